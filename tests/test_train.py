import pytest
import torch
from torch import nn

from attnbook.losses import sequence_cross_entropy
from attnbook.train import History, fit


def _batches():
    g = torch.Generator().manual_seed(0)
    w = torch.tensor([[2.0], [-3.0]])
    while True:
        x = torch.randn(32, 2, generator=g)
        yield x, x @ w


def test_fit_reduces_the_loss_and_records_history():
    torch.manual_seed(0)
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    evals = []
    history = fit(model, _batches(), lambda m, b: nn.functional.mse_loss(m(b[0]), b[1]), opt, steps=60,
                  eval_fn=lambda m: evals.append(m.training) or {"w0": m.weight[0, 0].item()}, eval_every=20,
                  progress=False)
    assert history.steps == list(range(1, 61))
    assert history.losses[-1] < 0.01 * history.losses[0]
    assert [s for s, _ in history.metrics["w0"]] == [20, 40, 60]
    assert evals == [False, False, False], "eval_fn must run in eval mode"
    assert history.seconds > 0 and not model.training


def test_fit_rejects_bad_arguments_and_non_finite_loss():
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="steps must be"):
        fit(model, _batches(), lambda m, b: m(b[0]).sum(), opt, steps=0, progress=False)
    with pytest.raises(ValueError, match="ran out after 2"):
        fit(model, iter([(torch.ones(1, 2), None)] * 2), lambda m, b: m(b[0]).sum(), opt, steps=3, progress=False)
    with pytest.raises(FloatingPointError):
        fit(model, _batches(), lambda m, b: m(b[0]).sum() * float("nan"), opt, steps=2, progress=False)


def test_smoothed_losses():
    h = History(steps=[1, 2, 3, 4], losses=[4.0, 2.0, 0.0, 2.0])
    assert h.smoothed_losses(window=2) == [4.0, 3.0, 1.0, 1.0]


def test_sequence_cross_entropy_ignores_padding():
    logits = torch.randn(2, 3, 5)
    targets = torch.tensor([[1, 2, 0], [3, 0, 0]])
    by_hand = -torch.stack([logits[0, 0].log_softmax(-1)[1], logits[0, 1].log_softmax(-1)[2],
                            logits[1, 0].log_softmax(-1)[3]]).mean()
    torch.testing.assert_close(sequence_cross_entropy(logits, targets, pad_id=0), by_hand)
    with pytest.raises(ValueError, match="disagree"):
        sequence_cross_entropy(logits, targets[:, :2], pad_id=0)
