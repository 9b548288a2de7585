"""attnbook.tasks.g2p_errors: error shares by third, with the vowel control, on hand-made results."""
import pytest

from attnbook.tasks.g2p import G2PResult
from attnbook.tasks.g2p_errors import error_thirds, third


def result(rows):
    words = [w for w, _, _ in rows]
    return G2PResult(words, [r for _, r, _ in rows], [h for _, _, h in rows], 0.0, 0.0, {})


def test_third():
    assert [third(j, 7) for j in range(7)] == [0, 0, 1, 1, 2, 2, 2]
    assert third(0, 1) == 1


def test_counts_and_controls():
    ref = ("K", "AH", "T", "AH", "K", "S")  # vowels in positions 1 and 3
    hyp = ("K", "IH", "T", "AH", "K", "S")  # one vowel error, in the first third
    out = error_thirds(result([("abcdefghi", ref, hyp), ("short", ref, ())]))
    assert out.words == 1 and out.errors == 1
    assert out.shares["errors"] == (1.0, 0.0, 0.0)
    assert out.shares["positions"] == (2 / 6, 2 / 6, 2 / 6)
    assert out.error_rate == {"vowel": 0.5, "consonant": 0.0}
    # the vowel rate alone puts the errors where the vowels are: one in each of the first two thirds
    assert out.shares["expected from vowels"] == pytest.approx((0.5, 0.5, 0.0))


def test_no_long_words():
    with pytest.raises(ValueError, match="no words"):
        error_thirds(result([("ab", ("AH", "B"), ("AH", "B"))]))


def test_length_curve_null_matches_the_overall_wer_and_climbs():
    from attnbook.metrics import phoneme_error_rate, wer_by_bucket, word_error_rate
    from attnbook.tasks.g2p import G2PResult
    from attnbook.tasks.g2p_errors import length_curve

    words = ["ab", "abcde", "abcdefghij", "abcdefghijklmn"] * 5
    refs = [tuple("K" * len(w)) for w in words]
    preds = [r if k % 3 else r[:-1] for k, r in enumerate(refs)]  # every third word loses a phoneme
    result = G2PResult(words, refs, preds, word_error_rate(preds, refs), phoneme_error_rate(preds, refs),
                       wer_by_bucket(words, preds, refs))
    curve = length_curve(result)
    assert curve.words == {"1-4": 5, "5-6": 5, "9-10": 5, "13+": 5}
    overall = sum(curve.null_wer[b] * curve.words[b] for b in curve.words) / len(words)
    assert abs(overall - result.wer) < 1e-6
    null = list(curve.null_wer.values())
    assert null == sorted(null) and null[0] < null[-1]
    p = curve.token_error
    assert abs(curve.null_wer["1-4"] - (1 - (1 - p) ** 3)) < 1e-9  # 2 phonemes + <eos>
    assert curve.per["13+"] == sum(k % 3 == 0 for k in range(3, 20, 4)) / (5 * 14)


def test_nearest_spelling_copies_the_closest_training_word():
    from attnbook.metrics import edit_distance
    from attnbook.tasks.g2p_errors import _letter_edits, nearest_spelling

    train = [("cat", ("K", "AE", "T")), ("cart", ("K", "AA", "R", "T")), ("dog", ("D", "AO", "G")),
             ("bat", ("B", "AE", "T")), ("catalog", ("K", "AE", "T", "AH", "L", "AO", "G"))]
    # 'cats' is one edit from 'cat' (and two from 'cart'); 'dig' one from 'dog'; 'hat' is one
    # edit from both 'cat' and 'bat': the earlier training word wins
    assert nearest_spelling(train, ["cats", "dig", "hat", "catalogs"]) == [
        ("K", "AE", "T"), ("D", "AO", "G"), ("K", "AE", "T"), ("K", "AE", "T", "AH", "L", "AO", "G")]
    # the window limits the search: with one neighbour on each side 'dig' only sees 'catalog'/'dog'
    assert nearest_spelling(train, ["dig"], window=1) == [("D", "AO", "G")]
    for a, b in [("knight", "night"), ("abc", "xbz"), ("", "ab"), ("aaa", "aa"), ("kitten", "sitting")]:
        assert _letter_edits(a, b) == edit_distance(a, b)
    with pytest.raises(ValueError, match="no training"):
        nearest_spelling([], ["cat"])
