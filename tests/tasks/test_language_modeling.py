"""Next-token loss, perplexity, logit filters on hand-made distributions, cached generation."""
import math

import pytest
import torch

from attnbook.models.gpt import GPT, GPTConfig
from attnbook.tasks.language_modeling import (
    choose_next, filter_logits, generate, generate_uncached, next_token_cross_entropy, next_token_loss, perplexity,
)


def probs_to_logits(*rows):
    return torch.tensor(rows).log()


def test_top_k_keeps_the_k_largest():
    logits = probs_to_logits([0.1, 0.4, 0.2, 0.3], [0.7, 0.1, 0.1, 0.1])
    kept = torch.isfinite(filter_logits(logits, top_k=2))
    assert kept.tolist() == [[False, True, False, True], [True, True, True, True]]  # ties at the k-th stay
    assert torch.isfinite(filter_logits(logits, top_k=10)).all()


def test_top_p_keeps_the_smallest_nucleus():
    logits = probs_to_logits([0.1, 0.4, 0.2, 0.3])
    assert torch.isfinite(filter_logits(logits, top_p=0.5)).tolist() == [[False, True, False, True]]  # 0.4+0.3
    assert torch.isfinite(filter_logits(logits, top_p=0.4)).tolist() == [[False, True, False, False]]
    assert torch.isfinite(filter_logits(logits, top_p=0.05)).tolist() == [[False, True, False, False]]  # top stays
    assert torch.isfinite(filter_logits(logits, top_p=1.0)).all()
    with pytest.raises(ValueError, match="top_p"):
        filter_logits(logits, top_p=0.0)


def test_choose_next_greedy_and_sampling_frequencies():
    logits = probs_to_logits([0.1, 0.6, 0.3])
    assert choose_next(logits).tolist() == [1]
    g = torch.Generator().manual_seed(0)
    draws = torch.stack([choose_next(logits.expand(1000, 3), 1.0, generator=g) for _ in range(4)]).flatten()
    freq = torch.bincount(draws, minlength=3) / draws.numel()
    torch.testing.assert_close(freq, torch.tensor([0.1, 0.6, 0.3]), atol=0.02, rtol=0)
    cold = choose_next(logits.expand(1000, 3), 0.05, generator=g)
    assert (cold == 1).float().mean() > 0.99  # low temperature -> nearly greedy
    assert set(choose_next(logits.expand(500, 3), 1.0, top_k=2, generator=g).tolist()) == {1, 2}


def test_loss_and_perplexity_of_a_uniform_model():
    class Uniform(torch.nn.Module):
        def forward(self, tokens):
            return torch.zeros(*tokens.shape, 7)

    loss = next_token_loss(Uniform(), torch.randint(7, (2, 5)))
    assert math.isclose(perplexity(loss.item()), 7.0, rel_tol=1e-5)
    with pytest.raises(ValueError, match="T >= 2"):
        next_token_loss(Uniform(), torch.zeros(2, 1, dtype=torch.long))


def test_next_token_cross_entropy_scores_each_target_from_the_tokens_before_it():
    class Echo(torch.nn.Module):  # sure that the next token repeats the current one
        def forward(self, tokens):
            return torch.nn.functional.one_hot(tokens, 5).float() * 50.0  # (B, T, V)

    tokens = torch.tensor([[1, 1, 2, 2], [3, 3, 3, 4]])
    per_target = next_token_cross_entropy(Echo(), tokens, reduction="none")  # (B, T-1)
    assert per_target.shape == (2, 3)
    assert (per_target < 1e-6).tolist() == [[True, False, True], [True, True, False]]
    torch.testing.assert_close(next_token_cross_entropy(Echo(), tokens, reduction="sum"), per_target.sum())
    torch.testing.assert_close(next_token_cross_entropy(Echo(), tokens), per_target.mean())
    torch.testing.assert_close(next_token_loss(Echo(), tokens), per_target.mean())
    with pytest.raises(ValueError, match="reduction must be 'mean', 'sum' or 'none', got 'max'"):
        next_token_cross_entropy(Echo(), tokens, reduction="max")


@pytest.mark.parametrize("temperature, top_k, top_p", [(0.0, None, None), (0.8, 5, None), (1.0, None, 0.9)])
def test_cached_generation_equals_recomputation(temperature, top_k, top_p):
    torch.manual_seed(0)
    model = GPT(GPTConfig(23, max_len=32, d_model=32, num_heads=4, d_ff=64, num_layers=2)).eval()
    prompt = torch.randint(23, (3, 4))
    a = generate(model, prompt, 10, temperature, top_k, top_p, torch.Generator().manual_seed(1))
    b = generate_uncached(model, prompt, 10, temperature, top_k, top_p, torch.Generator().manual_seed(1))
    assert a.shape == (3, 14) and torch.equal(a, b)
    assert torch.equal(a[:, :4], prompt)


def test_top_p_of_one_keeps_every_token_in_float32():
    """In float32 the running sum of 512 probabilities reaches 1.0 before the tail; top_p = 1.0
    must still keep every token (it dropped about 82 of 512 per row before the fix)."""
    logits = 3 * torch.randn(64, 512, generator=torch.Generator().manual_seed(0))  # float32
    probs = logits.sort(-1, descending=True).values.softmax(-1)
    assert (probs.cumsum(-1) - probs >= 1.0).any(), "the float32 sum never reaches 1: no test"
    assert not torch.isinf(filter_logits(logits, top_p=1.0)).any()
    assert torch.isinf(filter_logits(logits, top_p=0.9)).any()  # a real nucleus still cuts


def test_sample_stats_by_hand():
    from attnbook.tasks.language_modeling import sample_stats, words_of
    assert words_of("And God said, \"Let-there\" 12 be") == ["and", "god", "said", "let", "there", "be"]
    known = {"and", "god", "said"}
    stats = sample_stats(["and god and god zzz cut", "said qq"], known)
    # scored words (the last of each left out): and god and god zzz | said -> 1 of 6 invented
    assert stats["words"] == 6 and math.isclose(stats["invented"], 1 / 6)
    # pairs of text 1: (and god) (god and) (and god) (god zzz): 1 of 4 repeated; text 2: none
    assert math.isclose(stats["repeated_pairs"], 1 / 4)
    assert math.isclose(stats["distinct_pairs"], 3 / 4)
