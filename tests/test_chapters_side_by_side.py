"""The side-by-side benchmark times real runs, reports a stopped run, and names a missing chapter."""
import importlib.util
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))  # as when run as a script: its folder first, for `import common`
# It times notebooks alone and side by side: under pytest-xdist, the other workers wait while it runs.
pytestmark = pytest.mark.runs_alone

spec = importlib.util.spec_from_file_location(
    "chapters_side_by_side", ROOT / "benchmarks" / "chapters_side_by_side.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


@pytest.fixture
def tiny_chapters(tmp_path, monkeypatch):
    for name, code in [("01_quick", "x = 1"), ("02_slow", "import time\ntime.sleep(30)"),
                       ("03_broken", "raise ValueError('boom')")]:
        notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
        notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                           "language": "python"}
        nbformat.write(notebook, tmp_path / f"{name}.ipynb")
    monkeypatch.setattr(bench, "CHAPTERS", tmp_path)
    return tmp_path


def test_runs_alone_then_together_and_leaves_the_notebooks_as_they_were(tiny_chapters, monkeypatch,
                                                                        capsys):
    before = (tiny_chapters / "01_quick.ipynb").read_text()
    monkeypatch.setattr(sys, "argv", ["bench", "1", "--beside", "01"])
    bench.main()
    out = capsys.readouterr().out
    assert "CPU sharing on" in out
    assert out.count("01_quick.ipynb alone (before):") == out.count("01_quick.ipynb alone (after):") == 1
    assert out.count("x alone") == 2
    assert (tiny_chapters / "01_quick.ipynb").read_text() == before  # --no-write


def test_beside_a_busy_loop_times_the_chapter_twice_and_stops_the_loop(tiny_chapters, monkeypatch,
                                                                       capsys):
    spinners = []
    popen = bench.subprocess.Popen

    def recording_popen(command, *args, **kwargs):
        run = popen(command, *args, **kwargs)
        if "while True: pass" in command:
            spinners.append(run)
        return run

    monkeypatch.setattr(bench.subprocess, "Popen", recording_popen)
    monkeypatch.setattr(sys, "argv", ["bench", "1", "--beside", "busy"])
    bench.main()
    out = capsys.readouterr().out
    assert "01_quick.ipynb alone (after):" in out and "beside a one-core busy loop:" in out
    assert len(spinners) == 1 and spinners[0].poll() is not None  # the loop was stopped


def test_a_run_past_the_limit_is_stopped_and_reported(tiny_chapters, capsys):
    (seconds,) = bench.wait_all([bench.start(tiny_chapters / "02_slow.ipynb", share=False)], 3)
    assert seconds is None
    bench.show("02_slow.ipynb", None, alone=1.5, limit_s=3)
    assert "02_slow.ipynb: over 3 s (stopped), more than 2.0x alone" in capsys.readouterr().out


def test_a_failing_notebook_stops_the_benchmark_with_its_error(tiny_chapters):
    with pytest.raises(SystemExit, match="boom"):
        bench.wait_all([bench.start(tiny_chapters / "03_broken.ipynb", share=True)], 60)


def test_a_missing_chapter_is_named(tiny_chapters):
    with pytest.raises(SystemExit, match=r"chapters/07_\*\.ipynb; found 0"):
        bench.chapter_path("7")
