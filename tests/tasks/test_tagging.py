"""The synthetic position tasks and the one-layer self-attention tagger."""
import pytest
import torch

from attnbook.data.synthetic import IGNORE, neighbours_task, reversal_task, task_batches
from attnbook.models.tagger import SelfAttentionTagger
from attnbook.tasks.tagging import tagging_accuracy, tagging_loss


def test_reversal_task_targets_and_distinct_tokens():
    tokens, targets = reversal_task(5, 6, 10, torch.Generator().manual_seed(0))
    assert tokens.shape == (5, 6) and targets.shape == (5, 6, 1)
    assert torch.equal(targets[..., 0], tokens.flip(1))
    for row in tokens:
        assert len(set(row.tolist())) == 6
    assert torch.all(targets[..., 0] != tokens)  # even length: no position answers itself
    with pytest.raises(ValueError, match="even"):
        reversal_task(2, 5, 10, torch.Generator())


def test_neighbours_task_targets():
    tokens, targets = neighbours_task(3, 5, 7, torch.Generator().manual_seed(0))
    assert targets.shape == (3, 5, 2)
    assert torch.equal(targets[:, 1:, 0], tokens[:, :-1]) and torch.equal(targets[:, :-1, 1], tokens[:, 1:])
    assert torch.all(targets[:, 0, 0] == IGNORE) and torch.all(targets[:, -1, 1] == IGNORE)


def test_task_batches_are_deterministic():
    a = next(task_batches(neighbours_task, 4, 6, 9, torch.Generator().manual_seed(1)))
    b = next(task_batches(neighbours_task, 4, 6, 9, torch.Generator().manual_seed(1)))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_order_blind_tagger_is_permutation_equivariant():
    torch.manual_seed(0)
    model = SelfAttentionTagger(10, 16, 2, 8, positional="none").eval()
    tokens = torch.randint(10, (2, 8))
    perm = torch.randperm(8)
    torch.testing.assert_close(model(tokens)[:, perm], model(tokens[:, perm]), atol=1e-5, rtol=1e-5)
    with_position = SelfAttentionTagger(10, 16, 2, 8, positional="sinusoidal").eval()
    assert not torch.allclose(with_position(tokens)[:, perm], with_position(tokens[:, perm]), atol=1e-3)


def test_tagger_shapes_loss_and_accuracy():
    model = SelfAttentionTagger(7, 8, 2, 5, positional="learned", num_outputs=2)
    tokens, targets = neighbours_task(3, 5, 7, torch.Generator().manual_seed(0))
    logits, weights = model(tokens, need_weights=True)
    assert logits.shape == (3, 5, 2, 7) and weights.shape == (3, 2, 5, 5)
    loss = tagging_loss(model, (tokens, targets))
    assert loss.dim() == 0 and torch.isfinite(loss)
    acc = tagging_accuracy(model, tokens, targets)
    assert set(acc) == {"answer", "position", "output0", "output1"}
    assert all(0.0 <= v <= 1.0 for v in acc.values())
    with pytest.raises(ValueError, match="positional"):
        SelfAttentionTagger(7, 8, 2, 5, positional="rotary")


def test_accuracy_of_a_perfect_predictor_is_one():
    class Oracle(torch.nn.Module):
        def __init__(self, targets):
            super().__init__()
            self.targets = targets

        def forward(self, tokens):
            return torch.nn.functional.one_hot(self.targets.clamp(min=0), 7).float()

    tokens, targets = neighbours_task(3, 5, 7, torch.Generator().manual_seed(0))
    acc = tagging_accuracy(Oracle(targets), tokens, targets)
    assert acc == {"answer": 1.0, "position": 1.0, "output0": 1.0, "output1": 1.0}


def test_tagger_rejects_bad_sizes():
    with pytest.raises(ValueError, match="num_outputs"):
        SelfAttentionTagger(10, 16, 2, 8, num_outputs=0)
    with pytest.raises(ValueError, match="positional"):
        SelfAttentionTagger(10, 16, 2, 8, positional="rotary")
    with pytest.raises(ValueError, match="divisible"):
        SelfAttentionTagger(10, 18, 4, 8)
