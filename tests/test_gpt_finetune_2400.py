"""Chapter 8, Section 8.7: the fine-tune from the stored 2400-step GPT runs (smoke mode), and its
committed results match gpt_finetune.json's set-up (verses, rate, steps, test labels)."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def test_finetune_2400_smoke_run(tmp_path):
    out = tmp_path / "ft.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpt_finetune_2400.py"), "--smoke",
                    "--seeds", "0", "--out", str(out)], check=True, capture_output=True,
                   text=True, timeout=300)
    result = json.loads(out.read_text())
    assert [p["step"] for p in result["runs"][0]["curve"]] == [50, 100]
    assert result["pretraining_steps"] == 2400


def test_committed_finetune_2400_matches_gpt_finetune():
    new, old = load_result("gpt_finetune_2400.json"), load_result("gpt_finetune.json")
    assert [r["seed"] for r in new["runs"]] == [0, 1, 2] and new["lr"] == 1e-3
    assert new["test_labels"] == old["test_labels"]
    for key in ("train_verses", "valid_verses", "test_verses", "steps", "eval_every", "batch"):
        assert new[key] == old[key]
    assert all([p["step"] for p in r["curve"]] == list(range(50, 301, 50)) for r in new["runs"])
    assert "gpt_finetune_2400.py" in new["command"]
