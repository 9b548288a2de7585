"""Chapter 2's content-addressed benchmark: vowels moved to the end, where no band f(i, S) can point right."""
import json
import subprocess
import sys
from pathlib import Path

import torch

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bahdanau_content as script  # noqa: E402


def test_targets_are_consonants_then_vowels_in_order():
    assert script.source_positions("phone") == [0, 1, 3, 2, 4]
    pairs = [("ab", ("A",)), ("phone", ("F",)), ("abcdefghi", ("X",))]
    assert script.vowels_last_pairs(pairs) == [("phone", tuple("phnoe"))]


def test_best_band_is_the_most_common_source_and_its_hit_rate_counts_steps():
    words = ["bat", "bat", "abt"]  # step 0 of a 3-letter word copies letter 0 twice, letter 1 once
    band = script.fit_band(words)
    assert band[(0, 3)] == 0 and band[(1, 3)] == 2 and band[(2, 3)] == 1
    assert script.band_hit_rate(band, ["bat"]) == 1.0
    assert abs(script.band_hit_rate(band, ["abt"]) - 1 / 3) < 1e-9  # only step 1 (letter 2) agrees


def test_table_band_looks_at_f_i_s_of_each_word():
    band = {(0, 3): 2, (1, 3): 0, (2, 3): 1, (0, 2): 1, (1, 2): 0}
    score = script.TableBandScore(band, sigma=0.5)
    keys = torch.randn(2, 3, 4)
    keys[1, 2:] = 0  # the second word has 2 letters: zeros at padding, as packed sequences give
    query = torch.zeros(2, 1, 4)
    for _ in range(2):  # two batches: the step counter restarts
        prepared = score.prepare(keys)
        tops = [score.score(query, prepared)[:, 0].argmax(-1).tolist() for _ in range(2)]
        assert tops == [[2, 1], [0, 0]]


def test_smoke_run_writes_every_model_and_seed(tmp_path):
    out = tmp_path / "content.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bahdanau_content.py"), "--smoke", "--jobs", "2",
                    "--out", str(out)], check=True, capture_output=True, timeout=400)
    result = json.loads(out.read_text())
    assert {(r["model"], r["seed"]) for r in result["runs"]} == {
        (k, s) for k in script.KINDS for s in result["setup"]["seeds"]}
    assert 0 < result["best_band_hit_rate"]["test"] < 1


def test_committed_results_cover_three_seeds_and_the_showcase():
    result = load_result("bahdanau_content.json")
    assert result["setup"]["seeds"] == [0, 1, 2]
    runs = result["runs"]
    assert {(r["model"], r["seed"]) for r in runs} == {(k, s) for k in script.KINDS for s in (0, 1, 2)}
    assert all(r["steps"] == script.STEPS and r["test_words"] > 800 for r in runs)
    n = len(script.SHOWCASE)
    for r in runs:
        if r["model"] != "none" and r["seed"] == 0:  # (T, S): the letters and <eos>, by the letters
            assert len(r["showcase_weights"]) == n + 1 and all(len(row) == n for row in r["showcase_weights"])
    band_runs = [r for r in runs if r["model"] == "best_band"]  # a fixed band points the same in every seed
    assert all(r["strongest_on_copied_letter"] == result["best_band_hit_rate"]["test"] for r in band_runs)


def test_spread_band_weights_are_the_copy_distribution_of_each_word():
    spread = script.fit_spread(["bat", "bat", "abt"])  # step 0 of 3 letters: letter 0 twice, letter 1 once
    assert spread[(0, 3)] == {0: 2 / 3, 1: 1 / 3}
    score = script.SpreadBandScore(spread)
    keys = torch.randn(2, 3, 4)
    keys[1, 2:] = 0  # the second word has 2 letters (no 2-letter word in the table), zeros at padding
    for _ in range(2):  # two batches: the step counter restarts
        prepared = score.prepare(keys)
        scores = score.score(torch.zeros(2, 1, 4), prepared)[:, 0]  # (2, 3): step 0
        torch.testing.assert_close(torch.softmax(scores[0], -1), torch.tensor([2 / 3, 1 / 3, 0.0]),
                                   atol=1e-3, rtol=0)
        assert scores[1, :2].argmax() == 1  # unseen (i, S): the word's last letter
        score.score(torch.zeros(2, 1, 4), prepared)  # step 1


def test_bands_smoke_run_chooses_on_dev_and_runs_the_choice_with_every_seed(tmp_path):
    out = tmp_path / "bands.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bahdanau_content.py"), "--bands", "--smoke",
                    "--jobs", "2", "--out", str(out)], check=True, capture_output=True, timeout=600)
    _check_bands(json.loads(out.read_text()))


def _check_bands(result):
    first = result["setup"]["seeds"][0]
    tuned = {r["rule"]: r for r in result["runs"] if r["seed"] == first}
    assert set(tuned) == set(script.BAND_RULES)
    assert result["chosen_on_dev"] == min(tuned, key=lambda rule: tuned[rule]["dev_wer"])
    assert {r["seed"] for r in result["runs"] if r["rule"] == result["chosen_on_dev"]} == set(result["setup"]["seeds"])


def test_committed_bands_chose_on_dev_and_band_1_reproduces_the_best_band_run():
    result = load_result("bahdanau_content_bands.json")
    assert result["setup"]["seeds"] == [0, 1, 2]
    _check_bands(result)
    band_1 = next(r for r in result["runs"] if r["rule"] == "band_1" and r["seed"] == 0)
    best_band = next(r for r in load_result("bahdanau_content.json")["runs"]
                     if r["model"] == "best_band" and r["seed"] == 0)
    assert abs(band_1["test_wer"] - best_band["test_wer"]) < 0.01  # the same model, recipe and seed
