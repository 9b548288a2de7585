"""Data for the book: corpora, synthetic tasks, tokenisers, vocabularies and batches. One module each:

- ``g2p``: the CMU Pronouncing Dictionary as a grapheme-to-phoneme task, split 90/5/5 by hash
  (Chapters 1, 2, 5); ``joined_words``: held-out words written together, a length stress test;
- ``vocab``: symbols <-> ids with the four special tokens; ``batching``: padded seq2seq batches;
- ``synthetic``: small sequence tasks whose answer depends on where tokens are (Chapters 3, 4);
- ``bible``: the World English Bible, verse by verse with book and genre (Chapters 6, 8);
- ``wordpiece``: BERT's WordPiece tokeniser on a checkpoint's ``vocab.txt`` (Chapter 6);
- ``digits``: scikit-learn's 8x8 handwritten digits, splits and augmentation (Chapter 7);
- ``bpe``: byte-level byte-pair encoding, trained from scratch (Chapter 8);
- ``byte_text``: UTF-8 bytes as ids with T5's sentinels, as in ByT5 (Chapter 10).

Packaged corpora are found by ``attnbook.package_data``. ``data`` imports only the foundation
modules, never ``layers`` or ``models`` (``tests/test_layering.py``); the names below are the
G2P chapters' short imports.
"""
from attnbook.data.batching import Seq2SeqBatch, iterate_batches, make_batch, pad_sequences
from attnbook.data.g2p import G2PSplit, Pronunciation, build_vocabs, load_g2p, split_of
from attnbook.data.vocab import BOS, EOS, PAD, UNK, Vocab

__all__ = [
    "BOS", "EOS", "PAD", "UNK", "Vocab", "G2PSplit", "Pronunciation", "build_vocabs", "load_g2p", "split_of",
    "Seq2SeqBatch", "iterate_batches", "make_batch", "pad_sequences",
]
