"""Chapter 1's bottleneck, shown directly: reverse random strings through one fixed context C.

Usage: ``OMP_NUM_THREADS=1 nice python benchmarks/rnn_reverse_bottleneck.py`` writes
``lib/attnbook/results/rnn_reverse_bottleneck.json`` (Chapter 1, section 1.10, plots it);
``python benchmarks/rnn_reverse_bottleneck.py --smoke --out FILE`` is a seconds-long run for the tests.
The committed file was made with one process per seed, then merged (``COMMAND`` below):
``--seed S --out partS.json`` for S in 0 1 2, then ``--merge part0.json part1.json part2.json``;
the crossed arms (``--cross``: C 16 with a 64-wide decoder, C 64 with a 16-wide one) were added
the same way, one process per arm (``--width W --dec-width D``), and merged in.

``--map``: the arm that isolates C. The encoder stays at 32 GRU units per direction (as in the
C-of-64 arm) and a linear layer maps its 64 final numbers to C of 16 or 64 (``BottleneckSeq2Seq``
from ``rnn_width.py``); the decoder is 64 wide; same steps, strings, seeds and scoring. Writes
``lib/attnbook/results/rnn_reverse_bottleneck_map.json`` (``MAP_COMMAND``, one process per C).

The task: a string of 5 to 30 symbols drawn uniformly from 8 letters (a-h), the target the same
symbols in reverse order. No dictionary, no spelling rules: the decoder can only write what the
encoder packed into C. The model is Chapter 1's ``RNNSeq2Seq`` (bidirectional GRU encoder,
decoder that reads C at every step, no attention) at two widths of C, 2He = 16 and 2He = 64,
crossed with two widths of the decoder's state, Hd = 16 and Hd = 64 (a linear layer maps C to the
decoder's initial state, so the two are free), embeddings 16 wide, seeds 0, 1 and 2 per arm. Each run trains on
fresh random strings (64 per step, lengths uniform on 5-30; Adam 3e-3, gradients clipped at 1)
for ``STEPS`` steps, and is scored by greedy decoding on one fixed test set of 40 strings per
length (1,040 strings; the same for every run) at 1/3, 2/3 and all of the steps, so the results
show whether the accuracy had stopped rising. Scores per length: per-symbol accuracy (position
by position against the reference, an output of the wrong length counts its missing or extra
positions as errors) and exact match.

``--ed``: the same scores plus edit-distance scoring, which charges a dropped or extra symbol
once rather than at every later position (the reason Chapter 1 scores G2P by edit distance).
Per length: ``ed_score``, the mean of 1 - ED(output, reference) / L; ``wrong_length``, the share
of outputs whose length is not L; and, once for the test set, ``ed_null``: the same score for
random strings of the right length (10 draws per test string, a fixed generator), the level a
decoder that kept nothing would reach. Seed 0, C and decoder both 16 or both 64 wide; writes
``lib/attnbook/results/rnn_reverse_bottleneck_ed.json`` (``ED_COMMAND``, one process per arm).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

import common
from attnbook.data.batching import make_batch
from attnbook.data.vocab import Vocab
from attnbook.decoding import greedy_decode
from attnbook.models.rnn import RNNSeq2Seq, RNNSeq2SeqConfig

LETTERS = "abcdefgh"
MIN_LEN, MAX_LEN = 5, 30
WIDTHS = (16, 64)  # size of C = 2He
SEEDS = (0, 1, 2)
STEPS, BATCH, LR, CLIP, EMB = 1500, 64, 3e-3, 1.0, 16
TEST_PER_LENGTH = 40
COMMAND = ("for s in 0 1 2; do OMP_NUM_THREADS=1 python benchmarks/rnn_reverse_bottleneck.py "
           "--seed $s --out part$s.json & done; wait; python benchmarks/rnn_reverse_bottleneck.py "
           "--merge part0.json part1.json part2.json; for a in '16 64' '64 16'; do set -- $a; "
           "OMP_NUM_THREADS=1 python benchmarks/rnn_reverse_bottleneck.py --width $1 "
           "--dec-width $2 --out cross$1.json & done; wait; python "
           "benchmarks/rnn_reverse_bottleneck.py --merge lib/attnbook/results/"
           "rnn_reverse_bottleneck.json cross16.json cross64.json")

ED_COMMAND = ("for w in 16 64; do OMP_NUM_THREADS=1 python benchmarks/rnn_reverse_bottleneck.py "
              "--ed --width $w --seed 0 --out ed$w.json & done; wait; python "
              "benchmarks/rnn_reverse_bottleneck.py --merge ed16.json ed64.json "
              "--out lib/attnbook/results/rnn_reverse_bottleneck_ed.json")
NULL_DRAWS = 10

MAP_ENC, MAP_DEC = 32, 64
MAP_COMMAND = ("for c in 16 64; do OMP_NUM_THREADS=1 python benchmarks/rnn_reverse_bottleneck.py "
               "--map --width $c --out map$c.json & done; wait; python "
               "benchmarks/rnn_reverse_bottleneck.py --merge map16.json map64.json "
               "--out lib/attnbook/results/rnn_reverse_bottleneck_map.json")


def random_pairs(n: int, g: torch.Generator, lengths=None):
    if lengths is None:
        lengths = torch.randint(MIN_LEN, MAX_LEN + 1, (n,), generator=g).tolist()
    pairs = []
    for L in lengths:
        s = [LETTERS[i] for i in torch.randint(len(LETTERS), (L,), generator=g).tolist()]
        pairs.append((s, s[::-1]))
    return pairs


def edit_distance(a, b) -> int:
    """Levenshtein distance: insertions, deletions and substitutions each cost 1."""
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def ed_null(test, draws: int = NULL_DRAWS) -> dict:
    """Mean 1 - ED/L per length for random strings of the reference's length."""
    g = torch.Generator().manual_seed(777)
    by_len = {}
    for _, ref in test:
        for _ in range(draws):
            guess = [LETTERS[i] for i in torch.randint(len(LETTERS), (len(ref),),
                                                       generator=g).tolist()]
            by_len.setdefault(len(ref), []).append(1 - edit_distance(guess, ref) / len(ref))
    return {L: sum(v) / len(v) for L, v in sorted(by_len.items())}


