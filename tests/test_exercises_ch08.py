"""Chapter 8 checkers: each accepts the reference solution, rejects a table of plausible wrong
answers, and names the mistake where it knows it."""
import math
from collections import Counter

import pytest
import torch

import torch.nn.functional as F

from attnbook.exercises.ch08 import (
    INVENTED_RANGES, causal_pairs, check_attention_pairs, check_bpe_merges,
    check_invented_prediction, check_lm_loss, check_padded_loss, check_perplexity, check_top_p,
    check_window_prediction,
    check_greedy_cached, decoding_calls,
)
from attnbook.tasks.language_modeling import filter_logits, generate, generate_uncached
from conftest import assert_rejected


# --- reference solutions (as in the chapter) ---

def perplexity(losses):
    total = sum(float(x.sum()) for x in losses)
    count = sum(x.numel() for x in losses)
    return math.exp(total / count)


def bpe_merges(pieces, first_id, min_count, *, once_per_piece=False, weighted=True,
               strict=False, tie=None, right_to_left=False, same_id=False):
    """The chapter's solution; the keyword arguments write plausible wrong answers."""
    merges, new_id = [], first_id
    while True:
        counts = {}
        for ids, n in pieces.items():
            pairs = list(zip(ids, ids[1:]))
            for pair in (set(pairs) if once_per_piece else pairs):
                counts[pair] = counts.get(pair, 0) + (n if weighted else 1)
        if not counts:
            break
        best = (tie or (lambda c: min(c, key=lambda pair: (-c[pair], pair))))(counts)
        if counts[best] < min_count or (strict and counts[best] <= min_count):
            break
        merges.append(best)
        if right_to_left:
            pieces = {tuple(_merge(list(ids)[::-1], best[::-1], new_id))[::-1]: n
                      for ids, n in pieces.items()}
        else:
            pieces = {tuple(_merge(list(ids), best, new_id)): n for ids, n in pieces.items()}
        new_id += 0 if same_id else 1
    return merges, pieces


def top_p(logits, p):
    if p >= 1.0:  # in float32 the running sum can reach 1.0 before the tail
        return logits.clone()
    probs, order = logits.softmax(-1).sort(dim=-1, descending=True, stable=True)
    drop_sorted = probs.cumsum(-1) - probs >= p
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def greedy_cached(model, prompt, num_new, *, steps_before=False, keep_state=True,
                  new_only=False, feed=None, count=None, extra_step=False):
    """The chapter's solution; the keyword arguments write plausible wrong answers."""
    out = [prompt]
    logits, state = model.start(prompt)
    first_state, first = state, None
    if steps_before:  # the prompt's last token fed to step again
        logits, state = model.step(prompt[:, -1], state)
    for i in range(num_new if count is None else count):
        token = logits.argmax(-1)  # (B,)
        first = token if first is None else first
        out.append(token[:, None])
        if i + 1 < num_new or extra_step:
            fed = first if feed == "first" else token
            logits, new_state = model.step(fed, state if keep_state else first_state)
            state = new_state
    tokens = torch.cat(out, 1)
    return tokens[:, prompt.shape[1]:] if new_only else tokens


