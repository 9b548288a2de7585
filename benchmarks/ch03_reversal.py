"""What Chapter 3's reversal benchmarks share: section 3.7's task, model and training.

Sequences of 10 distinct letters out of 20, position i must output the letter at 9 - i; the test
set is 2,000 sequences drawn with seed 123; the model is a ``SelfAttentionTagger`` with one
single-head attention layer, trained with Adam on batches of 64 (``fit``'s defaults otherwise).
``train`` builds and trains one run; ``adjust(model)``, called after the model is built and before
the optimizer is, is where a script changes the one thing it studies (the score scale, the
embedding's initial size). Used by ``sqrt_dk_training.py`` and ``reversal_blur_scale.py``, which
import it as ``import ch03_reversal`` (Python puts a script's folder first on ``sys.path``).
"""
from __future__ import annotations

from typing import Callable

import torch

from attnbook.data.synthetic import reversal_task, task_batches
from attnbook.env import seed_everything
from attnbook.models.tagger import SelfAttentionTagger
from attnbook.tasks.tagging import tagging_loss
from attnbook.train import History, fit

SEQ_LEN, VOCAB, BATCH = 10, 20, 64


def test_set() -> tuple[torch.Tensor, torch.Tensor]:
    """The chapter's test set: tokens ``(2000, 10)`` and targets ``(2000, 10, 1)``."""
    return reversal_task(2000, SEQ_LEN, VOCAB, torch.Generator().manual_seed(123))


def train(width: int, positional: str, seed: int, steps: int, lr: float,
          adjust: Callable[[SelfAttentionTagger], None] | None = None,
          ) -> tuple[SelfAttentionTagger, History]:
    """One training run on one CPU thread, seeded as the chapter seeds its runs."""
    torch.set_num_threads(1)
    gen = seed_everything(seed)
    model = SelfAttentionTagger(VOCAB, width, num_heads=1, max_len=SEQ_LEN, positional=positional)
    if adjust is not None:
        adjust(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    batches = task_batches(reversal_task, BATCH, SEQ_LEN, VOCAB, gen, "cpu")
    return model, fit(model, batches, tagging_loss, optimizer, steps, progress=False)
