"""Chapter 10's count-table width study: the smoke run writes one row per width, and the committed
results choose each width on dev alone (the test set chooses nothing)."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def test_smoke_run_scores_every_width_and_chooses_on_dev(tmp_path):
    out = tmp_path / "widths.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "t5_count_width.py"), "--smoke", "--sizes", "500",
                    "--seeds", "0", "--out", str(out)], check=True, capture_output=True, timeout=600)
    result = json.loads(out.read_text())
    assert [r["width"] for r in result["rows"]] == result["widths"] == [5, 7, 9, 11, 13]
    [chosen] = result["chosen"]
    assert chosen["dev_wer"] == min(r["dev_wer"] for r in result["rows"])


def test_committed_choice_is_the_lowest_dev_error_per_size_and_seed():
    result = load_result("t5_count_width.json")
    assert result["dev_words"] > 1000 and result["test_words"] == 1165
    groups = {(r["size"], r["seed"]) for r in result["rows"]}
    assert len(result["chosen"]) == len(groups) == 7  # 500 and 2,000 words x 3 seeds, all words once
    for chosen in result["chosen"]:
        rows = [r for r in result["rows"] if (r["size"], r["seed"]) == (chosen["size"], chosen["seed"])]
        assert len(rows) == 5
        best = min(r["dev_wer"] for r in rows)
        assert chosen["dev_wer"] == best and chosen["width"] == min(r["width"] for r in rows
                                                                    if r["dev_wer"] == best)
