"""Each Chapter 5 checker accepts the reference solution, rejects a table of plausible wrong
answers, and names the mistake where it is a known one ("" = rejected without a diagnosis)."""
import math

import pytest
import torch

from attnbook.decoding import beam_search as library_beam_search
from attnbook.exercises.ch05 import (
    CONFIDENCE_RANGE, check_beam_search, check_confidence_prediction, check_decoder_step, check_capped_greedy_decode,
    check_label_smoothed_loss, check_parallel_encoder_layer, check_parallel_layer_prediction,
    check_right_token_probability, measure_parallel_layer,
)
from attnbook.layers.attention import KVCache
from attnbook.exercises.core import MUTATION
from attnbook.exercises.standins import BatchedPrefixModel, PrefixModel
from conftest import assert_rejected


# --- reference solutions (they live here, not in the library) --------------------------------
def parallel_encoder_layer(layer, x, mask):
    h = layer.norm1(x)
    return x + layer.self_attn(h, h, h, mask=mask) + layer.feed_forward(h)


def decoder_step(block, x, past, memory_kv, memory_mask, past_mask=None):
    h = block.norm1(x)
    new = block.self_attn.project_kv(h, h)
    cache = past.extend(new.key, new.value)
    mask = None  # (B, 1, P + 1): each row's real cached slots, then the new position itself
    if past_mask is not None:
        mask = torch.cat([past_mask, torch.ones_like(past_mask[:, :1])], dim=1)[:, None, :]
    x = x + block.self_attn.attend(h, cache, mask=mask)
    x = x + block.cross_attn.attend(block.norm2(x), memory_kv, mask=memory_mask)
    return x + block.feed_forward(block.norm3(x)), cache


def right_token_probability(model, src, src_lengths, tgt_in, tgt_out, pad_id):
    probs = model(src, src_lengths, tgt_in).softmax(-1)  # (B, T, V)
    right = probs.gather(-1, tgt_out[..., None])[..., 0]  # (B, T)
    return right[tgt_out != pad_id].mean().item()


def label_smoothed_loss(logits, targets, pad_id, epsilon, excluded_ids):
    logp = torch.log_softmax(logits, dim=-1)  # (B, T, V): the softmax over all V logits
    allowed = torch.ones(logits.shape[-1], dtype=torch.bool)
    allowed[excluded_ids] = False  # the n tokens that get ε / n each
    nll = -logp.gather(-1, targets[..., None])[..., 0]  # (B, T)
    uniform = -logp[..., allowed].mean(-1)  # (B, T): cross-entropy against 1/n on the allowed tokens
    loss = (1 - epsilon) * nll + epsilon * uniform
    real = targets != pad_id
    return loss[real].mean()


def capped_greedy_decode(model, src, src_lengths, bos_id, eos_id, extra):
    caps = (src_lengths + extra).tolist()  # each row's own cap
    state = model.start(src, src_lengths)
    tokens = torch.full((src.shape[0],), bos_id)
    rows = [[] for _ in caps]
    done = [cap <= 0 for cap in caps]
    while not all(done):
        logits, state = model.step(tokens, state)
        tokens = logits.argmax(-1)
        for i, t in enumerate(tokens.tolist()):
            if done[i]:
                continue
            if t == eos_id:
                done[i] = True
            else:
                rows[i].append(t)
                done[i] = len(rows[i]) >= caps[i]
    return rows


def my_beam_search(step, state, bos_id, eos_id, max_len, beam_size, length_penalty):
    beams = [(0.0, [], state, False)]  # (log-probability, tokens, state, finished)
    for _ in range(max_len):
        candidates = []
        for score, tokens, st, finished in beams:
            if finished:  # stays in the beam, score frozen
                candidates.append((score, tokens, st, True))
                continue
            logits, new_state = step(tokens[-1] if tokens else bos_id, st)
            for token, lp in enumerate(torch.log_softmax(logits, dim=-1).tolist()):
                candidates.append((score + lp, tokens + [token], new_state, token == eos_id))
        beams = sorted(candidates, key=lambda c: -c[0])[:beam_size]
        if all(b[3] for b in beams):
            break
    best = max(beams, key=lambda c: c[0] / len(c[1]) ** length_penalty)[1]
    return best[:-1] if best[-1] == eos_id else best


def not_done(*args):
    raise NotImplementedError


# --- wrong answers, each with the diagnosis it must get -----------------------------------------
def layer_variant(kind):
    def fn(layer, x, mask):
        sa, ff, n1, n2 = layer.self_attn, layer.feed_forward, layer.norm1, layer.norm2
        h = n1(x)
        if kind == "sequential":
            z = x + sa(h, h, h, mask=mask)
            return z + ff(n2(z))
        if kind == "sequential, one norm":
            z = x + sa(h, h, h, mask=mask)
            return z + ff(n1(z))
        if kind == "post":
            return n1(x + sa(x, x, x, mask=mask) + ff(x))
        if kind == "no residual":
            return sa(h, h, h, mask=mask) + ff(h)
        if kind == "ffn on x":
            return x + sa(h, h, h, mask=mask) + ff(x)
        if kind == "norm2":
            return x + sa(h, h, h, mask=mask) + ff(n2(x))
        if kind == "kv from x":
            return x + sa(h, x, x, mask=mask) + ff(h)
        if kind == "attn on x":
            return x + sa(x, x, x, mask=mask) + ff(h)
        if kind == "no mask":
            return x + sa(h, h, h) + ff(h)
        if kind == "inverted":
            return x + sa(h, h, h, mask=~mask) + ff(h)
        if kind == "in place":
            x.add_(sa(h, h, h, mask=mask) + ff(h))
            return x
        if kind == "normed residual":
            return h + sa(h, h, h, mask=mask) + ff(h)
        if kind == "2x":
            return x + x + sa(h, h, h, mask=mask) + ff(h)
        if kind == "LN around sum":  # the review's: LayerNorm1 on the input AND around the sum
            return n1(x + sa(h, h, h, mask=mask) + ff(h))
        if kind == "averaged":  # the review's: the two sublayers averaged
            return x + 0.5 * (sa(h, h, h, mask=mask) + ff(h))
        if kind == "ffn on attn":
            a = sa(h, h, h, mask=mask)
            return x + a + ff(a)
        if kind == "ffn on h + attn":  # the review's: the feed-forward reads h + MHA(h)
            a = sa(h, h, h, mask=mask)
            return x + a + ff(h + a)
        raise AssertionError(kind)
    return fn


def block_itself(layer, x, mask):  # the review's: the layer's own (sequential, post-norm) forward
    return layer(x, mask).hidden


def norm2_around_sum(layer, x, mask):  # the review's: norm2(x + MHA(h) + FFN(h))
    h = layer.norm1(x)
    return layer.norm2(x + layer.self_attn(h, h, h, mask=mask) + layer.feed_forward(h))


