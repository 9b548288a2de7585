"""Chapter 6's fine-tuning study: its committed results hold what the chapter reads, and its runs resume."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = str(ROOT / "benchmarks" / "bert_finetune.py")
CONDITIONS = {"probe", "pretrained-cls", "pretrained-pooler", "pretrained-mean", "random-mean"}


def test_committed_results_cover_every_condition_on_a_shared_split():
    result = load_result("bert_finetune.json")
    assert "benchmarks/bert_finetune.py" in result["command"]
    runs = result["runs"]
    assert {r["condition"] for r in runs} == CONDITIONS
    assert all(0.0 <= r["accuracy"] <= 1.0 and r["per_genre"] == result["per_genre"] for r in runs)
    shared = set.intersection(*({r["seed"] for r in runs if r["condition"] == c} for c in CONDITIONS))
    assert 0 in shared  # the chapter compares every row on split 0
    tuned = {r["lr"] for r in runs if r["condition"] != "probe"}
    assert len(tuned) == 1  # one learning rate for every fine-tuned row
    assert all(len(r["epoch_losses"]) == result["epochs"] for r in runs if r["condition"] != "probe")


def test_resume_reads_earlier_runs_instead_of_repeating_them(tmp_path):
    row = {"condition": "random-mean", "lr": 1e-4, "seed": 0, "per_genre": 4, "epochs": 1, "test_examples": 64,
           "accuracy": 0.25, "epoch_losses": [2.0], "seconds": 1.0}
    log = tmp_path / "earlier.log"
    log.write_text("header\n" + json.dumps(row) + "\n")
    out = tmp_path / "merged.json"
    done = subprocess.run([sys.executable, SCRIPT, "--smoke", "--seeds", "0", "--conditions", "random-mean",
                           "--resume", str(log), "--out", str(out)], check=True, capture_output=True, text=True,
                          timeout=300)
    assert "0 runs to do, 1 read from earlier logs" in done.stdout
    assert json.loads(out.read_text())["runs"] == [row]
