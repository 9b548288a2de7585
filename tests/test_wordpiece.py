"""WordPiece from scratch gives the reference tokenizer's ids, on the whole corpus and on hard cases."""
import pytest
import torch

from attnbook.checkpoints import minilm_dir
from attnbook.data.bible import load_bible
from attnbook.data.wordpiece import (
    WordPieceTokenizer, basic_tokenize, split_punctuation, strip_accents, wordpiece_split,
)

VOCAB = {"un", "##aff", "##able", "##a", "##ffa", "##ble", "una", "a", "[UNK]"}


@pytest.fixture(scope="module")
def tokenizer():
    return WordPieceTokenizer.from_file(minilm_dir() / "vocab.txt")


@pytest.fixture(scope="module")
def reference():
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(str(minilm_dir()))


def test_greedy_longest_match_first():
    assert wordpiece_split("unaffable", VOCAB) == ["una", "##ffa", "##ble"]  # not un ##aff ##able
    assert wordpiece_split("a", VOCAB) == ["a"]
    assert wordpiece_split("unx", VOCAB) == ["[UNK]"]       # a remainder nothing covers: the whole word
    assert wordpiece_split("a" * 101, {"a", "##a"}) == ["[UNK]"]
    assert wordpiece_split("a" * 100, {"a", "##a"}) == ["a"] + ["##a"] * 99


def test_basic_tokenisation_steps():
    assert strip_accents("Café naïve") == "Cafe naive"
    assert split_punctuation("don't!") == ["don", "'", "t", "!"]
    assert basic_tokenize("Hello, WORLD!\tNaïve\x07 日本") == ["hello", ",", "world", "!", "naive", "日", "本"]
    assert basic_tokenize("Hello", lower_case=False) == ["Hello"]


def test_every_verse_of_the_corpus_matches_the_reference(tokenizer, reference):
    verses = [v.text for v in load_bible()]
    ours = [tokenizer.encode(v)[0] for v in verses]
    theirs = reference(verses)["input_ids"]
    different = [v for v, a, b in zip(verses, ours, theirs) if a != b]
    assert len(verses) == 31_095
    assert different == []


HARD = [
    "Héllo\u00a0wörld\u200b!", "ÉCOLE Ångström İstanbul", "tab\there\nnew\rline", "a\x00b\ufffdc\x07d",
    "日本語のテキスト と 한국어", "emoji 😀 test", "x" * 101, "x" * 100, "naïve—dash…ellipsis «quotes»",
    "ﬁne ligature ½", "Σίσυφος Москва", "   ", "", "[MASK] token[SEP] [mask]", "co-operate 3.14 U.S.A.",
    "\u3000ideographic space", "mañana\u0301", "$5 + 3^2 | a~b `c`",
]


@pytest.mark.parametrize("text", HARD)
def test_hard_cases_match_the_reference(tokenizer, reference, text):
    assert tokenizer.encode(text)[0] == reference(text)["input_ids"]


def test_pairs_segments_and_padding_match_the_reference(tokenizer, reference):
    a = ["Jesus wept.", "In the beginning God created the heavens and the earth."]
    b = ["Rejoice always.", "Job answered:"]
    ours = tokenizer.encode_batch(a, b)
    theirs = reference(a, b, padding=True, return_tensors="pt")
    assert torch.equal(ours.input_ids, theirs["input_ids"])
    assert torch.equal(ours.segment_ids, theirs["token_type_ids"])
    assert torch.equal(ours.token_mask, theirs["attention_mask"].bool())


def test_truncation_longest_first(tokenizer, reference):
    a, b = "In the beginning God created the heavens and the earth.", "Jesus wept."
    for max_len in range(5, 16):
        ids, segments = tokenizer.encode(a, b, max_len=max_len)
        ref = reference(a, b, truncation="longest_first", max_length=max_len)
        assert ids == ref["input_ids"] and segments == ref["token_type_ids"]
    with pytest.raises(ValueError, match="at least 5, got 3"):
        tokenizer.encode(a, b, max_len=3)


def test_decode_joins_pieces(tokenizer):
    ids, _ = tokenizer.encode("The unaffable shepherd")
    assert tokenizer.decode(ids) == "[CLS] the unaffable shepherd [SEP]"


def test_bad_inputs_say_what_was_expected(tokenizer):
    with pytest.raises(TypeError, match="sequence of strings"):
        tokenizer.encode_batch("one string")
    with pytest.raises(ValueError, match="2 texts, 1 pairs"):
        tokenizer.encode_batch(["a", "b"], ["c"])
    with pytest.raises(ValueError, match="special tokens"):
        WordPieceTokenizer(["a", "b"])