def lm_loss(model, tokens):
    logits = model(tokens[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def attention_pairs(prompt_len, num_new, *, square=False, positions=False, calls=None,
                    step_keys="all", cached_calls=None):
    """The chapter's solution; the keyword arguments write plausible wrong answers."""
    def per_call(length):  # a call over `length` positions, no cache
        return length if positions else length * length if square else length * (length + 1) // 2

    recomputed = sum(per_call(prompt_len + i) for i in range(num_new if calls is None else calls))
    cached = per_call(prompt_len)  # start reads the prompt
    for i in range(1, num_new if cached_calls is None else cached_calls):  # the steps
        length = prompt_len + i  # the new query is position `length`
        cached += (1 if positions or step_keys == "one" else
                   length - prompt_len + 1 if step_keys == "generated" else length)
    return recomputed, cached


@pytest.mark.parametrize("check, solution", [
    (check_perplexity, perplexity), (check_bpe_merges, bpe_merges),
    (check_top_p, top_p), (check_greedy_cached, greedy_cached),
    (check_lm_loss, lm_loss), (check_attention_pairs, attention_pairs),
])
def test_reference_passes(check, solution, capsys):
    assert check(solution)
    assert "✓" in capsys.readouterr().out


def not_done(*args):
    raise NotImplementedError


@pytest.mark.parametrize("check", [check_perplexity, check_bpe_merges, check_top_p,
                                   check_greedy_cached, check_lm_loss,
                                   check_attention_pairs])
def test_stub_is_not_done(check, capsys):
    assert not check(not_done)
    assert "not done yet" in capsys.readouterr().out


def expect_rejected(check, wrong, capsys, diagnosis=None):
    assert not check(wrong)
    out = capsys.readouterr().out
    assert out.startswith("✗")
    if diagnosis is not None:
        assert diagnosis in out.splitlines()[0], out


# --- perplexity ---

def test_perplexity_wrong_answers(capsys):
    expect_rejected(check_perplexity, lambda ls: math.exp(sum(float(x.mean()) for x in ls) / len(ls)),
                    capsys, "mean losses")
    expect_rejected(check_perplexity, lambda ls: sum(math.exp(float(x.mean())) for x in ls) / len(ls),
                    capsys, "per-sequence perplexities")
    expect_rejected(check_perplexity, lambda ls: 2 ** float(torch.cat(ls).mean()), capsys, "nats")
    expect_rejected(check_perplexity, lambda ls: float(torch.cat(ls).mean()), capsys, "its exp")
    # the mean loss turned into bits, then exp: a mix of the two bases
    expect_rejected(check_perplexity, lambda ls: math.exp(float(torch.cat(ls).mean()) / math.log(2)),
                    capsys, "converted the mean loss to bits")
    expect_rejected(check_perplexity, lambda ls: math.exp(float(ls[0].mean())), capsys)  # ignores sequences
    expect_rejected(check_perplexity, lambda ls: math.exp(float(torch.cat(ls).sum()) / len(ls)),
                    capsys, "number of sequences")
    expect_rejected(check_perplexity, lambda ls: math.exp(
        float(torch.cat(ls).sum()) / max(sum(len(x) - 1 for x in ls), 1)), capsys, "n - 1 tokens")
    expect_rejected(check_perplexity, lambda ls: float(torch.cat(ls).exp().mean()), capsys,
                    "Jensen")
    expect_rejected(check_perplexity, lambda ls: math.exp(float(torch.cat(ls).median())), capsys,
                    "median")
    # each sequence's last loss dropped (as if the shift were still to be done): named
    expect_rejected(check_perplexity, lambda ls: perplexity([x[:-1] for x in ls if len(x) > 1]),
                    capsys, "do not drop x[-1]")

    def mutating(ls):
        ls[0].mul_(1.0).add_(0.0)
        ls.append(torch.zeros(1, dtype=torch.float64))  # changes the list it was given
        return perplexity(ls[:-1])
    expect_rejected(check_perplexity, mutating, capsys, "in place")
    expect_rejected(check_perplexity, lambda ls: torch.cat(ls).mean().exp(), capsys,
                    "not a tensor")  # a 0-d tensor, where one float is asked


# --- BPE merges down to a minimum count ---

def test_bpe_merges_wrong_answers(capsys):
    def counted_once(pieces, first_id, min_count):  # counts taken before the first merge only
        counts = Counter()
        for ids, n in pieces.items():
            for pair in zip(ids, ids[1:]):
                counts[pair] += n
        merges, new_id = [], first_id
        for pair, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
            if count < min_count:
                break
            merges.append(pair)
            pieces = {tuple(_merge(list(ids), pair, new_id)): n for ids, n in pieces.items()}
            new_id += 1
        return merges, pieces

    def mutating(pieces, first_id, min_count):
        merges, merged = bpe_merges(pieces, first_id, min_count)
        pieces.clear()
        pieces.update(merged)
        return merges, merged

    def drops_counts(pieces, first_id, min_count):
        merges, merged = bpe_merges(pieces, first_id, min_count)
        return merges, {ids: 1 for ids in merged}

    def one_merge_only(pieces, first_id, min_count):  # cell 6's step, run once
        merges, merged = bpe_merges(pieces, first_id, min_count)
        return merges[:1], bpe_merges(pieces, first_id, 10**9)[1] if not merges else {
            tuple(_merge(list(ids), merges[0], first_id)): n for ids, n in pieces.items()}

    def wrong(**kw):
        return lambda pieces, first_id, min_count: bpe_merges(pieces, first_id, min_count, **kw)

    def largest(c):
        return max(c, key=lambda p: (c[p], p))

    def first_seen(c):
        return max(c, key=c.get)

    def most_common(c):
        return Counter(c).most_common(1)[0][0]

    check = check_bpe_merges
    expect_rejected(check, wrong(once_per_piece=True), capsys, "counts twice")
    expect_rejected(check, wrong(weighted=False), capsys, "weight by the piece's count")
    expect_rejected(check, wrong(strict=True), capsys, ">=, not >")
    expect_rejected(check, counted_once, capsys, "recount")
    expect_rejected(check, wrong(same_id=True), capsys, "its own new id")
    expect_rejected(check, wrong(tie=largest), capsys, "not the largest")
    expect_rejected(check, wrong(tie=first_seen), capsys, "first pair seen")
    expect_rejected(check, wrong(tie=most_common), capsys, "first pair seen")
    expect_rejected(check, wrong(right_to_left=True), capsys, "left to right")
    expect_rejected(check, mutating, capsys, "in place")
    expect_rejected(check, drops_counts, capsys)
    expect_rejected(check, one_merge_only, capsys)


def test_bpe_merges_is_not_cell_6s_single_step(capsys):
    """Cell 6's loop body (one merge with the library's count_pairs and merge_pair) fails."""
    from attnbook.data.bpe import count_pairs, merge_pair

    def one_step(pieces, first_id, min_count):
        pairs = count_pairs(pieces)
        best = min(pairs, key=lambda pair: (-pairs[pair], pair))
        return [best], {tuple(merge_pair(list(ids), best, first_id)): n
                        for ids, n in pieces.items()}
    assert not check_bpe_merges(one_step)


def test_bpe_merges_refuses_cell_6s_loop(capsys):
    """Cell 6's loop, run to min_count, with the library's count_pairs and merge_pair: the
    checker makes them raise, so the answer on screen is named, not accepted."""
    import attnbook.data.bpe as bpe
    from attnbook.data.bpe import count_pairs, merge_pair

    def loop(pairs_of, merge):
        def cell_6_loop(pieces, first_id, min_count):
            merges = []
            while True:
                pairs = pairs_of(pieces)
                if not pairs:
                    break
                best = min(pairs, key=lambda pair: (-pairs[pair], pair))
                if pairs[best] < min_count:
                    break
                pieces = {tuple(merge(list(ids), best, first_id + len(merges))): n
                          for ids, n in pieces.items()}
                merges.append(best)
            return merges, pieces
        return cell_6_loop

    assert loop(count_pairs, merge_pair)({(1, 2, 1, 2): 3}, 10, 2)[0] == [(1, 2), (10, 10)]

    def by_name(pieces, first_id, min_count):  # as a notebook cell writes it: global names
        pairs = count_pairs(pieces)
        return loop(count_pairs, merge_pair)(pieces, first_id, min_count)

    def through_module(pieces, first_id, min_count):
        return loop(lambda p: bpe.count_pairs(p),
                    lambda *a: bpe.merge_pair(*a))(pieces, first_id, min_count)

    expect_rejected(check_bpe_merges, by_name, capsys, "off limits")
    expect_rejected(check_bpe_merges, through_module, capsys, "off limits")
    assert bpe.count_pairs is count_pairs and bpe.merge_pair is merge_pair


def _merge(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


# --- top-p ---

def test_top_p_wrong_answers(capsys):
    def drops_crossing(logits, p):
        probs, order = logits.softmax(-1).sort(-1, descending=True)
        drop = probs.cumsum(-1) > p
        return logits.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), float("-inf"))

    def unsorted(logits, p):
        probs = logits.softmax(-1)
        return logits.masked_fill(probs.cumsum(-1) - probs >= p, float("-inf"))

    def on_logits(logits, p):
        values, order = logits.sort(-1, descending=True)
        drop = values.cumsum(-1) - values >= p
        return logits.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), float("-inf"))

    def in_place(logits, p):
        out = top_p(logits, p)
        logits.copy_(out)
        return out

    def zero_not_inf(logits, p):
        return top_p(logits, p).nan_to_num(neginf=0.0)

    def ignores_batch(logits, p):  # the first row's nucleus for every row
        probs, order = logits.softmax(-1).sort(-1, descending=True)
        drop = (probs.cumsum(-1) - probs >= p)[:1].expand_as(probs)
        return logits.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), float("-inf"))

    expect_rejected(check_top_p, drops_crossing, capsys, "crosses rho")
    expect_rejected(check_top_p, unsorted, capsys, "sort")
    expect_rejected(check_top_p, on_logits, capsys, "not logits")
    expect_rejected(check_top_p, in_place, capsys, "in place")
    expect_rejected(check_top_p, zero_not_inf, capsys)
    expect_rejected(check_top_p, ignores_batch, capsys)
    expect_rejected(check_top_p, keeps_every_tie, capsys, "lower index first")
    expect_rejected(check_top_p, ties_last_index_first, capsys)

    def not_scattered(logits, p):  # the sorted-order mask applied in vocabulary order
        probs = logits.softmax(-1).sort(-1, descending=True).values
        return logits.masked_fill(probs.cumsum(-1) - probs >= p, float("-inf"))

    def strict(logits, p):  # > instead of >=: a token whose better tokens hold exactly p stays
        if p >= 1.0:
            return logits.clone()
        probs, order = logits.softmax(-1).sort(dim=-1, descending=True, stable=True)
        drop = probs.cumsum(-1) - probs > p
        return logits.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), float("-inf"))

    def float32_at_one(logits, p):  # no special case: p = 1 drops float32 tail tokens
        probs, order = logits.softmax(-1).sort(dim=-1, descending=True, stable=True)
        drop = probs.cumsum(-1) - probs >= p
        return logits.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), float("-inf"))

    expect_rejected(check_top_p, not_scattered, capsys, "scatter it back")
    expect_rejected(check_top_p, strict, capsys, ">=, not >")
    expect_rejected(check_top_p, float32_at_one, capsys, "float32")


