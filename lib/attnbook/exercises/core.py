"""The machinery every exercise checker shares.

A checker is a list of ``Case`` objects (known inputs and the answer they must give) and a list
of ``Mistake`` objects (known wrong answers). ``run_cases`` runs the reader's function on fresh
copies of each case's inputs, fails if the function changed an input in place, compares the
output with the expected one, and, when the output is wrong, looks for the known mistake that
gives exactly that output: then the verdict names the mistake in one line before showing the
failing case.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn


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
    reveal: bool = True  # False: a failure does not print `expected` (it answers a prediction)


@dataclass(frozen=True)
class Mistake:
    """A known wrong answer and the one line that names it.

    ``gives`` takes the exercise's arguments and returns what the mistaken answer would return;
    the mistake is diagnosed when the reader's output equals it (within the case's tolerance).
    ``when(args, got)`` is the alternative: a predicate on the reader's output. ``name`` is a
    short identifier (tests assert which mistake was diagnosed).
    """

    name: str
    message: str
    gives: Callable | None = None
    when: Callable[[tuple, object], bool] | None = None

    def matches(self, args: tuple, got: object, case: Case) -> bool:
        try:
            if self.gives is not None:
                with torch.no_grad():
                    wrong = self.gives(*_fresh(args), **case.kwargs)
                return compare(got, wrong, case.atol, case.rtol) is None
            if self.when is not None:
                return bool(self.when(args, got))
        except Exception:  # noqa: BLE001 - a mistake that cannot run on this case does not match
            return False
        return False


@dataclass(frozen=True)
class CheckResult:
    """Verdict of one checker run; ``bool(result)`` is True when every case passed.

    ``diagnosis`` is the ``name`` of the known mistake the output matched ("" if none), or
    ``MUTATION`` when the function changed one of its inputs in place.
    """

    exercise: str
    passed: bool
    message: str
    diagnosis: str = ""

    def __bool__(self) -> bool:
        return self.passed

    def _ipython_display_(self) -> None:
        """The verdict is printed by the checker; show nothing more in a notebook."""


MUTATION = "mutated input"


def _short(value: object) -> str:
    if isinstance(value, torch.Tensor):
        if value.numel() > 24:
            return f"a tensor of shape {tuple(value.shape)}, dtype {value.dtype}"
        return f"{value.detach().cpu()} (shape {tuple(value.shape)}, dtype {value.dtype})"
    if isinstance(value, tuple) and _holds_tensors(value):
        return "(" + ", ".join(_short(v) for v in value) + ")"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        parts = [f"{f.name} of shape {tuple(getattr(value, f.name).shape)}"
                 if isinstance(getattr(value, f.name), torch.Tensor) else f"{f.name}={getattr(value, f.name)!r}"
                 for f in dataclasses.fields(value)]
        return f"{type(value).__name__}({', '.join(parts)})"
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
    if dataclasses.is_dataclass(expected) and not isinstance(expected, type):
        if type(got) is not type(expected):
            return f"expected a {type(expected).__name__}, got {type(got).__name__}"
        for f in dataclasses.fields(expected):
            problem = compare(getattr(got, f.name), getattr(expected, f.name), atol, rtol)
            if problem:
                return f"{f.name}: {problem}"
        return None
    if isinstance(expected, (tuple, list)) and _holds_tensors(expected):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return f"expected a {type(expected).__name__} of {len(expected)} items, got {_kind(got)}"
        for n, (g, e) in enumerate(zip(got, expected)):
            problem = compare(g, e, atol, rtol)
            if problem:
                return f"item {n}: {problem}"
        return None
    if isinstance(expected, float):
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.item()
        if not isinstance(got, (int, float)) or abs(got - expected) > atol + rtol * abs(expected):
            return "values differ"
        return None
    if isinstance(expected, tuple) and isinstance(got, list):
        got = tuple(got)  # a pair returned as a list is still the pair
    if isinstance(got, torch.Tensor) and not isinstance(expected, torch.Tensor):
        return f"expected a {type(expected).__name__}, got a tensor"
    try:
        return None if bool(got == expected) else "values differ"
    except Exception:  # noqa: BLE001 - e.g. a list holding tensors of several values
        return f"expected {_kind(expected)}, got {_kind(got)}"


def _kind(value: object) -> str:
    return f"a {type(value).__name__} of {len(value)} items" if isinstance(value, (tuple, list)) else type(value).__name__


def _holds_tensors(value: object) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (tuple, list)):
        return any(_holds_tensors(v) for v in value)
    return dataclasses.is_dataclass(value) and not isinstance(value, type)


def _fresh(value: object) -> object:
    """A copy of a case's argument that the reader may change without harming the case."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, list):
        return [_fresh(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_fresh(v) for v in value)
    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    if isinstance(value, set):
        return set(value)  # members of a set are hashable, so immutable enough to share
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: _fresh(getattr(value, f.name))
                                             for f in dataclasses.fields(value) if f.init})
    return value  # modules, functions, stand-in models, numbers: shared (modules are checked below)


