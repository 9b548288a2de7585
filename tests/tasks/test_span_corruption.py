"""Span corruption: the measured statistics (15% hidden, spans of mean 3, shorter targets), the
input/target layout with sentinels, batches; the byte vocabulary; G2P as text to text."""
import pytest
import torch

from attnbook.data.byte_text import ByteVocab
from attnbook.tasks.span_corruption import (
    corrupt, corruption_statistics, noise_mask, random_segmentation, seq2seq_batch, span_corruption_batches,
)
from attnbook.tasks.text_to_text import byte_batches, phoneme_text, text_pairs


def test_random_segmentation_covers_every_item_with_nonempty_runs():
    g = torch.Generator().manual_seed(0)
    for items, segments in [(10, 1), (10, 10), (15, 5), (97, 13)]:
        runs = random_segmentation(items, segments, g)
        assert len(runs) == segments and sum(runs) == items and min(runs) >= 1
    with pytest.raises(ValueError, match="num_segments"):
        random_segmentation(3, 4)


@pytest.mark.parametrize("length", [20, 64, 100, 333])
def test_noise_fraction_and_span_count_are_exact_per_sequence(length):
    g = torch.Generator().manual_seed(length)
    for _ in range(50):
        mask = noise_mask(length, generator=g)
        hidden = int(mask.sum())
        assert hidden == round(0.15 * length)
        starts = int((mask[1:] & ~mask[:-1]).sum()) + int(mask[0])
        assert starts == max(round(hidden / 3), 1)
        assert not mask[0] and mask[-1]  # T5's layout: a kept token first, a span last


def test_measured_statistics():
    stats = corruption_statistics(100, sequences=1000)
    assert stats.noise_fraction == pytest.approx(0.15)
    assert stats.mean_span_length == pytest.approx(3.0)
    assert stats.mean_input_length == 100 - 15 + 5 + 1  # kept + one sentinel per span + </s>
    assert stats.mean_target_length == 15 + 5 + 1  # hidden + one sentinel per span + </s>
    assert sum(k * v for k, v in stats.span_length_counts.items()) == 15 * 1000
    assert 1 in stats.span_length_counts and max(stats.span_length_counts) > 5  # lengths vary


def test_spans_vary_between_draws_and_generators():
    a = noise_mask(64, generator=torch.Generator().manual_seed(0))
    b = noise_mask(64, generator=torch.Generator().manual_seed(1))
    assert not torch.equal(a, b)
    again = noise_mask(64, generator=torch.Generator().manual_seed(0))
    assert torch.equal(a, again)


def test_corrupt_layout_and_round_trip():
    ids = list(range(10, 22))  # 12 tokens
    mask = torch.tensor([0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 1, 1], dtype=torch.bool)
    src, tgt = corrupt(ids, mask, lambda i: 100 + i, eos_id=1)
    assert src == [10, 11, 100, 14, 15, 16, 101, 18, 19, 102, 1]
    assert tgt == [100, 12, 13, 101, 17, 102, 20, 21, 1]
    # filling every sentinel of the input with its span gives the text back
    spans, current = {}, None
    for t in tgt[:-1]:
        if t >= 100:
            current = spans.setdefault(t, [])
        else:
            current.append(t)
    rebuilt = [x for t in src[:-1] for x in (spans[t] if t >= 100 else [t])]
    assert rebuilt == ids


def test_bad_inputs_are_rejected():
    with pytest.raises(ValueError, match="at least 2"):
        noise_mask(1)
    with pytest.raises(ValueError, match="noise_density"):
        noise_mask(10, noise_density=1.5)
    with pytest.raises(ValueError, match="mean_span_length"):
        noise_mask(10, mean_span_length=0.5)
    with pytest.raises(ValueError, match="same length"):
        corrupt([1, 2, 3], torch.tensor([True, False]), lambda i: 9, 1)
    vocab = ByteVocab()
    with pytest.raises(ValueError, match="longer than one window"):
        next(span_corruption_batches([5] * 10, 64, 2, vocab.sentinel, 1, 0, torch.Generator()))


def test_batches_shift_the_target_behind_the_start_token():
    vocab = ByteVocab(8)
    stream = vocab.encode("In the beginning, God created the heavens and the earth. " * 4)
    batch = next(span_corruption_batches(stream, 40, 3, vocab.sentinel, vocab.eos_id, vocab.pad_id,
                                         torch.Generator().manual_seed(0)))
    assert batch.src.shape[0] == 3 and (batch.tgt_in[:, 0] == vocab.pad_id).all()
    for row in range(3):
        n = int(batch.tgt_lengths[row])
        assert batch.tgt_out[row, n - 1] == vocab.eos_id
        assert torch.equal(batch.tgt_in[row, 1:n], batch.tgt_out[row, : n - 1])
        assert batch.tgt_out[row, 0] == vocab.sentinel(0)
    assert seq2seq_batch([([5, 1], [7, 1])], 0).tgt_in.tolist() == [[0, 7]]


def test_byte_vocab():
    vocab = ByteVocab(num_sentinels=4)
    assert len(vocab) == 263 and vocab.sentinel(0) == 262 and vocab.sentinel(3) == 259
    ids = vocab.encode("héllo", eos=True)
    assert ids[-1] == vocab.eos_id and len(ids) == 7  # é is two bytes
    assert vocab.decode(ids + [50]) == "héllo"  # stops at </s>
    assert vocab.decode([vocab.encode("a")[0], vocab.sentinel(1), 0, vocab.encode("b")[0]]) == "a<extra_id_1>b"
    with pytest.raises(ValueError, match="sentinel index"):
        vocab.sentinel(4)
    with pytest.raises(IndexError, match="outside"):
        vocab.decode([263])
    with pytest.raises(TypeError, match="str"):
        vocab.encode(b"bytes")
    with pytest.raises(ValueError, match="num_sentinels"):
        ByteVocab(0)


def test_text_pairs_and_byte_batches():
    pairs = [("hello", ("HH", "AH", "L", "OW")), ("a", ("AH",))]
    assert phoneme_text(pairs[0][1]) == "hh ah l ow"
    assert text_pairs(pairs) == [("hello", "hh ah l ow"), ("a", "ah")]
    assert text_pairs(pairs, "p2g", prefix=True)[0] == ("p2g: hh ah l ow", "hello")
    with pytest.raises(ValueError, match="direction"):
        text_pairs(pairs, "g2g")
    vocab = ByteVocab()
    batch = next(byte_batches(text_pairs(pairs), vocab, 2, torch.Generator().manual_seed(0)))
    assert sorted(batch.src_lengths.tolist()) == [2, 6] and sorted(batch.tgt_lengths.tolist()) == [3, 11]
