"""Chapter 10's scratch-arm tuning (benchmarks/t5_scratch_tuning.py): smoke run, resume, collect,
and the committed results: the choice is made on dev, and the study's recipe reproduces the study."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = str(ROOT / "benchmarks" / "t5_scratch_tuning.py")


def test_smoke_run_resume_and_collect(tmp_path):
    run = subprocess.run([sys.executable, SCRIPT, "--smoke", "--part", "run", "--recipes", "3e-3", "1e-2-wu"],
                         check=True, capture_output=True, text=True, timeout=300)
    rows = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    assert {r["recipe"] for r in rows} == {"3e-3", "1e-2-wu"}
    assert all(0 <= r["dev_wer"] <= 1 and 0 <= r["g2p_wer"] <= 1 for r in rows)
    log = tmp_path / "run.log"
    log.write_text(run.stdout)
    again = subprocess.run([sys.executable, SCRIPT, "--smoke", "--part", "run", "--recipes", "3e-3", "--resume",
                            str(log)], check=True, capture_output=True, text=True, timeout=300)
    assert not [line for line in again.stdout.splitlines() if line.startswith("{")]  # nothing re-run
    out = tmp_path / "tuning.json"
    subprocess.run([sys.executable, SCRIPT, "--smoke", "--part", "collect", "--resume", str(log), "--out", str(out)],
                   check=True, capture_output=True, text=True, timeout=300)
    result = json.loads(out.read_text())
    dev = {r["recipe"]: r["dev_wer"] for r in rows}
    assert list(result["chosen"]) == ["100"] and dev[result["chosen"]["100"]] == min(dev.values())


def test_committed_results_choose_on_dev_and_reproduce_the_study():
    result = load_result("t5_scratch_tuning.json")
    runs = result["runs"]
    for size, chosen in result["chosen"].items():
        seed0 = {r["recipe"]: r["dev_wer"] for r in runs if r["size"] == int(size) and r["seed"] == 0}
        assert chosen == min(seed0, key=seed0.get)
    study = {(r["size"], r["seed"]): r["g2p_wer"] for r in load_result("t5_pretraining.json")["runs"]
             if r.get("model") == "t5" and r.get("arm") == "scratch" and r.get("tasks") == "g2p"
             and r.get("steps") == 600}
    mine = [r for r in runs if r["recipe"] == "3e-3"]
    assert mine and all(r["g2p_wer"] == study[(r["size"], r["seed"])] for r in mine)