def keeps_every_tie(logits, p):  # keeps every token as likely as the one that reaches p
    probs, order = logits.softmax(-1).sort(-1, descending=True)
    last = (probs.cumsum(-1) - probs < p).sum(-1, keepdim=True) - 1  # (B, 1) crossing p
    return logits.masked_fill(logits.softmax(-1) < probs.gather(-1, last), float("-inf"))


def ties_last_index_first(logits, p):  # sorts ascending, flips: ties to the higher index
    probs, order = logits.softmax(-1).sort(dim=-1, stable=True)
    probs, order = probs.flip(-1), order.flip(-1)
    drop_sorted = probs.cumsum(-1) - probs >= p
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


# --- how ties are broken (the chapter says so in its text) ---

def test_top_k_keeps_every_token_tied_with_the_kth():
    logits = torch.tensor([[1.0, 2.0, 2.0, 2.0, 0.0], [3.0, 1.0, 1.0, 0.0, 1.0]])
    kept = filter_logits(logits, top_k=2) > float("-inf")
    assert kept.tolist() == [[False, True, True, True, False],
                             [True, True, True, False, True]]


def nucleus_ties():
    """(logits, p, kept): equal probabilities join the nucleus lower index first."""
    probs = torch.tensor([[0.1, 0.2, 0.2, 0.2, 0.3], [0.24, 0.24, 0.24, 0.24, 0.04]],
                         dtype=torch.float64)
    kept = [[False, True, False, False, True], [True, True, False, False, False]]
    return probs.log(), 0.45, kept


def test_top_p_breaks_ties_by_index_in_the_library():
    logits, p, kept = nucleus_ties()
    assert (filter_logits(logits, top_p=p) > float("-inf")).tolist() == kept


def test_top_p_breaks_ties_by_index_in_a_large_vocabulary():
    """An unstable sort (PyTorch's default) loses the index order of ties from 17 tokens on."""
    logits = torch.zeros(1, 100)  # 100 equally likely tokens: p=0.1 keeps the first 10
    kept = filter_logits(logits, top_p=0.1) > float("-inf")
    assert kept[0].nonzero()[:, 0].tolist() == list(range(10))


def test_top_p_checker_breaks_ties_by_index(capsys):
    """The checker's answers keep the lower index on a tie (the reference passes)."""
    logits, p, kept = nucleus_ties()
    assert (top_p(logits, p) > float("-inf")).tolist() == kept
    assert check_top_p(top_p)


# --- greedy decoding with the cache ---

def test_greedy_cached_wrong_answers(capsys):
    check = check_greedy_cached
    expect_rejected(check, lambda m, x, n: greedy_cached(m, x, n, new_only=True), capsys,
                    "prompt followed by")
    expect_rejected(check, lambda m, x, n: greedy_cached(m, x, n, count=n - 1), capsys,
                    "num_new - 1 new tokens")
    expect_rejected(check, lambda m, x, n: greedy_cached(m, x, n, keep_state=False), capsys,
                    "*new* state")
    expect_rejected(check, lambda m, x, n: greedy_cached(m, x, n, steps_before=True), capsys,
                    "cache twice")
    expect_rejected(check, lambda m, x, n: greedy_cached(m, x, n, feed="first"), capsys,
                    "chosen *last*")
    # one step too many: the last token chosen goes through the model (right tokens, but the
    # step count is refused by name before the last case would overflow max_len)
    expect_rejected(check, lambda m, x, n: greedy_cached(m, x, n, extra_step=True), capsys,
                    "each extra step")
    # ... and labelled as that mistake, not as a use of the library
    expect_rejected(check, lambda m, x, n: greedy_cached(m, x, n, extra_step=True), capsys,
                    "raised WrongNumberOfStepCalls")
    # the slow way (no cache) and the library's loops are refused by name
    def recomputed(m, x, n):
        for _ in range(n):
            x = torch.cat([x, m(x)[:, -1].argmax(-1)[:, None]], 1)
        return x

    expect_rejected(check, recomputed, capsys, "cached way")
    expect_rejected(check, lambda m, x, n: generate(m, x, n), capsys, "off limits")
    expect_rejected(check, lambda m, x, n: generate_uncached(m, x, n), capsys, "off limits")
    # sampling is not greedy
    def sampled(m, x, n):
        out, (logits, state) = [x], m.start(x)
        g = torch.Generator().manual_seed(0)
        for i in range(n):
            token = torch.multinomial(logits.softmax(-1), 1, generator=g)[:, 0]
            out.append(token[:, None])
            if i + 1 < n:
                logits, state = m.step(token, state)
        return torch.cat(out, 1)

    expect_rejected(check, sampled, capsys, "not the most likely")
    # temperature sampling, and the right tokens but argmin by mistake, are named the same way
    def argmin(m, x, n):
        out, (logits, state) = [x], m.start(x)
        for i in range(n):
            token = logits.argmin(-1)
            out.append(token[:, None])
            if i + 1 < n:
                logits, state = m.step(token, state)
        return torch.cat(out, 1)

    expect_rejected(check, argmin, capsys, "not the most likely")


