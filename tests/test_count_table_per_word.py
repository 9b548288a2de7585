"""benchmarks/count_table_per_word.py runs end to end (smoke settings); the committed per-word
edits are those of the table count_table_width.py picks on dev, and add up to its totals."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.data import load_g2p
from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def _totals(result: dict, references) -> tuple[float, float]:
    edits = result["test_edits"]
    assert len(edits) == len(references) and all(e >= 0 for e in edits)
    wer = sum(e > 0 for e in edits) / len(edits)
    per = sum(edits) / sum(len(r) for r in references)
    return wer, per


def test_smoke_run(tmp_path):
    out = tmp_path / "per_word.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "count_table_per_word.py"), "--smoke",
                    "--out", str(out)], check=True, capture_output=True, timeout=300)
    result = json.loads(out.read_text())
    wer, per = _totals(result, [p for _, p in load_g2p().test[:200]])
    assert (round(wer, 4), round(per, 4)) == (result["test_wer"], result["test_per"])


def test_committed_results_match_the_chosen_width():
    result = load_result("count_table_per_word.json")
    widths = load_result("count_table_width.json")
    assert result["width"] == widths["chosen_width"]
    assert result["words"] == {"train": 105_103, "test": 5_825}
    wer, per = _totals(result, [p for _, p in load_g2p().test])
    chosen = widths["chosen"]
    assert (round(wer, 4), round(per, 4)) == (chosen["test_wer"], chosen["test_per"])
    assert (result["test_wer"], result["test_per"]) == (chosen["test_wer"], chosen["test_per"])


def test_committed_13_letter_results_match_the_wider_grid():
    result = load_result("count_table_per_word_13.json")
    wider = load_result("count_table_wider.json")
    assert result["width"] == wider["chosen_width"] == 13
    assert result["words"] == {"train": 105_103, "test": 5_825}
    wer, per = _totals(result, [p for _, p in load_g2p().test])
    chosen = wider["chosen"]
    assert (round(wer, 4), round(per, 4)) == (chosen["test_wer"], chosen["test_per"])
    assert (result["test_wer"], result["test_per"]) == (chosen["test_wer"], chosen["test_per"])
