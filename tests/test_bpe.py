"""Byte-level BPE: pre-split, merges computed by hand, the incremental trainer equal to the
naive one, encode == training segmentation, round trip on the whole corpus and on any text."""
import pytest

from attnbook.data.bible import load_bible
from attnbook.data.bpe import BPE, count_pairs, merge_pair, pre_split, train_bpe


def test_pre_split_is_gpt2_like_and_loses_nothing():
    assert pre_split("Let there be light.") == ["Let", " there", " be", " light", "."]
    assert pre_split("I'll say: 42 times!!") == ["I", "'ll", " say", ":", " 42", " times", "!!"]
    assert pre_split("a  b\n") == ["a", " ", " b", "\n"]  # the last space of a run goes with the word
    for text in ("x_y\t\tz  ", "naïve café — 😀!", "", "   "):
        assert "".join(pre_split(text)) == text


def test_merge_pair_left_to_right():
    assert merge_pair([1, 1, 1], (1, 1), 9) == [9, 1]
    assert merge_pair([1, 2, 3, 1, 2], (1, 2), 7) == [7, 3, 7]
    assert merge_pair([2, 1], (1, 2), 7) == [2, 1]
    assert merge_pair([], (1, 2), 7) == []


def test_count_pairs_weights_each_piece_by_its_count():
    assert count_pairs({(1, 2, 1, 2): 3, (2, 1): 1}) == {(1, 2): 6, (2, 1): 4}


def test_merges_computed_by_hand():
    # pieces 'aaab' and ' aab' (a=97, b=98, space=32); pair counts (a,a)=2+1=3, (a,b)=2, (' ',a)=1
    bpe = train_bpe("aaab aab", 259)
    # 1. (a,a)->256: [256,a,b] and [' ',256,b]; then every pair occurs once: the smallest pair wins,
    # 2. (32,256)->257, 3. (97,98)->258
    assert bpe.merges == ((97, 97), (32, 256), (97, 98))
    assert bpe.encode("aaab aab") == [256, 258, 257, 98]
    assert bpe.token_bytes()[256:] == [b"aa", b" aa", b"ab"]
    # counts of pieces weight the pairs: ' the' twice and 'the' once make (t,h) and (h,e) tie at 3,
    # and the smaller pair, (h,e) = (104,101), goes first
    assert train_bpe("the the the cat", 257).merges == ((104, 101),)


def test_training_stops_when_nothing_is_left_to_merge():
    bpe = train_bpe("ab", 300)
    assert bpe.merges == ((97, 98),) and bpe.vocab_size == 257
    with pytest.raises(ValueError, match="vocab_size must be >= 256"):
        train_bpe("ab", 100)


def naive_train(text, vocab_size):
    """The textbook loop: recount every pair after every merge."""
    pieces = {}
    for piece in pre_split(text):
        key = tuple(piece.encode("utf-8"))
        pieces[key] = pieces.get(key, 0) + 1
    merges = []
    while len(merges) < vocab_size - 256:
        pairs = count_pairs(pieces)
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        merged = {}
        for ids, n in pieces.items():
            key = tuple(merge_pair(list(ids), best, 255 + len(merges)))
            merged[key] = merged.get(key, 0) + n
        pieces = merged
    return tuple(merges), pieces


def test_incremental_training_equals_the_naive_loop_and_encode_reproduces_it():
    text = "\n".join(v.text for v in load_bible()[:400])
    merges, pieces = naive_train(text, 256 + 120)
    bpe = train_bpe(text, 256 + 120)
    assert bpe.merges == merges
    table = bpe.token_bytes()
    for ids in pieces:  # encoding a training piece gives the segmentation training ended with
        piece = b"".join(table[i] for i in ids).decode("utf-8")
        assert bpe.encode_piece(piece) == list(ids)


def test_round_trip_on_the_whole_corpus_and_on_text_it_never_saw():
    text = "\n".join(v.text for v in load_bible())
    bpe = train_bpe(text, 512)
    ids = bpe.encode(text)
    assert bpe.decode(ids) == text
    assert len(ids) < len(text.encode("utf-8")) / 2  # it compresses: 512 tokens already halve the bytes
    for other in ("naïve café — 😀\t\t x_y  ", "日本語のテキスト", "\n\n"):
        assert bpe.decode(bpe.encode(other)) == other
    assert bpe.tokens(" the 😀") == ["·the", "·", "<f0>", "<9f>", "<98>", "<80>"]  # bytes it never merged


def test_decode_rejects_unknown_ids():
    with pytest.raises(ValueError, match=r"token ids must be in \[0, 257\)"):
        BPE(((97, 98),)).decode([97, 300])
