"""benchmarks/nearest_word_g2p.py: its exact nearest-spelling search agrees with brute force, the
smoke run writes a well-formed file, and the committed results are consistent with themselves."""
import json
import random
import subprocess
import sys
from pathlib import Path

from attnbook.metrics import edit_distance
from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import nearest_word_g2p  # noqa: E402


def test_nearest_matches_brute_force():
    rng = random.Random(1)
    train = ["".join(rng.choice("abc") for _ in range(rng.randint(1, 9))) for _ in range(300)]
    words = ["".join(rng.choice("abcd") for _ in range(rng.randint(1, 10))) for _ in range(60)]
    found = nearest_word_g2p.nearest(words, train)
    for i, word in enumerate(words):
        distances = [edit_distance(list(word), list(t)) for t in train]
        best = min(distances)
        assert found["distance"][i] == best
        assert found["first"][i] == distances.index(best)  # ties: the first in training order


def _check(result: dict, n_test: int) -> None:
    assert result["words"]["test"] == n_test
    assert len(result["test_right"]) == n_test
    assert abs(1 - sum(result["test_right"]) / n_test - result["test_wer"]) < 1e-4
    assert sum(result["test_distance_counts"].values()) == n_test
    assert sum(result["test_words_by_length"].values()) == n_test
    assert set(result["test_wer_by_length"]) == set(result["test_words_by_length"])
    assert 0 < result["test_per"] < result["test_wer"] <= 1


def test_smoke_run(tmp_path):
    out = tmp_path / "nearest.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "nearest_word_g2p.py"), "--smoke",
                    "--out", str(out)], check=True, capture_output=True, timeout=300)
    _check(json.loads(out.read_text()), 200)


def test_committed_results():
    result = load_result("nearest_word_g2p.json")
    _check(result, 5_825)
    assert result["words"]["train"] == 105_103