def kv_from_x_ffn_norm2(layer, x, mask):  # the review's: K, V from x; the FFN on norm2(x)
    h = layer.norm1(x)
    return x + layer.self_attn(h, x, x, mask=mask) + layer.feed_forward(layer.norm2(x))


ENCODER_WRONG = [
    (block_itself, "the block itself"),
    (norm2_around_sum, "LayerNorm2 around the sum"),
    (kv_from_x_ffn_norm2, "keys and values from x, feed-forward on norm2(x)"),
    (layer_variant("sequential"), "sequential"),
    (layer_variant("post"), "post-norm"),
    (layer_variant("no residual"), "no residual"),
    (layer_variant("ffn on x"), "feed-forward on x"),
    (layer_variant("norm2"), "second norm"),
    (layer_variant("attn on x"), "attention on x"),
    (layer_variant("no mask"), "ignores mask"),
    (layer_variant("inverted"), "inverted mask"),
    (layer_variant("in place"), MUTATION),
    (layer_variant("sequential, one norm"), "sequential, norm1"),
    (layer_variant("normed residual"), "normalised residual"),
    (layer_variant("kv from x"), "keys and values from x"),
    (layer_variant("2x"), "doubled residual"),
    (layer_variant("ffn on attn"), "feed-forward reads the attention"),
    (layer_variant("ffn on h + attn"), "feed-forward reads h + attention"),
    (layer_variant("LN around sum"), "LayerNorm around the sum"),  # the review's wrong answer
    (layer_variant("averaged"), "sublayers averaged"),  # the review's wrong answer
    (not_done, ""),
]


def step_variant(kind):
    def fn(block, x, past, memory_kv, memory_mask, past_mask=None):
        sa = block.self_attn
        mask = None
        if past_mask is not None and kind != "padding seen":
            cached = ~past_mask if kind == "padding inverted" else past_mask
            own = torch.full_like(past_mask[:, :1], kind != "new masked out")
            mask = torch.cat([cached, own], dim=1)[:, None, :]
        h = block.norm1(x)
        src = x if kind == "keys from x" else h
        new = sa.project_kv(src, src)
        cache = (KVCache(new.key, new.value).extend(past.key, past.value) if kind == "new first"
                 else past.extend(new.key, new.value))
        if kind == "post":
            new = sa.project_kv(x, x)
            cache = past.extend(new.key, new.value)
            y = block.norm1(x + sa.attend(x, cache))
            y = block.norm2(y + block.cross_attn.attend(y, memory_kv, mask=memory_mask))
            return block.norm3(y + block.feed_forward(y)), cache
        if kind == "past only":
            y = x + sa.attend(h, past)
        elif kind == "itself only":
            y = x + sa.attend(h, new)
        elif kind == "tril":
            y = x + sa.attend(h, cache, mask=torch.ones(len(cache), len(cache), dtype=torch.bool).tril()[:1])
        elif kind == "residual to norm1(x)":
            y = h + sa.attend(h, cache)
        else:
            y = x + sa.attend(h, cache, mask=mask)
        cross_norm = block.norm1 if kind == "cross reads norm1" else block.norm2
        query = y if kind == "cross reads raw y" else cross_norm(x if kind == "cross reads x" else y)
        crossed = block.cross_attn.attend(query, memory_kv, mask=None if kind == "no memory mask" else memory_mask)
        z1 = y
        y = crossed if kind == "no cross residual" else y + crossed
        ffn_in = z1 if kind == "ffn reads z1" else y  # z1: the stream before cross-attention
        ffn_out = block.feed_forward((block.norm2 if kind == "norm2 for ffn" else block.norm3)(ffn_in))
        y = ffn_out if kind == "no ffn residual" else y + ffn_out
        if kind == "full recompute, no cache":
            return y, None
        if kind == "new kv only":  # the review's: the new position's key and value, not the extended cache
            return y, KVCache(new.key, new.value)
        return y, (past if kind == "old cache" else cache)
    return fn


def step_in_place(block, x, past, memory_kv, memory_mask):
    hidden, cache = decoder_step(block, x, past, memory_kv, memory_mask)
    x.copy_(hidden)
    return x, cache


def block_shortcut(block, x, past, memory_kv, memory_mask):
    """The review's one-line shortcut: call the block itself with the cache."""
    out = block(x, past=past, memory_kv=memory_kv, memory_mask=memory_mask)
    return out.hidden, out.cache


def block_forward_shortcut(block, x, past, memory_kv, memory_mask):
    out = block.forward(x, past=past, memory_kv=memory_kv, memory_mask=memory_mask)
    return out.hidden, out.cache


def decoder_step_without_past_mask(block, x, past, memory_kv, memory_mask):
    """The old exercise's answer: right without padding, no past_mask parameter."""
    return decoder_step(block, x, past, memory_kv, memory_mask)


STEP_WRONG = [
    (block_shortcut, "called the block"),
    (block_forward_shortcut, "called the block"),
    (step_variant("past only"), "past only"),
    (step_variant("itself only"), "itself only"),
    (step_variant("tril"), "top-left causal mask"),
    (step_variant("old cache"), "old cache returned"),
    (step_variant("new first"), "new key first"),
    (step_variant("keys from x"), "keys from x"),
    (step_variant("post"), "post-norm"),
    (step_variant("residual to norm1(x)"), "residual adds to norm1(x)"),  # the review's wrong answer
    (step_variant("no memory mask"), "ignores memory_mask"),
    (step_variant("padding seen"), "padding seen"),
    (step_variant("padding inverted"), "padding mask inverted"),
    (step_variant("new masked out"), "new slot marked as padding"),  # the review's wrong answer
    (decoder_step_without_past_mask, ""),
    (step_variant("cross reads x"), "cross-attention reads the old x"),
    (step_variant("cross reads raw y"), "cross-attention reads the unnormalised stream"),
    (step_variant("no cross residual"), "no residual around cross-attention"),
    (step_variant("norm2 for ffn"), "norm2 before the feed-forward"),
    (step_variant("ffn reads z1"), "feed-forward reads the stream before cross-attention"),  # the review's
    (step_variant("cross reads norm1"), "cross-attention reads norm1"),  # the review's wrong answer
    (step_variant("no ffn residual"), "no residual around the feed-forward"),  # the review's wrong answer
    (step_variant("new kv only"), "only the new position returned"),  # the review's wrong answer
    (step_in_place, MUTATION),
    (step_variant("full recompute, no cache"), ""),
    (not_done, ""),
]