def score(model, test, vocab, ed: bool = False):
    model.eval()
    by_len, eds = {}, {}
    with torch.no_grad():
        for start in range(0, len(test), 260):
            chunk = test[start:start + 260]
            b = make_batch(chunk, vocab, vocab)
            out = greedy_decode(model, b.src, b.src_lengths, vocab.bos_id, vocab.eos_id, MAX_LEN + 5)
            for (s, ref), pred in zip(chunk, out):
                pred = vocab.decode(pred)
                right = sum(p == r for p, r in zip(pred, ref))
                row = by_len.setdefault(len(ref), [0, 0, 0, 0])  # right, positions, exact, n
                row[0] += right
                row[1] += max(len(ref), len(pred))
                row[2] += int(list(pred) == list(ref))
                row[3] += 1
                if ed:
                    extra = eds.setdefault(len(ref), [0.0, 0])  # sum of 1 - ED/L, wrong length
                    extra[0] += 1 - edit_distance(list(pred), ref) / len(ref)
                    extra[1] += int(len(pred) != len(ref))
    model.train()
    out = {L: {"symbol_acc": r[0] / r[1], "exact": r[2] / r[3], "n": r[3]}
           for L, r in sorted(by_len.items())}
    for L, (total, wrong) in eds.items():
        out[L].update(ed_score=total / out[L]["n"], wrong_length=wrong / out[L]["n"])
    return out


