"""benchmarks/deep_norm_warmup.py runs end to end (smoke settings); the committed results hold both
placements with and without warm-up, two seeds each, and the settings Chapter 5 quotes."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {"post-norm, warm-up", "post-norm, no warm-up", "pre-norm, warm-up", "pre-norm, no warm-up"}


def _check(result: dict, layers: int, seeds=(0, 1)) -> None:
    assert set(result["summary"]) == VARIANTS
    for name, cell in result["summary"].items():
        assert cell["seeds"] == list(seeds)
        assert len(cell["dev_loss"]) == len(cell["train_loss_last20"]) == len(seeds)
        assert all(v > 0 for v in cell["dev_loss"])
    for row in result["runs"]:
        assert row["layers"] == layers
        assert (row["warmup_steps"] > 1) == ("no warm-up" not in row["variant"])


def test_smoke_run(tmp_path):
    out = tmp_path / "deep.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "deep_norm_warmup.py"), "--smoke", "--out", str(out)],
                   check=True, capture_output=True, timeout=300)
    _check(json.loads(out.read_text()), 2)


def test_committed_results():
    result = load_result("deep_norm_warmup.json")
    _check(result, 6, seeds=(0, 1, 2))  # seeds 0 and 1, then seed 2 added with --resume
    setup = result["setup"]
    assert (setup["layers"], setup["steps"], setup["warmup_steps"]) == (6, 200, 50)
    assert {r["warmup_steps"] for r in result["runs"]} == {1, 50}


def test_resume_reuses_the_logged_runs(tmp_path, monkeypatch):
    """--resume: a run found in the log is read back, not repeated; only the missing seed runs."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import deep_norm_warmup

    def row(variant, seed, smoke=False):
        return {"variant": variant, "seed": seed, "layers": 6, "warmup_steps": 1 if "no warm-up" in variant
                else 50, "train_loss_last20": 2.0, "dev_loss": 1.5 + seed, "max_loss": 4.0}

    log = tmp_path / "old.log"
    log.write_text("a header line\n" + "".join(json.dumps(row(v, 0)) + "\n" for v in sorted(VARIANTS)))
    ran = []
    monkeypatch.setattr(deep_norm_warmup, "run_one", lambda *a: ran.append(a[:2]) or row(*a))
    out = tmp_path / "deep.json"
    monkeypatch.setattr(sys, "argv", ["deep_norm_warmup.py", "--seeds", "0", "1", "--resume", str(log),
                                      "--out", str(out)])
    deep_norm_warmup.main()
    assert sorted(ran) == sorted((v, 1) for v in VARIANTS)  # seed 0 came from the log
    result = json.loads(out.read_text())
    _check(result, 6)
    assert all(cell["dev_loss"] == [1.5, 2.5] for cell in result["summary"].values())