def probability_variant(kind):
    def fn(model, src, src_lengths, tgt_in, tgt_out, pad_id):
        logits = model(src, src_lengths, tgt_in)
        probs = logits.softmax(-1 if kind != "softmax over T" else 1)
        if kind == "max":
            right = probs.max(-1).values
        else:
            right = probs.gather(-1, tgt_out[..., None])[..., 0]
        if kind == "tgt_in":
            right = probs.gather(-1, tgt_in[..., None])[..., 0]
        if kind == "geometric":
            logp = torch.log_softmax(logits, -1).gather(-1, tgt_out[..., None])[..., 0]
            return torch.exp(logp[tgt_out != pad_id].mean()).item()
        if kind == "log":
            right = torch.log_softmax(logits, -1).gather(-1, tgt_out[..., None])[..., 0]
        real = tgt_out != (0 if kind == "pad 0" else pad_id)
        if kind == "no eos":  # the review's wrong answer: each word's last target (<eos>) left out
            lengths = real.sum(-1)
            real = real & (torch.arange(real.shape[1])[None, :] < (lengths - 1)[:, None])
        if kind == "eos id 2":  # <eos> excluded by a fixed id
            real = real & (tgt_out != 2)
        if kind == "pad counted":
            return right.mean().item()
        if kind == "rows":
            return ((right * real).sum(-1) / real.sum(-1)).mean().item()
        return right[real].mean().item()
    return fn


CONFIDENCE_WRONG = [
    (probability_variant("max"), "largest probability"),
    (probability_variant("log"), "log-probability"),
    (probability_variant("pad counted"), "padding counted"),
    (probability_variant("rows"), "mean per word"),
    (probability_variant("tgt_in"), "tgt_in"),
    (probability_variant("geometric"), "geometric mean"),
    (probability_variant("no eos"), "eos excluded"),
    (probability_variant("eos id 2"), "eos id excluded"),
    (probability_variant("softmax over T"), ""),
    (probability_variant("pad 0"), "padding counted"),  # pad_id 0 never occurs: every position counts
    (not_done, ""),
]


def loss_variant(kind):
    F = torch.nn.functional

    def fn(logits, targets, pad_id, epsilon, excluded_ids):
        V = logits.shape[-1]
        allowed = torch.ones(V, dtype=torch.bool)
        allowed[excluded_ids] = False
        if kind == "pad always excluded":  # the review's: pad_id gets no ε / n even when not listed
            allowed[pad_id] = False
        n = int(allowed.sum())
        scores = logits.masked_fill(~allowed, -1e9) if kind == "renormalise" else logits
        logp = torch.log_softmax(scores, dim=-1)
        nll = -logp.gather(-1, targets[..., None])[..., 0]
        if kind in ("pytorch", "pytorch no ignore"):
            flat = logits.reshape(-1, V), targets.reshape(-1)
            if kind == "pytorch":
                return F.cross_entropy(*flat, ignore_index=pad_id, label_smoothing=epsilon)
            return F.cross_entropy(*flat, label_smoothing=epsilon)
        if kind == "V":  # by hand, but over all V classes
            smooth = -logp.mean(-1)
        elif kind == "V-1":
            smooth = (-logp.sum(-1) - nll) / (V - 1)
        elif kind == "n-1":
            smooth = (-logp[..., allowed].sum(-1) - nll) / (n - 1)
        elif kind == "n over V":  # divides by n, sums over every class
            smooth = -logp.sum(-1) / n
        elif kind == "eps over V":  # ε / V on each allowed token: the target sums to less than 1
            smooth = -logp[..., allowed].sum(-1) / V
        elif kind == "excluded to right":  # the review's: ε / V each, the excluded share on the right
            smooth = -logp[..., allowed].sum(-1) / V + (V - n) / V * nll
        elif kind == "eps not over n":  # ε on every allowed class: the sum of -log p, not its mean
            smooth = -logp[..., allowed].sum(-1)
        else:
            smooth = -logp[..., allowed].mean(-1)
        eps = 0.0 if kind == "no eps" else epsilon
        loss = (1 - eps) * nll + eps * smooth
        real = targets != (0 if kind == "pad 0" else pad_id)
        if kind == "pad counted":
            return loss.mean()
        if kind == "sum":
            return loss[real].sum()
        if kind == "per batch":
            return loss[real].sum() / targets.shape[0]
        if kind == "rows":
            return ((loss * real).sum(-1) / real.sum(-1).clamp(min=1)).mean()
        if kind == "in place":
            targets[~real] = 0
        if kind == "one minus only":
            return ((1 - eps) * nll)[real].mean()
        if kind == "kl":  # cross-entropy minus the target's entropy, through PyTorch's kl_div
            q = torch.where(allowed, eps / n, 0.0).expand_as(logp).clone()
            q.scatter_add_(-1, targets[..., None], torch.full_like(nll[..., None], 1 - eps))
            kl = F.kl_div(logp, q, reduction="none").sum(-1)
            return kl[real].mean()
        if kind in ("no 1 - eps", "scatter overwrites"):  # the target written out, then Σ q·(-log p)
            q = torch.where(allowed, eps / n, 0.0).expand_as(logp).clone()
            if kind == "scatter overwrites":  # scatter_ REPLACES the right token's ε/n with 1 - ε
                q.scatter_(-1, targets[..., None], 1 - eps)
                return (-(q * logp).sum(-1))[real].mean()
            return (nll - (q * logp).sum(-1))[real].mean()  # right token at weight 1, not 1 - ε
        if kind == "mix probabilities":
            return -torch.log((1 - eps) * torch.exp(-nll) + eps / n)[real].mean()
        if kind == "zeroed pad, mean":  # padding zeroed, then a mean over all B*T positions
            return torch.where(real, loss, torch.zeros(())).mean()
        return loss[real].mean()
    return fn


def masked_logits_pytorch(fill):
    """The review's: the excluded logits set to ``fill``, then PyTorch's label smoothing over all V."""
    def fn(logits, targets, pad_id, epsilon, excluded_ids):
        scores = logits.clone()
        scores[..., excluded_ids] = fill
        return torch.nn.functional.cross_entropy(scores.transpose(1, 2), targets, ignore_index=pad_id,
                                                 label_smoothing=epsilon)
    return fn


def renormalised_v_target(logits, targets, pad_id, epsilon, excluded_ids):
    """The review's: eps / V on each allowed token, the target then rescaled to sum to 1."""
    V = logits.shape[-1]
    q = torch.full((*targets.shape, V), epsilon / V)
    q[..., list(excluded_ids)] = 0.0
    q.scatter_add_(-1, targets[..., None], torch.full((*targets.shape, 1), 1 - epsilon))
    q = q / q.sum(-1, keepdim=True)
    loss = -(q * torch.log_softmax(logits, -1)).sum(-1)
    return loss[targets != pad_id].mean()


