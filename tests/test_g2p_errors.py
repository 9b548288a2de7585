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
