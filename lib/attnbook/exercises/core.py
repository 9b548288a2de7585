"""The machinery every exercise checker shares."""
from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch


@dataclass(frozen=True)
class Case:
    """One known input and the answer it must give."""

    description: str
    args: tuple
    expected: object
    hint: str = ""
    atol: float = 1e-5
    rtol: float = 1e-5
    kwargs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class CheckResult:
    """Verdict of one checker run; ``bool(result)`` is True when every case passed."""

    exercise: str
    passed: bool
    message: str

    def __bool__(self) -> bool:
        return self.passed

    def _ipython_display_(self) -> None:
        """The verdict is printed by the checker; show nothing more in a notebook."""


def _short(value: object) -> str:
    if isinstance(value, torch.Tensor):
        body = str(value.detach().cpu()) if value.numel() <= 24 else f"tensor of shape {tuple(value.shape)}"
        return f"{body} (shape {tuple(value.shape)}, dtype {value.dtype})"
    text = repr(value)
    return text if len(text) < 300 else text[:300] + " ..."


def compare(got: object, expected: object, atol: float, rtol: float) -> str | None:
    """None if ``got`` matches ``expected``; otherwise a sentence saying how it differs."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"expected a tensor, got {type(got).__name__}"
        if got.shape != expected.shape:
            return f"expected shape {tuple(expected.shape)}, got shape {tuple(got.shape)}"
        if got.dtype != expected.dtype and not (got.is_floating_point() and expected.is_floating_point()):
            return f"expected dtype {expected.dtype}, got {got.dtype}"
        got_c, exp_c = got.detach().cpu(), expected.detach().cpu()
        if exp_c.is_floating_point():
            if not torch.allclose(got_c.to(exp_c.dtype), exp_c, atol=atol, rtol=rtol, equal_nan=True):
                worst = (got_c.to(exp_c.dtype) - exp_c).abs().nan_to_num(float("inf")).max().item()
                return f"values differ (largest difference {worst:.3g})"
        elif not torch.equal(got_c, exp_c):
            return f"values differ at {int((got_c != exp_c).sum())} of {exp_c.numel()} positions"
        return None
    if isinstance(expected, float):
        if not isinstance(got, (int, float)) or abs(got - expected) > atol + rtol * abs(expected):
            return "values differ"
        return None
    return None if got == expected else "values differ"


def run_cases(exercise: str, reader_fn: Callable, cases: Sequence[Case]) -> CheckResult:
    """Run ``reader_fn`` on every case, print a verdict, return a ``CheckResult``."""
    if not callable(reader_fn):
        return _finish(exercise, False, f"expected a function, got {type(reader_fn).__name__}")
    for n, case in enumerate(cases, start=1):
        args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in case.args)
        try:
            got = reader_fn(*args, **case.kwargs)
        except NotImplementedError:
            return _finish(exercise, False, "not done yet: the function still raises NotImplementedError.")
        except Exception as err:  # noqa: BLE001 - the reader's code may raise anything
            where = traceback.extract_tb(err.__traceback__)[-1]
            return _finish(
                exercise, False,
                f"case {n} ({case.description}) raised {type(err).__name__}: {err}\n"
                f"   at line {where.lineno}: {where.line}\n   hint: {case.hint}" if case.hint else
                f"case {n} ({case.description}) raised {type(err).__name__}: {err} (line {where.lineno})",
            )
        problem = compare(got, case.expected, case.atol, case.rtol)
        if problem:
            text = (f"case {n} ({case.description}): {problem}.\n"
                    f"   expected: {_short(case.expected)}\n   got:      {_short(got)}")
            if case.hint:
                text += f"\n   hint: {case.hint}"
            return _finish(exercise, False, text)
    return _finish(exercise, True, f"all {len(cases)} cases pass.")


def _finish(exercise: str, passed: bool, detail: str) -> CheckResult:
    message = f"{'✓' if passed else '✗'} {exercise}: {detail}"
    print(message)
    return CheckResult(exercise, passed, message)