SMOOTHING_WRONG = [
    (renormalised_v_target, "eps/V on the allowed tokens, renormalised"),
    (masked_logits_pytorch(-1e9), "smoothing mass on masked logits"),  # the review's wrong answer
    (masked_logits_pytorch(float("-inf")), "smoothing mass on masked logits"),
    (loss_variant("zeroed pad, mean"), "divided by all positions"),
    (loss_variant("no eps"), "ignores epsilon"),
    (loss_variant("pytorch"), "PyTorch's label_smoothing"),  # the one-liner the old exercise accepted
    (loss_variant("V"), "PyTorch's label_smoothing"),
    (loss_variant("pytorch no ignore"), "PyTorch's label_smoothing, padding counted"),
    (loss_variant("renormalise"), "excluded from the softmax"),
    (loss_variant("pad always excluded"), "pad excluded although not in excluded_ids"),  # the review's
    (loss_variant("n over V"), "divided by m, summed over V"),
    (loss_variant("n-1"), "epsilon over the wrong allowed tokens"),
    (loss_variant("V-1"), "epsilon over V-1"),
    (loss_variant("eps over V"), "divided by V, not m"),
    (loss_variant("eps not over n"), "epsilon not divided by m"),
    (loss_variant("per batch"), "divided by the batch size"),
    (loss_variant("pad counted"), "padding counted"),
    (loss_variant("pad 0"), "ignores pad_id"),
    (loss_variant("sum"), "sum, not mean"),
    (loss_variant("rows"), "mean per sequence"),
    (loss_variant("in place"), MUTATION),
    (loss_variant("one minus only"), "no smoothing term"),
    (loss_variant("kl"), "KL divergence"),
    (loss_variant("mix probabilities"), "mix probabilities"),
    (loss_variant("no 1 - eps"), "no (1 - epsilon) weight"),
    (loss_variant("scatter overwrites"), "right token's eps/m overwritten"),
    (loss_variant("excluded to right"), "excluded mass on the right token"),  # the review's
    (not_done, ""),
]


def greedy_variant(thread=True, feed_bos=False, stop_any=False, cut=True, keep_eos=False, shift=0,
                   fixed_ids=False, caps="own", drop_all_eos=False, sample=False, uncut=False,
                   stop_first=False):
    def fn(model, src, src_lengths, bos_id, eos_id, extra):
        if fixed_ids:
            bos_id, eos_id = 1, 2
        B = src.shape[0]
        limit = {"own": src_lengths + extra, "padded": torch.full((B,), src.shape[1] + extra),
                 "shared": torch.full((B,), int(src_lengths.max()) + extra), "none": src_lengths}[caps]
        limit = (limit + shift).clamp(min=0).tolist()
        first = state = model.start(src, src_lengths)
        tokens = torch.full((B,), bos_id)
        ended = torch.zeros(B, dtype=torch.bool)
        out = []
        g = torch.Generator().manual_seed(0)
        for n in range(1, max(limit) + 1):
            logits, new_state = model.step(torch.full((B,), bos_id) if feed_bos else tokens, state)
            state = new_state if thread else first
            tokens = (torch.multinomial(logits.softmax(-1), 1, generator=g)[:, 0] if sample
                      else logits.argmax(-1))
            out.append(tokens)
            ended |= tokens == eos_id
            if (ended | (torch.tensor(limit) <= n)).all() or (stop_any and ended.any()):
                break
            if stop_first and (ended | (torch.tensor(limit) <= n)).any():  # first row finished
                break
        if uncut:  # every row as long as the loop ran: tokens after a row's <eos> kept, <eos> dropped
            return [[t for t in r if t != eos_id] if eos_id not in r else r[: r.index(eos_id)]
                    + r[r.index(eos_id) + 1:] for r in torch.stack(out, 1).tolist()]
        rows = [r[:c] for r, c in zip(torch.stack(out, 1).tolist(), limit)]
        if drop_all_eos:
            return [[t for t in r if t != eos_id] for r in rows]
        if not cut:
            return rows
        return [r[: r.index(eos_id) + keep_eos] if eos_id in r else r for r in rows]
    return fn


def greedy_ignores_lengths(model, src, src_lengths, bos_id, eos_id, extra):
    return capped_greedy_decode(model, src, torch.full_like(src_lengths, src.shape[1]), bos_id, eos_id,
                                extra - src.shape[1] + int(src_lengths.max()))


GREEDY_WRONG = [
    (greedy_variant(thread=False), "state not threaded"),
    (greedy_variant(feed_bos=True), "always feeds bos"),
    (greedy_variant(stop_any=True), "stops at the first eos"),
    (greedy_variant(stop_first=True), "stops at the first eos"),  # first row finished, <eos> or cap
    (greedy_variant(cut=False), "not cut at eos"),
    (greedy_variant(drop_all_eos=True), "drops every eos"),
    (greedy_variant(uncut=True), "tokens kept after eos"),  # the review's loop: appends after <eos>
    (greedy_variant(keep_eos=True), "keeps eos"),
    (greedy_variant(shift=1), "cap off by one"),
    (greedy_variant(shift=-1), "cap off by one"),
    (greedy_variant(fixed_ids=True), "hard-coded ids"),
    (greedy_variant(caps="shared"), "one cap for all"),
    (greedy_variant(caps="padded"), "padded length"),
    (greedy_variant(caps="none"), "ignores extra"),
    (greedy_variant(sample=True), ""),
    (lambda model, src, *rest: capped_greedy_decode(model, src.clamp_(max=5), *rest), MUTATION),
    (greedy_ignores_lengths, ""),
    (not_done, ""),
]


def beam_variant(thread=True, count_eos=True, count_bos=False, greedy=False, alpha=None, keep_eos=False,
                 aside=False, prune_normalised=False, drop=False, stop_top=False, extend=False,
                 multiply=False, finished_only=False, extra_steps=0, raw_logits=False):
    def fn(step, state, bos_id, eos_id, max_len, beam_size, length_penalty):
        K = 1 if greedy else beam_size
        a = length_penalty if alpha is None else alpha

        def rank(c):  # pruning compares raw scores; normalised only in the wrong variant
            return -c[0] / len(c[1]) ** a if prune_normalised else -c[0]
        first = state
        beams, done = [(0.0, [], state, False)], []
        for _ in range(max_len + extra_steps):
            candidates = []
            for score, tokens, st, finished in beams:
                if finished and not extend:
                    if not drop:  # the wrong variant loses a finished hypothesis
                        candidates.append((score, tokens, st, True))
                    continue
                logits, new_state = step(tokens[-1] if tokens else bos_id, st if thread else first)
                scores = logits if raw_logits else torch.log_softmax(logits, dim=-1)
                for token, lp in enumerate(scores.tolist()):
                    candidates.append((score + lp, tokens + [token], new_state,
                                       finished or token == eos_id))
            if not candidates:
                break
            candidates.sort(key=rank)
            if aside:
                done += [c for c in (candidates if aside == "all" else candidates[:K]) if c[3]]
                beams = [c for c in candidates if not c[3]][:K]
                if not beams or (aside != "max_len" and len(done) >= K):
                    break
                continue
            beams = candidates[:K]
            if stop_top and beams[0][3]:  # stops once the best-scoring hypothesis has finished
                break
            if all(b[3] for b in beams):
                break

        if extend:  # the review's search: finished ones extended, cut at the first <eos> at the end
            best = max(beams, key=lambda c: c[0] / max(len(c[1][: c[1].index(eos_id) + 1])
                                                       if eos_id in c[1] else len(c[1]), 1) ** a)[1]
            return best[: best.index(eos_id)] if eos_id in best else best

        def final(c):
            L = len(c[1]) - (0 if count_eos or not c[3] else 1) + (1 if count_bos else 0)
            return c[0] * max(L, 1) ** a if multiply else c[0] / max(L, 1) ** a
        pool = done + beams
        if finished_only and any(c[3] for c in pool):  # the review's: live ones at max_len lose
            pool = [c for c in pool if c[3]]
        if not pool:
            return []
        best = max(pool, key=final)[1]
        return best if keep_eos or best[-1] != eos_id else best[:-1]
    return fn


