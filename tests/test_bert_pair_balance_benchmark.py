"""Chapter 6's pair-task label balance: the results file agrees with the pair-task results."""
import sys
from pathlib import Path

import pytest

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bert_pair_balance  # noqa: E402,F401  (the script imports cleanly)


@pytest.mark.parametrize("task", ["order", "chapter"])
def test_balance_matches_the_pair_results(task):
    balance = load_result("bert_pair_balance.json")
    assert balance["command"] == "python benchmarks/bert_pair_balance.py"
    pairs = load_result(f"bert_pair_{task}.json")
    sides = balance["tasks"][task]
    assert sides["train"]["pairs"] == pairs["train_pairs"]
    assert sides["test"]["pairs"] == pairs["test_pairs"]
    assert sides["test"]["label_0"] == pairs["test_label_0"]
    for side in sides.values():
        assert side["label_0"] + side["label_1"] == side["pairs"]
