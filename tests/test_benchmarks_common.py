"""The benchmarks' shared code: results go to their one home with the command that made them,
earlier logs are read back for --resume, and rival timings alternate who goes first."""
import argparse
import json
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))  # as when a script runs: its folder first
import common  # noqa: E402

from attnbook.results import load_result  # noqa: E402


def test_the_results_home_is_the_folder_load_result_reads():
    assert common.RESULTS == ROOT / "lib" / "attnbook" / "results"
    for path in sorted(common.RESULTS.glob("*.json")):
        assert load_result(path.name) == json.loads(path.read_text())
    assert not (ROOT / "benchmarks" / "results").exists(), "results have one home: lib/attnbook/results/"


@pytest.mark.parametrize("smoke, out, expected", [
    (False, None, common.RESULTS / "x.json"),
    (True, None, None),
    (True, Path("elsewhere.json"), Path("elsewhere.json")),
    (False, Path("elsewhere.json"), Path("elsewhere.json")),
])
def test_a_run_writes_to_the_home_unless_told_otherwise_or_a_smoke_run(smoke, out, expected):
    assert common.out_path(argparse.Namespace(smoke=smoke, out=out), "x.json") == expected


def test_a_result_records_the_command_that_ran_after_its_description(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [str(ROOT / "benchmarks" / "x.py"), "--jobs", "2", "--conditions", "a b"])
    common.write_result(tmp_path / "r.json", {"description": "d", "runs": [1]})
    written = json.loads((tmp_path / "r.json").read_text())
    assert list(written) == ["description", "command", "runs"]
    assert written["command"] == "python benchmarks/x.py --jobs 2 --conditions 'a b'"
    assert f"wrote {tmp_path / 'r.json'}" in capsys.readouterr().out
    common.write_result(tmp_path / "s.json", {"command": "python benchmarks/x.py --jobs 2"})  # a script's own
    assert json.loads((tmp_path / "s.json").read_text()) == {"command": "python benchmarks/x.py --jobs 2"}


def test_resume_reads_only_the_json_lines_of_logs(tmp_path):
    (tmp_path / "a.log").write_text('starting\n{"model": "gru", "seed": 0}\nTraceback ...\n')
    (tmp_path / "b.log").write_text('{"model": "vit", "seed": 1}\n')
    assert common.log_rows([tmp_path / "a.log", tmp_path / "b.log"]) == [
        {"model": "gru", "seed": 0}, {"model": "vit", "seed": 1}]


def test_jobs_come_back_in_the_order_asked():
    assert common.run_jobs(divmod, [(7, 2), (9, 4), (1, 1)], jobs=1) == [(3, 1), (2, 1), (1, 0)]
    assert common.run_jobs(divmod, [(7, 2), (9, 4), (1, 1)], jobs=2) == [(3, 1), (2, 1), (1, 0)]


def test_interleaved_timing_alternates_who_goes_first():
    calls = []
    first_ms, second_ms, ratio = common.interleaved(lambda: calls.append("a"), lambda: calls.append("b"), 4,
                                                    torch.device("cpu"))
    assert calls == ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert first_ms > 0 and second_ms > 0 and ratio > 0


def test_the_verdict_names_the_target():
    assert common.verdict(1.19, 1.2) == "within the target of 1.20x"
    assert common.verdict(1.21, 1.2) == "ABOVE the target of 1.20x"


def test_jobs_below_one_is_a_usage_error():
    parser = common.experiment_parser("doc line\nmore")
    with pytest.raises(SystemExit):
        common.check_jobs(parser, parser.parse_args(["--jobs", "0"]))
    common.check_jobs(parser, parser.parse_args(["--jobs", "1"]))


def _square_run(x: int) -> dict:
    return {"x": x, "square": x * x}


def _grid(smoke: bool) -> list[tuple]:
    return [(2,)] if smoke else [(2,), (3,)]


def test_grid_main_runs_the_grid_and_writes_its_rows(tmp_path):
    out = tmp_path / "sweep.json"
    assert common.grid_main("A sweep.\n\nmore", _square_run, _grid, "unused.json",
                            ["--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["description"] == "A sweep."
    assert result["runs"] == [{"x": 2, "square": 4}, {"x": 3, "square": 9}]
    smoke = tmp_path / "smoke.json"
    common.grid_main("A sweep.", _square_run, _grid, "unused.json", ["--smoke", "--out", str(smoke)])
    assert json.loads(smoke.read_text())["runs"] == [{"x": 2, "square": 4}]
    with pytest.raises(SystemExit):
        common.grid_main("A sweep.", _square_run, _grid, "unused.json", ["--jobs", "0"])