BEAM_WRONG = [
    (beam_variant(thread=False), "state not threaded"),
    (beam_variant(greedy=True), "greedy"),
    (beam_variant(raw_logits=True), "scores from raw logits"),  # the review's wrong answer
    (beam_variant(alpha=0.0), "ignores length_penalty"),
    (beam_variant(count_eos=False), "length without eos"),
    (beam_variant(count_bos=True), "n counts <bos>"),  # (len + 1) ** alpha: the review's wrong answer
    (beam_variant(aside=True), "finished set aside"),
    (beam_variant(aside="max_len"), "finished set aside, run to max_len"),
    (beam_variant(aside="all"), "finished set aside, all of them"),
    (beam_variant(extend=True), "finished hypotheses extended"),  # the review's wrong answer
    (beam_variant(keep_eos=True), "keeps eos"),
    (beam_variant(drop=True), "finished dropped"),
    (beam_variant(stop_top=True), "stops when the top beam finishes"),
    (beam_variant(prune_normalised=True), "normalised while pruning"),
    # (a fixed penalty is not listed: on these cases its output equals counting <bos> or
    # n without <eos>, so no checker could tell which of them the reader did)
    (beam_variant(multiply=True), "penalty multiplied"),  # the review's wrong answer
    (beam_variant(finished_only=True), "only finished at max_len"),  # the review's wrong answer
    (lambda step, state, b, e, n, k, a: my_beam_search(step, (), b, e, n, k, a), "ignores the initial state"),
    (beam_variant(extra_steps=-1), "max_len - 1 steps"),  # range(max_len - 1): the off-by-one
    (beam_variant(extra_steps=1), "max_len + 1 steps"),
    (lambda step, state, b, e, n, k, a: my_beam_search(step, state, b, e, n - 1, k, a), "max_len - 1 steps"),
    (not_done, ""),
]


@pytest.mark.parametrize(("checker", "reference"), [
    (check_parallel_encoder_layer, parallel_encoder_layer), (check_label_smoothed_loss, label_smoothed_loss),
    (check_decoder_step, decoder_step), (check_right_token_probability, right_token_probability),
    (check_capped_greedy_decode, capped_greedy_decode), (check_beam_search, my_beam_search),
])
def test_reference_passes(checker, reference):
    assert checker(reference)


@pytest.mark.parametrize(("wrong", "diagnosis"), ENCODER_WRONG)
def test_encoder_layerassert_rejected(wrong, diagnosis, capsys):
    assert_rejected(check_parallel_encoder_layer, wrong, diagnosis, capsys)


@pytest.mark.parametrize(("wrong", "diagnosis"), STEP_WRONG)
def test_decoder_step_rejected(wrong, diagnosis, capsys):
    assert_rejected(check_decoder_step, wrong, diagnosis, capsys)


@pytest.mark.parametrize(("wrong", "diagnosis"), CONFIDENCE_WRONG)
def test_right_token_probability_rejected(wrong, diagnosis, capsys):
    assert_rejected(check_right_token_probability, wrong, diagnosis, capsys)


def test_decoder_step_reference_matches_the_library_cache_over_a_whole_decode():
    """Stepping the reference through a prefix one position at a time gives the full pass."""
    from attnbook.exercises.ch05 import _decoder_block
    block = _decoder_block(7, 16, 4)
    g = torch.Generator().manual_seed(0)
    prefix, memory = torch.randn(2, 5, 16, generator=g), torch.randn(2, 3, 16, generator=g)
    with torch.no_grad():
        memory_kv = block.project_memory(memory)
        full = block(prefix, memory_kv=memory_kv).hidden
        cache = KVCache(torch.zeros(2, 4, 0, 4), torch.zeros(2, 4, 0, 4))
        rows = []
        for t in range(5):
            hidden, cache = decoder_step(block, prefix[:, t:t + 1], cache, memory_kv, None)
            rows.append(hidden)
    torch.testing.assert_close(torch.cat(rows, 1), full, atol=1e-5, rtol=1e-5)


def _measure_in_range(fn):
    return sum(CONFIDENCE_RANGE) / 2


@pytest.mark.parametrize(("predicted", "measured", "passes", "says"), [
    (None, 0.8, False, "not done yet"),
    (1.5, 0.8, False, "between 0 and 1"),
    (0.99, 0.8, False, "above the smoothing optimum"),
    (0.8, 0.8, True, ""),
    (0.78, 0.763, True, ""),
    (0.74, 0.763, True, ""),
    (0.80, 0.763, False, "too confident"),  # the old solution's guess: 0.037 too high
    (0.88, 0.763, False, "too confident"),  # 1 - PER: errors counted, the optimum forgotten
    (0.90, 0.763, False, "too confident"),  # the smoothing optimum, as if every position were right
    (0.85, 0.72, False, "too confident"),
    (0.3, 0.8, False, "too unsure"),
    (0.72, 0.763, False, "too unsure"),
    (0.65, 0.76, False, "too unsure"),
    # ranges: the chapter's own reasoning gives one, and it is scored as a range
    ((0.73, 0.83), 0.763, True, ""),       # the reference: the middle 0.10 of its bounds
    ((0.73, 0.83), 0.74, True, ""),        # ... wherever in it the model lands
    ((0.75, 0.85), 0.763, True, ""),       # committing to the top half still passes
    ((0.69, 0.85), 0.763, False, "range too wide"),  # the reasoning's bounds, uncommitted
    ((0.60, 0.80), 0.763, False, "range too wide"),  # the review: 0.20 wide passed before
    ((0.70, 0.90), 0.763, False, "range too wide"),
    ((0.80, 0.90), 0.763, False, "too confident"),  # misses above: the nearer end is 0.04 too high
    ((0.60, 0.70), 0.763, False, "too unsure"),
    ((0.91, 0.99), 0.763, False, "above the smoothing optimum"),
    ((0.60, 0.90), 0.763, False, "range too wide"),  # a 0.30 band says little
    ((0.85, 0.69), 0.763, False, "low <= high"),
    ((0.0, 1.0), 0.763, False, "range too wide"),
])
def test_confidence_prediction_compares_prediction_and_measurement(predicted, measured, passes, says, capsys):
    """Close predictions pass; far ones fail, named by direction, with the measurement in the message."""
    result = check_confidence_prediction(predicted, right_token_probability, lambda fn: measured)
    out = capsys.readouterr().out
    assert bool(result) is passes
    if says in ("", "not done yet", "between 0 and 1", "low <= high"):
        assert says in out
    elif says == "range too wide":
        assert result.diagnosis == says and "at most 0.10" in out
    else:
        assert result.diagnosis == says and f"{measured:.2f}" in out
        assert ("too high" if says != "too unsure" else "too low") in out


