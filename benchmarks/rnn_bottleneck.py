"""Chapter 1's bottleneck, measured directly: what a frozen context C still holds about each
letter, for three encoders, beside the letter-window count table's length curve.

Usage: ``python benchmarks/rnn_bottleneck.py [--jobs 2]`` (writes
``lib/attnbook/results/rnn_bottleneck.json``, which the chapter reads), or
``python benchmarks/rnn_bottleneck.py --smoke`` (seconds; writes nothing unless ``--out``).

Three encoders, each feeding the chapter's ``ContextDecoder`` a C of 256 numbers, trained with the
book's shared default recipe (``G2PRecipe()``: a constant rate of 3e-3, 1,200 steps, the same
batches; the chapter itself now trains the dev-picked recipe of ``benchmarks/g2p_compare.py``, and
``benchmarks/rnn_width.py`` varies the encoder's width with it) and the same seed:

- ``bidirectional``: the chapter's ``RNNSeq2Seq`` (128 units each way; C joins the two last states);
- ``one-directional``: one GRU of 256 units reading left to right; C is its last state;
- ``one-directional, reversed``: the same, reading the letters right to left (the source reversal
  of Sutskever et al., 2014).

For each trained model: WER and PER by word length and the error thirds
(``attnbook.tasks.g2p_errors``). Then the **probe**: the encoder is frozen, and for each word
length L (4, 6, 8, 10, 12, 14) and each position k (1..L) a linear classifier (multinomial
logistic regression, L2-regularised, fitted by L-BFGS) learns from C of the training words of
length L which letter stands at position k; its accuracy is measured on the dev and test words of
length L. The same probe on the C of the untrained encoder (the same seed's initial weights) is
the null for "a random recurrent network already keeps this much". The majority letter at each
(L, k) is the floor.

Two more rows answer "is the hole a limit of 256 numbers, or what a trained GRU keeps?":

- ``random projection`` (no training): the word's one-hot letters, joined (27 L numbers), times a
  fixed random 27L x 256 matrix; the same probe reads the letters back from these 256 numbers, a
  capacity control for C's width;
- ``bidirectional, 8,000 steps`` (only with ``--converged``, about 8 CPU-minutes more): the
  chapter's model trained with the best recipe of ``benchmarks/g2p_compare.py`` for 8,000 steps
  (its ``converge`` run, seed 0, repeated here) and probed the same way; the results file then
  holds it under ``converged``.

The count table (``LetterWindowG2P``, Chapter 10) is fitted once on the training words; its PER
by length and error thirds on the test words are the no-bottleneck null of the chapter's §1.10.
CPU, one thread per run.

Two asides moved here from the chapter (seed 0, the constant-rate models of this file):

- Source reversal: the one-directional encoder gets 50.9% of the test words wrong (PER 16.2%),
  the same encoder reading the letters reversed 48.4% (PER 15.2%), the bidirectional one 48.4%
  (PER 15.3%, with 364,971 parameters against 463,275). No seed spread was measured for this
  comparison. In the probe, the reversed encoder's worst-kept letter of a 12-letter word comes
  back 43% of the time: reversal moves what is read last; it does not fill the hole.
- Error thirds (test words of 9+ letters): the bidirectional model puts 39% of its phoneme errors
  in the middle third of the reference, which holds 29% of the positions (vowel and consonant
  error rates alone would give it 30%); the count table, with no C, puts 43% there. So the middle
  of a long English word is hard to read whatever reads it.
"""
from __future__ import annotations

import json
from collections import Counter

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import common
from attnbook.data import build_vocabs, load_g2p, make_batch
from attnbook.metrics import edit_distance
from attnbook.models.rnn import RNNSeq2Seq, RNNSeq2SeqConfig
from attnbook.tasks.g2p import G2PRecipe, G2PResult, evaluate_g2p, train_g2p
from attnbook.tasks.g2p_errors import error_thirds, length_curve

ENCODERS = ("bidirectional", "one-directional", "one-directional, reversed")
PROBE_LENGTHS = (4, 6, 8, 10, 12, 14)


