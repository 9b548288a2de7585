"""Chapter 9's ablation: Chapter 8's GPT, each of today's four block changes added alone, and all of them.

Usage: ``python benchmarks/modern_ablation.py [--seeds 0 1 ... 7] [--jobs 1] [--resume LOG ...]`` (writes
``lib/attnbook/results/modern_ablation.json``, which the chapter prints), or ``--smoke`` (seconds,
writes nothing unless ``--out`` is given; the test suite runs it).

Data, tokenizer and recipe are Chapter 8's: the World English Bible with one chapter in 20 held
out, a byte-level BPE of 512 tokens trained on the rest, windows of 64 tokens, batches of 64,
600 AdamW steps (lr 1e-2, betas 0.9/0.95, weight decay 0.01, warm-up 60 steps then linear decay,
gradients clipped at 1). The models are Chapter 8's size (D = 64, 4 heads, 2 blocks, tied
token table); each variant's feed-forward width ``d_ff`` is chosen so that its parameter count is
the GPT's to within 0.2%, so no variant wins by being bigger. The seed sets the initial weights
and the batches; every variant sees the same batches for a given seed.

Variants: ``gpt`` (Chapter 8's class); ``+rmsnorm``, ``+swiglu``, ``+rotary``, ``+gqa`` (one change
each, through ``LlamaConfig``'s switches); ``modern`` (all four, and no biases: Llama's block).
Position controls (``--variants sinusoidal nope``, written to ``modern_ablation_positions.json``):
the GPT's recipe with the fixed sinusoidal table (scaled to the token table's rms, 0.02) in place
of the learned one, or with no position signal at all (causal masking alone); ``sinusoidal-rms1``: the
same fixed table at rms 1, fifty times larger, a scale at which the table is not drowned by the tokens.
Measured: held-out perplexity over Chapter 8's held-out windows of 64 tokens (the same targets as
the counting baselines, also recorded: unigram, bigram and trigram with interpolation weights chosen
on the last tenth of the training text, and interpolated Kneser-Ney of orders 3 to 5), the mean loss at
each of the 64 positions for models with a learned table, and for rotary models the mean loss at each position of
256-token windows (four times the training length) to see what happens past it, read two ways:
plain extrapolation (positions 0 .. 255 as they are) and position interpolation without
fine-tuning (Chen et al., 2023: position p turned as if at p · 64/256; ``interpolate_positions``).
``--variants modern+qknorm`` (written to ``modern_ablation_qknorm.json``): the modern block with
QK-norm, an RMSNorm on each head's queries and keys before the rotary turn.
``--interpolation`` writes the rotary runs to ``modern_ablation_interpolation.json``.
One thread per run.
"""
from __future__ import annotations

import dataclasses
import json
import math
import time

import torch

import common
from attnbook.checks import count_parameters
from attnbook.data.bible import load_bible
from attnbook.data.bpe import train_bpe
from attnbook.models.gpt import GPT, GPTConfig
from attnbook.models.llama import Llama, LlamaConfig, interpolate_positions
from attnbook.schedules import warmup_linear_scheduler
from attnbook.tasks.language_modeling import next_token_cross_entropy, next_token_loss
from attnbook.tasks.token_stream import (
    KneserNey, fit_bigram, held_out_targets, held_out_windows, lm_batches, model_loss, ngram_loss, unigram_probs,
)
from attnbook.train import fit

VARIANTS = ("gpt", "+rmsnorm", "+swiglu", "+rotary", "+gqa", "modern")
EXTRAS = ("modern+qknorm",)  # the modern block with QK-norm: modern_ablation_qknorm.json
CONTROLS = ("sinusoidal", "nope", "sinusoidal-rms1")  # + the fixed table at rms 1, 50 times larger  # the GPT's recipe with a fixed table / no position signal
SEEDS = tuple(range(8))
VOCAB, WINDOW, BATCH, STEPS, LONG = 512, 64, 64, 600, 256
GPT_SIZES = dict(d_model=64, num_heads=4, d_ff=256, num_layers=2)


