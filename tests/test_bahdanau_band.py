"""Chapter 2, section 2.7: the benchmark's BandScore gives, one decoder step at a time, the rows of
the fixed band -(j - i / r)^2 / (2 sigma^2) that the chapter computes as a (T, S) table."""
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bahdanau_length import BandScore  # noqa: E402


def band_table(n_steps, n_letters, r, sigma):
    steps = torch.arange(n_steps, dtype=torch.float)[:, None]
    letters = torch.arange(n_letters, dtype=torch.float)[None, :]
    return -((letters - steps / r) ** 2) / (2 * sigma**2)


def test_band_score_rows_equal_the_chapters_band_table_and_restart_each_batch():
    for r, sigma in ((0.85, 1.0), (1.3, 0.5)):
        band = BandScore(ratio=r, sigma=sigma)
        for _ in range(2):  # the step counter restarts with each batch's prepare
            prepared = band.prepare(torch.randn(3, 10, 4))
            rows = [band.score(torch.zeros(3, 1, 5), prepared) for _ in range(9)]
            got = torch.cat(rows, dim=1)  # (B, T, S)
            assert got.shape == (3, 9, 10)
            torch.testing.assert_close(got, band_table(9, 10, r, sigma).expand(3, -1, -1))