class OneWayEncoder(nn.Module):
    """One GRU reading left to right; C is its last state. src ``(B, S)`` -> ``(B, S, H)``, ``(B, H)``."""

    def __init__(self, vocab_size: int, emb_dim: int, hidden: int, pad_id: int = 0) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)
        self.gru = nn.GRU(emb_dim, hidden, batch_first=True)

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        B, S = src.shape
        packed = pack_padded_sequence(self.embedding(src), src_lengths.cpu(), batch_first=True,
                                      enforce_sorted=False)
        outputs, h_n = self.gru(packed)  # h_n: (1, B, H)
        outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=S)
        return outputs, h_n[0]  # (B, S, H), (B, H)


def build(encoder: str, config: RNNSeq2SeqConfig) -> RNNSeq2Seq:
    model = RNNSeq2Seq(config)
    if encoder != "bidirectional":  # the same C width, 2 * enc_hidden, from one direction
        model.encoder = OneWayEncoder(config.src_vocab_size, config.emb_dim, 2 * config.enc_hidden,
                                      config.pad_id)
    return model


def shown(pairs, encoder: str):
    """The pairs as the encoder reads them: reversed spellings for the reversed encoder."""
    return [(w[::-1], p) for w, p in pairs] if encoder.endswith("reversed") else list(pairs)


@torch.no_grad()
def contexts(model: RNNSeq2Seq, words: list[str], src_vocab, tgt_vocab) -> torch.Tensor:
    out = []
    for k in range(0, len(words), 1024):
        b = make_batch([(w, ()) for w in words[k:k + 1024]], src_vocab, tgt_vocab)
        out.append(model.encoder(b.src, b.src_lengths)[1])
    return torch.cat(out) if out else torch.zeros(0, 2 * model.config.enc_hidden)  # (N, 256)


