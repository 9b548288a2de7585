"""Checks that make the text's claims executable: shapes, equal modules, measured ranges."""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


def check_shape(x: torch.Tensor, expected: Sequence[int | None], name: str = "tensor") -> torch.Tensor:
    """Raise ``ValueError`` unless ``x.shape`` matches ``expected`` (``None`` matches any size).

    Returns ``x`` so a check can sit inside an expression.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(x).__name__}")
    expected = tuple(expected)
    shape = tuple(x.shape)
    ok = len(shape) == len(expected) and all(e is None or e == s for e, s in zip(expected, shape))
    if not ok:
        wanted = "(" + ", ".join("*" if e is None else str(e) for e in expected) + ")"
        raise ValueError(f"{name}: expected shape {wanted}, got {shape}")
    return x


def count_parameters(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


@torch.no_grad()
def assert_same_outputs(
    module_a: nn.Module,
    module_b: nn.Module,
    *inputs: torch.Tensor,
    atol: float = 1e-5,
    rtol: float = 1e-5,
) -> torch.Tensor:
    """Run both modules in eval mode on the same inputs and assert their outputs are equal.

    Outputs may be tensors or tuples of tensors. Returns the largest absolute difference.
    The modules' train/eval modes are restored afterwards.
    """
    modes = module_a.training, module_b.training
    module_a.eval()
    module_b.eval()
    try:
        out_a, out_b = module_a(*inputs), module_b(*inputs)
    finally:
        module_a.train(modes[0])
        module_b.train(modes[1])
    return assert_close_tensors(out_a, out_b, atol=atol, rtol=rtol)


def assert_close_tensors(a, b, atol: float = 1e-5, rtol: float = 1e-5) -> torch.Tensor:
    """``torch.testing.assert_close`` for a tensor or tuple of tensors; returns the max abs diff."""
    seq_a = a if isinstance(a, (tuple, list)) else (a,)
    seq_b = b if isinstance(b, (tuple, list)) else (b,)
    if len(seq_a) != len(seq_b):
        raise AssertionError(f"outputs differ in number: {len(seq_a)} vs {len(seq_b)}")
    worst = torch.tensor(0.0)
    for i, (ta, tb) in enumerate(zip(seq_a, seq_b)):
        torch.testing.assert_close(ta, tb, atol=atol, rtol=rtol, msg=lambda m, i=i: f"output {i}: {m}")
        if ta.numel():
            worst = torch.maximum(worst, (ta.detach().float() - tb.detach().float()).abs().max().cpu())
    return worst


def report_in_range(label: str, value: float, low: float, high: float, percent: bool = False) -> None:
    """Print a measured figure with the range it is expected in; fail loudly outside it.

    The printed line looks like ``test WER: 41.3% (expected 30.0%–50.0%) ok``. The book's
    nbval sanitizer masks the measured value, so a checked cell compares the label and the
    range, while the assertion here enforces that the value lies inside it.
    """
    fmt = (lambda v: f"{100 * v:.1f}%") if percent else (lambda v: f"{v:.4g}")
    if not low <= value <= high:
        raise AssertionError(
            f"{label} = {fmt(value)} is outside the expected range {fmt(low)}–{fmt(high)}"
        )
    print(f"{label}: {fmt(value)} (expected {fmt(low)}–{fmt(high)}) ok")


def report_close(label: str, actual, expected, atol: float = 1e-5, rtol: float = 1e-5) -> None:
    """Assert ``actual`` equals ``expected`` (tensors or tuples of them, ``torch.testing.assert_close``)
    and print the largest absolute difference, e.g. ``library == inline: max |difference| 2.4e-07
    (expected ≤ 1e-05) ok``. The nbval sanitizer masks the measured value, which differs in its
    last digits between machines. Returns None, so that a notebook cell ending with the call shows
    only the printed line (a returned float would be an output nbval compares digit by digit).
    """
    worst = float(assert_close_tensors(actual, expected, atol=atol, rtol=rtol))
    print(f"{label}: max |difference| {worst:.1e} (expected ≤ {atol:.0e}) ok")