# --- next-token loss ---

def ce(logits, targets, **kw):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), **kw)


def test_lm_loss_accepts_scoring_the_full_input():
    """model(tokens)[:, :-1] gives the same logits as model(tokens[:, :-1]) (causal)."""
    assert check_lm_loss(lambda m, x: ce(m(x)[:, :-1], x[:, 1:]))


def test_lm_loss_wrong_answers(capsys):
    check = check_lm_loss
    expect_rejected(check, lambda m, x: ce(m(x), x), capsys, "off by one: you scored the logits")
    expect_rejected(check, lambda m, x: ce(m(x)[:, 1:], x[:, 1:]), capsys, "the logits are not")
    expect_rejected(check, lambda m, x: ce(m(x[:, 1:]), x[:, :-1]), capsys, "*after* it")
    expect_rejected(check, lambda m, x: ce(m(x[:, :-1]), x[:, 1:].T.contiguous()), capsys,
                    "flatten")
    expect_rejected(check, lambda m, x: ce(m(x[:, :-1]), x[:, 1:], reduction="sum"), capsys,
                    "*mean*")
    expect_rejected(check, lambda m, x: ce(m(x[:, :-1]).softmax(-1), x[:, 1:]), capsys,
                    "do not softmax")
    expect_rejected(check, lambda m, x: ce(m(x[:, :-1]), x[:, 1:]).item(), capsys,
                    "carries no gradient")
    expect_rejected(check, lambda m, x: ce(m(x[:, :-1])[:, :-1], x[:, 1:-1]), capsys)
    expect_rejected(check, lambda m, x: ce(m(x)[:, :-1], x[:, :-1]), capsys,
                    "the tokens the model has just read")
    expect_rejected(check, lambda m, x: ce(m(x[:, :-1]), x[:, 1:].flip(-1)), capsys,
                    "backwards")
    expect_rejected(check, lambda m, x: ce(m(x)[:, 1:], x[:, :-1]), capsys,
                    "the other way")


# --- predict, then measure: the attention's work with and without the cache ---

def test_decoding_calls_are_measured():
    """The cases' answers come from the library's decoding, recorded call by call: start
    over the prompt then one position per step, or every position again at each call."""
    assert decoding_calls(3, 4, cached=True) == [(0, 3), (3, 1), (4, 1), (5, 1)]
    assert decoding_calls(3, 4, cached=False) == [(0, 3), (0, 4), (0, 5), (0, 6)]
    assert causal_pairs([(0, 3)]) == 6 and causal_pairs([(3, 1)]) == 4


@pytest.mark.parametrize("kwargs, said", [
    ({"step_keys": "one"}, "one pair per cached step"),
    ({"step_keys": "generated"}, "prompt's keys left out of the steps"),
    ({"positions": True}, "positions, not pairs (cached)"),
    ({"square": True}, "masked pairs counted"),
    ({"calls": "extra"}, "one call too many"),
    ({"cached_calls": "extra"}, "one call too many"),
    ({"calls": "fewer"}, "one call too few"),
    ({"cached_calls": "fewer"}, "one call too few"),
])
def test_attention_pairs_wrong_answers(kwargs, said, capsys):
    def wrong(t0, n):
        extra = {k: (n + 1 if v == "extra" else n - 1 if v == "fewer" else v)
                 for k, v in kwargs.items()}
        return attention_pairs(t0, n, **extra)

    assert_rejected(check_attention_pairs, wrong, said, capsys)


def test_attention_pairs_named_mistakes_elsewhere(capsys):
    def positions_slow_only(t0, n):  # position-passes the slow way, pairs with the cache
        return attention_pairs(t0, n, positions=True)[0], attention_pairs(t0, n)[1]

    assert_rejected(check_attention_pairs, positions_slow_only,
                    "positions, not pairs (recomputed)", capsys)
    assert_rejected(check_attention_pairs, lambda t0, n: attention_pairs(t0, n)[::-1],
                    "swapped", capsys)
    assert_rejected(check_attention_pairs, lambda t0, n: attention_pairs(t0, n)[0],
                    "not a pair", capsys)
    assert_rejected(check_attention_pairs, lambda t0, n: (*attention_pairs(t0, n), 0),
                    "not a pair", capsys)
    # an answer off by one pair, like no known mistake: rejected, nothing named
    assert_rejected(check_attention_pairs,
                    lambda t0, n: (attention_pairs(t0, n)[0], attention_pairs(t0, n)[1] + 1),
                    "", capsys)