def fit_probe(x: torch.Tensor, y: torch.Tensor, classes: int, l2: float = 1e-3) -> nn.Linear:
    """Multinomial logistic regression from standardised features, fitted by L-BFGS."""
    torch.manual_seed(0)
    probe = nn.Linear(x.shape[1], classes)
    opt = torch.optim.LBFGS(probe.parameters(), max_iter=200, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = nn.functional.cross_entropy(probe(x), y) + l2 * probe.weight.square().sum()
        loss.backward()
        return loss

    opt.step(closure)
    return probe


def model_features(model, src_vocab, tgt_vocab, encoder: str):
    """words -> their C ``(N, 256)``, the words shown as the encoder reads them."""
    read = (lambda ws: [w[::-1] for w in ws]) if encoder.endswith("reversed") else list
    return lambda words: contexts(model, read(words), src_vocab, tgt_vocab)


def random_projection(seed: int, width: int = 256):
    """words of one length L -> one-hot letters joined ``(N, 27 L)`` @ a fixed random matrix."""
    letters = {c: i for i, c in enumerate("'abcdefghijklmnopqrstuvwxyz")}
    matrices = {}

    def features(words: list[str]) -> torch.Tensor:
        L = len(words[0])
        if L not in matrices:
            g = torch.Generator().manual_seed(1000 * seed + L)
            matrices[L] = torch.randn(27 * L, width, generator=g) / (27 * L) ** 0.5
        x = torch.zeros(len(words), 27 * L)
        for i, w in enumerate(words):
            for k, c in enumerate(w):
                x[i, 27 * k + letters[c]] = 1.0
        return x @ matrices[L]  # (N, width)

    return features


def probe_table(features, data, src_vocab, lengths) -> dict:
    """Accuracy of the letter at position k (1-based, in the word's own order) read from the
    ``features(words)`` of each word (C, or a control)."""
    held_out = data.dev + data.test
    table = {}
    for L in lengths:
        train_words = [w for w, _ in data.train if len(w) == L]
        test_words = [w for w, _ in held_out if len(w) == L]
        x_train, x_test = features(train_words), features(test_words)
        mean, std = x_train.mean(0), x_train.std(0) + 1e-6
        x_train, x_test = (x_train - mean) / std, (x_test - mean) / std
        row = []
        for k in range(L):
            y_train = torch.tensor(src_vocab.encode([w[k] for w in train_words]))
            y_test = torch.tensor(src_vocab.encode([w[k] for w in test_words]))
            probe = fit_probe(x_train, y_train, len(src_vocab))
            with torch.no_grad():
                accuracy = (probe(x_test).argmax(-1) == y_test).float().mean().item()
            majority = Counter(y_train.tolist()).most_common(1)[0][0]
            row.append({"probe": round(accuracy, 4),
                        "majority": round((y_test == majority).float().mean().item(), 4)})
        table[str(L)] = {"train_words": len(train_words), "test_words": len(test_words), "by_k": row}
    return table


def by_length(result: G2PResult) -> dict:
    curve = length_curve(result)
    thirds = error_thirds(result)
    return {"test_wer": round(result.wer, 4), "test_per": round(result.per, 4),
            "by_length": {b: {"words": curve.words[b], "wer": round(curve.wer[b], 4),
                              "per": round(curve.per[b], 4)} for b in curve.wer},
            "thirds": {name: [round(s, 4) for s in shares] for name, shares in thirds.shares.items()},
            "thirds_words": thirds.words, "thirds_errors": thirds.errors,
            # per test word (in data.test order): edits to the reference, for bootstrap intervals
            "test_edits": [edit_distance(list(p), list(r))
                           for p, r in zip(result.predictions, result.references)]}


def run_encoder(encoder: str, seed: int, steps: int, smoke: bool) -> dict:
    torch.set_num_threads(1)
    data = load_g2p()
    if smoke:
        data = type(data)(data.train[:2000], data.dev[:200], data.test[:300])
    src_vocab, tgt_vocab = build_vocabs(load_g2p())
    config = RNNSeq2SeqConfig(src_vocab_size=len(src_vocab), tgt_vocab_size=len(tgt_vocab))
    torch.manual_seed(seed)
    model = build(encoder, config)
    lengths = PROBE_LENGTHS[:2] if smoke else PROBE_LENGTHS
    untrained = probe_table(model_features(model.eval(), src_vocab, tgt_vocab, encoder), data,
                            src_vocab, lengths)
    model.train()
    seen = type(data)(shown(data.train, encoder), shown(data.dev, encoder), shown(data.test, encoder))
    history = train_g2p(model, seen, src_vocab, tgt_vocab, G2PRecipe(steps=steps, seed=seed),
                        progress=False)
    model.eval()
    result = evaluate_g2p(model, seen.test, src_vocab, tgt_vocab)
    result = G2PResult([w for w, _ in data.test], result.references, result.predictions, result.wer,
                       result.per, result.wer_by_length)  # score by the real spelling's length
    row = {"encoder": encoder, "seed": seed, "steps": steps,
           "parameters": sum(p.numel() for p in model.parameters()),
           "final_loss": round(history.losses[-1], 4) if hasattr(history, "losses") else None,
           **by_length(result),
           "probe": probe_table(model_features(model, src_vocab, tgt_vocab, encoder), data,
                                src_vocab, lengths),
           "probe_untrained": untrained}
    print(json.dumps(row), flush=True)
    return row


def run_table(smoke: bool) -> dict:
    torch.set_num_threads(1)
    from attnbook.tasks.count_baselines import LetterAligner, LetterWindowG2P

    data = load_g2p()
    train = data.train[:5000] if smoke else data.train
    test = data.test[:300] if smoke else data.test
    table = LetterWindowG2P(train, LetterAligner(train))
    words, refs = [w for w, _ in test], [tuple(p) for _, p in test]
    preds = [tuple(table(w)) for w in words]
    wer = sum(p != r for p, r in zip(preds, refs)) / len(refs)
    per = sum(edit_distance(list(p), list(r)) for p, r in zip(preds, refs)) / sum(map(len, refs))
    row = {"encoder": "count table", **by_length(G2PResult(words, refs, preds, wer, per, {}))}
    print(json.dumps(row), flush=True)
    return row


def run_projection(seed: int, smoke: bool) -> dict:
    """The capacity control: the same probe on a fixed random projection of the one-hot letters."""
    torch.set_num_threads(1)
    data = load_g2p()
    if smoke:
        data = type(data)(data.train[:2000], data.dev[:200], data.test[:300])
    src_vocab, _ = build_vocabs(load_g2p())
    lengths = PROBE_LENGTHS[:2] if smoke else PROBE_LENGTHS
    row = {"encoder": "random projection", "seed": seed,
           "probe": probe_table(random_projection(seed), data, src_vocab, lengths)}
    print(json.dumps(row), flush=True)
    return row


def run_converged(seed: int, smoke: bool) -> dict:
    """The chapter's model trained as g2p_compare.py's ``converge`` run (its best recipe, 8,000
    steps), then scored and probed like the 1,200-step models."""
    import itertools

    import g2p_compare as compare
    from attnbook.data import iterate_batches
    from attnbook.env import seed_everything
    from attnbook.schedules import warmup_linear_scheduler
    from attnbook.tasks.g2p import g2p_loss
    from attnbook.train import fit

    torch.set_num_threads(1)
    data = load_g2p()
    src_vocab, tgt_vocab = build_vocabs(data)
    if smoke:
        data = type(data)(data.train[:2000], data.dev[:200], data.test[:300])
    from attnbook.results import load_result
    recipe = load_result("g2p_compare.json")["converged"]["gru"]["recipe"]  # the tuned recipe
    schedule, smoothing = compare.RECIPES[recipe]
    steps = 30 if smoke else compare.CONVERGE_STEPS
    seed_everything(seed)
    model = RNNSeq2Seq(RNNSeq2SeqConfig(len(src_vocab), len(tgt_vocab)))
    optimizer = torch.optim.Adam(model.parameters(), lr=compare.PEAK_LR, betas=(0.9, 0.98), eps=1e-9)
    scheduler = (warmup_linear_scheduler(optimizer, min(compare.WARMUP, steps - 1), steps)
                 if schedule == "linear" else None)
    batches = iterate_batches(data.train, src_vocab, tgt_vocab, compare.BATCH,
                              torch.Generator().manual_seed(seed))
    batches = itertools.chain([next(batches)], batches)  # as g2p_compare.py draws them
    fit(model, batches, lambda m, b: g2p_loss(m, b, tgt_vocab.pad_id, smoothing), optimizer, steps,
        clip_norm=compare.CLIP, scheduler=scheduler, progress=False)
    model.eval()
    result = evaluate_g2p(model, data.test, src_vocab, tgt_vocab)
    lengths = PROBE_LENGTHS[:2] if smoke else PROBE_LENGTHS
    row = {"encoder": "bidirectional, 8,000 steps", "seed": seed, "steps": steps, "recipe": recipe,
           **by_length(result),
           "probe": probe_table(model_features(model, src_vocab, tgt_vocab, "bidirectional"), data,
                                src_vocab, lengths)}
    print(json.dumps(row), flush=True)
    return row


def job(name: str, seed: int, steps: int, smoke: bool) -> dict:
    if name == "count table":
        return run_table(smoke)
    if name == "random projection":
        return run_projection(seed, smoke)
    if name == "bidirectional, 8,000 steps":
        return run_converged(seed, smoke)
    return run_encoder(name, seed, steps, smoke)


def main() -> None:
    p = common.experiment_parser(__doc__)
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--converged", action="store_true",
                   help="also train and probe the 8,000-step model of g2p_compare.py (seed 0)")
    args = p.parse_args()
    common.check_jobs(p, args)
    steps = 30 if args.smoke else G2PRecipe().steps
    done = common.log_rows(args.resume)
    have = {(r["encoder"], r.get("seed")) for r in done}
    todo = [("count table", None), ("random projection", 0)]
    todo += [("bidirectional, 8,000 steps", 0)] if args.converged else []
    todo += [(e, s) for s in args.seeds for e in ENCODERS]
    todo = [t for t in todo if t not in have]
    rows = done + common.run_jobs(job, [(*t, steps, args.smoke) for t in todo], args.jobs)
    path = common.out_path(args, "rnn_bottleneck.json")
    if path is None:
        return
    converged = [r for r in rows if r["encoder"] == "bidirectional, 8,000 steps"]
    common.write_result(path, {
        "description": __doc__.split("\n\n")[0],
        "steps": steps, "seeds": args.seeds, "probe_lengths": list(PROBE_LENGTHS),
        "machine": common.machine(args.jobs),
        "count_table": next(r for r in rows if r["encoder"] == "count table"),
        "random_projection": next(r for r in rows if r["encoder"] == "random projection"),
        **({"converged": converged[0]} if args.converged and converged else {}),
        "runs": [r for r in rows if r["encoder"] in ENCODERS and r["seed"] in args.seeds],
    })


if __name__ == "__main__":
    main()
