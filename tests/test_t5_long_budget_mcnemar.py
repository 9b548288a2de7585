"""Chapter 10's word-by-word comparison of the long-budget runs: the exact McNemar test, the paired
difference, and the smoke run's per-word outcomes (their share of wrong words is the WER)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from t5_long_budget_mcnemar import compare, exact_mcnemar  # noqa: E402


def test_exact_mcnemar():
    assert exact_mcnemar(0, 0) == 1.0
    assert exact_mcnemar(5, 5) == 1.0
    assert exact_mcnemar(0, 6) == pytest.approx(2 / 64)
    assert exact_mcnemar(100, 80) == pytest.approx(0.156, abs=0.002)  # symmetric in b and c
    assert exact_mcnemar(80, 100) == exact_mcnemar(100, 80)


def test_compare_counts_the_discordant_words():
    row = compare("1100", "1010")  # word 2: scratch only; word 3: pretrained only
    assert (row["scratch_only_right"], row["pretrained_only_right"]) == (1, 1)
    assert row["wer_difference_points"] == 0 and row["mcnemar_p"] == 1.0
    with pytest.raises(ValueError):
        compare("10", "1")


def test_smoke_run_prints_each_words_outcome():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "t5_long_budget.py"), "--smoke",
                           "--words"], check=True, capture_output=True, text=True, timeout=600)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert rows and all(set(r["correct"]) <= {"0", "1"} for r in rows)
    assert all(abs(r["correct"].count("0") / len(r["correct"]) - r["g2p_wer"]) < 1e-3 for r in rows)
