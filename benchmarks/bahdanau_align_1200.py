"""Chapter 2: alignment scores of the page's attention model trained 1,200 steps (seed 0).

§2.7 measures the alignment of the page's 360-step model (early training). This script trains
the same model with the page's recipe for 1,200 steps, exactly as ``bahdanau_page_1200.py``
does for seed 0 (``seed_everything(0)``, ``RNNAttentionSeq2Seq``, ``G2PRecipe(steps=1200,
seed=0)``, one CPU thread), then scores its teacher-forced weights on §2.7's words
(``data.test[::12]``) the way §2.7 does: how often the strongest letter is the letter that the
hard-EM ``LetterAligner`` (fitted on the training words) assigns to each phoneme, exactly and
within one letter, beside the global band (centre round(i / r)) and the per-word band (centre
round((i + 0.5) S / n - 0.5), n the word's phoneme count). Without ``--save`` the weights are not kept.

Reproduce with ``nice python benchmarks/bahdanau_align_1200.py`` (about 2.5 CPU-minutes);
``--smoke`` trains 3 steps and writes only where ``--out`` points.

``--tuned`` trains instead with the tuned recipe of ``g2p_compare.py`` (its ``run_one``: Adam
betas 0.9/0.98, 100 warm-up steps then linear decay, label smoothing 0.1, peak rate ``--rate``,
default 0.006, seed 0, 1,200 steps; the run that scored 36.5% test WER in ``g2p_compare.json``),
scores it the same way and writes ``bahdanau_align_1200_tuned.json``; ``--save`` also keeps its
weights as ``lib/attnbook/results/bahdanau_page_additive_1200.safetensors`` (1.7 MB, the same
shapes as ``bahdanau_page_additive.safetensors``), which §2.7-§2.9 load. Reproduce with
``nice python benchmarks/bahdanau_align_1200.py --tuned --save`` (about 3 CPU-minutes).
"""
from __future__ import annotations

import time

import torch

import common
from attnbook.data import build_vocabs, load_g2p, make_batch
from attnbook.env import seed_everything
from attnbook.models.rnn import RNNAttentionSeq2Seq, RNNAttentionSeq2SeqConfig
from attnbook.tasks.count_baselines import LetterAligner
from attnbook.tasks.g2p import G2PRecipe, evaluate_g2p, train_g2p


def alignment_scores(model, data, src_vocab, tgt_vocab) -> dict:
    """Strongest-letter agreement with the counting aligner on ``data.test[::12]``."""
    pairs = data.test[::12]
    batch = make_batch(pairs, src_vocab, tgt_vocab)
    model.eval()
    with torch.no_grad():
        _, w = model(batch.src, batch.src_lengths, batch.tgt_in, need_weights=True)
    n_letters = batch.src_lengths[:, None]  # (B, 1)
    n_phon = torch.tensor([len(p) for _, p in pairs])[:, None]  # (B, 1)
    r = sum(len(p) for _, p in data.train) / sum(len(x) for x, _ in data.train)
    i = torch.arange(w.shape[1])[None, :]  # (1, T)
    picks = {
        "learned": w.argmax(-1),
        "global_band": (i / r).round().long().minimum(n_letters - 1),
        "per_word_band": ((i + 0.5) * n_letters / n_phon - 0.5).round().long()
        .clamp(min=0).minimum(n_letters - 1),
    }
    aligner = LetterAligner(data.train)
    owner = torch.full(w.shape[:2], -1)
    for b, (word, phones) in enumerate(pairs):
        units = aligner.align(word, phones)
        if units is not None:
            letters_of = [j for j, unit in enumerate(units) for _ in unit]
            owner[b, : len(letters_of)] = torch.tensor(letters_of)
    aligned = owner >= 0
    out = {"test_words": len(pairs), "aligned_phonemes": int(aligned.sum())}
    for name, pick in picks.items():
        out[name] = {"exact": float((pick == owner)[aligned].float().mean()),
                     "within_one": float(((pick - owner).abs() <= 1)[aligned].float().mean())}
    return out


