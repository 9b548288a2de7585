"""Chapter 10's low-label test: does pretraining on unlabelled spellings help with few labelled words?

Usage (from the repository root), in up to three processes that share a checkpoint:

    python benchmarks/t5_low_label.py --part pretrain > /tmp/t5_ll_pre.log
    python benchmarks/t5_low_label.py --part finetune --arms scratch > /tmp/t5_ll_a.log
    python benchmarks/t5_low_label.py --part finetune --arms pretrained --seeds 0 1 > /tmp/t5_ll_b.log
    python benchmarks/t5_low_label.py --part finetune --arms pretrained --seeds 2 > /tmp/t5_ll_c.log
    python benchmarks/t5_low_label.py --part collect --resume /tmp/t5_ll_*.log
    python benchmarks/t5_low_label.py --part export

writes ``lib/attnbook/results/t5_low_label.json``; ``--part export`` copies the pretrained weights
(``--checkpoint``) into ``lib/attnbook/results/t5_spellings_pretrained.safetensors``, after
checking that they reproduce the pretraining's last wrong-input gap; ``--smoke`` runs in seconds and writes nothing

unless ``--out`` is given. A ``finetune`` part with the pretrained arm waits for the checkpoint.

1. **Pretraining** (once, seed 0): exactly the in-domain run of ``benchmarks/t5_encoder_use.py
   --corpus spellings`` (span corruption of the G2P *training* words' spellings alone, no
   phonemes; 3,000 steps of 64 windows of 32 bytes; T5's inverse-square-root schedule to a peak
   of 1e-2; the wrong-input gap tracked every 250 steps), its weights kept in ``--checkpoint``.
2. **Fine-tuning** with few labels: 500 and 2,000 labelled training words (the study's subsets:
   ``t5_pretraining.train_subset``, drawn by the seed), from those weights and from a fresh
   initialisation, the study's recipe for both arms (600 steps, batch 64, Adam 3e-3, no dropout),
   seeds 0, 1, 2; word and phoneme error rates on every 5th test word. The study's Transformer
   and count rows at the same sizes are in ``t5_pretraining.json`` and ``t5_baselines.json``.

One thread per process; every run prints one JSON line, so ``--resume`` skips finished runs.

**The pretraining's peak rate** (``--peak-lr``, ``--pretrain-seed``): the run above uses T5's
Adafactor peak of 1e-2 with plain Adam. Chapter 10 sweeps the peak over 1e-3, 2e-3 and 3e-3 and
keeps the one with the lowest held-out span-corruption loss at the last step (the rule was fixed
before fine-tuning): 3e-3. Each peak writes ``t5_low_label_lr{peak}.json`` (``_ps{seed}`` added
for another pretraining seed); the chapter loads the chosen weights,
``t5_spellings_pretrained_lr0.003.safetensors``. About 6 CPU-minutes per pretraining and 3 per
fine-tuning run on an idle core:

    python benchmarks/t5_low_label.py --part pretrain --peak-lr 3e-3 --checkpoint /tmp/pre3.pt > /tmp/pre3.log
    python benchmarks/t5_low_label.py --part finetune --peak-lr 3e-3 --arms pretrained --sizes 500 2000 0 \\
        --checkpoint /tmp/pre3.pt > /tmp/ft3.log      # --sizes 0: all the words
    python benchmarks/t5_low_label.py --part collect --peak-lr 3e-3 --resume /tmp/pre3.log /tmp/ft3.log
    python benchmarks/t5_low_label.py --part export --peak-lr 3e-3 --checkpoint /tmp/pre3.pt

(1e-3 and 2e-3: the same with ``--sizes 2000``; the second pretraining seed: ``--pretrain-seed 1``
on every line.) The scratch rows the chapter prints beside them are the study's, with the same
subsets, batches and seeds.

**Longer windows** (``--window``, ``--pretrain-batch``): the 32-byte run's targets are all 8 tokens,
shorter than 94% of the G2P targets written as text (15.3 tokens on average), so its decoder never
met a third sentinel nor an offset beyond -7. ``--window 96`` hides 14 bytes in 5 spans: targets
of 20 tokens, as long as 85% of the G2P targets. With a window other than 32 every part writes and
reads its own files: ``t5_low_label_w{window}.json`` and ``/tmp/t5_spellings_pretrained_w{window}.pt``
(``--checkpoint`` overrides), and ``--part positions`` adds the window's own length. The run for
Chapter 10 (the pretraining: 3,000 steps at about 0.45 s each on one loaded thread, 25-45
CPU-minutes; then 6 fine-tuning runs of 2-5 minutes each; the processes may run side by side):

    python benchmarks/t5_low_label.py --window 96 --pretrain-batch 32 --part pretrain > /tmp/t5_w96_pre.log
    python benchmarks/t5_low_label.py --window 96 --part finetune --sizes 2000 --arms scratch > /tmp/t5_w96_a.log
    python benchmarks/t5_low_label.py --window 96 --part finetune --sizes 2000 --arms pretrained > /tmp/t5_w96_b.log
    python benchmarks/t5_low_label.py --window 96 --part positions > /tmp/t5_w96_pos.log
    python benchmarks/t5_low_label.py --window 96 --pretrain-batch 32 --sizes 2000 --part collect \\
        --resume /tmp/t5_w96_*.log

**What the fine-tuned models write** (``--part outputs``, about 5 CPU-minutes): seed 0 with 2,000 words
only, both starts fine-tuned again exactly as in ``--part finetune`` (so their scores must equal the
committed seed-0 rows), then, on the same test words: the training loss along the way, the greedy
outputs for the first 12 words, the output lengths, and whether the model reads its input (nats per
target byte, teacher-forced, with each word's own spelling and with the next test word's). With a
window other than 32 it adds its row to the window's results file:

    python benchmarks/t5_low_label.py --window 96 --part outputs > /tmp/t5_w96_out.log
    python benchmarks/t5_low_label.py --window 96 --pretrain-batch 32 --sizes 2000 --part collect \\
        --resume /tmp/t5_w96_*.log
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

import common
from attnbook.data.g2p import load_g2p
from attnbook.models.t5 import T5
from attnbook.tasks.count_baselines import span_target_windows
from attnbook.tasks.span_corruption import corrupt, seq2seq_batch
from attnbook.train import evaluating
from t5_encoder_use import corpus_text, gap, pretrain_inverse_sqrt
from t5_pretraining import VOCAB, finetune_t5, t5_config, train_subset


@torch.no_grad()
def positions(weights: dict, smoke: bool, windows: int = 3000, lengths: tuple[int, ...] = (32, 64)) -> dict:
    """Where the pretrained model's loss on 64-byte windows comes from: nats per target token at each
    target position, on the held-out half of the windows ``t5_diagnosis.mismatch`` scores, and on
    32-byte windows (the pretraining's length) drawn the same way. A 32-byte window hides 5 bytes in
    2 spans (target: 8 tokens); a 64-byte one 10 bytes in 3 spans (14 tokens), so its target holds
    a third sentinel and decoder offsets beyond -7, which the pretraining never produced."""
    text = corpus_text("spellings")
    stream = VOCAB.encode(text[:50000] if smoke else text)
    model = T5(t5_config(smoke, dropout=0.0))
    model.load_state_dict(weights)
    out = {"kind": "positions", "windows_scored": windows // 2}
    for length in lengths:
        pairs = []
        for window, mask, target in span_target_windows(stream, length, VOCAB.sentinel, VOCAB.eos_id,
                                                         windows)[windows // 2:]:
            pairs.append((corrupt(window, torch.tensor(mask), VOCAB.sentinel, VOCAB.eos_id)[0], target))
        batch = seq2seq_batch(pairs, VOCAB.pad_id)
        with evaluating(model):
            logp = model(batch.src, batch.src_lengths, batch.tgt_in).log_softmax(-1)  # (B, T, V)
        nll = -logp.gather(-1, batch.tgt_out[..., None])[..., 0]  # (B, T)
        real = batch.tgt_out != VOCAB.pad_id
        kinds = {"byte": (batch.tgt_out >= 3) & (batch.tgt_out < 259),
                 "sentinel": (batch.tgt_out >= VOCAB.sentinel(15)) & real, "</s>": batch.tgt_out == VOCAB.eos_id}
        row = {"nats_per_token": round(float(nll[real].mean()), 4),
               "by_position": [round(float(nll[real[:, t], t].mean()), 4) for t in range(nll.shape[1])
                               if bool(real[:, t].any())],
               "by_kind": {k: round(float(nll[m].mean()), 4) for k, m in kinds.items() if bool(m.any())},
               "by_sentinel": {str(i): round(float(nll[batch.tgt_out == VOCAB.sentinel(i)].mean()), 4)
                               for i in range(16) if bool((batch.tgt_out == VOCAB.sentinel(i)).any())}}
        out[f"{length} bytes"] = row
    return out


@torch.no_grad()
def reads_input(model, pairs: list[tuple[str, str]]) -> dict:
    """Nats per target byte (not ``</s>``), teacher-forced, with each word's own input and with
    the next word's: a model that ignores its input scores both the same."""
    wrong = [(pairs[(i + 1) % len(pairs)][0], target) for i, (_, target) in enumerate(pairs)]
    out = {}
    with evaluating(model):
        for name, scored in (("own", pairs), ("wrong", wrong)):
            batch = seq2seq_batch([(VOCAB.encode(s, eos=True), VOCAB.encode(t, eos=True)) for s, t in scored],
                                  VOCAB.pad_id)
            logp = model(batch.src, batch.src_lengths, batch.tgt_in).log_softmax(-1)
            nll = -logp.gather(-1, batch.tgt_out[..., None])[..., 0]
            out[name] = round(float(nll[(batch.tgt_out >= 3) & (batch.tgt_out < 259)].mean()), 4)
    return {**out, "gap": round(out["wrong"] - out["own"], 4)}


def outputs(weights: dict, args, seed: int = 0, samples: int = 12) -> dict:
    """Seed 0 with 2,000 words, both starts: the fine-tuning of ``--part finetune`` again, then
    what each model writes and whether it reads its input (the docstring's ``--part outputs``)."""
    from attnbook.tasks.text_to_text import byte_batches, evaluate_text_g2p, generate_text, text_pairs
    from attnbook.train import fit
    from t5_pretraining import loss_fn

    data = load_g2p()
    test = data.test[:: 50 if args.smoke else 5]
    size = 100 if args.smoke else 2000
    train = train_subset(data.train[:500] if args.smoke else data.train, size, seed)
    shown = text_pairs(test, "g2p")
    row = {"kind": "outputs", "size": len(train), "seed": seed, "steps": args.steps, "arms": {}}
    for arm in ("pretrained", "scratch"):  # as finetune_t5 trains them
        torch.manual_seed(seed)
        model = T5(t5_config(args.smoke, dropout=0.0))
        if arm == "pretrained":
            model.load_state_dict(weights)
        arm_row = {"before": reads_input(model, shown)}
        batches = byte_batches(text_pairs(train, "g2p"), VOCAB, 64, torch.Generator().manual_seed(seed))
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
        history = fit(model, batches, loss_fn, optimizer, args.steps, progress=False)
        smoothed = history.smoothed_losses(min(50, args.steps))
        scores = evaluate_text_g2p(model, test, VOCAB, "g2p")
        written = generate_text(model, [s for s, _ in shown], VOCAB)
        arm_row.update({
            "g2p_wer": round(scores["wer"], 4), "g2p_per": round(scores["per"], 4),
            "loss": [[s, round(smoothed[s - 1], 4)] for s in sorted({min(50, args.steps), args.steps // 2,
                                                                      args.steps})],
            "after": reads_input(model, shown),
            "phonemes_written": round(sum(len(w.split()) for w in written) / len(written), 2),
            "phonemes_reference": round(sum(len(t.split()) for _, t in shown) / len(shown), 2),
            "distinct_outputs": len(set(written)), "test_words": len(written),
            "samples": [[s, t, w] for (s, t), w in list(zip(shown, written))[:samples]]})
        row["arms"][arm] = arm_row
    return row


def export(args, tag: str) -> None:
    """The checkpoint as safetensors in the results folder, if it reproduces the final gap."""
    from safetensors.torch import save_file

    from attnbook.checkpoints import sha256_of
    from t5_encoder_use import probe_batches

    weights = torch.load(args.checkpoint)
    model = T5(t5_config(False, dropout=0.0))
    model.load_state_dict(weights)
    stream = VOCAB.encode(corpus_text("spellings"))
    measured = gap(model, probe_batches(stream[int(len(stream) * 0.95):], 32))["gap"]
    recorded = json.loads((common.RESULTS / f"t5_low_label{tag}.json").read_text())["pretrain"]["gap_track"][-1][3]
    if abs(measured - recorded) > 1e-3:
        raise SystemExit(f"{args.checkpoint}: gap {measured} is not the recorded {recorded}")
    out = common.RESULTS / f"t5_spellings_pretrained{tag}.safetensors"
    save_file({k: v.contiguous() for k, v in weights.items()}, str(out))
    print(json.dumps({"kind": "export", "path": out.name, "gap": measured,
                      "sha256": sha256_of(out)}), flush=True)


def key(row: dict) -> tuple:
    return (row.get("kind"), row.get("arm"), row.get("size"), row.get("seed"))


def main(argv: list[str] | None = None) -> int:
    p = common.experiment_parser(__doc__)
    p.add_argument("--part", choices=("pretrain", "finetune", "positions", "outputs", "collect", "export"), required=True)
    p.add_argument("--arms", nargs="+", choices=("pretrained", "scratch"), default=["pretrained", "scratch"])
    p.add_argument("--sizes", type=int, nargs="+", default=[500, 2000])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=600, help="fine-tuning steps (both arms)")
    p.add_argument("--pretrain-steps", type=int, default=3000)
    p.add_argument("--window", type=int, default=32, help="pretraining window in bytes")
    p.add_argument("--pretrain-batch", type=int, default=64, help="pretraining windows per step")
    p.add_argument("--peak-lr", type=float, default=1e-2, help="pretraining peak rate (Adam)")
    p.add_argument("--pretrain-seed", type=int, default=0, help="pretraining init and window order")
    p.add_argument("--checkpoint", type=Path, default=None,
                   help="default /tmp/t5_spellings_pretrained.pt (window 32), else ..._w{window}.pt")
    args = p.parse_args(argv)
    tag = "" if args.window == 32 else f"_w{args.window}"
    tag += "" if args.peak_lr == 1e-2 else f"_lr{args.peak_lr:g}"
    tag += "" if args.pretrain_seed == 0 else f"_ps{args.pretrain_seed}"
    if args.checkpoint is None:
        args.checkpoint = Path(f"/tmp/t5_spellings_pretrained{tag}.pt")
    if args.smoke:
        args.pretrain_steps, args.steps, args.seeds, args.sizes = 20, 10, [0], [100]
    torch.set_num_threads(1)
    start = time.perf_counter()
    done = {key(r): r for r in common.log_rows(args.resume)}
    if args.part == "pretrain":
        pre_args = argparse.Namespace(smoke=args.smoke, corpus="spellings", steps=args.pretrain_steps,
                                      window=args.window, batch=args.pretrain_batch, peak_lr=args.peak_lr, warmup=300,
                                      seed=args.pretrain_seed,
                                      probe_every=10 if args.smoke else 250)
        pre, weights = pretrain_inverse_sqrt(pre_args, corpus_text("spellings"))
        partial = args.checkpoint.with_suffix(".partial")
        torch.save(weights, partial)
        partial.replace(args.checkpoint)  # whole or absent: the fine-tuning parts wait for it
        print(json.dumps(pre), flush=True)
    elif args.part == "finetune":
        data = load_g2p()
        test = data.test[:: 50 if args.smoke else 5]
        settings = argparse.Namespace(smoke=args.smoke, steps=args.steps, batch_size=64, lr=3e-3, device="cpu")
        weights = None
        for size in sorted(args.sizes, reverse=True):  # the larger size first: it is the informative one
            for seed in args.seeds:
                train = train_subset(data.train[:500] if args.smoke else data.train, size, seed)
                for arm in args.arms:
                    if (None, arm, len(train), seed) in done:
                        continue
                    if arm == "pretrained" and weights is None:
                        while not args.checkpoint.is_file():
                            time.sleep(20)
                        weights = torch.load(args.checkpoint)
                    row = finetune_t5(arm, train, test, seed, settings, weights if arm == "pretrained" else None)
                    print(json.dumps({**row, "size": len(train), "seed": seed}), flush=True)
    elif args.part == "positions":
        while not args.checkpoint.is_file():
            time.sleep(20)
        lengths = tuple(sorted({32, 64, args.window}))
        print(json.dumps(positions(torch.load(args.checkpoint), args.smoke, lengths=lengths)), flush=True)
    elif args.part == "outputs":
        while not args.checkpoint.is_file():
            time.sleep(20)
        print(json.dumps(outputs(torch.load(args.checkpoint), args)), flush=True)
    elif args.part == "export":
        if args.window != 32:
            raise SystemExit("--part export is for the 32-byte checkpoints the chapter loads")
        export(args, tag)
    else:
        rows = list(done.values())
        pre = [r for r in rows if r.get("kind") == "pretrain"]
        by_position = [r for r in rows if r.get("kind") == "positions"]
        written = [r for r in rows if r.get("kind") == "outputs"]
        runs = sorted((r for r in rows if "arm" in r),
                      key=lambda r: (r["size"], r["seed"], r["arm"]))
        out = common.out_path(args, f"t5_low_label{tag}.json")
        if out is not None:
            common.write_result(out, {
                "description": __doc__.splitlines()[0], "machine": common.machine(),
                "threads": 1, "test_words": len(load_g2p().test[:: 50 if args.smoke else 5]),
                "settings": {"steps": args.steps, "batch_size": 64, "lr": 3e-3,
                             "pretrain_steps": args.pretrain_steps, "window": args.window,
                             "pretrain_peak_lr": args.peak_lr, "pretrain_seed": args.pretrain_seed,
                             "pretrain_windows_per_step": args.pretrain_batch},
                "pretrain": pre[0] if pre else None,
                "positions": by_position[0] if by_position else None,
                **({"outputs": written[0]} if written else {}), "runs": runs})
    print(f"part {args.part}: {time.perf_counter() - start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
