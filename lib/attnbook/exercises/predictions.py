"""Predict, then measure: the checker of an exercise whose answer is an experiment's outcome.

The reader writes a prediction (a fraction) into a variable *before* running a short experiment
the chapter sets up, then passes both to the chapter's checker, which calls ``check_prediction``:

1. no prediction yet, or no measurement yet: "not done yet", saying which step is next;
2. the measurement is compared with the range committed in the chapter's checker module (the
   runs that made it are written beside it), which catches a wrong experiment;
   (a measurement that matches one of the outcome's known wrong experiments is named);
3. the prediction is compared with that range, and the gap is explained: the exercise still
   passes (the point is to find out), but a prediction outside the range gets its own line,
   marked ✗ "prediction off", with the explanation for its side of the range.

Line 2 prints ``label: 41.3% (expected 30.0%–50.0%) ok``, the form the notebooks' output
sanitizer masks; line 3 depends only on the prediction and the range, so it is stable.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from attnbook.exercises.core import CheckResult


PREDICTION_OFF = "prediction off"


@dataclass(frozen=True)
class Outcome:
    """What one experiment is expected to measure, and what to say about each prediction."""

    exercise: str  # the checker's name, e.g. "reversal on length 8"
    label: str  # what was measured, e.g. "accuracy on length 8"
    low: float  # the committed range of the measurement (fractions)
    high: float
    how_to_measure: str  # one sentence: the experiment, for "not done yet" and a bad measurement
    below: str  # why the outcome is higher than a prediction below the range
    inside: str  # what a prediction inside the range understood
    above: str  # why the outcome is lower than a prediction above the range
    # known wrong experiments: (low, high, name, message) for a measurement in [low, high]
    # outside the range, e.g. the score of another model
    mistakes: tuple[tuple[float, float, str, str], ...] = ()


def _as_number(value: object) -> float | None:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return float(value)


def _verdict(outcome: Outcome, passed: bool, text: str, diagnosis: str = "") -> CheckResult:
    message = f"{'✓' if passed else '✗'} {outcome.exercise}: {text}"
    print(message)
    return CheckResult(outcome.exercise, passed, message, diagnosis)


def check_prediction(outcome: Outcome, prediction: object, measured: object) -> CheckResult:
    """Check a measurement against ``outcome``'s range and explain the prediction's gap."""
    if prediction is None:
        return _verdict(outcome, False, "not done yet: write your prediction (a fraction from 0 "
                        "to 1) before you measure; then " + outcome.how_to_measure)
    guess = _as_number(prediction)
    if guess is None or not 0.0 <= guess <= 1.0:
        return _verdict(outcome, False, f"the prediction must be a fraction from 0 to 1, got "
                        f"{prediction!r}" + (" (a percentage? divide by 100)" if guess and
                                             1 < guess <= 100 else "."), "prediction not a fraction")
    if measured is None:
        return _verdict(outcome, False, "not done yet: your prediction is written; now "
                        + outcome.how_to_measure)
    value = _as_number(measured)
    expected = f"(expected {100 * outcome.low:.1f}%–{100 * outcome.high:.1f}%)"
    if value is None or not outcome.low <= value <= outcome.high:
        known = next((m for m in outcome.mistakes if value is not None and m[0] <= value <= m[1]), None)
        if known is not None:
            return _verdict(outcome, False, f"{outcome.label}: got {measured!r} {expected}; {known[3]}",
                            known[2])
        percent = value is not None and 1 < value <= 100 and outcome.low <= value / 100 <= outcome.high
        hint = ("give the measurement as a fraction, not a percentage." if percent else
                "that is not what this experiment measures: " + outcome.how_to_measure)
        return _verdict(outcome, False, f"{outcome.label}: got {measured!r} {expected}; {hint}",
                        "measurement a percentage" if percent else "wrong measurement")
    # a miss is marked ✗ on its own line: the exercise is done (✓), the prediction was not right
    if guess < outcome.low:
        verdict = (f"✗ {PREDICTION_OFF}: your prediction, {guess:.1%}, is below the measured "
                   f"range. {outcome.below}")
    elif guess > outcome.high:
        verdict = (f"✗ {PREDICTION_OFF}: your prediction, {guess:.1%}, is above the measured "
                   f"range. {outcome.above}")
    else:
        verdict = f"your prediction, {guess:.1%}, is inside the measured range. {outcome.inside}"
    return _verdict(outcome, True, f"{outcome.label}: {100 * value:.1f}% {expected} ok\n   {verdict}")