def _snapshot(value: object) -> object:
    """What ``_changed`` compares with after the call (None: not checked)."""
    if isinstance(value, nn.Module):
        return {k: v.detach().clone() for k, v in value.state_dict().items()}
    return _fresh(value)


def _changed(before: object, after: object) -> bool:
    if isinstance(after, nn.Module):
        now = after.state_dict()
        return now.keys() != before.keys() or any(not torch.equal(now[k], before[k]) for k in now)
    if isinstance(before, torch.Tensor):
        return (before.shape != after.shape or before.dtype != after.dtype
                or not torch.equal(before, after.detach()))
    if isinstance(before, (list, tuple)):
        return len(before) != len(after) or any(_changed(b, a) for b, a in zip(before, after))
    if isinstance(before, dict):
        return before.keys() != after.keys() or any(_changed(before[k], after[k]) for k in before)
    if dataclasses.is_dataclass(before) and not isinstance(before, type):
        return any(_changed(getattr(before, f.name), getattr(after, f.name)) for f in dataclasses.fields(before))
    try:
        return bool(before != after)
    except Exception:  # noqa: BLE001 - objects without a usable == are not checked
        return False


def _parameter_names(fn: Callable, count: int) -> list[str]:
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    return [names[i] if i < len(names) else f"argument {i + 1}" for i in range(count)]


def run_cases(
    exercise: str, reader_fn: Callable, cases: Sequence[Case], mistakes: Sequence[Mistake] = (),
) -> CheckResult:
    """Run ``reader_fn`` on every case, print a verdict, return a ``CheckResult``.

    Each call gets fresh copies of the case's tensors and lists; afterwards they (and any module
    argument's parameters) must be unchanged. A wrong output is matched against ``mistakes`` in
    order and the first that gives the same output is named in the verdict.
    """
    if not callable(reader_fn):
        return _finish(exercise, False, f"expected a function, got {type(reader_fn).__name__}")
    for n, case in enumerate(cases, start=1):
        args = tuple(_fresh(a) for a in case.args)
        before = [_snapshot(a) for a in args]
        try:
            got = reader_fn(*args, **case.kwargs)
        except NotImplementedError:
            return _finish(exercise, False, "not done yet: the function still raises NotImplementedError.")
        except Exception as err:  # noqa: BLE001 - the reader's code may raise anything
            where = traceback.extract_tb(err.__traceback__)[-1]
            text = (f"case {n} ({case.description}) raised {type(err).__name__}: {err}\n"
                    f"   at line {where.lineno}: {where.line}")
            return _finish(exercise, False, text + (f"\n   hint: {case.hint}" if case.hint else ""))
        names = _parameter_names(reader_fn, len(args))
        changed = [name for name, b, a in zip(names, before, args) if _changed(b, a)]
        if changed:
            return _finish(
                exercise, False,
                f"your function changed its input {', '.join(f'`{c}`' for c in changed)} in place; "
                f"leave inputs as they are and build new lists/tensors.\n"
                f"   failing case {n} ({case.description}).",
                MUTATION,
            )
        problem = compare(got, case.expected, case.atol, case.rtol)
        if problem:
            found = next((m for m in mistakes if m.matches(case.args, got, case)), None)
            detail = (f"expected: {_short(case.expected)}\n   got:      {_short(got)}" if case.reveal
                      else f"got:      {_short(got)} (the expected answer is not shown: it answers "
                           "the prediction)")
            if found is not None:
                return _finish(
                    exercise, False,
                    f"{found.message}\n   failing case {n} ({case.description}): {problem}.\n   {detail}",
                    found.name,
                )
            text = f"case {n} ({case.description}): {problem}.\n   {detail}"
            if case.hint:
                text += f"\n   hint: {case.hint}"
            return _finish(exercise, False, text)
    return _finish(exercise, True, f"all {len(cases)} cases pass.")


def _finish(exercise: str, passed: bool, detail: str, diagnosis: str = "") -> CheckResult:
    message = f"{'✓' if passed else '✗'} {exercise}: {detail}"
    print(message)
    return CheckResult(exercise, passed, message, diagnosis)



def no_grad(fn: Callable) -> Callable:
    """``fn`` run under ``torch.no_grad()`` (for exercises that call modules), same signature."""
    if not callable(fn):
        return fn

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with torch.no_grad():
            return fn(*args, **kwargs)

    return wrapped
