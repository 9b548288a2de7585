"""Chapter 10's count-table baselines: the rule, the alignment, the window lookups, the n-gram
losses on span-corruption targets."""
import math

import pytest

from attnbook.data.byte_text import ByteVocab
from attnbook.tasks.count_baselines import (
    aligned_letters,
    LetterAligner, LetterWindowG2P, PhonemeWindowP2G, copy_phoneme_names, letter_rule,
    span_target_baselines,
)

PAIRS = [("thought", ("TH", "AO", "T")), ("tough", ("T", "AH", "F")), ("box", ("B", "AA", "K", "S")),
         ("hello", ("HH", "AH", "L", "OW")), ("tell", ("T", "EH", "L")), ("bought", ("B", "AO", "T")),
         ("sought", ("S", "AO", "T")), ("hot", ("HH", "AA", "T"))] * 3


def test_letter_rule_reads_doubled_letters_once_and_x_as_two():
    assert letter_rule("hello") == ("HH", "EH", "L", "AA")
    assert letter_rule("box") == ("B", "AA", "K", "S")
    assert letter_rule("a-b") == ("AE", "B")  # not a letter: skipped


def test_copy_phoneme_names():
    assert copy_phoneme_names(("TH", "AO", "T")) == "thaot"


def test_alignment_covers_every_letter_and_joins_to_the_phonemes():
    aligner = LetterAligner(PAIRS)
    for word, phonemes in PAIRS:
        units = aligner.align(word, phonemes)
        assert len(units) == len(word)
        assert tuple(p for unit in units for p in unit) == phonemes
    units = aligner.align("box", ("B", "AA", "K", "S"))
    assert units[-1] == ("K", "S")
    assert aligner.align("a", ("B", "C", "D")) is None  # three phonemes for one letter


def test_window_tables_reproduce_their_training_words():
    """Words whose five-letter windows occur in no other word come back exactly, whatever the
    alignment (on eight words, hard EM has little to go on)."""
    aligner = LetterAligner(PAIRS)
    g2p, p2g = LetterWindowG2P(PAIRS, aligner), PhonemeWindowP2G(PAIRS, aligner)
    for word, phonemes in PAIRS:
        if "ought" not in word:
            assert g2p(word) == phonemes
            assert p2g(phonemes) == word
    assert len(g2p("hox")) >= 2  # an unseen word: narrower windows answer


def test_span_target_baselines_rank_as_expected():
    vocab = ByteVocab(num_sentinels=16)
    stream = vocab.encode("the quick brown fox jumps over the lazy dog. " * 200)
    nats = span_target_baselines(stream, 64, vocab.sentinel, vocab.eos_id, len(vocab), windows=200)
    assert set(nats) == {"target unigram", "target bigram", "text bigram + span length",
                         "text trigram + span length"}
    assert all(math.isfinite(v) and v > 0 for v in nats.values())
    # a repetitive text: knowing the text's n-grams beats modelling the target sequence alone
    assert nats["text trigram + span length"] < nats["text bigram + span length"] < nats["target bigram"]


@pytest.mark.parametrize("word", ["", "q"])
def test_g2p_table_on_short_words(word):
    aligner = LetterAligner(PAIRS)
    assert LetterWindowG2P(PAIRS, aligner)(word) == ()


def test_wider_g2p_tables_look_at_more_letters_first():
    """The 7- and 9-letter tables try a wider window before the 5-letter back-off: 'ought' words differ
    only three letters from the centre, so only the wider windows tell 'thought' from 'sought'."""
    aligner = LetterAligner(PAIRS)
    g2p5 = LetterWindowG2P(PAIRS, aligner)
    assert g2p5.shapes[0] == (2, 2)
    for width in (7, 9, 11, 13):
        wide = LetterWindowG2P(PAIRS, aligner, width=width)
        assert wide.shapes[0] == ((width - 1) // 2,) * 2
        assert wide.shapes[-len(g2p5.shapes):] == g2p5.shapes
        for word, phonemes in PAIRS:  # every training word's widest window is its own
            assert wide(word) == phonemes
    with pytest.raises(ValueError, match="width must be one of"):
        LetterWindowG2P(PAIRS, aligner, width=6)


ALIGN_PAIRS = [("thought", ("TH", "AO", "T")), ("tot", ("T", "AA", "T")), ("hot", ("HH", "AA", "T")),
               ("box", ("B", "AA", "K", "S")), ("ox", ("AA", "K", "S")), ("though", ("DH", "OW"))] * 5


def test_aligned_letters_give_each_phoneme_its_letter_in_order():
    aligner = LetterAligner(ALIGN_PAIRS)
    assert aligned_letters(aligner, "box", ("B", "AA", "K", "S")) == [0, 1, 2, 2]
    for word, phonemes in set(ALIGN_PAIRS):
        units, letters = aligner.align(word, phonemes), aligned_letters(aligner, word, phonemes)
        assert len(letters) == len(phonemes) and letters == sorted(letters)
        assert all(phonemes[j] in units[i] for j, i in enumerate(letters))
    assert aligned_letters(aligner, "a", ("EY", "B", "C")) is None  # three phonemes on one letter
