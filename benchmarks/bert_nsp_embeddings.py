"""MiniLM's cosine between the two sentences of Chapter 6's first 400 NSP pairs (for its AUC).

Usage (from the repository root):
``python benchmarks/bert_nsp_embeddings.py`` (writes ``lib/attnbook/results/bert_nsp_embeddings.json``)

The chapter ranks 400 next-sentence pairs by three scores that know nothing of word order; one is
the cosine of all-MiniLM-L6-v2's sentence embeddings of A and B. Encoding the 800 sentences costs
about 10 CPU-seconds, so it runs here, once: the pairs are built exactly as on the page (each
chapter of the World English Bible a document, ``make_nsp_pairs(documents, 10_000,
random.Random(0))``, the first 400), and the results file holds each pair's label and cosine plus
a SHA-256 of the 800 decoded sentences, which the chapter checks against its own pairs.
"""
from __future__ import annotations

import hashlib
import random
import sys

import torch

import common
from attnbook.checkpoints import MINILM_SHA256, minilm_dir
from attnbook.data.bible import load_bible
from attnbook.data.wordpiece import WordPieceTokenizer
from attnbook.models.bert import load_pretrained_bert
from attnbook.tasks import masked_lm as mlm
from attnbook.tasks import text_classification as tc


def side_texts(tokenizer: WordPieceTokenizer, count: int = 400) -> tuple[list[bool], list[str], list[str]]:
    """The chapter's first ``count`` NSP pairs: IsNext labels, decoded A sentences, decoded B sentences."""
    chapters: dict = {}
    for verse in load_bible():
        ids = tokenizer.encode(verse.text)[0]
        chapters.setdefault((verse.book, verse.chapter), []).append(ids[1:-1])
    pairs = mlm.make_nsp_pairs(list(chapters.values()), 10_000, random.Random(0))[:count]
    return ([label == mlm.IS_NEXT for *_, label in pairs],
            [tokenizer.decode(a) for a, _, _ in pairs], [tokenizer.decode(b) for _, b, _ in pairs])


def digest(a_texts: list[str], b_texts: list[str]) -> str:
    """SHA-256 of the A sentences then the B sentences, one per line."""
    return hashlib.sha256("\n".join(a_texts + b_texts).encode()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = common.parser(__doc__)
    parser.add_argument("--pairs", type=int, default=400)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    tokenizer = WordPieceTokenizer.from_file(minilm_dir() / "vocab.txt")
    model = load_pretrained_bert(minilm_dir(), MINILM_SHA256)
    is_next, a_texts, b_texts = side_texts(tokenizer, args.pairs)
    cosine = (tc.encode_texts(model, tokenizer, a_texts) * tc.encode_texts(model, tokenizer, b_texts)).sum(-1)
    result = {"description": "cosine of all-MiniLM-L6-v2's sentence embeddings of A and B, Chapter 6's NSP pairs",
              "pairs": args.pairs, "texts_sha256": digest(a_texts, b_texts), "is_next": is_next,
              "cosine": [float(c) for c in cosine]}
    print(f"{args.pairs} pairs ({sum(is_next)} IsNext); cosine mean {float(cosine.mean()):.4f}")
    common.write_result(common.RESULTS / "bert_nsp_embeddings.json", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
