"""Chapter 10's baselines: what count tables score on the tasks of the T5 study.

Usage (from the repository root): ``python benchmarks/t5_baselines.py`` writes
``lib/attnbook/results/t5_baselines.json`` (the chapter prints it beside the trained arms of
``benchmarks/t5_pretraining.py``); ``--smoke`` runs in seconds and writes nothing unless
``--out`` is given.

1. **G2P**, on the same test words as the study (every 5th word of the test split): the 26-line
   one-phoneme-per-letter rule, and a five-letter-window lookup after hard-EM letter-to-phoneme
   alignment (``attnbook.tasks.count_baselines``), fitted on all the training words and on the
   study's subsets of 500 and 2,000 words (the same three seeds draw the same subsets; the
   alignment is fitted on the subset alone).
2. **P2G**: copying the phoneme names, and a five-phoneme-window lookup.
3. **Span-corruption targets**: nats per target token of n-gram models on the pretraining task
   (64-byte windows of the World English Bible, 15% noise, mean span 3).
"""
from __future__ import annotations

import statistics
import time

import torch

import common
from attnbook.data.bible import load_bible
from attnbook.data.byte_text import ByteVocab
from attnbook.data.g2p import load_g2p
from attnbook.metrics import phoneme_error_rate, word_error_rate
from attnbook.tasks.count_baselines import (
    LetterAligner, LetterWindowG2P, PhonemeWindowP2G, copy_phoneme_names, letter_rule,
    span_target_baselines,
)

VOCAB = ByteVocab(num_sentinels=16)


def subset(train, size: int, seed: int):
    """The study's subset (``benchmarks/t5_pretraining.py``, ``train_subset``)."""
    if size == 0 or size >= len(train):
        return list(train)
    pick = torch.randperm(len(train), generator=torch.Generator().manual_seed(1000 + seed))[:size]
    return [train[i] for i in sorted(pick.tolist())]


def scores(predict, inputs, refs) -> dict[str, float]:
    hyps = [tuple(predict(x)) for x in inputs]
    refs = [tuple(r) for r in refs]
    return {"wer": round(word_error_rate(hyps, refs), 4), "per": round(phoneme_error_rate(hyps, refs), 4)}


def main(argv: list[str] | None = None) -> int:
    p = common.experiment_parser(__doc__)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--sizes", type=int, nargs="+", default=[500, 2000])
    p.add_argument("--test-every", type=int, default=5)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    start = time.perf_counter()
    data = load_g2p()
    train = list(data.train[:3000]) if args.smoke else list(data.train)
    test = data.test[:: args.test_every]
    words, phonemes = [w for w, _ in test], [p for _, p in test]
    rows = [{"task": "g2p", "method": "letter rule", "size": 0, **scores(letter_rule, words, phonemes)}]
    aligner = LetterAligner(train)
    rows.append({"task": "g2p", "method": "letter window", "size": len(data.train),
                 **scores(LetterWindowG2P(train, aligner), words, phonemes)})
    rows.append({"task": "p2g", "method": "copy phoneme names", "size": 0,
                 **scores(copy_phoneme_names, phonemes, words)})
    rows.append({"task": "p2g", "method": "phoneme window", "size": len(data.train),
                 **scores(PhonemeWindowP2G(train, aligner), phonemes, words)})
    for size in args.sizes:
        for seed in args.seeds:
            part = subset(train, size, seed)
            model = LetterWindowG2P(part, LetterAligner(part))
            rows.append({"task": "g2p", "method": "letter window", "size": size, "seed": seed,
                         **scores(model, words, phonemes)})
    for row in rows:
        print(row, flush=True)
    text = " ".join(v.text for v in load_bible())
    stream = VOCAB.encode(text[:50000] if args.smoke else text)
    span = span_target_baselines(stream, 64, VOCAB.sentinel, VOCAB.eos_id, len(VOCAB),
                                 windows=200 if args.smoke else 3000)
    span = {k: round(v, 3) for k, v in span.items()}
    print(span)
    out = common.out_path(args, "t5_baselines.json")
    if out is not None:
        common.write_result(out, {
            "description": __doc__.splitlines()[0], "machine": common.machine(),
            "wall_seconds": round(time.perf_counter() - start, 1), "test_words": len(test),
            "g2p_p2g": rows, "span_targets_nats_per_token": span})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
