"""Greedy decoding, the uncached reference, and beam search, on tiny hand-built models."""
import pytest
import torch
from torch import nn

from attnbook.decoding import beam_search, greedy_decode, greedy_decode_uncached
from attnbook.models.transformer import Transformer, TransformerConfig

BOS, EOS = 1, 2


class TableModel(nn.Module):
    """A 'model' whose next-token log-probabilities depend only on the previous token: table[prev]."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.table = table  # (V, V) log-probabilities

    def start(self, src, src_lengths):
        return torch.zeros(src.shape[0])

    def step(self, tokens, state):
        return self.table[tokens], state

    def reorder_state(self, state, index):
        return state.index_select(0, index)


def trap_table() -> torch.Tensor:
    """Greedy takes token 3 (p=0.6) then is stuck with a 0.34 choice; token 4 (p=0.4) leads to
    <eos> with probability 1. Best sequence: [4] (0.4) beats [3, 5] (0.6 * 0.34 = 0.204)."""
    V = 6
    p = torch.full((V, V), 1e-9)
    p[BOS, 3], p[BOS, 4] = 0.6, 0.4
    p[3, 5], p[3, EOS], p[3, 0] = 0.34, 0.33, 0.33
    p[4, EOS] = 1.0
    p[5, EOS] = 1.0
    p[EOS, EOS] = 1.0
    p[0, EOS] = 1.0
    return (p / p.sum(-1, keepdim=True)).log()


def test_greedy_is_not_the_best_sequence_and_beam_finds_it():
    model = TableModel(trap_table())
    src, lengths = torch.zeros(1, 3, dtype=torch.long), torch.tensor([3])
    assert greedy_decode(model, src, lengths, BOS, EOS, 5) == [[3, 5]]
    assert beam_search(model, src, lengths, BOS, EOS, 5, beam_size=1) == [[3, 5]]
    assert beam_search(model, src, lengths, BOS, EOS, 5, beam_size=2) == [[4]]


def test_beam_search_needs_reorder_state():
    with pytest.raises(TypeError, match="reorder_state"):
        beam_search(nn.Linear(2, 2), torch.zeros(1, 2, dtype=torch.long), torch.tensor([2]), BOS, EOS, 3)


def tiny_transformer(seed: int) -> Transformer:
    torch.manual_seed(seed)
    model = Transformer(TransformerConfig(9, 10, d_model=16, num_heads=2, d_ff=32, dropout=0.0, tie_output=False))
    with torch.no_grad():
        model.readout.bias[EOS] -= 1.0  # longer outputs, so the test covers several steps
    return model.eval()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_one_equals_greedy_on_a_transformer(seed):
    model = tiny_transformer(seed)
    g = torch.Generator().manual_seed(seed)
    src, lengths = torch.randint(4, 9, (8, 6), generator=g), torch.tensor([6, 5, 4, 3, 6, 2, 1, 6])
    greedy = greedy_decode(model, src, lengths, BOS, EOS, 10)
    assert beam_search(model, src, lengths, BOS, EOS, 10, beam_size=1) == greedy
    assert greedy_decode_uncached(model, src, lengths, BOS, EOS, 10) == greedy


def test_wider_beam_never_scores_worse():
    """Beam 4's chosen output has a log-probability >= greedy's (length_penalty 0)."""
    model = tiny_transformer(5)
    src, lengths = torch.randint(4, 9, (6, 5), generator=torch.Generator().manual_seed(0)), torch.full((6,), 5)

    def logprob(row):
        state, tokens, total = model.start(src[i:i + 1], lengths[i:i + 1]), torch.tensor([BOS]), 0.0
        for tok in [*row, EOS]:
            logits, state = model.step(tokens, state)
            total += torch.log_softmax(logits, -1)[0, tok].item()
            tokens = torch.tensor([tok])
        return total

    greedy = greedy_decode(model, src, lengths, BOS, EOS, 30)
    beam = beam_search(model, src, lengths, BOS, EOS, 30, beam_size=4)
    with torch.no_grad():
        for i in range(6):
            assert logprob(beam[i]) >= logprob(greedy[i]) - 1e-5


def test_max_len_is_validated():
    model = TableModel(trap_table())
    src, lengths = torch.zeros(1, 3, dtype=torch.long), torch.tensor([3])
    for fn in (greedy_decode, greedy_decode_uncached, beam_search):
        with pytest.raises(ValueError, match="max_len"):
            fn(model, src, lengths, BOS, EOS, 0)
