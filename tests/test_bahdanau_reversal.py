"""Chapter 2's reversal benchmark: the mirror band looks where reversal needs, and the script runs end to end."""
import json
import subprocess
import sys
from pathlib import Path

import torch

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bahdanau_reversal as script  # noqa: E402


def test_mirror_band_looks_at_letter_s_minus_1_minus_i_of_each_word():
    keys = torch.randn(2, 5, 3)
    keys[1, 3:] = 0  # the second word has 3 letters: zeros at padding, as packed sequences give
    band = script.MirrorBandScore(sigma=1.0)
    query = torch.zeros(2, 1, 4)
    for _ in range(2):  # two batches: the step counter restarts
        prepared = band.prepare(keys)
        tops = [band.score(query, prepared)[:, 0].argmax(-1).tolist() for _ in range(3)]
        assert tops == [[4, 2], [3, 1], [2, 0]]


def test_reversal_pairs_keep_3_to_8_letters_reversed():
    pairs = [("ab", ("A",)), ("cat", ("K",)), ("abcdefghi", ("X",)), ("phonetic", ("F",))]
    assert script.reversed_pairs(pairs) == [("cat", ("t", "a", "c")),
                                            ("phonetic", tuple("citenohp"))]


def test_smoke_run_writes_every_model_and_seed(tmp_path):
    out = tmp_path / "reversal.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bahdanau_reversal.py"), "--smoke", "--jobs", "2",
                    "--out", str(out)], check=True, capture_output=True, timeout=300)
    result = json.loads(out.read_text())
    runs = {(r["model"], r["seed"]) for r in result["runs"]}
    assert runs == {(k, s) for k in script.KINDS for s in result["setup"]["seeds"]}


def test_committed_results_cover_three_seeds_of_every_model():
    result = load_result("bahdanau_reversal.json")
    assert result["setup"]["seeds"] == [0, 1, 2]
    assert {(r["model"], r["seed"]) for r in result["runs"]} == {(k, s) for k in script.KINDS for s in (0, 1, 2)}
    assert all(r["steps"] == script.STEPS and r["test_words"] > 800 for r in result["runs"])


def test_count_table_benchmark_smoke_and_committed_results(tmp_path):
    """benchmarks/bahdanau_count_table.py: every length bucket of bahdanau_length.py, scored."""
    out = tmp_path / "table.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bahdanau_count_table.py"), "--smoke",
                    "--out", str(out)], check=True, capture_output=True, timeout=300)
    smoke = json.loads(out.read_text())
    committed = load_result("bahdanau_count_table.json")
    for result, per_bucket in ((smoke, 20), (committed, 150)):
        assert all(cell["inputs"] == per_bucket and 0 < cell["per"] < 1 for cell in result["by_length"].values())
    assert list(committed["by_length"]) == load_result("bahdanau_length.json")["setup"]["buckets"]
    assert committed["training_words"] > 100_000 and committed["single_words"]["inputs"] > 5_000
    for result in (smoke, committed):  # the table's error thirds on the 9+-letter test words (Ch2 §2.6)
        thirds = result["error_thirds"]
        assert 0 < thirds["words"] and 0 < thirds["errors"]
        assert all(abs(sum(shares) - 1) < 1e-3 for shares in thirds["shares"].values())
    assert committed["error_thirds"]["words"] == 1528  # the words of the networks' error_thirds


def test_count_table_width_9_results_match_the_dev_chosen_table():
    """--width 9: the width count_table_width.py picks on dev; its single-word scores agree with it."""
    w9 = load_result("bahdanau_count_table_w9.json")
    chosen = load_result("count_table_width.json")
    assert w9["width"] == chosen["chosen_width"] == 9
    assert w9["single_words"]["per"] == chosen["chosen"]["test_per"]
    assert w9["single_words"]["wer"] == chosen["chosen"]["test_wer"]
    assert list(w9["by_length"]) == load_result("bahdanau_length.json")["setup"]["buckets"]
    assert all(cell["inputs"] == 150 for cell in w9["by_length"].values())
    assert w9["error_thirds"]["words"] == 1528
