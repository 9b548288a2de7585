import pytest

from attnbook.metrics import edit_distance, length_bucket, phoneme_error_rate, wer_by_bucket, word_error_rate


@pytest.mark.parametrize("hyp, ref, distance", [
    ("", "", 0), ("abc", "abc", 0), ("", "abc", 3), ("abc", "", 3),
    ("kitten", "sitting", 3), ("flaw", "lawn", 2), ("ab", "ba", 2),
])
def test_edit_distance_hand_computed(hyp, ref, distance):
    assert edit_distance(list(hyp), list(ref)) == distance
    assert edit_distance(list(ref), list(hyp)) == distance


def test_wer_and_per_hand_computed():
    refs = [("N", "AY", "T"), ("F", "OW", "N"), ("AH",)]
    hyps = [("N", "AY", "T"), ("F", "AO", "N"), ()]
    assert word_error_rate(hyps, refs) == pytest.approx(2 / 3)
    assert phoneme_error_rate(hyps, refs) == pytest.approx((0 + 1 + 1) / 7)


def test_metrics_reject_bad_input():
    with pytest.raises(ValueError, match="one hypothesis per reference"):
        word_error_rate([("A",)], [])
    with pytest.raises(ValueError, match="empty"):
        phoneme_error_rate([], [])


def test_buckets_in_length_order():
    assert [length_bucket(n) for n in (1, 4, 5, 8, 12, 13, 30)] == ["1-4", "1-4", "5-6", "7-8", "11-12", "13+", "13+"]
    words = ["abcdefghijklmn", "ab", "abcde"]
    by = wer_by_bucket(words, [("X",), ("A",), ("B",)], [("Y",), ("A",), ("B",)])
    assert list(by) == ["1-4", "5-6", "13+"]
    assert by == {"1-4": 0.0, "5-6": 0.0, "13+": 1.0}


def test_per_by_bucket_hand_computed():
    from attnbook.metrics import decade_bucket, per_by_bucket

    assert [decade_bucket(n) for n in (3, 20, 29, 30, 46)] == ["0-9", "20-29", "20-29", "30-39", "40-49"]
    words = ["a" * 35, "a" * 21, "a" * 25]
    refs = [("A", "B", "C", "D"), ("A", "B"), ("A", "B", "C")]
    hyps = [("A", "B"), ("A", "B"), ("X", "B", "C")]
    by = per_by_bucket(words, hyps, refs)
    assert list(by) == ["20-29", "30-39"]
    assert by["20-29"] == pytest.approx((0 + 1) / (2 + 3))
    assert by["30-39"] == pytest.approx(2 / 4)
    with pytest.raises(ValueError, match="one word per reference"):
        per_by_bucket(words[:2], hyps, refs)


@pytest.mark.parametrize("hyp, ref, expected", [
    ("abcde", "abcde", []),
    ("xbcde", "abcde", [0.0]),  # substitution at the start
    ("abxde", "abcde", [0.5]),  # in the middle
    ("abcd", "abcde", [1.0]),  # the last symbol dropped
    ("abcdex", "abcde", [1.0]),  # an extra symbol at the end
    ("xabcde", "abcde", [0.0]),  # an extra symbol before the first
    ("b", "a", [0.5]),  # a one-symbol reference
    ("", "abc", [0.0, 0.5, 1.0]),  # everything dropped
])
def test_error_positions_hand_computed(hyp, ref, expected):
    from attnbook.metrics import edit_distance, error_positions
    assert error_positions(list(hyp), list(ref)) == expected
    assert len(error_positions(list(hyp), list(ref))) == edit_distance(list(hyp), list(ref))


def test_error_positions_count_equals_edit_distance_on_random_pairs():
    import random
    from attnbook.metrics import edit_distance, error_positions
    rng = random.Random(0)
    for _ in range(200):
        hyp = [rng.choice("abc") for _ in range(rng.randint(0, 7))]
        ref = [rng.choice("abc") for _ in range(rng.randint(1, 7))]
        positions = error_positions(hyp, ref)
        assert len(positions) == edit_distance(hyp, ref)
        assert all(0.0 <= p <= 1.0 for p in positions)


def test_error_positions_rejects_an_empty_reference():
    from attnbook.metrics import error_positions
    with pytest.raises(ValueError, match="reference is empty"):
        error_positions(["a"], [])


def test_sign_test_p_hand_computed():
    import math

    from attnbook.metrics import sign_test_p

    assert sign_test_p(0, 0) == 1.0
    assert sign_test_p(3, 3) == 1.0  # capped at 1
    assert sign_test_p(5, 0) == pytest.approx(2 / 32)  # 2 * (1/2)^5
    assert sign_test_p(0, 5) == sign_test_p(5, 0)
    # 27 against 18: twice the lower binomial tail of 45 fair coin flips
    tail = sum(math.comb(45, k) for k in range(19)) / 2**45
    assert sign_test_p(27, 18) == pytest.approx(2 * tail)
    with pytest.raises(ValueError):
        sign_test_p(-1, 2)
    with pytest.raises(ValueError):
        sign_test_p(1.5, 2)


def test_bootstrap_interval_reproducible_and_brackets_the_mean():
    import torch

    from attnbook.metrics import bootstrap_interval

    values = torch.tensor([1.0] * 30 + [0.0] * 70)
    low, high = bootstrap_interval(values, lambda d: d.mean(1))
    assert (low, high) == bootstrap_interval(values, lambda d: d.mean(1))  # seeded
    assert low < 0.3 < high and 0.15 < low and high < 0.45
    # the same draws as resampling by hand with the same seed
    pick = torch.randint(100, (2000, 100), generator=torch.Generator().manual_seed(0))
    by_hand = values[pick].mean(1).quantile(torch.tensor([0.025, 0.975])).tolist()
    assert [low, high] == by_hand
    # rows of several numbers: a ratio of sums, as in the chapters' paired comparisons
    rows = torch.stack([torch.full((50,), 2.0), torch.ones(50)], dim=1)  # (50, 2)
    assert bootstrap_interval(rows, lambda d: d[..., 1].sum(1) / d[..., 0].sum(1)) == (0.5, 0.5)
    assert bootstrap_interval(torch.zeros(1), lambda d: d.mean(1)) == (0.0, 0.0)
    with pytest.raises(ValueError):
        bootstrap_interval(torch.zeros(0), lambda d: d.mean(1))
    with pytest.raises(ValueError):
        bootstrap_interval(values, lambda d: d.mean(1), level=1.5)
    with pytest.raises(ValueError):
        bootstrap_interval(values, lambda d: d)  # not one value per draw
