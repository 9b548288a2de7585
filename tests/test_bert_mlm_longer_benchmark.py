"""Chapter 6's longer MLM run: its committed results hold what the chapter reads (accuracy by
position type beside six count tables, the paired comparison with the wide tables, the genre probe
of the trained features), its right-bigram baseline reads the right neighbour, its back-off tables
back off, and a smoke run writes the same fields."""
import json
import subprocess
import sys
from pathlib import Path

import torch

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = str(ROOT / "benchmarks" / "bert_mlm_longer.py")
sys.path.insert(0, str(ROOT / "benchmarks"))
import bert_mlm_longer  # noqa: E402

KINDS = {"[MASK]", "random", "unchanged", "all chosen"}
BASELINES = {"copy-or-unigram", "copy-or-bigram", "copy-or-right-bigram", "copy-or-both-neighbours",
             "copy-or-4-gram", "copy-or-5-gram"}


def check_result(result: dict) -> None:
    assert "benchmarks/bert_mlm_longer.py" in result["command"]
    assert set(result["positions"]) == KINDS
    positions = result["positions"]
    assert positions["all chosen"] == positions["[MASK]"] + positions["random"] + positions["unchanged"]
    assert set(result["baselines"]) == BASELINES
    for accs in result["baselines"].values():
        assert set(accs) == KINDS
        assert accs["unchanged"] == 1.0 and accs["random"] == 0.0  # every baseline copies
    assert result["evaluation"]["distinct"] is True
    assert set(result["genre probe rivals"]) == {"same model, untrained", "token counts, same ids"}
    for accs in result["genre probe rivals"].values():
        assert len(accs) == 5 and all(0.0 <= a <= 1.0 for a in accs)
    for run in result["runs"]:
        assert run["curve"][-1]["step"] == run["steps"] and run["final"] == run["curve"][-1]
        assert len(run["genre probe"]) == 5 and all(0.0 <= a <= 1.0 for a in run["genre probe"])
        assert set(run["against tables at [MASK]"]) == BASELINES
        for p in run["against tables at [MASK]"].values():
            # every [MASK] position is right for both, one, or neither
            assert p["both right"] + p["model only"] <= positions["[MASK]"]
            assert abs(p["gap"] - (p["model only"] - p["table only"]) / positions["[MASK]"]) < 1e-6
            low, high = p["bootstrap 95%"]
            assert low <= high and 0 <= p["resamples at or below zero"] <= 1000
        for point in run["curve"]:
            assert {f"{k} accuracy" for k in KINDS} | {"held-out loss", "step"} == set(point)
            assert all(0.0 <= point[f"{k} accuracy"] <= 1.0 for k in KINDS)


def test_committed_results_hold_accuracy_by_position_type_beside_the_baselines():
    result = load_result("bert_mlm_longer.json")
    check_result(result)
    # the chapter's held-out batches (1,024 distinct verses): the counts its table prints
    assert result["positions"] == {"[MASK]": 2802, "random": 338, "unchanged": 338, "all chosen": 3478}
    assert result["evaluation"]["verses"] == 1024
    assert [r["seed"] for r in result["runs"]] == [0, 1, 2]
    assert all(r["steps"] == 4000 for r in result["runs"])


def test_back_off_uses_the_widest_context_seen_and_never_reads_a_mask():
    MASK, CLS, SEP = bert_mlm_longer.MASK, bert_mlm_longer.CLS, bert_mlm_longer.SEP
    offsets = [(-1, 1), (1,), (-1,)]
    tables = bert_mlm_longer.context_tables([[5, 6, 7], [5, 8, 7], [5, 8, 7], [9, 6, 8]], offsets)
    assert tables[(-1, 1)][(5, 7)] == 8  # 5 _ 7: 8 twice, 6 once
    contexts = bert_mlm_longer.CONTEXTS["copy-or-both-neighbours"]
    seen = torch.tensor([[CLS, 5, MASK, 7, SEP], [CLS, 9, MASK, MASK, SEP], [CLS, 5, MASK, 9, SEP]])
    guess = bert_mlm_longer.backoff_predictions(seen, tables, contexts, unigram_id=6)
    assert guess[0, 2] == 8  # both neighbours seen: 5 _ 7
    assert guess[1, 2] == 6  # right neighbour is [MASK]: back off to the left one, 9 -> 6
    assert guess[2, 2] == 8  # 5 _ 9 never seen, 9 never preceded: the left one, 5 -> 8 twice
    assert guess[0, 1] == 5  # visible tokens are copied


def test_right_bigram_guesses_the_most_frequent_token_before_the_right_neighbour():
    V, MASK, CLS, SEP = 8, bert_mlm_longer.MASK, bert_mlm_longer.CLS, bert_mlm_longer.SEP
    bigrams = bert_mlm_longer.mlm.bigram_table([[5, 6], [5, 6], [7, 6], [7, 5]], V, CLS, SEP)
    seen = torch.tensor([[CLS, MASK, 6, SEP], [CLS, MASK, MASK, SEP], [CLS, 7, MASK, SEP]])
    predicted = bert_mlm_longer.right_bigram_predictions(seen, bigrams, unigram_id=7)
    assert predicted[0, 1] == 5  # 5 comes before 6 twice, 7 once
    assert predicted[1, 1] == 7  # right neighbour is [MASK]: the unigram guess
    assert predicted[1, 2] == 6  # 6 ends three verses, 5 one
    assert torch.equal(predicted[2, :2], seen[2, :2])  # visible tokens are copied


def test_smoke_run_writes_the_fields_the_chapter_reads(tmp_path):
    out = tmp_path / "smoke.json"
    subprocess.run([sys.executable, SCRIPT, "--smoke", "--json", str(out)], check=True, cwd=ROOT,
                   capture_output=True, timeout=600)
    result = json.loads(out.read_text())
    check_result(result)
    assert result["runs"][0]["steps"] == 20