def test_confidence_prediction_rejects_a_measurement_outside_the_committed_range(capsys):
    result = check_confidence_prediction(0.8, right_token_probability, lambda fn: 0.99)
    assert not result and "outside" in capsys.readouterr().out


def test_confidence_prediction_needs_a_right_measuring_function(capsys):
    result = check_confidence_prediction(0.8, probability_variant("max"), _measure_in_range)
    assert not result and "fix right_token_probability first" in capsys.readouterr().out


@pytest.mark.parametrize(("wrong", "diagnosis"), SMOOTHING_WRONG)
def test_label_smoothingassert_rejected(wrong, diagnosis, capsys):
    assert_rejected(check_label_smoothed_loss, wrong, diagnosis, capsys)


@pytest.mark.parametrize(("wrong", "diagnosis"), GREEDY_WRONG)
def test_greedyassert_rejected(wrong, diagnosis, capsys):
    assert_rejected(check_capped_greedy_decode, wrong, diagnosis, capsys)


@pytest.mark.parametrize(("wrong", "diagnosis"), BEAM_WRONG)
def test_beam_searchassert_rejected(wrong, diagnosis, capsys):
    assert_rejected(check_beam_search, wrong, diagnosis, capsys)


def beam_extends_past_eos(step, state, bos_id, eos_id, max_len, beam_size, length_penalty):
    """rev05b's search: never freezes a finished hypothesis, runs all max_len steps, ranks by
    score / len ** alpha over every token (those after <eos> too), then cuts at the first <eos>.
    On case 2 its output equals counting <bos>; the checker must name the real mistake."""
    beams = [(0.0, [], state)]
    for _ in range(max_len):
        candidates = []
        for score, tokens, st in beams:
            logits, new_state = step(tokens[-1] if tokens else bos_id, st)
            for token, lp in enumerate(torch.log_softmax(logits, -1).tolist()):
                candidates.append((score + lp, tokens + [token], new_state))
        beams = sorted(candidates, key=lambda c: -c[0])[:beam_size]
    best = max(beams, key=lambda c: c[0] / len(c[1]) ** length_penalty)[1]
    return best[: best.index(eos_id)] if eos_id in best else best


def test_beam_extended_past_eos_is_named_not_bos(capsys):
    assert_rejected(check_beam_search, beam_extends_past_eos, "finished hypotheses extended", capsys)


def test_reference_beam_search_matches_the_library_on_many_stand_ins():
    """The exercise's beam search (one sequence, Python lists) is the library's batched one."""
    for seed in range(30):
        model = PrefixModel(7, 100 + seed, 2, eos_growth=0.3, spread=1.5)
        for K, alpha in ((1, 0.0), (3, 0.0), (3, 1.0), (4, 0.6)):
            got = my_beam_search(model, (), 1, 2, 8, K, alpha)
            expected = library_beam_search(BatchedPrefixModel(model, ()), torch.zeros(1, 1), torch.ones(1), 1, 2, 8,
                                           beam_size=K, length_penalty=alpha)[0]
            assert got == expected, (seed, K, alpha)


def test_label_smoothing_is_pytorchs_only_with_nothing_excluded():
    """With no excluded ids the exercise's loss is PyTorch's; with <pad> and <bos> excluded it is not, so the
    one-line F.cross_entropy(..., label_smoothing=ε) cannot solve the exercise."""
    logits, targets = torch.randn(2, 3, 6), torch.tensor([[2, 3, 0], [4, 0, 0]])
    pytorch = float(torch.nn.functional.cross_entropy(logits.reshape(-1, 6), targets.reshape(-1), ignore_index=0,
                                                      label_smoothing=0.2))
    assert math.isclose(float(label_smoothed_loss(logits, targets, 0, 0.2, [])), pytorch, rel_tol=1e-5)
    assert not math.isclose(float(label_smoothed_loss(logits, targets, 0, 0.2, [0, 1])), pytorch, rel_tol=1e-3)


@pytest.mark.parametrize("prefix", ['ENCODER', 'SMOOTHING', 'GREEDY', 'BEAM', 'STEP', 'CONFIDENCE'])
def test_every_diagnosis_is_triggered_by_a_wrong_answer(prefix):
    """Each known mistake a checker can name is named for at least one wrong answer above."""
    import attnbook.exercises.ch05 as checkers
    names = {m.name for m in getattr(checkers, f"{prefix}_MISTAKES")}
    triggered = {d for _, d in globals()[f"{prefix}_WRONG"]} - {"", MUTATION}
    assert names == triggered


# --- predict, then measure: the parallel layer beside the two sequential ones --------------------
RIGHT_DISTANCES = {"pre-norm": (0.0, 0.3), "post-norm": (0.5, 0.8)}  # measured: 0.14 and 0.65
PARALLEL_WRONG = [  # (prediction, the diagnosis or text it must get)
    (None, "not done yet"),
    ("pre-norm", "not two ranges"),                               # the old binary answer
    ({"pre-norm": 0.14, "post-norm": 0.65}, "not two ranges"),    # numbers, not ranges
    ({"pre-norm": (0.0, 0.3)}, "not two ranges"),                 # one layer only
    ({"pre-norm": (0.3, 0.0), "post-norm": (0.5, 0.8)}, "low <= high"),
    ({"pre-norm": (-0.1, 0.2), "post-norm": (0.5, 0.8)}, "outside 0-2"),
    ({"pre-norm": (0.0, 0.5), "post-norm": (0.5, 0.8)}, "range too wide"),
    ({"pre-norm": (0.0, 0.3), "post-norm": (0.0, 1.5)}, "range too wide"),  # a guess that covers all
    ({"pre-norm": (0.5, 0.8), "post-norm": (0.0, 0.3)}, "closer: post-norm"),
    ({"pre-norm": (0.4, 0.7), "post-norm": (0.6, 0.9)}, "pre-norm distance too high"),
    ({"pre-norm": (0.0, 0.05), "post-norm": (0.5, 0.8)}, "pre-norm distance too low"),   # "identical"
    ({"pre-norm": (0.0, 0.3), "post-norm": (1.2, 1.5)}, "post-norm distance too high"),  # "unrelated"
    ({"pre-norm": (0.0, 0.2), "post-norm": (0.2, 0.5)}, "post-norm distance too low"),
]


