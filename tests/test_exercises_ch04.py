"""Each Chapter 4 checker accepts a reference solution, rejects a table of plausible wrong
answers, and names the mistake where it is a known one ("" = rejected without a diagnosis)."""
import pytest
import torch

from attnbook.exercises.ch04 import check_cached_self_attention, check_merge_heads, check_split_heads
from attnbook.exercises.core import MUTATION
from attnbook.layers import KVCache, causal_mask
from conftest import assert_rejected


# --- reference solutions (they live here, not in the library) --------------------------------
def split_heads(x, num_heads):
    B, T, D = x.shape
    return x.view(B, T, num_heads, D // num_heads).transpose(1, 2)


def merge_heads(x):
    B, H, T, Dh = x.shape
    return x.transpose(1, 2).contiguous().view(B, T, H * Dh)


def cached_self_attention(attn, x, cache):
    kv = attn.project_kv(x, x)  # (B, H, T, Dh) each
    full = kv if cache is None else cache.extend(kv.key, kv.value)  # (B, H, P+T, Dh)
    mask = causal_mask(x.shape[1], len(full))  # (T, P+T): the new queries are the last T positions
    return attn.attend(x, full, mask), full


def not_done(*args):
    raise NotImplementedError


# --- wrong answers, each with the diagnosis it must get -----------------------------------------
def split_in_place(x, num_heads):
    out = split_heads(x.clone(), num_heads)
    x.mul_(2.0)
    return out


SPLIT_WRONG = [
    (lambda x, h: x.reshape(x.shape[0], h, x.shape[1], x.shape[2] // h), "no transpose"),
    (lambda x, h: x.view(x.shape[0], x.shape[1], x.shape[2] // h, h).permute(0, 3, 1, 2), "interleaved columns"),
    (lambda x, h: x.view(x.shape[0], x.shape[1], h, x.shape[2] // h), "heads not moved"),
    (lambda x, h: split_heads(x, 2), "ignores num_heads"),
    (split_in_place, MUTATION),
    (lambda x, h: split_heads(x, h).flip(1), ""),  # heads in reverse order
    (not_done, ""),
]

MERGE_WRONG = [
    (lambda x: x.reshape(x.shape[0], x.shape[2], x.shape[1] * x.shape[3]), "transposed head merge"),
    (lambda x: x.permute(0, 2, 3, 1).reshape(x.shape[0], x.shape[2], -1), "interleaved heads"),
    (lambda x: x.mean(1), "averaged heads"),
    (lambda x: x.sum(1), "averaged heads"),
    (lambda x: merge_heads(x.transpose_(2, 3).transpose_(2, 3).mul_(2.0)), MUTATION),
    (lambda x: merge_heads(x.flip(1)), ""),  # heads in reverse order
    (not_done, ""),
]


def cached_discards_extend(attn, x, cache):  # the mutable-cache habit: extend() "in place"
    kv = attn.project_kv(x, x)
    if cache is None:
        cache = kv
    else:
        cache.extend(kv.key, kv.value)  # returns a new cache, which is dropped
    return attn.attend(x, cache), cache


def cached_returns_old(attn, x, cache):
    out, full = cached_self_attention(attn, x, cache)
    return out, cache if cache is not None else full


def cached_ignores_cache(attn, x, cache):
    return cached_self_attention(attn, x, None)


def cached_new_first(attn, x, cache):
    kv = attn.project_kv(x, x)
    full = kv if cache is None else KVCache(torch.cat([kv.key, cache.key], -2), torch.cat([kv.value, cache.value], -2))
    return attn.attend(x, full, causal_mask(x.shape[1], len(full))), full


def cached_no_mask(attn, x, cache):
    kv = attn.project_kv(x, x)
    full = kv if cache is None else cache.extend(kv.key, kv.value)
    return attn.attend(x, full), full


def cached_square_mask(attn, x, cache):
    kv = attn.project_kv(x, x)
    full = kv if cache is None else cache.extend(kv.key, kv.value)
    T = x.shape[1]
    return attn.attend(x, full, torch.ones(T, len(full), dtype=torch.bool).tril()), full


def cached_forward(attn, x, cache):  # the whole layer on the new positions only
    return attn(x, x, x), attn.project_kv(x, x)


def cached_in_place(attn, x, cache):
    out, full = cached_self_attention(attn, x, cache)
    if cache is not None:
        cache.key.zero_()  # "frees" the old cache
    return out, full


CACHED_WRONG = [
    (cached_discards_extend, "cache not extended"),
    (cached_returns_old, "returns the old cache"),
    (cached_ignores_cache, "ignores the cache"),
    (cached_new_first, "new before old"),
    (cached_no_mask, "no causal mask"),
    (cached_square_mask, "mask aligned to the first keys"),
    (cached_forward, "ignores the cache"),
    (cached_in_place, MUTATION),
    (lambda attn, x, cache: (cached_self_attention(attn, x, cache)[0], None), ""),
    (not_done, ""),
]


@pytest.mark.parametrize(("checker", "reference"), [
    (check_split_heads, split_heads), (check_merge_heads, merge_heads),
    (check_cached_self_attention, cached_self_attention),
])
def test_reference_passes(checker, reference):
    assert checker(reference)


@pytest.mark.parametrize(("wrong", "diagnosis"), SPLIT_WRONG)
def test_splitassert_rejected(wrong, diagnosis, capsys):
    assert_rejected(check_split_heads, wrong, diagnosis, capsys)


@pytest.mark.parametrize(("wrong", "diagnosis"), MERGE_WRONG)
def test_mergeassert_rejected(wrong, diagnosis, capsys):
    assert_rejected(check_merge_heads, wrong, diagnosis, capsys)


@pytest.mark.parametrize(("wrong", "diagnosis"), CACHED_WRONG)
def test_cachedassert_rejected(wrong, diagnosis, capsys):
    assert_rejected(check_cached_self_attention, wrong, diagnosis, capsys)


def test_cached_steps_rebuild_full_causal_attention():
    """The exercise's step, threaded over a sequence one position at a time, gives the outputs of
    causal self-attention over the whole sequence: what the checker's cases stand for."""
    from attnbook.layers import MultiHeadAttention
    torch.manual_seed(0)
    attn = MultiHeadAttention(8, 2).eval()
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        full = attn(x, x, x, mask=causal_mask(5))
        cache, outs = None, []
        for t in range(5):
            out, cache = cached_self_attention(attn, x[:, t:t + 1], cache)
            outs.append(out)
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-5, rtol=1e-5)
    assert len(cache) == 5


@pytest.mark.parametrize("prefix", ['SPLIT', 'MERGE', 'CACHED'])
def test_every_diagnosis_is_triggered_by_a_wrong_answer(prefix):
    """Each known mistake a checker can name is named for at least one wrong answer above."""
    import attnbook.exercises.ch04 as checkers
    names = {m.name for m in getattr(checkers, f"{prefix}_MISTAKES")}
    triggered = {d for _, d in globals()[f"{prefix}_WRONG"]} - {"", MUTATION}
    assert names == triggered
