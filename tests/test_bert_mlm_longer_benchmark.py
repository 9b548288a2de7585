"""Chapter 6's longer MLM run: its committed results hold what the chapter reads, its right-bigram
baseline reads the right neighbour, and a smoke run writes the same fields."""
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
BASELINES = {"copy-or-unigram", "copy-or-bigram", "copy-or-right-bigram"}


def check_result(result: dict) -> None:
    assert "benchmarks/bert_mlm_longer.py" in result["command"]
    assert set(result["positions"]) == KINDS
    positions = result["positions"]
    assert positions["all chosen"] == positions["[MASK]"] + positions["random"] + positions["unchanged"]
    assert set(result["baselines"]) == BASELINES
    for accs in result["baselines"].values():
        assert set(accs) == KINDS
        assert accs["unchanged"] == 1.0 and accs["random"] == 0.0  # every baseline copies
    for run in result["runs"]:
        assert run["curve"][-1]["step"] == run["steps"] and run["final"] == run["curve"][-1]
        for point in run["curve"]:
            assert {f"{k} accuracy" for k in KINDS} | {"held-out loss", "step"} == set(point)
            assert all(0.0 <= point[f"{k} accuracy"] <= 1.0 for k in KINDS)


def test_committed_results_hold_accuracy_by_position_type_beside_the_baselines():
    result = load_result("bert_mlm_longer.json")
    check_result(result)
    # the chapter's held-out batches: the counts its table prints
    assert result["positions"] == {"[MASK]": 2820, "random": 335, "unchanged": 341, "all chosen": 3496}


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
