"""benchmarks/count_table_width.py runs end to end (smoke settings) and picks its width on dev only;
the committed results hold every width's dev and test scores and the test buckets with their sizes."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import count_table_width  # noqa: E402


def _check(result: dict, test_words: int, widths=("5", "7", "9")) -> None:
    rows = result["widths"]
    assert set(rows) == set(widths)
    for row in rows.values():
        for key in ("dev_wer", "dev_per", "test_wer", "test_per"):
            assert 0.0 < row[key] < 1.0
        assert row["test_per"] < row["test_wer"]  # one wrong phoneme makes a whole word wrong
        buckets = row["test_by_length"]
        assert list(buckets) == ["1-4", "5-6", "7-8", "9-10", "11-12", "13+"][: len(buckets)]
        assert sum(b["words"] for b in buckets.values()) == test_words
    chosen = result["chosen_width"]
    assert rows[str(chosen)]["dev_wer"] == min(r["dev_wer"] for r in rows.values())  # dev, not test
    assert result["chosen"] == rows[str(chosen)]


def test_smoke_run(tmp_path):
    out = tmp_path / "widths.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "count_table_width.py"), "--smoke", "--out", str(out)],
                   check=True, capture_output=True, timeout=300)
    _check(json.loads(out.read_text()), 200)


def test_tie_on_dev_goes_to_the_narrower_window():
    """Two words: every width scores the same on dev, so the narrowest must be chosen."""
    train = [("cat", ("K", "AE", "T")), ("cab", ("K", "AE", "B"))]
    result = count_table_width.evaluate(train, train, [("cot", ("K", "AA", "T"))], widths=(5, 9))
    assert result["chosen_width"] == 5


def test_committed_results():
    result = load_result("count_table_width.json")
    assert result["words"] == {"train": 105_103, "dev": result["words"]["dev"], "test": 5_825}
    _check(result, 5_825)
    five = result["widths"]["5"]  # the default table that Chapters 1, 2 and 10 use
    table = load_result("g2p_transformer_recipes.json")["count_table"]["letter window"]
    assert (five["test_wer"], five["test_per"]) == (table["test_wer"], table["test_per"])


def test_widths_option_smoke(tmp_path):
    out = tmp_path / "wider.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "count_table_width.py"), "--smoke", "--widths", "9", "13",
                    "--out", str(out)], check=True, capture_output=True, timeout=300)
    _check(json.loads(out.read_text()), 200, widths=("9", "13"))


def test_committed_wider_results():
    """Chapter 5's grid, 5 to 13 letters: the rows it shares with the 5/7/9 file are the same runs."""
    wider, narrow = load_result("count_table_wider.json"), load_result("count_table_width.json")
    assert wider["words"] == narrow["words"]
    _check(wider, 5_825, widths=("5", "7", "9", "11", "13"))
    for width in ("5", "7", "9"):
        assert wider["widths"][width] == narrow["widths"][width]