@pytest.mark.parametrize(("prediction", "says"), PARALLEL_WRONG)
def test_parallel_layer_prediction_rejects_and_names(prediction, says, capsys):
    result = check_parallel_layer_prediction(prediction, parallel_encoder_layer)
    out = capsys.readouterr().out
    assert not result
    assert result.diagnosis == says or (says == "not done yet" and says in out)
    if "distance too" in says or says == "closer: post-norm":
        assert "relative distance" in out  # measured before the verdict


@pytest.mark.parametrize("prediction", [RIGHT_DISTANCES, {"pre-norm": [0.1, 0.2], "post-norm": [0.6, 0.7]},
                                        {"post-norm": (0.4, 0.7), "pre-norm": (0.1, 0.4)}])
def test_parallel_layer_prediction_passes_ranges_that_hold_both(prediction, capsys):
    result = check_parallel_layer_prediction(prediction, parallel_encoder_layer)
    out = capsys.readouterr().out
    assert result and "both measured distances lie inside" in out


def test_parallel_layer_closer_post_names_pre_norm(capsys):
    result = check_parallel_layer_prediction({"pre-norm": (0.5, 0.8), "post-norm": (0.0, 0.3)},
                                             parallel_encoder_layer)
    out = capsys.readouterr().out
    assert not result and "PRE-norm" in out and "attention term MHA(LayerNorm1(x)) is" in out


def test_parallel_layer_measurement_separates_the_two_layers():
    """The measurement the prediction is checked against: closer to pre-norm by a wide margin, the
    attention term shared exactly, the feed-forward term changed; a sequential answer is measured as
    the pre-norm layer itself."""
    m = measure_parallel_layer(parallel_encoder_layer)
    assert m["to pre-norm"] < 0.3 < 0.45 < m["to post-norm"]
    assert m["attention term"] < 1e-5 and m["feed-forward term"] > 0.2
    sequential = measure_parallel_layer(lambda layer, x, mask: layer_variant("sequential")(layer, x, mask))
    assert sequential["to pre-norm"] < 1e-5


def test_parallel_layer_prediction_needs_a_right_layer(capsys):
    result = check_parallel_layer_prediction(RIGHT_DISTANCES, layer_variant("sequential"))
    assert not result and "fix parallel_encoder_layer first" in capsys.readouterr().out


# --- the command line reads the predict-then-measure exercises' predictions ------------------------
@pytest.mark.parametrize(("prediction", "passes", "says"), [
    (None, False, "not done yet"),
    (RIGHT_DISTANCES, True, "lie inside"),
    ({"pre-norm": (0.5, 0.8), "post-norm": (0.0, 0.3)}, False, "closer: post-norm"),
    ({"pre-norm": (0.0, 0.3), "post-norm": (1.2, 1.5)}, False, "post-norm distance too high"),
    ("pre", False, "not two ranges"),
])
def test_parallel_layer_file_checks_the_prediction(prediction, passes, says, capsys):
    from attnbook.exercises.ch05 import check_parallel_layer_file
    result = check_parallel_layer_file(parallel_encoder_layer, prediction=prediction)
    out = capsys.readouterr().out
    assert bool(result) is passes
    assert says in out or result.diagnosis == says


def test_parallel_layer_file_needs_a_right_layer(capsys):
    from attnbook.exercises.ch05 import check_parallel_layer_file
    assert not check_parallel_layer_file(layer_variant("sequential"), prediction=RIGHT_DISTANCES)
    assert "fix parallel_encoder_layer first" in capsys.readouterr().out


@pytest.mark.parametrize(("prediction", "passes", "says"), [
    (None, False, "not done yet"),
    (0.77, True, "consistent"),
    (0.84, True, "consistent"),              # the accepted range's ends
    (0.70, True, "consistent"),
    ((0.73, 0.83), True, "consistent"),      # the chapter's reference prediction
    ((0.69, 0.85), False, "range too wide"),
    ((0.60, 0.70), False, "too unsure"),
    (0.86, False, "too confident"),          # a number outside the notebook's range fails
    (0.87, False, "too confident"),          # (the review: 0.87 passed here, not in the notebook)
    (0.67, False, "too unsure"),
    (0.66, False, "too unsure"),
    (0.88, False, "too confident"),
    (0.95, False, "above the smoothing optimum"),
    ((0.91, 0.99), False, "above the smoothing optimum"),
    (0.5, False, "too unsure"),
    ((0.50, 0.60), False, "too unsure"),
    ((0.62, 0.72), False, "too unsure"),     # overlaps 0.70-0.84 but misses 0.77: the notebook's rule
    ((0.78, 0.88), False, "too confident"),  # overlaps too, and fails in the notebook as well
    ((0.60, 0.90), False, "range too wide"),
    ((0.85, 0.69), False, "low <= high"),
    (1.5, False, "between 0 and 1"),
    (77, False, "between 0 and 1"),          # a percentage, not a probability
    ("high", False, "a number"),
])
def test_confidence_file_checks_the_prediction(prediction, passes, says, capsys):
    from attnbook.exercises.ch05 import check_confidence_file
    result = check_confidence_file(right_token_probability, prediction=prediction)
    out = capsys.readouterr().out
    assert bool(result) is passes
    assert says in out or result.diagnosis == says


@pytest.mark.parametrize("prediction", [0.90, (0.86, 0.90)])
def test_confidence_feedback_names_the_page_models_1200_steps(prediction, capsys):
    """The page's model trained 1,200 steps (transformer_page_model.json), not 960."""
    from attnbook.exercises.ch05 import check_confidence_file
    notebook = check_confidence_prediction(prediction, right_token_probability, lambda fn: 0.77)
    file = check_confidence_file(right_token_probability, prediction=prediction)
    out = capsys.readouterr().out
    assert not notebook and not file
    assert out.count("after only 1,200 steps") == 2 and "960" not in out


def test_confidence_file_needs_a_right_function(capsys):
    from attnbook.exercises.ch05 import check_confidence_file
    assert not check_confidence_file(probability_variant("max"), prediction=0.77)
    assert "fix right_token_probability first" in capsys.readouterr().out


def test_command_line_passes_the_files_predictions(tmp_path, capsys):
    """``python -m attnbook.exercises ch05 answers.py`` hands prediction_<name> to the checker:
    the same right function passes or fails with the prediction alone."""
    import inspect
    import textwrap
    from attnbook.exercises import ch05
    from attnbook.exercises.__main__ import check_file
    saved = dict(ch05.EXERCISES)
    code = textwrap.dedent(inspect.getsource(right_token_probability))
    header = "import torch\nimport torch.nn.functional as F\n"
    try:  # only this exercise: the others need their functions
        ch05.EXERCISES.clear()
        ch05.EXERCISES["right_token_probability"] = saved["right_token_probability"]
        answers = tmp_path / "answers.py"
        for prediction, status, says in (("0.77", 0, "consistent"), ("0.95", 1, "above 0.902"),
                                         (None, 1, "not done yet")):
            line = f"prediction_right_token_probability = {prediction}\n" if prediction else ""
            answers.write_text(header + line + code)
            assert check_file("ch05", answers) == status
            assert says in capsys.readouterr().out
    finally:
        ch05.EXERCISES.clear()
        ch05.EXERCISES.update(saved)


