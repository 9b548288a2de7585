"""The copying baseline and the first-copy split of Chapter 8's induction section."""
import math

import torch

from attnbook.tasks.induction import copy_predictions, copying_baseline, repeated_segments


def test_copy_predictions_use_the_last_earlier_occurrence():
    tokens = torch.tensor([[5, 1, 5, 2, 5, 7]])
    # after position 2 (a 5): the last earlier 5 is at 0, followed by 1; after 4: by 2
    assert copy_predictions(tokens).tolist() == [[-1, -1, 1, -1, 2, -1]]


def test_copying_baseline_is_right_on_a_clean_repeat():
    tokens = torch.tensor([[1, 2, 3, 4, 1, 2, 3, 4]])  # no chance repeats: every guess right
    share, loss, count = copying_baseline(tokens, torch.tensor([4]), 10, epsilon=0.1)
    assert (share, count) == (1.0, 3)
    assert math.isclose(loss, -math.log(0.9 + 0.1 / 10))


def test_copying_baseline_is_wrong_after_a_chance_repeat():
    # segment 7 7 9, repeated; after position 3 (a 7) the last earlier 7 (position 1) is
    # followed by 9, but the copy goes on with 7: chance repeats mislead the rule
    tokens = torch.tensor([[7, 7, 9, 7, 7, 9]])
    share, _, count = copying_baseline(tokens, torch.tensor([3]), 10, epsilon=0.5)
    assert count == 2 and share < 1.0


def test_copying_baseline_on_random_segments_is_mostly_right():
    tokens, lengths = repeated_segments(64, 32, 64, 6, 16, torch.Generator().manual_seed(0))
    share, loss, _ = copying_baseline(tokens, lengths, 64, epsilon=0.15)
    assert 0.7 < share < 0.95 and loss < math.log(64)
