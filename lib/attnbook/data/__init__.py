"""Data for the book: the CMUdict grapheme-to-phoneme task, vocabularies and padded batches."""
from attnbook.data.batching import Seq2SeqBatch, iterate_batches, make_batch, pad_sequences
from attnbook.data.g2p import G2PSplit, Pronunciation, build_vocabs, load_g2p, split_of
from attnbook.data.vocab import BOS, EOS, PAD, UNK, Vocab

__all__ = [
    "BOS", "EOS", "PAD", "UNK", "Vocab", "G2PSplit", "Pronunciation", "build_vocabs", "load_g2p", "split_of",
    "Seq2SeqBatch", "iterate_batches", "make_batch", "pad_sequences",
]