@pytest.mark.parametrize("half", [lambda m: m * m / 2, lambda m: m * m // 2])
def test_attention_pairs_half_the_square(half, capsys):
    def wrong(t0, n):  # m^2 / 2 per call, the slow way and the cache's start alike
        slow = sum(half(t0 + i) for i in range(n))
        fast = half(t0) + sum(t0 + i for i in range(1, n))
        return slow, fast

    assert_rejected(check_attention_pairs, wrong, "half the square", capsys)


@pytest.mark.parametrize("rounding", [round, int, float])
def test_attention_pairs_same_factor_as_positions(rounding, capsys):
    def wrong(t0, n):  # the pairs divided by the factor the position-passes shrink by
        slow, _ = attention_pairs(t0, n)
        passes = attention_pairs(t0, n, positions=True)
        return slow, rounding(slow * passes[1] / passes[0])

    assert_rejected(check_attention_pairs, wrong, "same factor as the positions", capsys)


def test_attention_pairs_accepts_floats_and_lists(capsys):
    assert check_attention_pairs(lambda t0, n: [float(x) for x in attention_pairs(t0, n)])
    assert "22x fewer" in capsys.readouterr().out  # the chapter's run, measured


# --- predict, then measure: invented words ---

def fake_measure(shares):
    return lambda temperature: shares[temperature]


MEASURED = {0.5: 0.0055, 1.0: 0.0754, 1.5: 0.2067}  # as the book's run (seed 3)


def test_invented_prediction_not_done(capsys):
    assert not check_invented_prediction(fake_measure(MEASURED), None)
    assert "not done yet" in capsys.readouterr().out


def test_invented_prediction_close_passes(capsys):
    assert all(low <= MEASURED[t] <= high for t, (low, high) in INVENTED_RANGES.items())
    assert check_invented_prediction(fake_measure(MEASURED), {0.5: 0.01, 1.5: 0.20})


@pytest.mark.parametrize("prediction, mistake, said", [
    ({0.5: 0.30, 1.5: 0.40}, "wrong direction", "*sharpens*"),  # lower temperature, more
    # the wording agrees with Section 8.5 (cutting the tail leaves invented words)
    ({0.5: 0.30, 1.5: 0.40}, "wrong direction", "likely pieces chained together still make"),
    ({0.5: 0.24, 1.5: 0.24}, "no change predicted", "same share at both"),  # the review's flat
    ({0.5: 0.10, 1.5: 0.105}, "no change predicted", "same share at both"),  # flat, low
    ({0.5: 0.02, 1.5: 0.06}, "wrong direction", "*flattens*"),  # higher temperature, less
    ({0.5: 0.07, 1.5: 0.20}, "magnitude", "removes more than you thought"),
    ({0.5: 0.01, 1.5: 0.70}, "magnitude", "smaller than you thought"),  # "flat: gibberish"
    ({0.5: 0.07, 1.5: 0.70}, "magnitude", "; and the rise"),  # both off: both explained
    ({0.5: 0.03, 1.5: 0.12}, "magnitude", "the tail is long"),  # the review's: too low at 1.5
])
def test_invented_prediction_off_passes_with_its_diagnosis(prediction, mistake, said, capsys):
    # the measurement ran: the exercise passes, and the wrong prediction is named, not failed
    result = check_invented_prediction(fake_measure(MEASURED), prediction)
    out = capsys.readouterr().out
    assert result and result.diagnosis == mistake
    assert said in out and out.startswith("✗ prediction off") and "✓" in out


def test_invented_prediction_does_not_blame_the_tail_alone(capsys):
    """Section 8.5: top-k 20 cuts the tail and invents fewer words, but still some; the feedback
    must say the tail is part of the story, not all of it, and must not claim that greedy
    decoding invents words (it invents none)."""
    check_invented_prediction(fake_measure(MEASURED), {0.5: 0.30, 1.5: 0.40})
    out = capsys.readouterr().out
    assert "wrong direction" in out and "where invented words come from" not in out
    assert "only part of it" in out and "greedy" not in out


def test_invented_prediction_close_has_no_diagnosis(capsys):
    result = check_invented_prediction(fake_measure(MEASURED), {0.5: 0.01, 1.5: 0.20})
    assert result and result.diagnosis == ""
    assert "prediction off" not in capsys.readouterr().out


@pytest.mark.parametrize("prediction, said", [
    ({0.5: 5, 1.5: 40}, "between 0 and 1"),  # percentages, not fractions
    ({0.5: -0.05, 1.5: 0.35}, "between 0 and 1"),  # a negative share
    ({0.5: 0.05}, "must be a dict"),
])
def test_invented_prediction_malformed_fails(prediction, said, capsys):
    assert not check_invented_prediction(fake_measure(MEASURED), prediction)
    assert said in capsys.readouterr().out


def test_invented_prediction_too_low_at_high_temperature(capsys):
    measured = {0.5: 0.01, 1.0: 0.08, 1.5: 0.28}
    result = check_invented_prediction(fake_measure(measured), {0.5: 0.01, 1.5: 0.10})
    assert result and result.diagnosis == "magnitude"
    assert "tail is long" in capsys.readouterr().out


def test_invented_prediction_not_measured_when_malformed():
    calls = []
    check_invented_prediction(lambda t: calls.append(t) or 0.2, {0.5: 5, 1.5: 40})
    assert calls == []  # a malformed prediction fails before the measurement runs


def test_invented_prediction_rejects_a_measurement_out_of_range(capsys):
    assert not check_invented_prediction(fake_measure({0.5: 0.5, 1.0: 0.2, 1.5: 0.45}),
                                         {0.5: 0.05, 1.5: 0.40})
    assert "outside the range" in capsys.readouterr().out


# --- predict, then measure: a window of 16 ---

WINDOW_MEASURED = (18.662, 24.804)  # as the book's run: the 16-window GPT, the chapter's


def test_window_prediction_not_done(capsys):
    assert not check_window_prediction(lambda: WINDOW_MEASURED, None)
    assert "not done yet" in capsys.readouterr().out


@pytest.mark.parametrize("prediction", [18.0, 16.5, 21.0])
def test_window_prediction_close_passes(prediction, capsys):
    assert check_window_prediction(lambda: WINDOW_MEASURED, prediction)
    assert "within 15%" in capsys.readouterr().out


@pytest.mark.parametrize("prediction, mistake, said", [
    (40.0, "wrong direction", "did not cost"),  # "a quarter of the context, much worse"
    (25.0, "wrong direction", "did not cost"),  # "about the chapter's, a little worse"
    (24.8, "no change predicted", "predicted no change"),  # the chapter's GPT's own value
    (24.7, "no change predicted", "predicted no change"),
    (23.0, "too small a gain", "larger than you"),  # "a little better than 23.37"
    (9.0, "too large a gain", "too far"),  # "as good as the 4-gram"
    (2.9, "too large a gain", "too far"),  # a loss in nats, not a perplexity
])
def test_window_prediction_off_passes_with_its_diagnosis(prediction, mistake, said, capsys):
    # the measurement ran: the exercise passes, and the wrong prediction is named, not failed
    result = check_window_prediction(lambda: WINDOW_MEASURED, prediction)
    out = capsys.readouterr().out
    assert result and result.diagnosis == mistake
    assert said in out and out.startswith("✗ prediction off") and "✓" in out


def test_window_prediction_close_has_no_diagnosis(capsys):
    result = check_window_prediction(lambda: WINDOW_MEASURED, 18.0)
    assert result and result.diagnosis == ""
    assert "prediction off" not in capsys.readouterr().out


@pytest.mark.parametrize("prediction, said", [
    ("18", "one number"), (True, "one number"), ({16: 18.0}, "one number"),
    (0.5, "between 1"), (600.0, "between 1"),
])
def test_window_prediction_rejects_malformed(prediction, said, capsys):
    assert not check_window_prediction(lambda: WINDOW_MEASURED, prediction)
    assert said in capsys.readouterr().out


def test_window_prediction_rejects_a_measurement_out_of_range(capsys):
    assert not check_window_prediction(lambda: (30.0, 24.8), 29.0)
    assert "outside the range" in capsys.readouterr().out
    assert not check_window_prediction(lambda: (18.7, 60.0), 18.0)
    assert "outside the range" in capsys.readouterr().out


def test_window_ranges_hold_the_stored_result():
    from attnbook.exercises.ch08 import WINDOW_SHORT_RANGE
    from attnbook.results import load_result
    stored = load_result("gpt_window16.json")
    assert stored["window"] == 16 and stored["batch"] * 16 == 64 * 64 and stored["steps"] == 600
    assert WINDOW_SHORT_RANGE[0] <= stored["perplexity"] <= WINDOW_SHORT_RANGE[1]


def test_every_function_exercise_is_on_the_command_line():
    from attnbook.exercises.ch08 import EXERCISES
    assert set(EXERCISES) == {"perplexity_of", "bpe_merges", "top_p", "greedy_cached",
                              "lm_loss", "padded_loss", "attention_pairs", "measure_invented",
                              "measure_window"}


# --- answers that hand the work to the library the chapter imports ---

def test_top_p_refuses_the_librarys_filter(capsys):
    import attnbook.tasks.language_modeling as lm
    expect_rejected(check_top_p, lambda logits, p: filter_logits(logits, top_p=p), capsys,
                    "off limits")
    expect_rejected(check_top_p, lambda logits, p: lm.filter_logits(logits, top_p=p), capsys,
                    "off limits")
    logits = torch.tensor([[0.0, 1.0, 2.0]])  # the library is back afterwards
    assert torch.isinf(filter_logits(logits, top_p=0.5)).sum() == 2
    assert lm.filter_logits is filter_logits


def test_lm_loss_refuses_the_librarys_loss(capsys):
    import attnbook.tasks.language_modeling as lm
    from attnbook.tasks.language_modeling import next_token_cross_entropy, next_token_loss
    expect_rejected(check_lm_loss, lambda m, x: next_token_loss(m, x), capsys, "off limits")
    expect_rejected(check_lm_loss, lambda m, x: next_token_cross_entropy(m, x), capsys,
                    "off limits")
    expect_rejected(check_lm_loss, lambda m, x: lm.next_token_loss(m, x), capsys, "off limits")
    assert lm.next_token_loss is next_token_loss


def test_lm_loss_needs_a_gradient(capsys):
    expect_rejected(check_lm_loss, lambda m, x: ce(m(x[:, :-1]), x[:, 1:]).detach(), capsys,
                    "no gradient")

    def under_no_grad(m, x):
        with torch.no_grad():
            return ce(m(x[:, :-1]), x[:, 1:])

    expect_rejected(check_lm_loss, under_no_grad, capsys, "no gradient")
    expect_rejected(check_lm_loss,
                    lambda m, x: torch.tensor(ce(m(x[:, :-1]), x[:, 1:]).item()), capsys,
                    "no gradient")


# --- the review's wrong answers that were rejected but not named ---

def test_bpe_merge_that_never_shrinks_gets_a_verdict(capsys):
    """A merge that forgets to skip the pair's second token loops forever: the checker stops it."""
    def bpe_no_skip(pieces, first_id, min_count):
        merges = []
        while True:
            counts = {}
            for ids, n in pieces.items():
                for pair in zip(ids, ids[1:]):
                    counts[pair] = counts.get(pair, 0) + n
            if not counts:
                break
            best = min(counts, key=lambda pair: (-counts[pair], pair))
            if counts[best] < min_count:
                break
            merged = {}
            for ids, n in pieces.items():
                out, i = [], 0
                while i < len(ids):
                    if i + 1 < len(ids) and (ids[i], ids[i + 1]) == best:
                        out.append(first_id + len(merges))
                    else:
                        out.append(ids[i])
                    i += 1  # the pair's second token is not skipped: nothing shrinks
                merged[tuple(out)] = n
            pieces = merged
            merges.append(best)
        return merges, pieces

    expect_rejected(check_bpe_merges, bpe_no_skip, capsys, "i += 2")


def test_lm_loss_named_mistakes_from_the_review(capsys):
    check = check_lm_loss
    expect_rejected(check, lambda m, x: F.nll_loss(m(x[:, :-1]).reshape(-1, m.config.vocab_size),
                                                   x[:, 1:].reshape(-1)), capsys, "nll_loss")
    expect_rejected(check, lambda m, x: ce(m(x[:, :-1]), x[:, 1:], reduction="sum") / x.numel(),
                    capsys, "T - 1 targets")
    expect_rejected(check, lambda m, x: ce(m(x[:, :-1]), x[:, 1:], reduction="sum")
                    / x.shape[1], capsys, "T - 1 targets")


def test_lm_loss_names_a_dropped_first_target(capsys):
    expect_rejected(check_lm_loss, lambda m, x: ce(m(x[:, :-1])[:, 1:], x[:, 2:]), capsys,
                    "left out the first target")
    expect_rejected(check_lm_loss, lambda m, x: ce(m(x[:, 1:-1]), x[:, 2:]), capsys,
                    "must read from tokens[:, 0]")


def test_top_p_named_mistakes_from_the_review(capsys):
    def ascending(logits, p):  # Hugging Face's top-p warper
        sorted_logits, order = logits.sort(-1, descending=False)
        drop = sorted_logits.softmax(-1).cumsum(-1) <= 1 - p
        drop[..., -1:] = False
        return logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))

    def threshold(logits, p):  # min-p style: within (1 - p) of the most likely token
        probs = logits.softmax(-1)
        return logits.masked_fill(probs < (1 - p) * probs.max(-1, keepdim=True).values,
                                  float("-inf"))

    def keeps_two(logits, p):  # the definition, with a floor of two tokens
        probs, order = logits.softmax(-1).sort(dim=-1, descending=True, stable=True)
        drop = probs.cumsum(-1) - probs >= p
        drop[..., :2] = False
        return logits.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), float("-inf"))

    def ascending_keeps_two(logits, p):  # Hugging Face's warper, min_tokens_to_keep=2
        sorted_logits, order = logits.sort(-1, descending=False)
        drop = sorted_logits.softmax(-1).cumsum(-1) <= 1 - p
        drop[..., -2:] = False
        return logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))

    expect_rejected(check_top_p, threshold, capsys, "min-p")
    expect_rejected(check_top_p, ascending, capsys, "ascending sort")
    # the review's wrong answer was named a min-p threshold: a floor of two tokens is named
    expect_rejected(check_top_p, keeps_two, capsys, "min_tokens_to_keep=2")
    expect_rejected(check_top_p, ascending_keeps_two, capsys, "min_tokens_to_keep=2")
    expect_rejected(check_top_p, lambda logits, p: top_p(logits, p).log_softmax(-1), capsys,
                    "log-probabilities")
    expect_rejected(check_top_p, lambda logits, p: logits.log_softmax(-1).masked_fill(
        top_p(logits, p) == float("-inf"), float("-inf")), capsys, "log-probabilities")


