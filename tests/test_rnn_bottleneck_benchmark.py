"""Chapter 1's bottleneck benchmark runs (smoke mode), resumes, and its committed results hold what
the chapter reads: the count table's curves and, per encoder, a probe for every length and position."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = str(ROOT / "benchmarks" / "rnn_bottleneck.py")
BUCKETS = ["1-4", "5-6", "7-8", "9-10", "11-12", "13+"]


def test_smoke_run_then_resume(tmp_path):
    first = subprocess.run([sys.executable, SCRIPT, "--smoke"], check=True, capture_output=True,
                           text=True, timeout=600)
    rows = [json.loads(line) for line in first.stdout.splitlines() if line.startswith("{")]
    assert [r["encoder"] for r in rows] == ["count table", "random projection", "bidirectional",
                                            "one-directional", "one-directional, reversed"]
    for L, row in rows[1]["probe"].items():  # the capacity control: a probe, no training
        assert len(row["by_k"]) == int(L) and all(0 <= c["probe"] <= 1 for c in row["by_k"])
    for r in rows[2:]:
        for table in (r["probe"], r["probe_untrained"]):
            for L, row in table.items():
                assert len(row["by_k"]) == int(L)
                assert all(0 <= c["probe"] <= 1 and 0 <= c["majority"] <= 1 for c in row["by_k"])
    log = tmp_path / "first.log"
    log.write_text(first.stdout)
    out = tmp_path / "merged.json"
    again = subprocess.run([sys.executable, SCRIPT, "--smoke", "--resume", str(log), "--out", str(out),
                            "--converged"], check=True, capture_output=True, text=True, timeout=300)
    new = [json.loads(line) for line in again.stdout.splitlines() if line.startswith("{")]
    assert [r["encoder"] for r in new] == ["bidirectional, 8,000 steps"]  # only the new run
    merged = json.loads(out.read_text())
    assert merged["count_table"] == rows[0] and merged["random_projection"] == rows[1]
    assert merged["runs"] == rows[2:] and merged["converged"] == new[0]
    tuned = load_result("g2p_compare.json")["converged"]["gru"]["recipe"]
    assert len(new[0]["probe"]) == 2 and new[0]["recipe"] == tuned


def test_committed_results_hold_what_the_chapter_reads():
    result = load_result("rnn_bottleneck.json")
    table = result["count_table"]
    recipes = load_result("g2p_transformer_recipes.json")["count_table"]["letter window"]
    assert table["test_wer"] == recipes["test_wer"]  # the same table, fitted again
    assert list(table["by_length"]) == BUCKETS and len(table["thirds"]["errors"]) == 3
    assert {r["encoder"] for r in result["runs"]} == {"bidirectional", "one-directional",
                                                      "one-directional, reversed"}
    control = result["random_projection"]["probe"]
    assert list(control) == [str(L) for L in result["probe_lengths"]]
    for L, row in control.items():
        assert len(row["by_k"]) == int(L) and row["test_words"] > 0
    for run in result["runs"]:
        assert run["steps"] == 1200 and list(run["by_length"]) == BUCKETS
        for key in ("probe", "probe_untrained"):
            assert list(run[key]) == [str(L) for L in result["probe_lengths"]]
            for L, row in run[key].items():
                assert len(row["by_k"]) == int(L) and row["train_words"] > 0 and row["test_words"] > 0


def test_committed_per_word_edits_and_converged_probe():
    """The chapter's bootstrap reads the count table's edits per test word; they must add up to
    its PER, in data.test's order. The converged model is probed at every length."""
    from attnbook.data import load_g2p

    result = load_result("rnn_bottleneck.json")
    test = load_g2p().test
    edits = result["count_table"]["test_edits"]
    assert len(edits) == len(test) and all(e >= 0 for e in edits)
    phonemes = sum(len(p) for _, p in test)
    assert abs(sum(edits) / phonemes - result["count_table"]["test_per"]) < 1e-4
    converged = result["converged"]
    assert converged["steps"] == 8000 and list(converged["by_length"]) == BUCKETS
    assert list(converged["probe"]) == [str(L) for L in result["probe_lengths"]]
