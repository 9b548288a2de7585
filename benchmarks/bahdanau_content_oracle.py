"""Chapter 2's vowels-last task: a band *told* the true alignment, the ceiling for where-to-look.

``nice python benchmarks/bahdanau_content_oracle.py --jobs 1`` writes
``lib/attnbook/results/bahdanau_content_oracle.json``; ``--smoke`` runs in seconds.

``bahdanau_content.py`` compares the learned additive weights with position-only rules. This run
gives the reader the other end of the scale, as ``bahdanau_reversal.py``'s mirror band does for
reversal: a parameter-free band (Gaussian, sigma 1 letter, the same width as the other bands)
centred on the letter that output step i actually copies, read from the input word's own letters
(its consonants' positions, then its vowels'); the end-of-word step looks at the last letter. The
band knows where to look; the decoder must still learn to copy. Same recipe, seeds, batches and
initial weights (apart from the score) as the other runs, scored on the same test words.
About half a CPU-minute per run: three runs.
"""
from __future__ import annotations

import torch

import common
from attnbook.data import build_vocabs
from attnbook.env import seed_everything
from attnbook.models.rnn import RNNAttentionSeq2Seq
from bahdanau_content import build, source_positions, task_split
from bahdanau_content_position import train_and_score
from bahdanau_length import BAND_SIGMA
from bahdanau_reversal import BATCH, SEEDS, STEPS, TEST_EVERY, WIDTH


class OracleBandScore(torch.nn.Module):
    """A parameter-free band centred, at step i, on the letter that step i copies.

    ``centres`` ``(B, T_max)`` is set from the source letters by ``OracleBandModel.start`` before
    ``prepare``; like ``MirrorBandScore``, the step counter is reset by ``prepare`` and advanced
    by every ``score`` call."""

    def __init__(self, sigma: float) -> None:
        super().__init__()
        self.sigma, self.t = sigma, 0
        self.centres = torch.zeros(0, 0)

    def prepare(self, keys: torch.Tensor) -> torch.Tensor:
        self.t = 0
        return keys

    def score(self, query: torch.Tensor, prepared: torch.Tensor) -> torch.Tensor:
        step = min(self.t, self.centres.shape[1] - 1)
        centre = self.centres[:, step].to(query.device, query.dtype)[:, None]  # (B, 1)
        j = torch.arange(prepared.shape[1], dtype=query.dtype, device=query.device)  # (S,)
        e = -((j[None, :] - centre) ** 2) / (2 * self.sigma**2)  # (B, S)
        self.t += 1
        return e[:, None, :].expand(-1, query.shape[1], -1).clone()  # (B, T, S)


class OracleBandModel(RNNAttentionSeq2Seq):
    """The attention decoder whose score is an ``OracleBandScore`` told each word's alignment."""

    itos: list[str] = []

    def start(self, src: torch.Tensor, src_lengths: torch.Tensor):
        rows = []
        width = src.shape[1] + 2  # every letter step, the end-of-word step, one spare
        for b in range(src.shape[0]):
            n = int(src_lengths[b])
            word = "".join(self.itos[int(t)] for t in src[b, :n])
            centres = source_positions(word)
            rows.append(centres + [n - 1] * (width - len(centres)))  # then the last letter
        self.decoder.score.centres = torch.tensor(rows, dtype=torch.float)  # (B, width)
        return super().start(src, src_lengths)


def oracle_model(task, src_vocab, tgt_vocab, width: int) -> OracleBandModel:
    """``build("additive")``'s model (the same initial weights) with the oracle band as its score."""
    plain = build("additive", task, len(src_vocab), len(tgt_vocab), width)
    model = OracleBandModel(plain.config)
    model.load_state_dict(plain.state_dict())
    model.itos = src_vocab.itos
    model.decoder.score = OracleBandScore(BAND_SIGMA)
    return model


def run_one(kind: str, seed: int, smoke: bool) -> dict:
    """Train the oracle band with the vowels-last recipe and score it on every 5th test word."""
    torch.set_num_threads(1)
    task = task_split()
    src_vocab, tgt_vocab = build_vocabs(task)
    seed_everything(seed)
    model = oracle_model(task, src_vocab, tgt_vocab, 8 if smoke else WIDTH)
    return train_and_score(kind, seed, smoke, model, task, src_vocab, tgt_vocab)


def main() -> None:
    parser = common.experiment_parser(__doc__, conditions=True)
    args = parser.parse_args()
    common.check_jobs(parser, args)
    seeds = SEEDS[:2] if args.smoke else SEEDS
    rows = common.run_missing(run_one, ("oracle_band",), seeds, args.smoke, args.jobs, args.resume)
    out = common.out_path(args, "bahdanau_content_oracle.json")
    if out is None:
        return
    common.write_result(out, {
        "description": "Chapter 2, section 2.7: vowels-last task, a parameter-free band (sigma 1 letter) told "
                       "the true alignment (step i looks at the letter it copies), the same recipe, seeds, "
                       "batches and initial weights as the other runs; written by "
                       "benchmarks/bahdanau_content_oracle.py",
        "command": f"python benchmarks/bahdanau_content_oracle.py --jobs {args.jobs}",
        "machine": common.machine(args.jobs if args.jobs > 1 else None), "conditions": args.conditions,
        "setup": {"width": WIDTH, "steps": STEPS, "batch_size": BATCH, "seeds": list(seeds),
                  "band_sigma": BAND_SIGMA, "test": f"every {TEST_EVERY}th test word"},
        "runs": rows,
    })


if __name__ == "__main__":
    main()