def restarted(m, x, n):
    """The review's loophole: start re-run on the growing sequence, step never called."""
    for _ in range(n):
        logits, _ = m.start(x)
        x = torch.cat([x, logits.argmax(-1)[:, None]], 1)
    return x


def test_greedy_cached_names_a_left_out_first_token(capsys):
    """The review's answer feeds start's argmax to step but leaves it out of the output (every
    token shifted by one): named as that, not as the prompt's last token read twice, which
    keeps its own name."""
    def shifted(m, x, n):
        out, (logits, state) = [x], m.start(x)
        token = logits.argmax(-1)
        for _ in range(n):
            logits, state = m.step(token, state)
            token = logits.argmax(-1)
            out.append(token[:, None])
        return torch.cat(out, 1)

    result = check_greedy_cached(shifted)
    out = capsys.readouterr().out
    assert not result and result.diagnosis == "first new token left out", out
    assert "shifted by one" in out.splitlines()[0]
    result = check_greedy_cached(lambda m, x, n: greedy_cached(m, x, n, steps_before=True))
    assert not result and result.diagnosis == "prompt's last token read twice"


def test_greedy_cached_refuses_start_on_the_growing_sequence(capsys):
    expect_rejected(check_greedy_cached, restarted, capsys, "re-ran start")