REVIEW_WRONG_FILE = '''
import torch


def label_smoothed_loss(logits, targets, pad_id, epsilon, excluded_ids):
    V = logits.shape[-1]
    allowed = torch.ones(V, dtype=torch.bool)
    allowed[list(excluded_ids) + [pad_id]] = False
    logp = logits.log_softmax(-1)
    nll = -logp.gather(-1, targets[..., None])[..., 0]
    smooth = -logp[..., allowed].mean(-1)
    loss = (1 - epsilon) * nll + epsilon * smooth
    return loss[targets != pad_id].mean()


def decoder_step(block, x, past, memory_kv, memory_mask):
    h = block.norm1(x)
    new = block.self_attn.project_kv(h, h)
    cache = past.extend(new.key, new.value)
    z1 = x + block.self_attn.attend(h, cache)
    z2 = z1 + block.cross_attn.attend(block.norm2(z1), memory_kv, mask=memory_mask)
    return z2 + block.feed_forward(block.norm3(z1)), cache


def parallel_encoder_layer(layer, x, mask):
    h = layer.norm1(x)
    a = layer.self_attn(h, h, h, mask=mask)
    return x + a + layer.feed_forward(h + a)
prediction_parallel_encoder_layer = {"pre-norm": (0.0, 0.3), "post-norm": (0.5, 0.8)}
'''


def test_command_line_names_the_reviews_wrong_answers(tmp_path, capsys):
    """The review's wrong answers, run through ``python -m attnbook.exercises ch05 FILE``, get the
    same named diagnosis as in the notebook (not the case's generic hint)."""
    import attnbook.exercises.ch05 as checkers
    from attnbook.exercises.__main__ import check_file
    answers = tmp_path / "answers.py"
    answers.write_text(REVIEW_WRONG_FILE)
    assert check_file("ch05", answers) == 1
    out = capsys.readouterr().out
    for name, mistakes in (("pad excluded although not in excluded_ids", checkers.SMOOTHING_MISTAKES),
                           ("feed-forward reads the stream before cross-attention", checkers.STEP_MISTAKES),
                           ("feed-forward reads h + attention", checkers.ENCODER_MISTAKES)):
        message = next(m.message for m in mistakes if m.name == name)
        assert message in out, out
    assert "hint:" not in out, out


# --- predict, then compute: the label-smoothing floor as a formula in ε and m -------------------
def _exact(e, m):
    return -(1 - e + e / m) * math.log(1 - e + e / m) - (m - 1) * (e / m) * math.log(e / m)


def _approx(e, m):  # h(ε) + ε log m: 0.016 nats off at m = 43, rejected
    return -(1 - e) * math.log(1 - e) - e * math.log(e) + e * math.log(m)


def _numeric(e, m):  # builds m probabilities: fails at m = 10^12
    q = torch.full((m,), e / m, dtype=torch.float64)
    q[0] += 1 - e
    return float(-(q * q.log()).sum())


@pytest.mark.parametrize(("formula", "passes", "says"), [
    (None, False, "not done yet"),
    (1.377, False, "not one number"),  # a number, not a formula
    (_exact, True, "matches at every size"),
    (_approx, False, "drops the ε/m"),  # h(ε) + ε log m: 0.016 off at m = 43
    (lambda e, m: _approx(e, m - 1), False, "WRONG tokens only"),  # h(ε) + ε log(m - 1)
    (lambda e, m: _exact(e, m) / math.log(2), False, "in bits"),  # log base 2
    (lambda e, m: 0.685, False, "same floor for 43 and for 37,000"),  # the chapter's floor
    (lambda e, m: e * math.log(m), False, "add h(ε)"),  # ε log m alone
    (lambda e, m: -math.log(1 - e + e / m), False, "the right token alone"),  # -log q(right)
    (lambda e, m: 0.0 * m, False, "still pays H(q)"),  # zero
    (_numeric, False, "must not build m probabilities"),
    (lambda e, m: _exact(e, m) + 0.5, False, "too high"),
    (lambda e, m: _exact(e, m) - 0.1, False, "too low"),
])
def test_smoothing_floor_prediction(formula, passes, says, capsys):
    from attnbook.exercises.ch05 import check_smoothing_floor_prediction
    assert bool(check_smoothing_floor_prediction(formula, label_smoothed_loss)) is passes
    assert says in capsys.readouterr().out


def test_smoothing_floor_is_computed_with_the_readers_loss(capsys):
    """The floor is the reader's own loss for a model equal to q; a wrong loss is sent back first."""
    from attnbook.exercises.ch05 import (FLOOR_EPSILON, FLOOR_VOCABULARY, check_smoothing_floor_prediction,
                                         measure_smoothing_floor, smoothing_floor)
    assert math.isclose(measure_smoothing_floor(label_smoothed_loss),
                        smoothing_floor(FLOOR_EPSILON, FLOOR_VOCABULARY), rel_tol=1e-6)
    assert not check_smoothing_floor_prediction(_exact, loss_variant("V-1"))
    assert "fix label_smoothed_loss first" in capsys.readouterr().out


def test_command_line_checks_the_floor_prediction(tmp_path, capsys):
    import inspect
    import textwrap
    from attnbook.exercises import ch05
    from attnbook.exercises.__main__ import check_file
    saved = dict(ch05.EXERCISES)
    code = textwrap.dedent(inspect.getsource(label_smoothed_loss))
    exact = ("def prediction_label_smoothed_loss(e, m):\n"
             "    return -(1 - e + e / m) * math.log(1 - e + e / m) - (m - 1) * (e / m) * math.log(e / m)\n")
    constant = "def prediction_label_smoothed_loss(e, m):\n    return 0.685\n"
    try:
        ch05.EXERCISES.clear()
        ch05.EXERCISES["label_smoothed_loss"] = saved["label_smoothed_loss"]
        answers = tmp_path / "answers.py"
        for prediction, status, says in ((exact, 0, "matches at every size"),
                                         (constant, 1, "same floor for 43"), (None, 1, "not done yet")):
            answers.write_text("import math\nimport torch\n" + (prediction or "") + code)
            assert check_file("ch05", answers) == status
            assert says in capsys.readouterr().out
    finally:
        ch05.EXERCISES.clear()
        ch05.EXERCISES.update(saved)


def test_decoder_step_padded_cases_need_the_mask(capsys):
    """Without padding the old five-argument answer passes every case; the padded cases reject it."""
    assert not check_decoder_step(lambda b, x, p, kv, m, past_mask=None: decoder_step(b, x, p, kv, m))
    assert "attended to the padding slots" in capsys.readouterr().out
