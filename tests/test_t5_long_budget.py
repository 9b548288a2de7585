"""Chapter 10's longer fine-tuning budget: the smoke run scores at every checkpoint, collecting
writes one row per arm, seed and checkpoint, and the committed rows at 1,200 steps equal the
committed study's (scoring along the way does not change the training)."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "t5_long_budget.py"


def test_smoke_run_and_collect(tmp_path):
    log = tmp_path / "run.log"
    done = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--arm", "scratch"], check=True,
                          capture_output=True, text=True, timeout=600)
    log.write_text(done.stdout)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [r["steps"] for r in rows] == [3, 6]
    assert all(0 <= r["g2p_wer"] <= 1 and 0 <= r["g2p_per"] for r in rows)
    out = tmp_path / "long.json"
    subprocess.run([sys.executable, str(SCRIPT), "--part", "collect", "--out", str(out), "--resume", str(log)],
                   check=True, capture_output=True, timeout=600)
    assert [r["steps"] for r in json.loads(out.read_text())["runs"]] == [3, 6]


def test_committed_rows_reproduce_the_study_at_1200_steps():
    runs = load_result("t5_long_budget.json")["runs"]
    study = load_result("t5_pretraining.json")["runs"]
    pretrained = load_result("t5_low_label_lr0.003_ft1200.json")["runs"]
    for r in (r for r in runs if r["steps"] == 1200):
        if r["arm"] == "scratch":
            (same,) = [s for s in study if s.get("model") == "t5" and s.get("arm") == "scratch"
                       and s.get("tasks") == "g2p" and s["steps"] == 1200 and s["size"] == r["size"]
                       and s["seed"] == r["seed"]]
        else:
            (same,) = [s for s in pretrained if s["seed"] == r["seed"]]
        assert (r["g2p_wer"], r["g2p_per"]) == (same["g2p_wer"], same["g2p_per"])
    assert {r["steps"] for r in runs} >= {1200, 2400}
