import re
from pathlib import Path

import pytest
import torch

import attnbook.data
from attnbook.data import BOS, EOS, PAD, UNK, Vocab, build_vocabs, iterate_batches, load_g2p, make_batch, pad_sequences
from attnbook.data.g2p import parse_cmudict, split_of


@pytest.fixture(scope="module")
def data():
    return load_g2p()


def test_parse_strips_stress_comments_and_groups_variants():
    entries = parse_cmudict([
        "tomato T AH0 M EY1 T OW2",
        "tomato(2) T AH0 M AA1 T OW2",
        "aalborg AO1 L B AO0 R G # place, danish",
        "",
    ])
    assert entries["tomato"] == [("T", "AH", "M", "EY", "T", "OW"), ("T", "AH", "M", "AA", "T", "OW")]
    assert entries["aalborg"] == [("AO", "L", "B", "AO", "R", "G")]


def test_split_is_a_pure_function_of_the_word():
    assert split_of("knight") == split_of("knight")
    counts = {s: 0 for s in ("train", "dev", "test")}
    for i in range(4000):
        counts[split_of(f"w{i}")] += 1
    assert 0.03 < counts["test"] / 4000 < 0.07 and 0.03 < counts["dev"] / 4000 < 0.07


def test_g2p_filtering_and_split(data):
    words = [w for split in (data.train, data.dev, data.test) for w, _ in split]
    assert len(words) == len(set(words)), "a word appears in two splits"
    assert all(set(w) <= set("abcdefghijklmnopqrstuvwxyz'") for w in words)
    assert len(data.phoneme_inventory()) == 39
    assert not any(ch.isdigit() for p in data.phoneme_inventory() for ch in p)
    assert 0.88 < len(data.train) / len(words) < 0.92
    for word, split in [(w, "train") for w, _ in data.train[:50]] + [(w, "test") for w, _ in data.test[:50]]:
        assert split_of(word) == split
    # words with two genuinely different pronunciations are dropped
    everything = dict(data.train + data.dev + data.test)
    assert "read" not in everything and "live" not in everything
    assert everything["knight"] == ("N", "AY", "T")


def test_missing_dictionary_file_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="no dictionary file"):
        load_g2p(str(tmp_path / "nope.dict"))


def test_vocab_round_trip_and_specials():
    v = Vocab(["a", "b", "c"])
    assert v.itos[:4] == [PAD, BOS, EOS, UNK] and len(v) == 7
    assert v.encode(["c", "a"]) == [6, 4]
    assert v.decode([1, 6, 4, 2, 5]) == ["c", "a"]  # stops at <eos>, drops <bos>
    assert v.decode([1, 6, 2], strip_specials=False) == [BOS, "c", EOS]
    with pytest.raises(KeyError, match="unknown symbol 'z' at position 1"):
        v.encode(["a", "z"])
    assert v.encode(["a", "z"], allow_unknown=True) == [4, v.unk_id]
    with pytest.raises(ValueError, match="special"):
        Vocab(["a", PAD])
    with pytest.raises(IndexError):
        v.decode([99])


def test_pad_sequences_pads_right_and_reports_lengths():
    padded, lengths = pad_sequences([[5, 6, 7], [8]], pad_id=0)
    assert padded.tolist() == [[5, 6, 7], [8, 0, 0]]
    assert lengths.tolist() == [3, 1]
    with pytest.raises(ValueError, match="empty batch"):
        pad_sequences([], pad_id=0)
    with pytest.raises(ValueError, match="is empty"):
        pad_sequences([[1], []], pad_id=0)


def test_make_batch_shifts_targets(data):
    src_vocab, tgt_vocab = build_vocabs(data)
    batch = make_batch([("ox", ("AA", "K", "S")), ("a", ("AH",))], src_vocab, tgt_vocab)
    assert batch.src.shape == (2, 2) and batch.src_lengths.tolist() == [2, 1]
    assert batch.tgt_in[:, 0].tolist() == [tgt_vocab.bos_id] * 2
    assert tgt_vocab.decode(batch.tgt_in[0], strip_specials=False) == [BOS, "AA", "K", "S"]
    assert tgt_vocab.decode(batch.tgt_out[0], strip_specials=False) == ["AA", "K", "S", EOS]
    assert batch.tgt_out[1].tolist() == [tgt_vocab.stoi["AH"], tgt_vocab.eos_id, 0, 0]
    assert batch.tgt_lengths.tolist() == [4, 2]
    with pytest.raises(KeyError, match="unknown symbol"):
        make_batch([("o9", ("AA",))], src_vocab, tgt_vocab)


def test_iterate_batches_is_seeded_and_trims_padding(data):
    src_vocab, tgt_vocab = build_vocabs(data)
    pairs = data.dev[:300]
    a = iterate_batches(pairs, src_vocab, tgt_vocab, 64, torch.Generator().manual_seed(3))
    b = iterate_batches(pairs, src_vocab, tgt_vocab, 64, torch.Generator().manual_seed(3))
    for _ in range(7):  # more than one pass: the iterator is endless when shuffling
        x, y = next(a), next(b)
        assert torch.equal(x.src, y.src) and torch.equal(x.tgt_out, y.tgt_out)
        assert x.src.shape[1] == int(x.src_lengths.max())
        assert (x.src[:, -1] != src_vocab.pad_id).any()
    one_pass = list(iterate_batches(pairs, src_vocab, tgt_vocab, 64))
    assert sum(len(b.src) for b in one_pass) == 300
    assert make_batch(pairs[:64], src_vocab, tgt_vocab).src.tolist() == one_pass[0].src.tolist()


def test_the_data_package_docstring_names_every_data_module():
    folder = Path(attnbook.data.__file__).parent
    modules = {p.stem for p in folder.glob("*.py")} - {"__init__"}
    named = set(re.findall(r"``(\w+)``", attnbook.data.__doc__))
    assert modules <= named, f"attnbook/data/__init__.py does not describe {sorted(modules - named)}"