def test_greedy_cached_refuses_a_second_start_on_the_prompt(capsys):
    def started_twice(m, x, n):
        m.start(x)
        return greedy_cached(m, x, n)

    expect_rejected(check_greedy_cached, started_twice, capsys, "re-ran start")


def test_greedy_cached_counting_ends_with_the_call(capsys):
    """The counting is switched off once the reader's function returns: the named mistakes
    (which call start themselves) still run, and the reference still passes twice in a row."""
    assert check_greedy_cached(greedy_cached)
    assert check_greedy_cached(greedy_cached)
    capsys.readouterr()
    expect_rejected(check_greedy_cached, lambda m, x, n: greedy_cached(m, x, n, feed="first"),
                    capsys, "chosen *last*")


def test_top_p_names_an_unstable_sort(capsys):
    """PyTorch's default CPU sort reverses equal values in a row of 128: only a stable sort
    keeps the lower indices (the review's answer without stable=True passed 12 cases)."""
    x = torch.zeros(1, 128, dtype=torch.float64)
    if torch.equal(x.sort(dim=-1, descending=True).indices,
                   x.sort(dim=-1, descending=True, stable=True).indices):
        pytest.skip("this PyTorch's default sort keeps equal values in order here")

    def unstable(logits, p):
        if p >= 1.0:
            return logits.clone()
        probs, order = logits.softmax(-1).sort(dim=-1, descending=True)
        drop = probs.cumsum(-1) - probs >= p
        return logits.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop),
                                  float("-inf"))

    expect_rejected(check_top_p, unstable, capsys, "stable=True")


def held_back(m, x, n):
    """start on all but the prompt's last token, then num_new steps, the first fed that token:
    the same tokens for the same work (the review's pattern)."""
    out, (_, state) = [x], m.start(x[:, :-1])
    token = x[:, -1]
    for _ in range(n):
        logits, state = m.step(token, state)
        token = logits.argmax(-1)
        out.append(token[:, None])
    return torch.cat(out, 1)


def test_greedy_cached_accepts_holding_back_the_prompts_last_token(capsys):
    """Accepted on every prompt of two tokens or more; a one-token prompt leaves start an empty
    prompt, refused by name (not as a wrong step count)."""
    expect_rejected(check_greedy_cached, held_back, capsys)
    out = capsys.readouterr().out
    check_greedy_cached(held_back)
    out = capsys.readouterr().out
    assert "empty prompt" in out and "step was called" not in out, out
    assert "prompt 1," in out  # the one failing case is the one-token prompt


def test_perplexity_names_a_skipped_first_token(capsys):
    expect_rejected(check_perplexity, lambda ls: perplexity([x[1:] for x in ls]), capsys,
                    "first of each sequence")
    # dropping only the very first loss is named the same (the first case is one sequence)
    expect_rejected(check_perplexity, lambda ls: perplexity([torch.cat(ls)[1:]]), capsys,
                    "first of each sequence")


def test_lm_loss_names_a_sum_over_positions(capsys):
    expect_rejected(check_lm_loss, lambda m, x: ce(m(x[:, :-1]), x[:, 1:], reduction="sum")
                    / x.shape[0], capsys, "summed each row")
    # the sum over everything keeps its own name
    expect_rejected(check_lm_loss, lambda m, x: ce(m(x[:, :-1]), x[:, 1:], reduction="sum"),
                    capsys, "not the sum")


# --- the review's (g) wrong answers that were rejected under a generic or wrong name ---