def run(width: int, seed: int, steps: int, test, vocab, dec_width: int | None = None,
        mapped: bool = False, ed: bool = False) -> dict:
    torch.set_num_threads(1)
    dec_width = dec_width or width
    torch.manual_seed(seed)
    enc_hidden = MAP_ENC if mapped else width // 2
    config = RNNSeq2SeqConfig(len(vocab), len(vocab), emb_dim=EMB, enc_hidden=enc_hidden,
                              dec_hidden=dec_width)
    if mapped:  # encoder fixed at MAP_ENC per direction, C = a linear map to `width` numbers
        from rnn_width import BottleneckSeq2Seq
        model = BottleneckSeq2Seq(config, width)
    else:
        model = RNNSeq2Seq(config)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    g = torch.Generator().manual_seed(1000 + seed)  # the same strings for both widths
    checkpoints, losses, t0 = {}, [], time.process_time()
    marks = {steps // 3, 2 * steps // 3, steps}
    for step in range(1, steps + 1):
        b = make_batch(random_pairs(BATCH, g), vocab, vocab)
        logits = model(b.src, b.src_lengths, b.tgt_in)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), b.tgt_out.flatten(),
                                                 ignore_index=vocab.pad_id)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        losses.append(loss.item())
        if step in marks:
            checkpoints[step] = score(model, test, vocab, ed)
    cpu = time.process_time() - t0
    result = {"width": width, "dec_width": dec_width, "enc_hidden": enc_hidden,
              "mapped": mapped, "seed": seed, "steps": steps,
              "parameters": sum(p.numel() for p in model.parameters()),
              "final_loss_mean_last_100": sum(losses[-100:]) / len(losses[-100:]),
              "cpu_seconds": round(cpu, 1), "checkpoints": checkpoints}
    print(json.dumps({k: v for k, v in result.items() if k != "checkpoints"}), flush=True)
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--out", type=Path, default=common.RESULTS / "rnn_reverse_bottleneck.json")
    ap.add_argument("--width", type=int, action="append")
    ap.add_argument("--seed", type=int, action="append")
    ap.add_argument("--dec-width", type=int, help="decoder state Hd (default 2He = width of C)")
    ap.add_argument("--cross", action="store_true",
                    help="the crossed arms only: C 16 with Hd 64 and C 64 with Hd 16")
    ap.add_argument("--map", action="store_true",
                    help="isolate C: encoder 32 per direction, C a linear map to --width numbers")
    ap.add_argument("--ed", action="store_true",
                    help="also score by edit distance, with a random-string null")
    ap.add_argument("--merge", type=Path, nargs="+", help="join the runs of partial results files")
    args = ap.parse_args()
    if args.merge:  # e.g. one process per seed, then --merge their files into --out
        parts = [json.loads(p.read_text()) for p in args.merge]
        merged = dict(parts[0])
        merged["runs"] = sorted((r for p in parts for r in p["runs"]),
                                key=lambda r: (r["width"], r.get("dec_width", r["width"]),
                                               r["seed"]))
        merged["command"] = (MAP_COMMAND if parts[0].get("mapped") else
                             ED_COMMAND if parts[0].get("edit_distance") else COMMAND)
        if not merged.get("mapped") and not merged.get("edit_distance") and any(r.get("dec_width", r["width"]) != r["width"]
                                            for r in merged["runs"]):
            merged["dec_widths"] = list(WIDTHS)
            merged["description"] = merged["description"].replace(
                "two widths of C", "two widths of C crossed with two decoder widths")
        common.write_result(args.out, merged)
        return
    vocab = Vocab(LETTERS)
    steps = 6 if args.smoke else STEPS
    per_len = 2 if args.smoke else TEST_PER_LENGTH
    g = torch.Generator().manual_seed(12345)
    test = random_pairs(0, g, [L for L in range(MIN_LEN, MAX_LEN + 1) for _ in range(per_len)])
    if args.map:
        arms = [(w, MAP_DEC) for w in (args.width or WIDTHS)]
    elif args.cross:
        arms = [(WIDTHS[0], WIDTHS[1]), (WIDTHS[1], WIDTHS[0])]
    else:
        arms = [(w, args.dec_width or w) for w in (args.width or WIDTHS)]
    runs = [run(w, s, steps, test, vocab, d, args.map, args.ed) for w, d in arms
            for s in (args.seed or SEEDS)]
    if args.ed:
        common.write_result(args.out, {
            "description": "reverse random strings as rnn_reverse_bottleneck.json (C and decoder "
                           "both 16 or both 64 wide, seed 0), scored by position and by edit "
                           "distance (1 - ED/L), with a random-string null per length",
            "edit_distance": True, "letters": LETTERS, "lengths": [MIN_LEN, MAX_LEN],
            "widths_C": list(WIDTHS), "seeds": args.seed or [0], "steps": steps,
            "batch": BATCH, "lr": LR, "clip": CLIP, "emb_dim": EMB, "test_per_length": per_len,
            "null_draws": NULL_DRAWS, "ed_null": ed_null(test), "machine": common.machine(),
            "command": ED_COMMAND, "runs": runs})
        return
    if args.map:
        common.write_result(args.out, {
            "description": "reverse random strings, C isolated: encoder 32 GRU units per "
                           "direction, C a linear map of its 64 final numbers to 16 or 64, "
                           "decoder 64 wide; otherwise as rnn_reverse_bottleneck.json",
            "mapped": True, "enc_hidden": MAP_ENC, "dec_hidden": MAP_DEC,
            "letters": LETTERS, "lengths": [MIN_LEN, MAX_LEN], "widths_C": list(WIDTHS),
            "seeds": list(SEEDS), "steps": steps, "batch": BATCH, "lr": LR, "clip": CLIP,
            "emb_dim": EMB, "test_per_length": per_len, "machine": common.machine(),
            "command": MAP_COMMAND, "runs": runs})
        return
    common.write_result(args.out, {
        "description": "reverse random strings of 5-30 symbols (8 letters) with Chapter 1's "
                       "RNNSeq2Seq (no attention), two widths of C, three seeds; greedy scores "
                       "per length on one fixed test set, at 1/3, 2/3 and all of the steps",
        "letters": LETTERS, "lengths": [MIN_LEN, MAX_LEN], "widths_C": list(WIDTHS),
        "seeds": list(SEEDS), "steps": steps, "batch": BATCH, "lr": LR, "clip": CLIP,
        "emb_dim": EMB, "test_per_length": per_len, "machine": common.machine(),
        "runs": runs})


if __name__ == "__main__":
    main()
