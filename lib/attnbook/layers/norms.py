"""The normalisation layers a block can be built with, chosen by a ``Norm`` spec.

- LayerNorm (Ba et al., 2016): ``(x - mean) / sqrt(var + eps) * g + b``, over the last dimension;
  with or without the bias ``b``.
- RMSNorm (Zhang & Sennrich, 2019): ``x / sqrt(mean(x²) + eps) * g``: no mean subtracted, no bias
  (T5, Llama). ``torch.nn.RMSNorm`` is its reference.

A ``Norm`` is an immutable recipe, not a module: a block calls ``norm(d_model)`` once per
sublayer, so one spec builds every norm of a stack. Legend: B batch, T length, D model width.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from attnbook.layers.validation import NORMS, check_choice, check_eps, check_positive


class RMSNorm(nn.Module):
    """``x / sqrt(mean(x²) + eps) * weight`` over the last dimension, computed in float32 at least."""

    def __init__(self, d_model: int, eps: float = 1e-6) -> None:
        super().__init__()
        check_positive(d_model=d_model)
        check_eps(eps)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.weight.shape[0]:
            raise ValueError(f"RMSNorm over width {self.weight.shape[0]} got input of shape {tuple(x.shape)}")
        x32 = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        rms = torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)  # (..., 1)
        return (x32 * rms).to(x.dtype) * self.weight.to(x.dtype)  # (..., D)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"


@dataclass(frozen=True)
class Norm:
    """Which norm a block uses: ``kind`` ``"layernorm"`` or ``"rmsnorm"``, its ``eps``, and for a
    LayerNorm whether it has a bias. ``Norm()`` is the 2017 paper's LayerNorm (eps 1e-5)."""

    kind: str = "layernorm"
    eps: float = 1e-5
    bias: bool = True

    def __post_init__(self) -> None:
        check_choice("norm", self.kind, NORMS)
        check_eps(self.eps)
        if self.kind == "rmsnorm" and self.bias:
            raise ValueError("RMSNorm has no bias: use Norm('rmsnorm', eps, bias=False)")

    def __call__(self, d_model: int) -> nn.Module:
        """A new norm module over width ``d_model``."""
        if self.kind == "rmsnorm":
            return RMSNorm(d_model, eps=self.eps)
        return nn.LayerNorm(d_model, eps=self.eps, bias=self.bias)


def rms_norm(eps: float = 1e-6) -> Norm:
    """The ``Norm`` of T5 and Llama: RMSNorm, no bias."""
    return Norm("rmsnorm", eps, bias=False)
