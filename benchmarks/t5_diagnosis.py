"""Chapter 10's diagnosis: why did span-corruption pretraining not help the byte-level T5?

Usage (from the repository root): ``python benchmarks/t5_diagnosis.py --part PART`` for each
part, then ``python benchmarks/t5_diagnosis.py --part none --resume LOG ...`` writes
``lib/attnbook/results/t5_diagnosis.json``; ``--smoke`` runs in seconds.

Same model, recipe, test words (every 5th) and one CPU thread as ``benchmarks/t5_pretraining.py``;
all the training words, 600 fine-tuning steps, three seeds:

1. ``--part lr``: the T5 **from scratch** fine-tuned at 1e-3 and 1e-2 (the study ran 3e-3; the
   ablation swept the same rates for the pretrained arm only).
2. ``--part probe``: what the study's pretrained T5 (``--checkpoint``) does on its own task: its
   span-corruption loss on the 1,500 scored windows of ``benchmarks/t5_baselines.py`` (same
   windows, same masks, so the numbers compare with the count models'), greedy span fills for
   the first six of them; and the letter-window count table on the *whole* test split (the
   words Chapter 5 reports on).
3. ``--part indomain``: an in-domain control: the same pretraining (1,500 steps, mean span 3)
   on the G2P training pairs themselves, written as text (``"thought th ao t"``, one pair after
   another), then fine-tuned like the study's pretrained arm; and the mismatch probe of part 5 on
   windows of that text.
4. ``--part p2g``: the study's pretrained T5 fine-tuned on p2g alone for 1,200 steps (the
   multi-task model's budget).
5. ``--part mismatch`` (seconds): does the pretrained decoder use its input at all? The same
   1,500 scored windows, each target scored three ways: with its own input, with the input of
   the next window (a wrong one, with as many sentinels), and with an input of sentinels alone.
   Nats per target token, and per hidden byte (the sentinels and ``</s>`` are predictable
   without the input). If the wrong input costs almost nothing, the decoder is a language
   model of its targets.
"""
from __future__ import annotations

import argparse
import json
import time

import torch

import common
from attnbook.data.bible import load_bible
from attnbook.data.g2p import load_g2p
from attnbook.decoding import greedy_decode
from attnbook.losses import sequence_cross_entropy
from attnbook.metrics import phoneme_error_rate, word_error_rate
from attnbook.models.t5 import T5
from attnbook.tasks.count_baselines import LetterAligner, LetterWindowG2P, span_target_windows
from attnbook.tasks.span_corruption import seq2seq_batch
from attnbook.tasks.text_to_text import phoneme_text
from attnbook.train import evaluating
from t5_pretraining import VOCAB, add_study_arguments, finetune_t5, pretrain, study_setup, t5_config


def key(row: dict) -> tuple:
    return (row.get("kind"), row.get("arm"), row.get("tasks"), row.get("lr"), row.get("seed"))


def show(ids: list[int]) -> str:
    """Ids as text, sentinel i shown as <i>."""
    out, raw = [], bytearray()
    for token in ids:
        if VOCAB.is_sentinel(token) or token == VOCAB.eos_id:
            out.append(raw.decode("utf-8", "replace"))
            raw = bytearray()
            out.append("</s>" if token == VOCAB.eos_id else f"<{len(VOCAB) - 1 - token}>")
        else:
            raw += VOCAB.decode([token]).encode("utf-8")
    out.append(raw.decode("utf-8", "replace"))
    return "".join(out)


