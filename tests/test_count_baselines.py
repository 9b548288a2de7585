"""The count-table aligner read as letter indices (Chapter 5's alignment check uses it)."""
import pytest

from attnbook.tasks.count_baselines import LetterAligner, aligned_letters

PAIRS = [("thought", ("TH", "AO", "T")), ("tot", ("T", "AA", "T")), ("hot", ("HH", "AA", "T")),
         ("box", ("B", "AA", "K", "S")), ("ox", ("AA", "K", "S")), ("though", ("DH", "OW"))] * 5


@pytest.fixture(scope="module")
def aligner():
    return LetterAligner(PAIRS)


def test_each_phoneme_gets_the_letter_it_is_aligned_to(aligner):
    units = aligner.align("box", ("B", "AA", "K", "S"))
    assert units == [("B",), ("AA",), ("K", "S")]
    assert aligned_letters(aligner, "box", ("B", "AA", "K", "S")) == [0, 1, 2, 2]


def test_one_letter_per_phoneme_in_order_and_the_unit_holds_it(aligner):
    for word, phonemes in set(PAIRS):
        units, letters = aligner.align(word, phonemes), aligned_letters(aligner, word, phonemes)
        assert len(letters) == len(phonemes) and letters == sorted(letters)
        assert all(phonemes[j] in units[i] for j, i in enumerate(letters))
    assert aligned_letters(aligner, "tot", ("T", "AA", "T")) == [0, 1, 2]


def test_a_word_with_no_alignment_gives_none(aligner):
    assert aligned_letters(aligner, "a", ("EY", "B", "C")) is None  # three phonemes on one letter
