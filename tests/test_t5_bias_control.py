"""Chapter 10's bias control: the smoke run records the encoder table at each checkpoint, and the
committed run continues the chapter's live 200-step fine-tuning (its first row is that run's)."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def test_smoke_run_records_every_checkpoint(tmp_path):
    out = tmp_path / "control.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "t5_bias_control.py"), "--smoke", "--out", str(out)],
                   check=True, capture_output=True, timeout=600)
    rows = json.loads(out.read_text())["rows"]
    assert [r["step"] for r in rows] == [2, 4]
    assert all(len(r["heads"]) == 4 and r["max_change"] >= 0 for r in rows)


def test_committed_run_starts_from_the_chapters_live_run():
    result = load_result("t5_bias_control.json")
    assert [r["step"] for r in result["rows"]] == [200, 1000, 2000, 3000]
    first = result["rows"][0]["heads"]  # the chapter's live cell prints these at step 200
    assert [(h["at_offset"], round(h["largest"], 2)) for h in first] == [(-3, 0.59), (-11, 0.31), (1, 0.6),
                                                                          (-2, 0.66)]
