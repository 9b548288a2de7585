"""The warm-up learning-rate schedule of the Transformer paper."""
import math

import pytest
import torch

from attnbook.schedules import transformer_lr, warmup_factor, warmup_scheduler


def test_paper_formula_values():
    assert transformer_lr(1, 512, 4000) == pytest.approx(512 ** -0.5 * 4000 ** -1.5)
    assert transformer_lr(4000, 512, 4000) == pytest.approx((512 * 4000) ** -0.5)  # the peak
    assert transformer_lr(16000, 512, 4000) == pytest.approx(512 ** -0.5 / 4 / math.sqrt(1000))


def test_rises_then_falls():
    lrs = [transformer_lr(s, 128, 100) for s in range(1, 1001)]
    assert max(range(1000), key=lrs.__getitem__) == 99  # step 100
    assert all(a < b for a, b in zip(lrs[:99], lrs[1:100]))
    assert all(a > b for a, b in zip(lrs[99:], lrs[100:]))


def test_scheduler_with_paper_peak_equals_the_formula():
    d_model, warmup = 64, 50
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=(d_model * warmup) ** -0.5)
    sched = warmup_scheduler(opt, warmup)
    for step in range(1, 201):
        assert opt.param_groups[0]["lr"] == pytest.approx(transformer_lr(step, d_model, warmup))
        opt.step()
        sched.step()


def test_factor_peaks_at_one_and_rejects_step_zero():
    assert warmup_factor(10, 10) == 1.0
    with pytest.raises(ValueError):
        warmup_factor(0, 10)
    with pytest.raises(ValueError):
        transformer_lr(0, 512, 4000)


def test_linear_warmup_then_decay_to_zero():
    from attnbook.schedules import warmup_linear_factor, warmup_linear_scheduler

    assert warmup_linear_factor(5, 10, 110) == 0.5
    assert warmup_linear_factor(10, 10, 110) == 1.0
    assert warmup_linear_factor(11, 10, 110) == 1.0
    assert warmup_linear_factor(61, 10, 110) == 0.5
    assert warmup_linear_factor(110, 10, 110) == pytest.approx(0.01)
    assert warmup_linear_factor(111, 10, 110) == 0.0
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=2.0)
    sched = warmup_linear_scheduler(opt, 10, 110)
    seen = []
    for _ in range(110):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen[0] == pytest.approx(0.2) and seen[9] == pytest.approx(2.0) and seen[-1] == pytest.approx(0.02)
    with pytest.raises(ValueError):
        warmup_linear_factor(1, 10, 10)
