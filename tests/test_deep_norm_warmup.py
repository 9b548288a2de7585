"""benchmarks/deep_norm_warmup.py runs end to end (smoke settings); the committed results hold both
placements with and without warm-up, two seeds each, and the settings Chapter 5 quotes."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {"post-norm, warm-up", "post-norm, no warm-up", "pre-norm, warm-up", "pre-norm, no warm-up"}


def _check(result: dict, layers: int) -> None:
    assert set(result["summary"]) == VARIANTS
    for name, cell in result["summary"].items():
        assert cell["seeds"] == [0, 1]
        assert len(cell["dev_loss"]) == len(cell["train_loss_last20"]) == 2
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
    _check(result, 6)
    setup = result["setup"]
    assert (setup["layers"], setup["steps"], setup["warmup_steps"]) == (6, 200, 50)
    assert {r["warmup_steps"] for r in result["runs"]} == {1, 50}
