"""Chapter 6's count rivals (attnbook.tasks.ngram_fill) on corpora small enough to count by hand."""
import pytest
import torch

from attnbook.tasks import ngram_fill as ng
from attnbook.tasks.masked_lm import MaskedInputs

PAD, UNK, CLS, SEP, MASK = range(5)
V = 12


def make(sentences):
    return ng.NGramFill(sentences, V, num_special=5, cls_id=CLS, sep_id=SEP, pad_id=PAD, mask_id=MASK)


def test_back_off_uses_the_widest_context_seen_and_backs_off_past_mask():
    # 6 follows 5 twice, 7 once; between 5 and 9 only 7 occurs
    fill = make([[5, 6, 8], [5, 6, 8], [5, 7, 9]])
    seen = torch.tensor([[CLS, 5, MASK, 9, SEP], [CLS, 5, MASK, MASK, SEP], [CLS, 10, 11, MASK, PAD]])
    got = fill.back_off_fill(seen, [(-1, 1), (-1,)], unigram_id=8)
    assert got[0, 2] == 7  # both neighbours (5, 9) seen: 7, not the left bigram's 6
    assert got[1, 2] == 6  # right neighbour is [MASK]: backs off to the left token 5 -> 6
    assert got[1, 3] == 8  # both neighbours [MASK]/[SEP] context never seen, left is [MASK]: unigram
    assert got[2, 3] == 8  # left 11 never seen in training: unigram
    visible = seen != MASK
    assert torch.equal(got[visible], seen[visible])  # every visible token is copied


def test_context_table_breaks_ties_by_first_occurrence():
    fill = make([[5, 7], [5, 6], [5, 6], [5, 7]])  # after 5: 7 and 6 twice each, 7 first
    context, target = fill.context_table((-1,))
    assert target[context == 5].tolist() == [7]
    fill = make([[5, 6], [5, 7], [5, 7]])  # 7 more often, though 6 came first
    context, target = fill.context_table((-1,))
    assert target[context == 5].tolist() == [7]


def test_position_and_right_bigram_fills():
    sentences = [[5, 6], [5, 7], [8, 7]]
    best = ng.most_frequent_by_position(sentences, V, exclude=range(5), length=4)
    assert best[1] == 5 and best[2] == 7  # position 0 is [CLS]: the verse starts at 1
    seen = torch.tensor([[CLS, MASK, MASK, SEP]])
    assert ng.position_unigram_fill(seen, best, MASK, unigram_id=7).tolist() == [[CLS, 5, 7, SEP]]
    bigrams = torch.zeros(V, V)
    for s in sentences:
        for a, b in zip([CLS, *s], [*s, SEP]):
            bigrams[a, b] += 1
    seen = torch.tensor([[CLS, MASK, 7, SEP], [CLS, MASK, MASK, SEP]])
    got = ng.right_bigram_fill(seen, bigrams, range(5), MASK, unigram_id=9)
    assert got[0, 1] == 5  # 7 comes after 5 once and after 8 once: the first max, 5
    assert got[1, 1] == 9  # the right token is [MASK]: unigram


def test_witten_bell_is_a_distribution_and_matches_the_formula():
    fill = make([[5, 6, 8], [5, 6, 9], [5, 7, 8]])
    lower = fill.unigram_p.expand(1, V)
    p = fill.witten_bell(lower, torch.tensor([5]), (-1,))[0]  # context: left token 5
    assert float(p.sum()) == pytest.approx(1.0)
    # C(5, 6) = 2, C(5, 7) = 1, C(5) = 3, N1(5) = 2
    assert float(p[6]) == pytest.approx((2 + 2 * lower[0, 6]) / 5)
    assert float(p[7]) == pytest.approx((1 + 2 * lower[0, 7]) / 5)
    never = fill.witten_bell(lower, torch.tensor([11]), (-1,))[0]  # context never seen
    assert torch.equal(never, lower[0])


def test_smoothed_theta_rule_and_nats():
    fill = make([[5, 6, 8], [5, 6, 8], [5, 6, 8]])
    seen = torch.tensor([[CLS, 5, MASK, 8, SEP], [CLS, 5, 10, 8, SEP]])
    targets = torch.tensor([[CLS, 5, 6, 8, SEP], [CLS, 5, 6, 8, SEP]])
    chosen = torch.tensor([[0, 1, 1, 0, 0], [0, 0, 1, 0, 0]], dtype=torch.bool)
    masked = MaskedInputs(seen, targets, chosen)
    found = fill.smoothed(masked)
    rows, cols, visible, p = found
    assert rows.tolist() == [0, 0, 1] and visible.tolist() == [5, MASK, 10]
    assert torch.allclose(p.sum(1), torch.ones(3, dtype=p.dtype))
    copies = fill.theta_rule(found, seen.shape, 0.0)
    assert copies[0, 1] == 5 and copies[1, 2] == 10  # theta 0 keeps every visible token
    assert copies[0, 2] == 6  # at [MASK]: the most likely token between 5 and 8
    checks = fill.theta_rule(found, seen.shape, 1.01)
    assert checks[1, 2] == 6  # theta above 1 replaces the random 10 by the likely 6
    # with copy weight 1, a visible token that is the target costs 0 nats
    assert fill.nats(masked, (rows[:1], cols[:1], visible[:1], p[:1]), lambda q: torch.ones_like(q)) == 0.0
    assert fill.nats(masked, found, lambda q: 0.5 * torch.ones_like(q)) > 0


def test_vocabulary_too_large_for_the_codes():
    with pytest.raises(ValueError, match="base 1024"):
        ng.NGramFill([[5]], 1024, num_special=5, cls_id=CLS, sep_id=SEP, pad_id=PAD, mask_id=MASK)
