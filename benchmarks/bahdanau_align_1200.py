"""Chapter 2: alignment scores of the page's attention model trained 1,200 steps (seed 0).

§2.7 measures the alignment of the page's 360-step model (early training). This script trains
the same model with the page's recipe for 1,200 steps, exactly as ``bahdanau_page_1200.py``
does for seed 0 (``seed_everything(0)``, ``RNNAttentionSeq2Seq``, ``G2PRecipe(steps=1200,
seed=0)``, one CPU thread), then scores its teacher-forced weights on §2.7's words
(``data.test[::12]``) the way §2.7 does: how often the strongest letter is the letter that the
hard-EM ``LetterAligner`` (fitted on the training words) assigns to each phoneme, exactly and
within one letter, beside the global band (centre round(i / r)) and the per-word band (centre
round((i + 0.5) S / n - 0.5), n the word's phoneme count). The weights (1.7 MB) are not kept.

Reproduce with ``nice python benchmarks/bahdanau_align_1200.py`` (about 2.5 CPU-minutes);
``--smoke`` trains 3 steps and writes only where ``--out`` points.
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


def main() -> None:
    parser = common.experiment_parser(__doc__)
    args = parser.parse_args()
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
