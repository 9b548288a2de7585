"""Chapter 10's dev choice of the pretraining peak (benchmarks/t5_peak_dev.py): smoke run, resume
and collect; the committed result's choice is the lower mean dev WER."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = str(ROOT / "benchmarks" / "t5_peak_dev.py")


def test_smoke_run_resume_and_collect(tmp_path):
    run = subprocess.run([sys.executable, SCRIPT, "--smoke", "--part", "run"],
                         check=True, capture_output=True, text=True, timeout=300)
    rows = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    assert sorted(r["peak"] for r in rows) == [3e-3, 1e-2]
    assert all(0 <= r["dev_wer"] <= 1 and 0 <= r["g2p_wer"] <= 1 for r in rows)
    log = tmp_path / "run.log"
    log.write_text(run.stdout)
    again = subprocess.run([sys.executable, SCRIPT, "--smoke", "--part", "run", "--resume", str(log)],
                           check=True, capture_output=True, text=True, timeout=300)
    assert not [line for line in again.stdout.splitlines() if line.startswith("{")]  # nothing re-run
    out = tmp_path / "peak_dev.json"
    subprocess.run([sys.executable, SCRIPT, "--smoke", "--part", "collect", "--resume", str(log), "--out", str(out)],
                   check=True, capture_output=True, text=True, timeout=300)
    result = json.loads(out.read_text())
    assert result["seeds_compared"] == [0] and result["chosen"] in result["mean_dev_wer"]


def test_committed_choice_is_the_lower_dev_wer():
    result = load_result("t5_peak_dev.json")
    means = result["mean_dev_wer"]
    assert result["seeds_compared"] and result["chosen"] == min(means, key=means.get)
