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