def data() -> tuple[torch.Tensor, torch.Tensor]:
    """Chapter 8's token streams: (training ids, held-out ids)."""
    verses = load_bible()
    chapters = list(dict.fromkeys((v.book, v.chapter) for v in verses))
    held_out = {c for i, c in enumerate(chapters) if i % 20 == 0}
    train_text = "\n".join(v.text for v in verses if (v.book, v.chapter) not in held_out)
    test_text = "\n".join(v.text for v in verses if (v.book, v.chapter) in held_out)
    bpe = train_bpe(train_text, VOCAB)
    return torch.tensor(bpe.encode(train_text)), torch.tensor(bpe.encode(test_text))


def llama_config(variant: str, d_ff: int, smoke: bool) -> LlamaConfig:
    """The GPT's parts in ``LlamaConfig``'s switches, with the variant's change(s)."""
    gpt = dict(norm="layernorm", norm_eps=1e-5, feed_forward="gelu", positions="learned", bias=True,
               num_kv_heads=GPT_SIZES["num_heads"], max_len=WINDOW)
    changes = {
        "+rmsnorm": dict(norm="rmsnorm"),
        "+swiglu": dict(feed_forward="swiglu"),
        "+rotary": dict(positions="rotary", max_len=LONG),
        "+gqa": dict(num_kv_heads=2),
        "sinusoidal": dict(positions="sinusoidal"),
        "nope": dict(positions="none"),
        "sinusoidal-rms1": dict(positions="sinusoidal", sinusoidal_rms=1.0),
        "modern": dict(norm="rmsnorm", norm_eps=1e-6, feed_forward="swiglu", positions="rotary", max_len=LONG,
                       num_kv_heads=2, bias=False),
        "modern+qknorm": dict(norm="rmsnorm", norm_eps=1e-6, feed_forward="swiglu", positions="rotary",
                              max_len=LONG, num_kv_heads=2, bias=False, qk_norm=True),
    }[variant]
    sizes = dict(GPT_SIZES, d_ff=d_ff)
    if smoke:
        sizes.update(d_model=16, d_ff=max(4, d_ff // 4))
    return LlamaConfig(vocab_size=VOCAB, tie_embeddings=True, **{**sizes, **gpt, **changes})


def matched_d_ff(variant: str, target: int, smoke: bool) -> int:
    """The feed-forward width whose model has the parameter count nearest ``target``."""
    count = lambda f: count_parameters(Llama(llama_config(variant, f, smoke)))  # noqa: E731
    low, high = count(64), count(128)  # the count is linear in d_ff
    per_unit = (high - low) / 64
    guess = round(64 + (target - low) / per_unit)
    return min(range(guess - 2, guess + 3), key=lambda f: abs(count(f) - target))


def build(variant: str, seed: int, smoke: bool) -> torch.nn.Module:
    gpt_config = GPTConfig(VOCAB, max_len=WINDOW, **GPT_SIZES)
    if smoke:
        gpt_config = dataclasses.replace(gpt_config, d_model=16, d_ff=64)
    torch.manual_seed(seed)
    if variant == "gpt":
        return GPT(gpt_config)
    target = count_parameters(GPT(gpt_config))
    d_ff = matched_d_ff(variant, target, smoke)
    torch.manual_seed(seed)
    return Llama(llama_config(variant, d_ff, smoke))


class Trigram:
    """Interpolated trigram counts: ``l2 · P(t | a, b) + (1 - l2) · bigram``, the bigram itself
    ``l1 · P(t | b) + (1 - l1) · unigram`` (add-one unigram); an unseen context backs off to the
    bigram. Chapter 8's kind of baseline one order up; ``KneserNey`` is the stronger one."""

    def __init__(self, stream: torch.Tensor, vocab: int) -> None:
        s, self.V = stream.long(), vocab
        self.unigram = torch.bincount(s, minlength=vocab).double() + 1
        self.unigram /= self.unigram.sum()
        self.bigram = torch.zeros(vocab * vocab, dtype=torch.float64).index_add_(
            0, s[:-1] * vocab + s[1:], torch.ones(len(s) - 1, dtype=torch.float64)).view(vocab, vocab)
        keys, counts = torch.unique((s[:-2] * vocab + s[1:-1]) * vocab + s[2:], return_counts=True)
        self.trigram = dict(zip(keys.tolist(), counts.tolist()))
        self.context = torch.zeros(vocab * vocab, dtype=torch.float64).index_add_(
            0, s[:-2] * vocab + s[1:-1], torch.ones(len(s) - 2, dtype=torch.float64))

    def probs(self, a: torch.Tensor, b: torch.Tensor, t: torch.Tensor, l1: float, l2: float) -> torch.Tensor:
        """P(t | a, b) for 1-D id tensors; ``a = -1``: no second token of context (bigram only)."""
        rows = self.bigram[b].sum(1)
        bigram = l1 * self.bigram[b, t] / rows.clamp(min=1) + (1 - l1) * self.unigram[t]
        bigram = torch.where(rows > 0, bigram, self.unigram[t])
        ctx = (a.clamp(min=0) * self.V + b)
        seen = self.context[ctx]
        tri = torch.tensor([self.trigram.get(k, 0) for k in (ctx * self.V + t).tolist()], dtype=torch.float64)
        trigram = torch.where(seen > 0, l2 * tri / seen.clamp(min=1) + (1 - l2) * bigram, bigram)
        return torch.where(a >= 0, trigram, bigram)


def trigram_baseline(train: torch.Tensor, test: torch.Tensor) -> dict:
    """Held-out loss of the trigram on the held-out windows' targets (the models' targets), each
    predicted from at most the two tokens before it *in its window*; weights chosen on the last
    tenth of the training stream, then counts refitted on all of it."""
    grid = [(l1, l2) for l1 in (0.6, 0.7, 0.8, 0.9, 0.95, 0.99) for l2 in (0.3, 0.5, 0.6, 0.7, 0.8, 0.9)]
    cut = int(len(train) * 0.9)
    fitted, val = Trigram(train[:cut], VOCAB), train[cut:].long()
    best = min(grid, key=lambda w: -fitted.probs(val[:-2], val[1:-1], val[2:], *w).log().mean().item())
    windows = held_out_windows(test, WINDOW).long()  # (N, T + 1)
    a = torch.cat([torch.full_like(windows[:, :1], -1), windows[:, :-2]], dim=1)  # (N, T)
    loss = -Trigram(train, VOCAB).probs(a.reshape(-1), windows[:, :-1].reshape(-1), windows[:, 1:].reshape(-1),
                                         *best).log().mean().item()
    return {"held_out_loss": round(loss, 5), "held_out_perplexity": round(math.exp(loss), 3),
            "weights": list(best)}


def kneser_ney_baselines(train: torch.Tensor, test: torch.Tensor, orders: tuple[int, ...] = (3, 4, 5)) -> dict:
    """Interpolated Kneser-Ney (discount 0.75) of each order on the models' held-out targets."""
    out = {}
    for order in orders:
        loss = KneserNey(train, VOCAB, order).held_out_loss(test, WINDOW)
        out[str(order)] = {"held_out_loss": round(loss, 5), "held_out_perplexity": round(math.exp(loss), 3)}
    return out


@torch.no_grad()
def loss_by_position(model: torch.nn.Module, stream: torch.Tensor, window: int) -> list[float]:
    """Mean held-out loss at each position 0 .. window - 1 of windows of ``window`` tokens."""
    windows = held_out_windows(stream, window)
    total = torch.zeros(window, dtype=torch.float64)
    for chunk in windows.split(32):
        total += next_token_cross_entropy(model, chunk, reduction="none").double().sum(0)
    return (total / len(windows)).tolist()


def run_one(variant: str, seed: int, smoke: bool, steps: int = STEPS) -> dict:
    torch.set_num_threads(1)
    train, test = data()
    if smoke:
        train, test = train[:20_000], test[:3_000]
        steps = 5
    model = build(variant, seed, smoke)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.95), weight_decay=0.01)
    batches = lm_batches(train, WINDOW, BATCH, torch.Generator().manual_seed(seed))
    start = time.perf_counter()
    history = fit(model, batches, next_token_loss, optimizer, steps,
                  scheduler=warmup_linear_scheduler(optimizer, max(1, steps // 10), steps), progress=False)
    seconds = time.perf_counter() - start
    loss = model_loss(model, test, WINDOW)
    row = {"variant": variant, "seed": seed, "steps": steps, "parameters": count_parameters(model),
           "d_ff": model.config.d_ff, "train_seconds": round(seconds, 1),
           "final_train_loss": round(sum(history.losses[-50:]) / len(history.losses[-50:]), 4),
           "held_out_loss": round(loss, 5), "held_out_perplexity": round(math.exp(loss), 3)}
    if isinstance(model, Llama) and model.config.positions == "rotary":
        by_position = loss_by_position(model.eval(), test, LONG)
        row["loss_by_position_256"] = [round(x, 4) for x in by_position]
        interpolated = loss_by_position(interpolate_positions(model.eval(), WINDOW, LONG), test, LONG)
        row["loss_by_position_256_interpolated"] = [round(x, 4) for x in interpolated]
    else:  # a learned table: positions 1 .. 64 only (what a sliding window of 64 keeps)
        row["loss_by_position_64"] = [round(x, 4) for x in loss_by_position(model.eval(), test, WINDOW)]
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    p = common.experiment_parser(__doc__)
    p.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS + CONTROLS + EXTRAS)
    p.add_argument("--steps", type=int, default=STEPS,
                   help=f"training steps (default {STEPS}, the chapter's budget; another budget writes "
                        "modern_ablation_steps<N>.json)")
    p.add_argument("--interpolation", action="store_true",
                   help="rotary variants only; writes modern_ablation_interpolation.json (plain "
                        "extrapolation and position interpolation of the same runs)")
    args = p.parse_args()
    common.check_jobs(p, args)
    if args.interpolation and not set(args.variants) <= {"+rotary", "modern"}:
        p.error("--interpolation measures rotary models: --variants +rotary and/or modern")
    done = {(r["variant"], r["seed"]): r for r in common.log_rows(args.resume)}
    todo = [(v, s, args.smoke, args.steps) for s in args.seeds for v in args.variants if (v, s) not in done]
    start = time.perf_counter()
    rows = list(done.values()) + common.run_jobs(run_one, todo, args.jobs)
    train, test = data()
    if args.smoke:
        train, test = train[:20_000], test[:3_000]
    previous, targets = held_out_targets(test, WINDOW)
    table, weight = fit_bigram(train, VOCAB)
    bigram = ngram_loss(table, previous, targets)
    unigram = ngram_loss(unigram_probs(train, VOCAB), previous, targets)
    result = {
        "description": __doc__.split("\n\n")[0],
        "machine": common.machine(args.jobs),
        "recipe": {"steps": args.steps, "batch": BATCH, "window": WINDOW, "vocab": VOCAB, "lr": 1e-2,
                   "betas": [0.9, 0.95], "weight_decay": 0.01, "warmup": args.steps // 10, "clip_norm": 1.0,
                   "gpt_sizes": GPT_SIZES, "tied_embeddings": True},
        "wall_seconds": round(time.perf_counter() - start),
        "held_out_targets": len(targets),
        "bigram": {"held_out_loss": round(bigram, 5), "held_out_perplexity": round(math.exp(bigram), 3),
                   "weight": weight},
        "unigram": {"held_out_loss": round(unigram, 5), "held_out_perplexity": round(math.exp(unigram), 3)},
        "trigram": trigram_baseline(train, test),
        "kneser_ney": kneser_ney_baselines(train, test),
        "runs": sorted(rows, key=lambda r: ((VARIANTS + CONTROLS + EXTRAS).index(r["variant"]), r["seed"])),
    }
    name = "modern_ablation.json" if args.steps == STEPS else f"modern_ablation_steps{args.steps}.json"
    if set(args.variants) <= set(CONTROLS):  # the position controls keep a file of their own
        name = name.replace("modern_ablation", "modern_ablation_positions")
    if set(args.variants) <= set(EXTRAS):  # QK-norm too
        name = name.replace("modern_ablation", "modern_ablation_qknorm")
    if args.interpolation:
        name = name.replace("modern_ablation", "modern_ablation_interpolation")
    out = common.out_path(args, name)
    if out is not None:
        common.write_result(out, result)


if __name__ == "__main__":
    main()
