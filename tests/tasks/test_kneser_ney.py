"""Interpolated Kneser-Ney counts (Chapter 9's strongest counting baseline)."""
import math

import pytest
import torch

from attnbook.tasks.token_stream import KneserNey


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_probabilities_sum_to_one_for_every_context_length(order):
    stream = torch.randint(7, (400,), generator=torch.Generator().manual_seed(0))
    model = KneserNey(stream, 7, order)
    for context in [(), (3,), (1, 3), (2, 1, 3), (6, 6, 6, 6, 6)]:  # seen, unseen, longer
        assert math.isclose(sum(model.prob(context, w) for w in range(7)), 1.0, rel_tol=1e-9)


def test_continuation_counts_and_discount_by_hand():
    # "a b a b a c": bigram counts ab 2, ba 2, ac 1; tokens preceded by: a {b}, b {a}, c {a}
    model = KneserNey(torch.tensor([0, 1, 0, 1, 0, 2]), 3, 2, discount=0.5)
    unigram_c = (1 - 0.5) / 3 + 0.5 * 3 / 3 * (1 / 3)  # continuation count 1 of 3 types
    assert math.isclose(model.prob((), 2), unigram_c)
    # after a: c(a, c) = 1 of 3, two distinct followers
    assert math.isclose(model.prob((0,), 2), (1 - 0.5) / 3 + 0.5 * 2 / 3 * unigram_c)


def test_held_out_loss_and_bad_arguments():
    stream = torch.randint(5, (300,), generator=torch.Generator().manual_seed(1))
    assert 0 < KneserNey(stream, 5, 3).held_out_loss(stream[:65], 16) < math.log(5) + 0.5
    with pytest.raises(ValueError, match="order"):
        KneserNey(stream, 5, 0)


def test_position_losses_average_to_the_held_out_loss():
    stream = torch.randint(7, (400,), generator=torch.Generator().manual_seed(0))
    kn = KneserNey(stream[:300], 7, order=3)
    per_position = kn.position_losses(stream[300:], 9)
    assert per_position.shape == (9,)
    assert math.isclose(per_position.mean().item(), kn.held_out_loss(stream[300:], 9), rel_tol=1e-9)


def test_fit_kneser_ney_picks_the_discount_on_the_training_tail():
    from attnbook.tasks.token_stream import fit_kneser_ney
    stream = torch.randint(5, (600,), generator=torch.Generator().manual_seed(0))
    cut = 540
    model, discount = fit_kneser_ney(stream, 5, order=2, grid=(0.3, 0.9), window=10)
    tail = {d: KneserNey(stream[:cut], 5, 2, d).held_out_loss(stream[cut:], 10) for d in (0.3, 0.9)}
    assert discount == min(tail, key=tail.get)
    assert model.discount == discount and len(model.grams[2]) == len(KneserNey(stream, 5, 2).grams[2])


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_next_token_probs_match_prob(order):
    stream = torch.randint(6, (400,), generator=torch.Generator().manual_seed(order))
    kn = KneserNey(stream[:300], 6, order=order, discount=0.7)
    contexts = torch.cat([stream[300:310].reshape(2, 5), torch.tensor([[5, 5, 5, 5, 5]])])
    for width in range(0, 6):
        got = kn.next_token_probs(contexts[:, :width] if width else contexts[:, :0])
        want = torch.tensor([[kn.prob(tuple(row), w) for w in range(6)]
                             for row in contexts[:, :width].tolist()], dtype=torch.float64)
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(got.sum(-1), torch.ones(3, dtype=torch.float64))


@pytest.mark.parametrize("order", [2, 3, 4])
def test_raw_at_start_matches_prob_and_the_lower_order_model(order):
    stream = torch.randint(6, (400,), generator=torch.Generator().manual_seed(order))
    kn = KneserNey(stream[:300], 6, order=order, discount=0.7, raw_at_start=True)
    contexts = torch.cat([stream[300:310].reshape(2, 5), torch.tensor([[5, 5, 5, 5, 5]])])
    for width in range(0, 6):
        got = kn.next_token_probs(contexts[:, :width] if width else contexts[:, :0])
        want = torch.tensor([[kn.prob(tuple(row), w) for w in range(6)]
                             for row in contexts[:, :width].tolist()], dtype=torch.float64)
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(got.sum(-1), torch.ones(3, dtype=torch.float64))
    # a context cut short to n - 1 tokens is scored as the n-gram model scores it (exactly
    # up to order 3; from order 4 the continuation counts differ at the stream's edges)
    for n in range(1, min(order, 3)):
        lower = KneserNey(stream[:300], 6, order=n, discount=0.7)
        context = tuple(stream[300 : 300 + n - 1].tolist())
        for w in range(6):
            assert math.isclose(kn.prob(context, w), lower.prob(context, w), rel_tol=1e-12)
    # and a full context is unchanged
    plain = KneserNey(stream[:300], 6, order=order, discount=0.7)
    full = tuple(stream[300 : 300 + order - 1].tolist())
    assert kn.prob(full, 3) == plain.prob(full, 3)
    short = tuple(stream[300 : 300 + min(1, order - 2)].tolist())  # raw counts at the top
    assert any(kn.prob(short, w) != plain.prob(short, w) for w in range(6))
