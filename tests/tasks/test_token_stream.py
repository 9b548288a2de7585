"""Language modelling on a token stream: windows, held-out targets, n-gram baselines."""
import math

import pytest
import torch
from torch import nn

from attnbook.tasks.token_stream import (
    bigram_counts, bigram_probs, fit_bigram, held_out_targets, held_out_windows, lm_batches, model_loss,
    ngram_loss, unigram_probs,
)


def test_batches_are_windows_of_the_stream():
    stream = torch.arange(100)
    batch = next(lm_batches(stream, 8, 5, torch.Generator().manual_seed(0)))
    assert batch.shape == (5, 9)
    assert torch.equal(batch[:, 1:] - batch[:, :-1], torch.ones(5, 8, dtype=torch.long))
    assert batch.max() < 100
    with pytest.raises(ValueError, match="more than window"):
        next(lm_batches(torch.arange(9), 8, 2))


def test_held_out_windows_make_every_target_count_once():
    stream = torch.arange(23)
    windows = held_out_windows(stream, 5)  # (22 // 5 = 4, 6)
    assert windows.shape == (4, 6) and windows[1, 0] == windows[0, -1]
    previous, targets = held_out_targets(stream, 5)
    assert torch.equal(targets, torch.arange(1, 21)) and torch.equal(previous, torch.arange(0, 20))


def test_unigram_and_bigram_by_hand():
    stream = torch.tensor([0, 1, 0, 1, 0, 2])
    torch.testing.assert_close(unigram_probs(stream, 4, smoothing=0.0), torch.tensor([3, 2, 1, 0]).double() / 6)
    torch.testing.assert_close(unigram_probs(stream, 4), torch.tensor([4, 3, 2, 1]).double() / 10)
    counts = bigram_counts(stream, 4)
    assert counts[0, 1] == 2 and counts[1, 0] == 2 and counts[0, 2] == 1 and counts.sum() == 5
    probs = bigram_probs(stream, 4, 0.5)
    torch.testing.assert_close(probs.sum(1), torch.ones(4).double())
    assert math.isclose(probs[0, 1].item(), 0.5 * 2 / 3 + 0.5 * 0.3)
    torch.testing.assert_close(probs[3], unigram_probs(stream, 4))  # a row never seen: the unigram
    assert math.isclose(ngram_loss(probs, torch.tensor([0]), torch.tensor([1])), -math.log(0.5 * 2 / 3 + 0.15))
    with pytest.raises(ValueError, match="weight"):
        bigram_probs(stream, 4, 1.0)


def test_fit_bigram_prefers_counts_on_a_predictable_stream():
    stream = torch.arange(8).repeat(50)  # each token has one successor
    probs, weight = fit_bigram(stream, 8)
    assert weight == 0.99 and probs[3, 4] > 0.99


class Perfect(nn.Module):
    """Knows that the next token is this one plus 1."""

    def __init__(self, vocab):
        super().__init__()
        self.vocab = vocab
        self.scale = nn.Parameter(torch.tensor(50.0))

    def forward(self, tokens):
        return self.scale * nn.functional.one_hot((tokens + 1) % self.vocab, self.vocab).float()


def test_model_loss_on_held_out_windows():
    stream = torch.arange(40) % 10
    assert model_loss(Perfect(10), stream, 6, batch_size=2) < 1e-6
    uniform = Perfect(10)
    uniform.scale.data.zero_()
    assert math.isclose(model_loss(uniform, stream, 6), math.log(10), rel_tol=1e-6)


def test_position_losses_average_to_the_model_loss():
    from attnbook.models.gpt import GPT, GPTConfig
    from attnbook.tasks.token_stream import position_losses
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=13, max_len=8, d_model=16, num_heads=2, d_ff=32, num_layers=1))
    stream = torch.randint(13, (90,), generator=torch.Generator().manual_seed(1))
    per_position = position_losses(model, stream, 8, batch_size=3)
    assert per_position.shape == (8,)
    assert math.isclose(per_position.mean().item(), model_loss(model, stream, 8), rel_tol=1e-6)
    assert not torch.allclose(per_position, per_position.mean().expand(8))  # not a constant
