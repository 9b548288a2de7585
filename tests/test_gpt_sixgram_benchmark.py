"""Chapter 8's 6-gram benchmark runs (smoke mode), and its committed result is the chapter's:
the same held-out targets, discount and counting as the stored 5-gram."""
import json
import math
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def test_sixgram_smoke_run(tmp_path):
    out = tmp_path / "sixgram.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpt_sixgram.py"), "--smoke",
                    "--out", str(out)], check=True, capture_output=True, text=True, timeout=300)
    result = json.loads(out.read_text())
    assert result["order"] == 6 and len(result["sixgram_position_losses"]) == 64
    assert result["held_out_targets"] == (3000 - 1) // 64 * 64  # smoke: 3,000 held-out tokens


def test_committed_sixgram_matches_the_chapter():
    six, counts = load_result("gpt_sixgram.json"), load_result("gpt_ngram_counts.json")
    assert six["held_out_targets"] == counts["held_out_targets"]
    assert six["discount"] == counts["discount"] and six["window"] == counts["window"]
    losses = six["sixgram_position_losses"]
    assert math.isclose(math.exp(sum(losses) / len(losses)), six["perplexity"], rel_tol=1e-9)
    five = math.exp(sum(counts["fivegram_position_losses"]) / 64)
    assert six["perplexity"] < five  # counting still improves past the 5-gram
