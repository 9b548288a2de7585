"""Induction heads: the data, the induction targets and scores, the attention-only model."""
import pytest
import torch

from attnbook.models.attention_only import AttentionOnly
from attnbook.tasks.induction import half_losses, induction_scores, induction_targets, repeated_segments


def test_repeated_segments_repeat_with_varying_lengths():
    tokens, lengths = repeated_segments(64, 20, 50, 3, 10, torch.Generator().manual_seed(0))
    assert tokens.shape == (64, 20) and lengths.min() >= 3 and lengths.max() <= 10
    assert len(set(lengths.tolist())) > 3
    for row, L in zip(tokens, lengths.tolist()):
        assert torch.equal(row[:L], row[L: 2 * L])
    with pytest.raises(ValueError, match="max_segment"):
        repeated_segments(2, 10, 5, 3, 6)


def test_induction_targets_by_hand():
    tokens = torch.tensor([[5, 6, 7, 5, 6, 5]])
    # position 3 (5): previous 5 at 0 -> target 1; position 4 (6): previous 6 at 1 -> 2;
    # position 5 (5): the *latest* previous 5 is at 3 -> 4
    assert induction_targets(tokens).tolist() == [[-1, -1, -1, 1, 2, 4]]


def test_induction_score_of_a_perfect_and_of_a_previous_token_head():
    tokens = torch.tensor([[5, 6, 7, 5, 6, 7]])
    targets = induction_targets(tokens)[0]
    perfect = torch.zeros(1, 2, 6, 6)
    for i, t in enumerate(targets.tolist()):
        perfect[0, 0, i, t if t >= 0 else 0] = 1.0
        perfect[0, 1, i, max(i - 1, 0)] = 1.0  # previous-token head
    torch.testing.assert_close(induction_scores(perfect, tokens), torch.tensor([1.0, 0.0]))


def test_attention_only_model_is_causal_and_returns_maps_when_asked():
    torch.manual_seed(0)
    model = AttentionOnly(11, 12, d_model=16, num_heads=2, num_layers=2).eval()
    tokens = torch.randint(11, (3, 9))
    changed = tokens.clone()
    changed[:, 5] = (changed[:, 5] + 1) % 11
    with torch.no_grad():
        a, b = model(tokens), model(changed)
        logits, maps = model(tokens, need_weights=True)
    torch.testing.assert_close(a[:, :5], b[:, :5])
    assert not torch.allclose(a[:, 5:], b[:, 5:])
    assert logits.shape == (3, 9, 11) and len(maps) == 2 and maps[0].shape == (3, 2, 9, 9)
    assert torch.all(maps[1].triu(1) == 0)
    with pytest.raises(ValueError, match="longer than max_len=12"):
        model(torch.zeros(1, 13, dtype=torch.long))


def test_half_losses_split_first_and_repeated_copy():
    class Copier(torch.nn.Module):  # predicts the token L back, knowing L=3: perfect on the second copy
        def forward(self, x):
            out = torch.zeros(*x.shape, 8)
            shifted = torch.roll(x, 2, dims=1)  # x[t-2]: in the second copy, token t+1 is token t+1-3
            out.scatter_(-1, shifted[..., None], 30.0)
            return out
    tokens = torch.tensor([[1, 2, 3, 1, 2, 3, 4, 5]])
    first, second = half_losses(Copier(), tokens, torch.tensor([3]))
    assert second < 1e-6 and first > 1.0


def test_prefix_matching_score_reads_second_copies_only():
    from attnbook.tasks.induction import previous_token_scores
    tokens = torch.tensor([[1, 2, 3, 1, 2, 3, 5, 5]])  # L = 3; a chance repeat at 7
    lengths = torch.tensor([3])
    weights = torch.zeros(1, 2, 8, 8)
    for i in (3, 4, 5):  # head 0: the token after the first copy
        weights[0, 0, i, i - 3 + 1] = 1.0
    weights[0, 0, 7, 0] = 1.0  # ... not at the chance repeat (its target is 7)
    weights[0, 1] = torch.diag(torch.ones(7), -1)  # head 1: the previous token
    scores = induction_scores(weights, tokens, lengths)
    assert torch.allclose(scores, torch.tensor([1.0, 0.0]))
    assert induction_scores(weights, tokens)[0] < 1.0  # the old score counts position 7 too
    previous = previous_token_scores(weights)
    assert previous.shape == (2, 7) and torch.allclose(previous[1], torch.ones(7))