def run_one(seed: int, smoke: bool) -> dict:
    torch.set_num_threads(1)
    data = load_g2p()
    src_vocab, tgt_vocab = build_vocabs(data)
    seed_everything(seed)
    model = RNNAttentionSeq2Seq(RNNAttentionSeq2SeqConfig(len(src_vocab), len(tgt_vocab)))
    recipe = G2PRecipe(steps=3 if smoke else 1200, seed=seed)
    cpu = time.process_time()
    train_g2p(model, data, src_vocab, tgt_vocab, recipe, progress=False)
    test = data.test[:64] if smoke else data.test
    result = evaluate_g2p(model, test, src_vocab, tgt_vocab)
    row = {"model": "additive", "seed": seed, "steps": recipe.steps, "test_words": len(test),
           "test_wer": result.wer, "test_per": result.per,
           "alignment": alignment_scores(model, data, src_vocab, tgt_vocab),
           "cpu_seconds": round(time.process_time() - cpu, 1)}
    print(row, flush=True)
    return row


WEIGHTS = "bahdanau_page_additive_1200.safetensors"


def run_tuned(seed: int, smoke: bool, rate: float, save: bool) -> dict:
    """``g2p_compare.run_one``'s tuned 1,200-step run of the page's model, then §2.7's scores."""
    import g2p_compare
    from safetensors.torch import save_file

    from attnbook.checkpoints import sha256_of

    built = []
    make = g2p_compare.build

    def build(kind: str, src_size: int, tgt_size: int, smoke_: bool) -> torch.nn.Module:
        built.append(make(kind, src_size, tgt_size, smoke_))
        return built[-1]

    g2p_compare.build = build  # this process only: keep a handle on the trained model
    recipe = "warm-up + linear decay, smoothing 0.1"
    steps = 3 if smoke else g2p_compare.BUDGET_STEPS
    cpu = time.process_time()
    row = g2p_compare.run_one("gru_attention", recipe, seed, steps, "tuned", smoke, rate)
    model = built[-1]
    data = load_g2p()
    src_vocab, tgt_vocab = build_vocabs(data)
    row = {"model": "additive", **{k: row[k] for k in ("recipe", "seed", "steps", "peak_lr",
                                                       "dev_wer", "dev_per", "test_wer",
                                                       "test_per", "final_loss")},
           "alignment": alignment_scores(model, data, src_vocab, tgt_vocab)}
    if save and not smoke:
        weights = common.RESULTS / WEIGHTS
        save_file({k: v.detach().clone().contiguous() for k, v in model.state_dict().items()},
                  str(weights))
        row |= {"weights": WEIGHTS, "sha256": sha256_of(weights)}
    row["cpu_seconds"] = round(time.process_time() - cpu, 1)
    print(row, flush=True)
    return row


def main() -> None:
    parser = common.experiment_parser(__doc__)
    parser.add_argument("--tuned", action="store_true",
                        help="the tuned recipe of g2p_compare.py instead of the page's recipe")
    parser.add_argument("--rate", type=float, default=0.006, help="with --tuned: the peak rate")
    parser.add_argument("--save", action="store_true",
                        help=f"with --tuned: keep the weights as results/{WEIGHTS}")
    args = parser.parse_args()
    if args.tuned:
        out = common.out_path(args, "bahdanau_align_1200_tuned.json")
        row = run_tuned(0, args.smoke, args.rate, args.save)
        if out is not None:
            common.write_result(out, {
                "description": "Chapter 2: the page's additive-attention model trained with "
                               "g2p_compare.py's tuned 1,200-step recipe, seed 0, and its alignment "
                               "scores; written by benchmarks/bahdanau_align_1200.py --tuned",
                "machine": common.machine(), "runs": [row]})
        return
    out = common.out_path(args, "bahdanau_align_1200.json")
    if out is None:
        print(run_one(0, args.smoke))
        return
    common.run_and_write(run_one, [(0, args.smoke)], 1, out,
                         "Chapter 2: alignment scores of the page's additive-attention model "
                         "after 1,200 steps of the page's recipe, seed 0; written by "
                         "benchmarks/bahdanau_align_1200.py")


if __name__ == "__main__":
    main()