@torch.no_grad()
def probe(weights: dict, smoke: bool, windows: int) -> dict:
    model = T5(t5_config(smoke, dropout=0.0))
    model.load_state_dict(weights)
    text = " ".join(v.text for v in load_bible())
    stream = VOCAB.encode(text[:50000] if smoke else text)
    samples = span_target_windows(stream, 64, VOCAB.sentinel, VOCAB.eos_id, windows)
    held_out = samples[windows // 2:]
    pairs = []
    for window, mask, target in held_out:
        # the input with sentinels, as corrupt() builds it
        inputs, spans = [], 0
        for i, (token, hidden) in enumerate(zip(window, mask)):
            if hidden and (i == 0 or not mask[i - 1]):
                inputs.append(VOCAB.sentinel(spans))
                spans += 1
            if not hidden:
                inputs.append(token)
        pairs.append((inputs + [VOCAB.eos_id], target))
    nats = tokens = 0.0
    with evaluating(model):
        for start in range(0, len(pairs), 250):
            batch = seq2seq_batch(pairs[start:start + 250], VOCAB.pad_id)
            logits = model(batch.src, batch.src_lengths, batch.tgt_in)
            count = int((batch.tgt_out != VOCAB.pad_id).sum())
            nats += float(sequence_cross_entropy(logits, batch.tgt_out, VOCAB.pad_id)) * count
            tokens += count
        shown = pairs[:6]
        batch = seq2seq_batch(shown, VOCAB.pad_id)
        written = greedy_decode(model, batch.src, batch.src_lengths, VOCAB.pad_id, VOCAB.eos_id, 40)
    fills = [{"text": show(w), "input": show(i), "target": show(t), "written": show(o)}
             for (w, _, _), (i, t), o in zip(held_out[:6], shown, written)]
    return {"kind": "probe", "windows_scored": len(pairs), "model_nats_per_token": round(nats / tokens, 4),
            "fills": fills}


def _pairs(stream: list[int], windows: int) -> list[tuple[list[int], list[int]]]:
    """(input with sentinels, target) of the held-out half of the scored windows."""
    pairs = []
    for window, mask, target in span_target_windows(stream, 64, VOCAB.sentinel, VOCAB.eos_id, windows)[windows // 2:]:
        inputs, spans = [], 0
        for i, (token, hidden) in enumerate(zip(window, mask)):
            if hidden and (i == 0 or not mask[i - 1]):
                inputs.append(VOCAB.sentinel(spans))
                spans += 1
            if not hidden:
                inputs.append(token)
        pairs.append((inputs + [VOCAB.eos_id], target))
    return pairs


@torch.no_grad()
def mismatch(weights: dict, smoke: bool, windows: int, text: str | None = None) -> dict:
    """The pretrained model's loss on its targets with the right, a wrong and an empty input
    (windows of ``text``; default: the Bible, the study's pretraining corpus)."""
    model = T5(t5_config(smoke, dropout=0.0))
    model.load_state_dict(weights)
    text = " ".join(v.text for v in load_bible()) if text is None else text
    pairs = _pairs(VOCAB.encode(text[:50000] if smoke else text), windows)

    def score(scored: list) -> tuple[float, float]:
        nats = tokens = byte_nats = byte_tokens = 0.0
        with evaluating(model):
            for start in range(0, len(scored), 250):
                batch = seq2seq_batch(scored[start:start + 250], VOCAB.pad_id)
                logp = model(batch.src, batch.src_lengths, batch.tgt_in).log_softmax(-1)  # (B, T, V)
                nll = -logp.gather(-1, batch.tgt_out[..., None])[..., 0]  # (B, T)
                real = batch.tgt_out != VOCAB.pad_id
                byte = real & (batch.tgt_out >= 3) & (batch.tgt_out < 259)
                nats, tokens = nats + float(nll[real].sum()), tokens + int(real.sum())
                byte_nats, byte_tokens = byte_nats + float(nll[byte].sum()), byte_tokens + int(byte.sum())
        return round(nats / tokens, 4), round(byte_nats / byte_tokens, 4)

    wrong = [(pairs[(i + 1) % len(pairs)][0], pairs[i][1]) for i in range(len(pairs))]
    empty = [([t for t in target if VOCAB.is_sentinel(t)] + [VOCAB.eos_id], target) for _, target in pairs]
    row = {"kind": "mismatch", "windows_scored": len(pairs)}
    for name, scored in (("own input", pairs), ("next window's input", wrong), ("sentinels only", empty)):
        row[name] = dict(zip(("nats_per_token", "nats_per_hidden_byte"), score(scored)))
    return row


def whole_test_table(smoke: bool) -> dict:
    data = load_g2p()
    train = list(data.train[:3000]) if smoke else list(data.train)
    test = data.test[:200] if smoke else data.test
    model = LetterWindowG2P(train, LetterAligner(train))
    hyps = [tuple(model(w)) for w, _ in test]
    refs = [tuple(p) for _, p in test]
    return {"kind": "whole test", "method": "letter window", "test_words": len(test),
            "g2p_wer": round(word_error_rate(hyps, refs), 4), "g2p_per": round(phoneme_error_rate(hyps, refs), 4)}


def main(argv: list[str] | None = None) -> int:
    p = common.experiment_parser(__doc__)
    p.add_argument("--part", choices=("lr", "probe", "indomain", "p2g", "mismatch", "none"), default="none")
    add_study_arguments(p, "the study's pretrained weights (benchmarks/t5_pretraining.py)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    start = time.perf_counter()
    settings, train, test = study_setup(args)
    rows = common.log_rows(args.resume)
    done = {key(r) for r in rows}

    def record(row: dict) -> None:
        print(json.dumps(row), flush=True)
        rows.append(row)

    def study_weights() -> dict:
        return pretrain(settings)[1] if args.smoke else torch.load(args.checkpoint)

    if args.part == "lr":
        for seed in args.seeds:  # seed-major, so that a partial run holds every rate
            for lr in args.lrs:
                if (None, "scratch", "g2p", lr, seed) not in done:
                    run = finetune_t5("scratch", train, test, seed,
                                      argparse.Namespace(**{**vars(settings), "lr": lr}), None)
                    record({**run, "lr": lr, "seed": seed})
    if args.part == "probe":
        record(probe(study_weights(), args.smoke, 200 if args.smoke else 3000))
        record(whole_test_table(args.smoke))
    if args.part == "mismatch":
        record(mismatch(study_weights(), args.smoke, 200 if args.smoke else 3000))
    if args.part == "indomain":
        text = " ".join(f"{word} {phoneme_text(ph)}" for word, ph in train)
        row, weights = pretrain(settings, text)
        record({k: v for k, v in row.items() if not k.endswith("_bias")} | {"corpus": "g2p train"})
        record(mismatch(weights, args.smoke, 200 if args.smoke else 3000, text) | {"corpus": "g2p train"})
        for seed in args.seeds:
            run = finetune_t5("pretrained", train, test, seed, settings, weights)
            record({**run, "arm": "pretrained on g2p words", "lr": settings.lr, "seed": seed})
    if args.part == "p2g":
        weights = study_weights()
        for seed in args.seeds:
            run = finetune_t5("pretrained", train, test, seed, settings, weights, ("p2g",),
                              2 * settings.steps)
            record({**run, "lr": settings.lr, "seed": seed})
    out = common.out_path(args, "t5_diagnosis.json")
    if out is not None and args.part == "none":
        common.write_result(out, {"description": __doc__.splitlines()[0], "machine": common.machine(),
                                  "test_words": len(test), "runs": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
