import pytest
import torch
from torch import nn

from attnbook.losses import sequence_cross_entropy
from attnbook.train import History, evaluating, fit


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


def test_fit_trains_again_after_each_evaluation():
    model = nn.Linear(2, 1)
    modes = []
    fit(model, _batches(), lambda m, b: modes.append(m.training) or nn.functional.mse_loss(m(b[0]), b[1]),
        torch.optim.SGD(model.parameters(), lr=0.1), steps=6, eval_fn=lambda m: {}, eval_every=2, progress=False)
    assert modes == [True] * 6, "a step after an evaluation ran outside train mode"


def _mixed_mode_model() -> nn.Module:
    """Train mode at the top, a frozen (eval) encoder inside, and a train-mode layer inside that."""
    model = nn.Sequential(nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5)), nn.Dropout(0.5), nn.Linear(2, 1))
    model[0].eval()
    model[0][1].train()
    return model


def _modes(model: nn.Module) -> list[bool]:
    return [m.training for m in model.modules()]


def test_evaluating_puts_every_submodule_in_eval_and_restores_each_exactly():
    model = _mixed_mode_model()
    before = _modes(model)
    assert len(set(before)) == 2, "the fixture must mix modes"
    with evaluating(model) as inside:
        assert inside is model and not any(_modes(model))
    assert _modes(model) == before


def test_evaluating_restores_the_modes_after_an_exception():
    model = _mixed_mode_model()
    before = _modes(model)
    with pytest.raises(RuntimeError, match="boom"), evaluating(model):
        raise RuntimeError("boom")
    assert _modes(model) == before


@pytest.mark.parametrize("mode", [True, False])
def test_evaluating_keeps_a_uniform_mode(mode):
    model = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5)).train(mode)
    with evaluating(model):
        assert not model[1].training
    assert _modes(model) == [mode] * 3


def test_evaluating_rejects_what_is_not_a_module():
    with pytest.raises(TypeError, match="expects a torch.nn.Module, got function"):
        with evaluating(lambda x: x):
            pass


def test_fit_rejects_bad_arguments_and_non_finite_loss():
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="steps must be"):
        fit(model, _batches(), lambda m, b: m(b[0]).sum(), opt, steps=0, progress=False)
    with pytest.raises(ValueError, match="ran out after 2"):
        fit(model, iter([(torch.ones(1, 2), None)] * 2), lambda m, b: m(b[0]).sum(), opt, steps=3, progress=False)
    with pytest.raises(FloatingPointError):
        fit(model, _batches(), lambda m, b: m(b[0]).sum() * float("nan"), opt, steps=2, progress=False)


def test_fit_counts_clipped_steps():
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)  # weights stay: the same norm each step
    batches = iter([(torch.ones(1, 2), None)] * 6)
    loss = lambda m, b: 10 * m(b[0]).sum()  # noqa: E731  gradient norm 10 * sqrt(3)
    assert fit(model, batches, loss, opt, steps=3, clip_norm=1.0, progress=False).clipped == 3
    assert fit(model, batches, loss, opt, steps=3, clip_norm=100.0, progress=False).clipped == 0


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


@pytest.mark.parametrize("clip_norm", [1.0, 0.1, 1e-3, 100.0])
def test_clip_grad_norm_mechanics(clip_norm):
    """What Chapter 1 says about clipping (moved here from the page): clip_grad_norm_ returns
    the norm before clipping, leaves min(norm, clip_norm), and keeps the direction."""
    torch.manual_seed(0)
    model = nn.GRU(4, 8, batch_first=True)
    states, _ = model(torch.randn(3, 5, 4))
    states.pow(2).sum().backward()

    def joined():
        return torch.cat([p.grad.flatten() for p in model.parameters()])

    raw = joined().clone()
    returned = nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
    clipped = joined()
    torch.testing.assert_close(returned, raw.norm())
    torch.testing.assert_close(clipped.norm(), raw.norm().clamp(max=clip_norm))
    torch.testing.assert_close(clipped / clipped.norm(), raw / raw.norm())
