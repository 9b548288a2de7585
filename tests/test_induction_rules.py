"""The copying rules that read every earlier occurrence (Chapter 8's baselines), on a case
worked by hand."""
import math

import pytest
import torch

from attnbook.tasks.induction import copying_baseline, fit_rule_epsilon, occurrence_rule_loss

# one sequence, segment length 3: the scored targets are positions 4 and 5.
# target 4 (token 0) follows token 2, new in the sequence: uniform, ln V.
# target 5 (token 1) follows token 0, seen at 0 and 2, followed there by 1 and by 2.
TOKENS = torch.tensor([[0, 1, 0, 2, 0, 1]])
LENGTHS = torch.tensor([3])
V, EPS = 4, 0.2


@pytest.mark.parametrize("rule, p_right", [
    ("all", (1 - EPS) / 2 + EPS / V),  # half the mass on 1, half on 2
    ("first", (1 - EPS) + EPS / V),  # what followed position 0: 1, right
])
def test_rules_by_hand(rule, p_right):
    expected = (math.log(V) - math.log(p_right)) / 2
    assert occurrence_rule_loss(TOKENS, LENGTHS, V, EPS, rule) == pytest.approx(expected)


def test_the_last_occurrence_rule_is_wrong_here():
    share, loss, count = copying_baseline(TOKENS, LENGTHS, V, EPS)  # follows position 2: 2
    assert count == 2 and share == 0.0
    assert loss == pytest.approx((math.log(V) - math.log(EPS / V)) / 2)


def test_unknown_rule_and_fitted_epsilon():
    with pytest.raises(ValueError):
        occurrence_rule_loss(TOKENS, LENGTHS, V, EPS, "last")
    assert fit_rule_epsilon(TOKENS, LENGTHS, V, "first") == 0.01  # always right: smallest