def test_attention_pairs_names_the_missing_self_pair(capsys):
    """m (m - 1) / 2 per call and t - 1 per step: the diagonal left out, named as such (the
    review's answer got the message about the number of calls)."""
    def no_diagonal(t0, n):
        slow = sum((t0 + i) * (t0 + i - 1) // 2 for i in range(n))
        fast = t0 * (t0 - 1) // 2 + sum(t0 + i - 1 for i in range(1, n))
        return slow, fast

    expect_rejected(check_attention_pairs, no_diagonal, capsys, "its own key")
    assert no_diagonal(5, 4) == (74, 28)  # the review's numbers
    # only one side without the diagonal is named the same
    expect_rejected(check_attention_pairs,
                    lambda t0, n: (no_diagonal(t0, n)[0], attention_pairs(t0, n)[1]), capsys,
                    "its own key")
    # the cached side alone: on the first case (5, 4) its 28 is also what one step too few
    # gives, so it keeps that name; rejected either way
    expect_rejected(check_attention_pairs,
                    lambda t0, n: (attention_pairs(t0, n)[0], no_diagonal(t0, n)[1]), capsys)


def test_top_p_names_gather_instead_of_scatter(capsys):
    def gathered(logits, p):
        if p >= 1.0:
            return logits.clone()
        probs, order = logits.softmax(-1).sort(dim=-1, descending=True, stable=True)
        drop = probs.cumsum(-1) - probs >= p
        return logits.masked_fill(drop.gather(-1, order), float("-inf"))

    expect_rejected(check_top_p, gathered, capsys, "gather")


def test_lm_loss_names_a_wrong_flatten_order(capsys):
    def v(m):
        return m.config.vocab_size

    expect_rejected(check_lm_loss, lambda m, x: F.cross_entropy(
        m(x[:, :-1]).transpose(0, 1).reshape(-1, v(m)), x[:, 1:].reshape(-1)), capsys,
        "different orders")
    expect_rejected(check_lm_loss, lambda m, x: F.cross_entropy(
        m(x[:, :-1]).reshape(v(m), -1).T, x[:, 1:].reshape(-1)), capsys, "reshape(V, -1)")
    # both flattened position-major: the same mean, accepted
    assert check_lm_loss(lambda m, x: F.cross_entropy(
        m(x[:, :-1]).transpose(0, 1).reshape(-1, v(m)), x[:, 1:].T.reshape(-1)))


# --- the padded-batch loss (the exercise that replaced lm_loss in the chapter) ---

def padded_loss(model, tokens, lengths, *, extra=0, by_row=False, shift=True):
    """The chapter's solution; the keyword arguments write plausible wrong answers."""
    logits = model(tokens[:, :-1]) if shift else model(tokens)
    targets = tokens[:, 1:] if shift else tokens
    positions = torch.arange(targets.shape[1])
    real = positions[None, :] + (1 if shift else 0) < lengths[:, None] + extra
    losses = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
    if by_row:
        return ((losses * real).sum(1) / real.sum(1)).mean()
    return (losses * real).sum() / real.sum()


def test_padded_loss_reference_passes(capsys):
    assert check_padded_loss(padded_loss)
    assert "✓" in capsys.readouterr().out
    assert not check_padded_loss(not_done)
    assert "not done yet" in capsys.readouterr().out


def test_padded_loss_accepts_boolean_indexing(capsys):
    def indexed(m, x, n):
        real = torch.arange(x.shape[1] - 1)[None, :] + 1 < n[:, None]
        return F.cross_entropy(m(x[:, :-1])[real], x[:, 1:][real])

    assert check_padded_loss(indexed)


def test_padded_loss_wrong_answers(capsys):
    def v(m):
        return m.config.vocab_size

    check = check_padded_loss
    expect_rejected(check, lambda m, x, n: F.cross_entropy(
        m(x[:, :-1]).reshape(-1, v(m)), x[:, 1:].reshape(-1)), capsys, "padding too")
    expect_rejected(check, lambda m, x, n: F.cross_entropy(
        m(x[:, :-1]).reshape(-1, v(m)), x[:, 1:].reshape(-1), ignore_index=0), capsys,
        "ignore_index=0")
    expect_rejected(check, lambda m, x, n: padded_loss(m, x, n, by_row=True), capsys,
                    "each row's mean")
    expect_rejected(check, lambda m, x, n: padded_loss(m, x, n, extra=1), capsys,
                    "first padding")
    expect_rejected(check, lambda m, x, n: padded_loss(m, x, n, extra=-1), capsys,
                    "last real token")
    expect_rejected(check, lambda m, x, n: padded_loss(m, x, n, shift=False), capsys,
                    "off by one")

    def summed(m, x, n):
        real = torch.arange(x.shape[1] - 1)[None, :] + 1 < n[:, None]
        return F.cross_entropy(m(x[:, :-1])[real], x[:, 1:][real], reduction="sum")

    expect_rejected(check, summed, capsys, "not their sum")
    expect_rejected(check, lambda m, x, n: padded_loss(m, x, n).detach(), capsys,
                    "no gradient")


def test_padded_loss_refuses_the_librarys_loss(capsys):
    from attnbook.tasks.language_modeling import next_token_cross_entropy

    def via_library(m, x, n):
        per = next_token_cross_entropy(m, x, reduction="none")
        real = torch.arange(x.shape[1] - 1)[None, :] + 1 < n[:, None]
        return (per * real).sum() / real.sum()

    expect_rejected(check_padded_loss, via_library, capsys, "off limits")


def test_padded_loss_cases_hold_a_real_zero_and_padding():
    """The cases can tell ignore_index=0 from the mask: a real token 0 and padding in each."""
    import attnbook.exercises.ch08 as ch08
    seen = []
    ch08.check_padded_loss(lambda m, x, n: seen.append((x.clone(), n.clone())) or
                           padded_loss(m, x, n))
    assert len(seen) >= 5
    for x, n in seen:
        assert (x[0, 1] == 0) and int(n[0]) > 1  # a real 0
    assert any(bool((n < x.shape[1]).any()) for x, n in seen)  # padding somewhere
    assert len({tuple(n.tolist()) for _, n in seen}) == len(seen)  # the lengths vary


# --- named in review r62-08: three wrong answers that only got a generic hint ---

def test_top_p_probabilities_named(capsys):
    def probabilities(logits, p):  # the filtered logits' softmax, 0 where dropped
        return top_p(logits, p).softmax(-1)

    def raw_probabilities(logits, p):  # the probabilities with the dropped ones zeroed
        return logits.softmax(-1).masked_fill(top_p(logits, p) == float("-inf"), 0.0)

    assert_rejected(check_top_p, probabilities, "probabilities", capsys)
    assert_rejected(check_top_p, raw_probabilities, "probabilities", capsys)


def test_top_p_positional_dim_with_stable_named(capsys):
    def positional(logits, p):  # PyTorch raises a TypeError: dim must be a keyword
        probs, order = logits.softmax(-1).sort(-1, descending=True, stable=True)
        drop = probs.cumsum(-1) - probs >= p
        return logits.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop),
                                  float("-inf"))

    expect_rejected(check_top_p, positional, capsys, "sort(dim=-1, descending=True")


def test_attention_pairs_prompt_triangle_left_out(capsys):
    def wrong(t0, n):  # the cached count without start's t0 (t0 + 1) / 2 pairs
        slow, fast = attention_pairs(t0, n)
        return slow, fast - t0 * (t0 + 1) // 2

    assert_rejected(check_attention_pairs, wrong, "prompt's triangle left out", capsys)
