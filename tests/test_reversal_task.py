"""Chapter 1's page-scale reversal run and the bag-of-symbols baselines (attnbook.tasks.reversal)."""
import torch

from attnbook.tasks.reversal import (LETTERS, baseline_scores, ed_score, random_pairs,
                                     score_reversal, symbols_kept, train_reversal)


def test_symbols_kept_inverts_the_mixture():
    # kappa kept, the rest at the floor: (kappa + (L - kappa) * floor) / L
    for L, kappa, floor in [(10, 4, 0.2), (25, 8, 0.125), (5, 5, 0.3)]:
        score = (kappa + (L - kappa) * floor) / L
        assert abs(symbols_kept(score, floor, L) - kappa) < 1e-9


def test_ed_score_counts_each_slip_once():
    ref = list("abcdefgh")
    assert ed_score(ref, ref) == 1
    assert ed_score(ref[1:], ref) == 1 - 1 / 8  # one dropped symbol, not a shifted tail
    assert ed_score([], ref) == 0


def test_baselines_calibrate_kappa():
    scores = baseline_scores(range(8, 31, 11), per_length=60)
    for L, s in scores.items():
        assert s["random"] < s["shuffled"] < s["keep"] <= 1
        bag = symbols_kept(s["shuffled"], s["random"], L)
        eight = symbols_kept(s["keep"], s["random"], L)
        assert 0.5 < bag < 3.0, (L, bag)  # the right letters in a wrong order keep little
        assert 6.5 < eight <= 8.0 + 1e-9, (L, eight)  # the first 8 right: about 8 kept
    short = baseline_scores([5], per_length=10)[5]
    assert short["keep"] == 1  # strings no longer than 8 are kept whole


def test_random_pairs_reverse_and_respect_lengths():
    g = torch.Generator().manual_seed(0)
    pairs = random_pairs(50, g, 5, 7)
    assert all(5 <= len(s) <= 7 and t == s[::-1] and set(s) <= set(LETTERS) for s, t in pairs)
    fixed = random_pairs(0, g, 5, 7, lengths=[3, 9])
    assert [len(s) for s, _ in fixed] == [3, 9]


def test_training_is_repeatable_and_leaves_the_random_state_alone():
    torch.set_num_threads(1)
    before = torch.random.get_rng_state()
    test = random_pairs(0, torch.Generator().manual_seed(1), 5, 6, lengths=[5, 6] * 3)
    a = score_reversal(train_reversal(8, steps=3, lo=5, hi=6, batch=8), test)
    assert torch.equal(torch.random.get_rng_state(), before)
    b = score_reversal(train_reversal(8, steps=3, lo=5, hi=6, batch=8), test)
    assert a == b and set(a) == {5, 6} and all(v["n"] == 3 for v in a.values())
