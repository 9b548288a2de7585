"""Checkers for Chapter 5 (the Transformer).

Expected answers come from the book's library (``attnbook.layers.EncoderBlock``,
``attnbook.decoding``); the stand-in decoders'
logits depend on their state (``attnbook.exercises.standins``). Each checker lists the known
mistakes it can name. ``EXERCISES`` maps the notebook's function names to their checkers.
Legend: B batch, S source length, T target length, D model width, V vocabulary, K beams.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable
from unittest import mock

import torch

from attnbook.decoding import beam_search as _library_beam_search
from attnbook.exercises.core import Case, CheckResult, Mistake, _finish, no_grad, run_cases
from attnbook.exercises.standins import BatchedPrefixModel, PrefixModel
from attnbook.layers import DecoderBlock, EncoderBlock
from attnbook.layers.attention import KVCache
from attnbook.layers.masks import token_mask
from attnbook.models.transformer import Transformer, TransformerConfig


# --- the post-norm encoder layer --------------------------------------------------------------------
def _encoder_layer(seed: int, d_model: int, num_heads: int) -> EncoderBlock:
    torch.manual_seed(seed)
    layer = EncoderBlock(d_model, num_heads, 2 * d_model).eval()
    with torch.no_grad():  # LayerNorms away from (1, 0), so that a skipped or swapped norm shows
        for norm in (layer.norm1, layer.norm2):
            norm.weight.normal_(1.0, 0.3)
            norm.bias.normal_(0.0, 0.3)
    return layer


def _parallel_variant(layer, x, mask, order="parallel", attn_mask="given", ffn_input="h", attn_input="h",
                      kv_input="h", residual="x"):
    """The parallel layer with one known mistake switched on (all defaults: the right answer)."""
    m = mask if attn_mask == "given" else (None if attn_mask == "none" else ~mask)
    n1, n2, sa, ff = layer.norm1, layer.norm2, layer.self_attn, layer.feed_forward
    if order == "the block itself":  # the layer's own forward: sequential, post-norm here
        return layer(x, m).hidden
    if order == "norm2 around the sum":  # the right sublayers, then LayerNorm2 around the whole sum
        h = n1(x)
        return n2(x + sa(h, h, h, mask=m) + ff(h))
    if order == "sequential":  # the pre-norm layer of the chapter
        h = n1(x)
        z = x + sa(h, h, h, mask=m)
        return z + ff(n2(z))
    if order == "sequential, norm1":  # the sequential layer, its feed-forward normalised by norm1 again
        h = n1(x)
        z = x + sa(h, h, h, mask=m)
        return z + ff(n1(z))
    if order == "post-norm":
        return n1(x + sa(x, x, x, mask=m) + ff(x))
    if order == "normalised sum":  # the right sublayers, then LayerNorm1 around the whole sum too
        h = n1(x)
        return n1(x + sa(h, h, h, mask=m) + ff(h))
    if order == "averaged":  # the two sublayers averaged, not added
        h = n1(x)
        return x + 0.5 * (sa(h, h, h, mask=m) + ff(h))
    h = n1(x)
    a = x if attn_input == "x" else h
    kv = x if kv_input == "x" else a
    attended = sa(a, kv, kv, mask=m)
    f = {"h": h, "x": x, "norm2": n2(x), "attn": attended, "h+attn": h + attended}[ffn_input]
    update = attended + ff(f)
    if residual == "2x":
        return 2 * x + update
    return update if order == "no residual" else (h if residual == "h" else x) + update


ENCODER_MISTAKES = [
    Mistake("the block itself", "that is the layer's own forward, layer(x, mask).hidden: the SEQUENTIAL "
            "post-norm block, z = LN1(x + MHA(x)), out = LN2(z + FFN(z)). Write the parallel layer from its "
            "modules: h = layer.norm1(x), then x + layer.self_attn(h, h, h, mask=mask) + layer.feed_forward(h).",
            gives=lambda *a: _parallel_variant(*a, order="the block itself")),
    Mistake("sequential", "that is the sequential pre-norm layer (attention, then a feed-forward that reads "
            "the attention's result); here both read the same LayerNorm1(x) and are added to x together.",
            gives=lambda *a: _parallel_variant(*a, order="sequential")),
    Mistake("sequential, norm1", "that is a sequential layer (the feed-forward reads the attention's "
            "result, through norm1 again); in the parallel layer both sublayers read the same "
            "LayerNorm1(x), computed once from the input, and both outputs are added to x together.",
            gives=lambda *a: _parallel_variant(*a, order="sequential, norm1")),
    Mistake("post-norm", "the LayerNorm comes first, on the input of the two sublayers "
            "(x + MHA(LN(x)) + FFN(LN(x))), not after the sum.",
            gives=lambda *a: _parallel_variant(*a, order="post-norm")),
    Mistake("LayerNorm around the sum", "you normalised twice: the sublayers read LayerNorm1(x), "
            "and then LayerNorm1 was applied again to x + MHA(h) + FFN(h). A pre-norm layer normalises only "
            "the sublayers' input; the sum x + MHA(h) + FFN(h) is the output as it is.",
            gives=lambda *a: _parallel_variant(*a, order="normalised sum")),
    Mistake("LayerNorm2 around the sum", "you normalised the output: norm2(x + MHA(h) + FFN(h)). In the "
            "parallel pre-norm layer no LayerNorm comes after the sum; x + MHA(h) + FFN(h) with h = norm1(x) is "
            "the output as it is, and norm2 is not used at all.",
            gives=lambda *a: _parallel_variant(*a, order="norm2 around the sum")),
    Mistake("keys and values from x, feed-forward on norm2(x)", "two slips: the keys and values read x (all "
            "three of queries, keys and values read h = norm1(x)), and the feed-forward reads norm2(x) (it "
            "reads the same h as the attention). One LayerNorm, norm1, feeds both sublayers.",
            gives=lambda *a: _parallel_variant(*a, kv_input="x", ffn_input="norm2")),
    Mistake("sublayers averaged", "you averaged the two sublayers (x + (MHA(h) + FFN(h)) / 2): each is "
            "added at full weight, x + MHA(h) + FFN(h), as in the sequential layer.",
            gives=lambda *a: _parallel_variant(*a, order="averaged")),
    Mistake("no residual", "the residual is missing: add x to the two sublayers' outputs.",
            gives=lambda *a: _parallel_variant(*a, order="no residual")),
    Mistake("feed-forward on x", "the feed-forward reads the normalised input LayerNorm1(x), as the attention "
            "does, not x itself.", gives=lambda *a: _parallel_variant(*a, ffn_input="x")),
    Mistake("second norm", "one LayerNorm feeds both sublayers (norm1); you normalised the feed-forward's "
            "input with norm2.", gives=lambda *a: _parallel_variant(*a, ffn_input="norm2")),
    Mistake("attention on x", "the attention reads LayerNorm1(x) as queries, keys and values, not x.",
            gives=lambda *a: _parallel_variant(*a, attn_input="x")),
    Mistake("keys and values from x", "the queries read LayerNorm1(x) but the keys and values read x: "
            "in self-attention all three come from the same normalised input.",
            gives=lambda *a: _parallel_variant(*a, kv_input="x")),
    Mistake("normalised residual", "the residual stream carries x itself; you added the sublayers to "
            "LayerNorm1(x), so the normalisation no longer sits on a side branch.",
            gives=lambda *a: _parallel_variant(*a, residual="h")),
    Mistake("doubled residual", "x is added twice (2x + ...): the stream x appears once, plus the two "
            "sublayers' outputs.", gives=lambda *a: _parallel_variant(*a, residual="2x")),
    Mistake("feed-forward reads the attention", "your feed-forward reads the attention's output; in the "
            "parallel layer it reads LayerNorm1(x), the same input as the attention.",
            gives=lambda *a: _parallel_variant(*a, ffn_input="attn")),
    Mistake("feed-forward reads h + attention", "your feed-forward reads LayerNorm1(x) plus the "
            "attention's output (h + MHA(h)); in the parallel layer it reads LayerNorm1(x) alone, the same "
            "input as the attention, and the two outputs are added to x side by side.",
            gives=lambda *a: _parallel_variant(*a, ffn_input="h+attn")),
    Mistake("ignores mask", "padding keys got attention: pass mask=mask to self_attn.",
            gives=lambda *a: _parallel_variant(*a, attn_mask="none")),
    Mistake("inverted mask", "the mask is inverted: True means 'may attend' (a real key); pass it as it is.",
            gives=lambda *a: _parallel_variant(*a, attn_mask="inverted")),
]


def check_parallel_encoder_layer(fn: Callable) -> CheckResult:
    """``parallel_encoder_layer(layer: EncoderBlock, x (B, S, D), mask (B, 1, S)) -> (B, S, D)``:
    ``h = LayerNorm1(x); out = x + MHA(h, h, h) + FFN(h)`` with the layer's modules."""
    cases = []
    for seed, (B, S, D, H, lengths) in enumerate([
        (3, 6, 16, 4, [6, 3, 1]), (1, 4, 8, 2, [4]), (2, 1, 12, 3, [1, 1]), (4, 5, 16, 1, [2, 5, 5, 4]),
    ]):
        layer = _encoder_layer(seed, D, H)
        x = torch.randn(B, S, D, generator=torch.Generator().manual_seed(seed))
        mask = token_mask(torch.tensor(lengths), S)[:, None, :]  # (B, 1, S)
        with torch.no_grad():
            expected = _parallel_variant(layer, x, mask)
        cases.append(Case(
            f"B={B}, S={S}, D={D}, H={H}, lengths {lengths}", (layer, x, mask), expected,
            hint="compare with the chapter's pre-norm layer: which sublayer's input changes when the two "
                 "run side by side instead of one after the other? If that is clear, check which tensor "
                 "each sublayer reads and which one the two results are added to. Likely slips: x added twice "
                 "(2x + ...), or a feed-forward that reads the attention's output instead of LayerNorm1(x).",
        ))
    return run_cases("parallel encoder layer", no_grad(fn), cases, ENCODER_MISTAKES)


# Predict, then measure: the parallel layer beside the chapter's two sequential layers. On one fixed
# layer and input (LayerNorms away from (1, 0)), the parallel layer's output lies 0.14 (relative L2
# distance, each output LayerNorm'd per position) from the pre-norm layer's and 0.65 from the
# post-norm layer's, with the same modules (other seeds: 0.10-0.14 and 0.52-0.65): the attention
# term MHA(LayerNorm1(x)) is the pre-norm layer's own, only the feed-forward's input changes. The
# reader predicts both distances as ranges, each at most PARALLEL_RANGE_WIDTH wide, before the
# checker measures them (0: the same output; about 1.41: unrelated directions).
LAYER_CHOICES = ("pre-norm", "post-norm")
PARALLEL_RANGE_WIDTH = 0.3


def measure_parallel_layer(fn: Callable, seed: int = 4) -> dict[str, float]:
    """``fn``'s output beside one ``EncoderBlock`` run pre-norm and post-norm (the same modules):
    relative L2 distances, and how much each sublayer term differs from the pre-norm layer's."""
    layer = _encoder_layer(seed, 32, 4)
    x = torch.randn(8, 10, 32, generator=torch.Generator().manual_seed(seed))  # (B, S, D)
    mask = token_mask(torch.tensor([10, 7, 3, 10, 1, 9, 10, 5]), 10)[:, None, :]  # (B, 1, S)
    with torch.no_grad():
        parallel = fn(layer, x, mask)
        layer.norm_first = True
        pre = layer(x, mask).hidden
        layer.norm_first = False
        post = layer(x, mask).hidden
        h = layer.norm1(x)
        attention = layer.self_attn(h, h, h, mask=mask)  # the attention term of both pre-norm layers
        z = x + attention
        ffn_sequential, ffn_parallel = pre - z, layer.feed_forward(h)  # pre = z + FFN(LayerNorm2(z))

    def rel(a, b):
        return float((a - b).norm() / b.norm())

    def unit(a):  # each position's vector normalised (LayerNorm without weights): scale drops out
        return torch.nn.functional.layer_norm(a, a.shape[-1:])
    # the layers' outputs compared after a LayerNorm: post-norm's output is a LayerNorm's, the
    # others carry x's scale, and a scale difference alone must not decide which layer is closer.
    # Each term of fn's output beside the pre-norm layer's: fn's attention term is what remains of of fn's output beside the pre-norm layer's: fn's attention term is what remains of
    # its output once x and the parallel feed-forward term are taken away
    return {"to pre-norm": rel(unit(parallel), unit(pre)), "to post-norm": rel(unit(parallel), unit(post)),
            "attention term": rel(parallel - x - ffn_parallel, attention),
            "feed-forward term": rel(ffn_parallel, ffn_sequential)}


def _distance_ranges(predicted: object) -> tuple[dict[str, tuple[float, float]] | None, str, str]:
    """The reader's ``{"pre-norm": (low, high), "post-norm": (low, high)}``, or why it is not one."""
    form = ("predicted_distances is a dict {'pre-norm': (low, high), 'post-norm': (low, high)}: a range "
            "for each relative distance")
    if not isinstance(predicted, dict) or set(predicted) != set(LAYER_CHOICES):
        return None, f"{form}; you wrote {predicted!r}.", "not two ranges"
    ranges = {}
    for layer in LAYER_CHOICES:
        pair = predicted[layer]
        try:
            low, high = (float(v) for v in pair)
        except (TypeError, ValueError):
            return None, f"{form}; for {layer!r} you wrote {pair!r}.", "not two ranges"
        if low > high:
            return None, f"a range is (low, high) with low <= high; for {layer!r} you wrote {pair!r}.", "low <= high"
        if low < 0 or high > 2:
            return None, (f"a relative distance of two LayerNorm'd outputs lies between 0 (the same) and 2 "
                          f"(opposite); for {layer!r} you wrote {pair!r}."), "outside 0-2"
        if high - low > PARALLEL_RANGE_WIDTH + 1e-9:
            return None, (f"your {layer} range {low:.2f}-{high:.2f} is {high - low:.2f} wide: a range passes when "
                          f"it is at most {PARALLEL_RANGE_WIDTH:.2f} wide, so commit to a narrower one before "
                          "measuring."), "range too wide"
        ranges[layer] = (low, high)
    return ranges, "", ""


def check_parallel_layer_prediction(predicted_distances: dict | None, fn: Callable) -> CheckResult:
    """Check ``fn`` (``check_parallel_encoder_layer``), then measure it (``measure_parallel_layer``) and
    compare the reader's prediction: a range (at most ``PARALLEL_RANGE_WIDTH`` wide) for the relative
    distance of the parallel layer's output to each sequential layer's, each output normalised per
    position first (scale-invariant). The sublayer terms are printed as the explanation."""
    name = "parallel layer prediction"
    if predicted_distances is None:
        return _finish(name, False, "not done yet: write your prediction (predicted_distances) before you run "
                       "the cell.")
    ranges, why, diagnosis = _distance_ranges(predicted_distances)
    if ranges is None:
        return _finish(name, False, why, diagnosis)
    if not check_parallel_encoder_layer(fn):
        return _finish(name, False, "fix parallel_encoder_layer first: the measurement uses it.")
    m = measure_parallel_layer(fn)
    measured = {"pre-norm": m["to pre-norm"], "post-norm": m["to post-norm"]}
    print(f"   relative distance of the parallel layer's output to the pre-norm layer's {measured['pre-norm']:.2f}, "
          f"to the post-norm layer's {measured['post-norm']:.2f} (each output LayerNorm'd per position first, "
          "so scale alone decides nothing; same modules, one layer, 8 sequences)")
    print(f"   against the pre-norm layer: attention term differs by {m['attention term']:.2f}, "
          f"feed-forward term by {m['feed-forward term']:.2f} (relative)")
    shown = ", ".join(f"{k} {lo:.2f}-{hi:.2f}" for k, (lo, hi) in ranges.items())
    if sum(ranges["post-norm"]) < sum(ranges["pre-norm"]):
        return _finish(name, False, f"you predicted {shown}: closer to post-norm. The parallel layer is closer "
                       "to the PRE-norm layer: it keeps the stream x itself and adds the sublayers to it, as "
                       "pre-norm does, and its attention term MHA(LayerNorm1(x)) is the pre-norm layer's exactly "
                       "(only the feed-forward's input changes); the post-norm layer normalises the stream after "
                       "each sum and its attention reads x, not LN(x); the distances are taken after a LayerNorm "
                       "of each output, so the difference is not one of scale.", "closer: post-norm")
    reasons = {
        ("pre-norm", "high"): ("the attention term and x are the pre-norm layer's own (difference 0.00 above); only "
                               "the feed-forward term changes, and it is a small part of x + attention + FFN, so "
                               "the two outputs stay close"),
        ("pre-norm", "low"): ("the outputs are not the same: the feed-forward reads LN1(x) instead of LN2(x + "
                              "attention), so its term differs (the second line above), and that moves the output"),
        ("post-norm", "high"): ("the two outputs are not unrelated (about 1.41 for independent directions): both "
                                "still carry x, the largest part of the stream, only re-normalised after each sum "
                                "in the post-norm layer"),
        ("post-norm", "low"): ("post-norm changes every term: its attention reads x, not LN1(x), its feed-forward "
                               "reads a normalised sum, and each sum is normalised again, so the outputs differ "
                               "well beyond the feed-forward term alone"),
    }
    for layer in LAYER_CHOICES:
        low, high = ranges[layer]
        if not low <= measured[layer] <= high:
            side = "high" if low > measured[layer] else "low"
            return _finish(name, False, f"you predicted {shown}; the {layer} distance is {measured[layer]:.2f}, "
                           f"your range is too {side}: {reasons[layer, side]}. Note what surprised you, then set "
                           "the prediction to what was measured to move on.", f"{layer} distance too {side}")
    return _finish(name, True, f"you predicted {shown}, and both measured distances lie inside: the two layers "
                   "share the stream x and the attention term MHA(LayerNorm1(x)) (difference 0.00 above); only "
                   "the feed-forward's input differs.")


# --- the label-smoothed loss ------------------------------------------------------------------------
# The exercise spreads ε over the tokens a target can be, not over the whole vocabulary: the ids in
# ``excluded_ids`` (padding, <bos>, <unk>: never a target) get no smoothing mass. PyTorch's
# ``label_smoothing`` spreads ε over all V classes and has no way to leave some out, so the one-line
# ``F.cross_entropy(..., label_smoothing=ε)`` fails here and is named.
def _smoothed(logits, targets, pad_id, epsilon, excluded=(), spread="allowed", ignore_pad=True,
              reduce="tokens", form="ce", renormalise=False):
    V = logits.shape[-1]
    allowed = torch.ones(V, dtype=torch.bool)
    allowed[list(excluded)] = False
    scores = logits.double()
    if renormalise:  # the excluded tokens removed from the softmax itself
        scores = scores.masked_fill(~allowed, float("-inf"))
    logp = torch.log_softmax(scores, dim=-1)  # (B, T, V)
    logp_allowed = torch.where(allowed, logp, torch.zeros((), dtype=logp.dtype))  # 0 where excluded
    n = int(allowed.sum())
    nll = -logp.gather(-1, targets.clamp(0, V - 1)[..., None])[..., 0]  # (B, T)
    if form == "mix probabilities":  # -log((1 - ε) p + ε / m): the mixture inside the log
        loss = -torch.log((1 - epsilon) * torch.exp(-nll) + epsilon / n)
    elif form == "no smoothing term":
        loss = (1 - epsilon) * nll
    elif form == "no 1 - epsilon":  # the right token's term at full weight, ε/m added on top
        loss = nll + epsilon * (-logp_allowed.sum(-1) / n)
    elif spread == "allowed":  # the right answer: ε / m on each of the m allowed tokens
        loss = (1 - epsilon) * nll + epsilon * (-logp_allowed.sum(-1) / n)
        if form == "kl" and epsilon > 0:  # KL(q || p) = cross-entropy - H(q): the same gradient, lower
            q_right, q_other = 1 - epsilon + epsilon / n, epsilon / n
            loss = loss + q_right * math.log(q_right) + (n - 1) * q_other * math.log(q_other)
    elif spread == "V":  # PyTorch's label_smoothing: ε / V on every one of the V classes
        loss = (1 - epsilon) * nll + epsilon * (-logp.mean(-1))
    elif spread == "V over allowed":  # ε / V on each allowed token: the target sums to less than 1
        loss = (1 - epsilon) * nll + epsilon * (-logp_allowed.sum(-1) / V)
    elif spread == "V over allowed, renormalised":  # ε / V on each allowed token, q rescaled to sum to 1
        loss = ((1 - epsilon) * nll + epsilon * (-logp_allowed.sum(-1) / V)) / (1 - epsilon + epsilon * n / V)
    elif spread == "excluded to right":  # ε / V on each allowed token, the excluded share on the right
        k = V - n
        loss = (1 - epsilon + epsilon * k / V) * nll + epsilon * (-logp_allowed.sum(-1) / V)
    elif spread == "all":  # ε (not ε / m) on every allowed class: the target sums to more than 1
        loss = (1 - epsilon) * nll + epsilon * (-logp_allowed.sum(-1))
    elif spread == "n over V":  # ε / m, but on all V classes: the target sums to more than 1
        loss = (1 - epsilon) * nll + epsilon * (-logp.sum(-1) / n)
    elif spread == "right overwritten":  # scatter of 1 - ε replaced the right token's ε / m
        loss = (1 - epsilon) * nll + epsilon * (-logp_allowed.sum(-1) - nll) / n
    elif spread == "V-1":  # ε / (V - 1) on every wrong class
        loss = (1 - epsilon) * nll + epsilon * (-logp.sum(-1) - nll) / (V - 1)
    else:  # "allowed-1": ε / (n - 1) on every allowed wrong class
        loss = (1 - epsilon) * nll + epsilon * (-logp_allowed.sum(-1) - nll) / (n - 1)
    real = (targets != pad_id) if ignore_pad else torch.ones_like(targets, dtype=torch.bool)
    loss = torch.where(real, loss, torch.zeros((), dtype=loss.dtype))
    if reduce == "sum":
        return float(loss.sum())
    if reduce == "batch":  # the sum over real tokens divided by the number of sequences B
        return float(loss.sum() / targets.shape[0])
    if reduce == "rows":
        return float((loss.sum(-1) / real.sum(-1).clamp(min=1)).mean())
    if reduce == "all positions":  # padding left out of the sum, but counted in the divisor
        return float(loss.sum() / targets.numel())
    return float(loss.sum() / real.sum())


SMOOTHING_MISTAKES = [
    Mistake("excluded mass on the right token", "you gave each class ε / V and moved the excluded classes' "
            "share to the right token: spread ε evenly over the m allowed classes (ε / m each), and give the "
            "right token 1 - ε on top of its ε / m.",
            gives=lambda lg, t, p, e, x: _smoothed(lg, t, p, e, x, spread="excluded to right")),
    Mistake("ignores epsilon", "your loss is plain cross-entropy: mix (1 - ε) of it with ε times the "
            "cross-entropy against the uniform distribution over the allowed tokens.",
            gives=lambda lg, t, p, e, x: _smoothed(lg, t, p, 0.0)),
    Mistake("PyTorch's label_smoothing", "your loss spreads ε over all V classes, the excluded ones too: "
            "that is what F.cross_entropy(..., label_smoothing=ε) computes, and it cannot leave tokens out. "
            "Here the target puts ε / m on each of the m tokens NOT in excluded_ids, 0 on the excluded ones.",
            gives=lambda lg, t, p, e, x: _smoothed(lg, t, p, e, spread="V")),
    Mistake("PyTorch's label_smoothing, padding counted", "your loss is F.cross_entropy(..., "
            "label_smoothing=ε) without ignore_index: it spreads ε over all V classes (the excluded ones too) "
            "and counts the padding positions. Write the target yourself: ε / m on each of the m tokens not in "
            "excluded_ids, and average over the positions whose target is not pad_id.",
            gives=lambda lg, t, p, e, x: _smoothed(lg, t, p, e, spread="V", ignore_pad=False)),
    Mistake("smoothing mass on masked logits", "your loss is huge or infinite: a log-probability of "
            "about -1e9 (or -inf) enters it. Setting the excluded tokens' logits very low and then spreading "
            "ε over all V classes (as label_smoothing does) puts target mass on tokens of probability ~0. "
            "Keep the logits as they are and give the excluded ids no TARGET mass (ε / m on the others).",
            when=lambda args, got: not math.isfinite(float(got)) or abs(float(got)) > 1e4),
    Mistake("excluded from the softmax", "you removed the excluded tokens from the softmax. The model still "
            "gives them probability (and must learn to give them none): keep the log-softmax over all V "
            "logits and only give the excluded tokens no TARGET mass.",
            gives=lambda lg, t, p, e, x: _smoothed(lg, t, p, e, x, renormalise=True)),
    Mistake("pad excluded although not in excluded_ids", "your loss gives pad_id no smoothing mass "
            "although pad_id is not in excluded_ids: exclude exactly the ids in excluded_ids (this chapter's "
            "list happens to contain pad_id; the argument may not). pad_id decides only which POSITIONS "
            "enter the average, not which TOKENS get ε / m.",
            gives=lambda lg, t, p, e, x: _smoothed(lg, t, p, e, list(x) + [p])),
    Mistake("divided by m, summed over V", "you divided ε by the number m of allowed tokens but summed "
            "-log p over all V classes: the target then sums to more than 1. Sum over the allowed tokens only.",
            gives=lambda lg, t, p, e, x: _smoothed(lg, t, p, e, x, spread="n over V")),
    Mistake("epsilon over the wrong allowed tokens", "you spread ε over the n - 1 allowed tokens other than "
            "the right one; here ε / m goes on every allowed token, the right one included (as in PyTorch).",
            gives=lambda lg, t, p, e, x: _smoothed(lg, t, p, e, x, spread="allowed-1")),
    Mistake("divided by V, not m", "you put ε / V on each allowed token: with tokens excluded, the target "
            "then sums to 1 - ε + m·ε/V, less than 1. Divide ε by m, the number of allowed tokens "
            "(V - len(excluded_ids)), not by V.",
            gives=lambda lg, t, p, e, x: _smoothed(lg, t, p, e, x, spread="V over allowed")),
    Mistake("eps/V on the allowed tokens, renormalised", "you put ε / V on each allowed token and then "
            "rescaled the target to sum to 1: that shifts mass towards the right token (it gets "
            "(1 - ε + ε/V) / (1 - ε + m·ε/V)). Spread ε evenly over the m allowed tokens instead, ε / m each "
            "(m = V - len(excluded_ids)), which sums to 1 with no rescaling.",
            gives=lambda lg, t, p, e, x: _smoothed(lg, t, p, e, x, spread="V over allowed, renormalised")),
    Mistake("epsilon over V-1", "you spread ε over the V - 1 wrong classes, excluded ones included; "
            "spread it over the m allowed tokens (those not in excluded_ids), the right one included.",
            gives=lambda lg, t, p, e, x: _smoothed(lg, t, p, e, spread="V-1")),
    Mistake("epsilon not divided by m", "you put ε itself on every allowed class: the smoothed target then "
            "sums to 1 - ε + m·ε, not 1. Spread ε over the m allowed tokens, ε / m each.",
            gives=lambda lg, t, p, e, x: _smoothed(lg, t, p, e, x, spread="all")),
    Mistake("KL divergence", "you computed the KL divergence from the smoothed target, which is the "
            "cross-entropy minus the target's own entropy H(q): the same gradients, but a loss lower by a "
            "constant. The loss asked for is the cross-entropy itself.",
            gives=lambda lg, t, p, e, x: _smoothed(lg, t, p, e, x, form="kl")),
    Mistake("mix probabilities", "you mixed the probabilities inside the log, -log((1 - ε)·p + ε/m); "
            "the loss is the cross-entropy against the mixed target, a mixture of log-losses: "
            "Σ_v q_v·(-log p_v).",
            gives=lambda lg, t, p, e, x: _smoothed(lg, t, p, e, x, form="mix probabilities")),
    Mistake("no smoothing term", "you scaled the log-loss of the right token by (1 - ε) but left out the "
            "ε part: the target also puts ε/m on every allowed class, each with its own -log p.",
            gives=lambda lg, t, p, e, x: _smoothed(lg, t, p, e, x, form="no smoothing term")),
    Mistake("no (1 - epsilon) weight", "your right-token term -log p(right) has weight 1: the target puts "
            "1 - ε + ε/m on the right token, so weigh its cross-entropy by (1 - ε) before adding ε times the "
            "mean -log p over the allowed tokens; with weight 1 the target sums to 1 + ε.",
            gives=lambda lg, t, p, e, x: _smoothed(lg, t, p, e, x, form="no 1 - epsilon")),
    Mistake("right token's eps/m overwritten", "your target gives the right token 1 - ε instead of "
            "1 - ε + ε/m: a scatter_ of 1 - ε into the ε/m row REPLACES the right token's ε/m (the target sums "
            "to 1 - ε/m). Add 1 - ε to it (scatter_add_, or += on the gathered entry) instead.",
            gives=lambda lg, t, p, e, x: _smoothed(lg, t, p, e, x, spread="right overwritten")),
    Mistake("ignores pad_id", "use the pad_id argument: the padding id is not always 0.",
            gives=lambda lg, t, p, e, x: _smoothed(lg, t, 0, e, x)),
    Mistake("padding counted", "padding positions count in your loss: ignore every position whose target "
            "is pad_id (in the sum and in the count).",
            gives=lambda lg, t, p, e, x: _smoothed(lg, t, p, e, x, ignore_pad=False)),
    Mistake("divided by all positions", "you left the padding positions out of the sum but divided by "
            "all B·T positions, padding included (a mean over a zero-filled loss): divide by the number "
            "of real target tokens only.",
            gives=lambda lg, t, p, e, x: _smoothed(lg, t, p, e, x, reduce="all positions")),
    Mistake("sum, not mean", "average over the real target tokens; you summed them.",
            gives=lambda lg, t, p, e, x: _smoothed(lg, t, p, e, x, reduce="sum")),
    Mistake("divided by the batch size", "you divided the summed loss by the number of sequences B; "
            "the loss is a mean over the real target tokens, so divide by how many there are.",
            gives=lambda lg, t, p, e, x: _smoothed(lg, t, p, e, x, reduce="batch")),
    Mistake("mean per sequence", "average over all real tokens of the batch at once, not per sequence and "
            "then over sequences (long sequences weigh more).",
            gives=lambda lg, t, p, e, x: _smoothed(lg, t, p, e, x, reduce="rows")),
]


def check_label_smoothed_loss(fn: Callable) -> CheckResult:
    """``label_smoothed_loss(logits (B, T, V), targets (B, T), pad_id, epsilon, excluded_ids) -> float`` (or a
    0-d tensor): the mean over non-padding positions of the cross-entropy against (1 - ε)·one-hot + ε / m on
    each of the m tokens not in ``excluded_ids`` (0 on those)."""
    cases = []
    for seed, (B, T, V, pad_id, epsilon, lengths, excluded) in enumerate([
        (2, 5, 7, 0, 0.1, [5, 2], [0, 1]), (3, 4, 10, 3, 0.3, [4, 4, 1], [3, 0, 9]),
        (1, 1, 5, 4, 0.2, [1], [4]), (4, 6, 6, 0, 0.0, [3, 6, 1, 2], [0, 1]),
        (2, 3, 12, 11, 0.5, [3, 0], []), (2, 4, 8, 0, 0.2, [4, 3], [0, 1, 3]),
    ]):
        g = torch.Generator().manual_seed(seed)
        logits = 2.0 * torch.randn(B, T, V, generator=g)
        choices = torch.tensor([v for v in range(V) if v != pad_id and v not in excluded])
        targets = choices[torch.randint(0, len(choices), (B, T), generator=g)]  # never pad, never excluded
        real = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (B, T)
        targets[~real] = pad_id
        expected = _smoothed(logits, targets, pad_id, epsilon, excluded)
        n = V - len(excluded)
        cases.append(Case(
            f"B={B}, T={T}, V={V}, pad_id={pad_id}, epsilon={epsilon}, real lengths {lengths}, "
            f"excluded_ids={excluded} (m = {n} allowed tokens)",
            (logits, targets, pad_id, epsilon, list(excluded)), expected, atol=1e-5, rtol=1e-5,
            hint="write the smoothed target distribution q of one position first (1 - ε on the right token, "
                 "ε / m on each of the m tokens not in excluded_ids, 0 on the excluded ones) and check that it "
                 "sums to 1 (ε / m each, with m = V - len(excluded_ids), not ε / V); the loss of a position "
                 "is the cross-entropy Σ_v q_v·(-log p_v) with the model's "
                 "log-softmax over all V logits. Then decide which positions enter the average, and what it "
                 "divides by."))
    return run_cases("label-smoothed loss", no_grad(fn), cases, SMOOTHING_MISTAKES)



# --- predict, then compute: the label-smoothing floor as a formula in ε and m ------------------
# A model whose probabilities equal the smoothed target q still pays the loss H(q). The chapter prints
# H(q) for its own 43 classes (0.685). The reader writes, BEFORE computing anything, the floor as a
# closed form floor(epsilon, m) (nothing excluded, m = V). The checker compares it with the reader's own
# loss (logits = log q) at m = 43 and at the paper's ~37,000 tokens, and with the exact value at m = 10^12
# (ε = 0.1) and m = 10^9 (ε = 0.2), where no tensor of m probabilities fits in memory: only a formula
# answers there. H(q) = -(1 - ε + ε/m) log(1 - ε + ε/m) - (m - 1)(ε/m) log(ε/m), about h(ε) + ε log m:
# the floor grows with the log of the vocabulary.
FLOOR_VOCABULARY = 37_000
FLOOR_EPSILON = 0.1
FLOOR_TOLERANCE = 0.005  # h(ε) + ε·log m misses by 0.016 at m = 43: it must not pass
FLOOR_MEASURED = ((FLOOR_EPSILON, 43), (FLOOR_EPSILON, FLOOR_VOCABULARY))  # compared with the reader's loss
FLOOR_HUGE = ((0.1, 10**12), (0.2, 10**9))  # compared with the exact value: no tensor this size


def smoothing_floor(epsilon: float, m: int) -> float:
    """H(q) in nats for ε spread over m tokens, the right one included."""
    right, other = 1 - epsilon + epsilon / m, epsilon / m
    return -right * math.log(right) - (m - 1) * other * math.log(other)


def measure_smoothing_floor(fn: Callable, epsilon: float = FLOOR_EPSILON, m: int = FLOOR_VOCABULARY) -> float:
    """The reader's ``label_smoothed_loss`` for a model whose log-probabilities are log q itself."""
    q = torch.full((m,), epsilon / m, dtype=torch.float64)
    q[1] += 1 - epsilon  # the right token is id 1; id 0 is padding, a target never seen here
    with torch.no_grad():
        return float(fn(q.log()[None, None, :], torch.tensor([[1]]), 0, epsilon, []))


def _binary_entropy(epsilon: float) -> float:
    return -(1 - epsilon) * math.log(1 - epsilon) - epsilon * math.log(epsilon)


def _floor_misses(formula: Callable, m: int, epsilon: float) -> tuple[str, str] | None:
    """(diagnosis, message) for a known wrong formula (judged at ε and m), or None."""
    predicted = formula(epsilon, m)
    if abs(predicted) < FLOOR_TOLERANCE:
        return "zero floor", "a model equal to q still pays H(q) > 0: the target itself is uncertain."
    if abs(formula(epsilon, 43) - predicted) < 1e-9:
        return "ignores m", ("your formula gives the same floor for 43 and for 37,000 tokens; the m - 1 "
                             "small terms ε/m·log(m/ε) sum to about ε·log(m/ε), which grows with m.")
    known = [
        (epsilon * math.log(m), "epsilon log m only", "you kept the wrong tokens' share, about ε·log m, but not "
         "the entropy of the split itself between the right token (1 - ε) and the rest (ε): add h(ε)."),
        (-math.log(1 - epsilon + epsilon / m), "right-token log-loss", "that is -log q(right), the loss of "
         "the right token alone; the floor is the whole cross-entropy of q with itself, every token's term."),
    ]
    for value, name, message in known:
        if abs(predicted - value) < FLOOR_TOLERANCE:
            return name, message
    near = [  # close to the truth somewhere, so judged at both measured sizes (ε = 0.1 and 0.2)
        (lambda e, k: smoothing_floor(e, k) / math.log(2), "bits", "your formula gives H(q) in bits "
         "(log base 2); the loss, and the floor, are in nats: use the natural log."),
        (lambda e, k: _binary_entropy(e) + e * math.log(k), "h(eps) + eps log m", "close, but that is the "
         "approximation h(ε) + ε·log m: it drops the ε/m that q also puts on the right token (the right "
         "token's probability is 1 - ε + ε/m, and only m - 1 tokens share ε/m alone). It is 0.016 nats "
         "off at m = 43; write the two kinds of term exactly."),
        (lambda e, k: _binary_entropy(e) + e * math.log(k - 1), "eps over the m - 1 others",
         "that is the floor of a target that spreads ε over the m - 1 WRONG tokens only (1 - ε on the "
         "right one); the chapter's q gives every token ε/m, the right one included."),
    ]
    points = [(e, k) for e in (0.1, 0.2) for k in (43, m)]
    for wrong, name, message in near:
        if all(abs(formula(e, k) - wrong(e, k)) < 1e-3 for e, k in points):
            return name, message
    return None


def check_smoothing_floor_prediction(floor_formula: Callable | None, fn: Callable,
                                     _loss_checked: bool = False) -> CheckResult:
    """Check ``label_smoothed_loss`` (``check_label_smoothed_loss``), then the reader's closed form
    ``floor_formula(epsilon, m)`` for H(q): against the reader's own loss for a model equal to q at
    m = 43 and 37,000 (ε = 0.1), and against the exact value at m = 10^12 and 10^9, where no tensor
    fits (within ``FLOOR_TOLERANCE`` nats)."""
    name = "label-smoothing floor formula"
    if floor_formula is None:
        return _finish(name, False, "not done yet: write floor_formula(epsilon, m), H(q) in nats as a "
                       "closed form, before you run the cell.")
    if not callable(floor_formula):
        return _finish(name, False, "floor_formula is a function of epsilon and m (a closed form), not "
                       f"one number; you wrote {floor_formula!r}.", "one number")
    if not _loss_checked and not check_label_smoothed_loss(fn):
        return _finish(name, False, "fix label_smoothed_loss first: the floor is measured with it.")
    rows = []
    for epsilon, m in FLOOR_MEASURED + FLOOR_HUGE:
        try:
            predicted = float(floor_formula(epsilon, m))
        except (MemoryError, RuntimeError, OverflowError, ValueError) as error:
            return _finish(name, False, f"floor_formula({epsilon}, {m:,}) failed ({type(error).__name__}): "
                           "it must not build m probabilities; write H(q) as the right token's term plus "
                           "m - 1 equal terms, two logarithms in all.", "not a closed form")
        truth = (measure_smoothing_floor(fn, epsilon, m) if (epsilon, m) in FLOOR_MEASURED
                 else smoothing_floor(epsilon, m))
        rows.append((epsilon, m, predicted, truth))
    print("   ε      m                 your formula   " + "measured / exact")
    for epsilon, m, predicted, truth in rows:
        how = "your loss" if (epsilon, m) in FLOOR_MEASURED else "exact"
        print(f"   {epsilon:<6} {m:<17,} {predicted:>8.3f}       {truth:.3f} ({how})")
    if all(abs(p - t) <= FLOOR_TOLERANCE for _, _, p, t in rows):
        return _finish(name, True, "your formula matches at every size: splitting the mass 1 - ε against ε "
                       f"costs h(ε) ({_binary_entropy(FLOOR_EPSILON):.3f} at ε = 0.1), and spreading ε over m "
                       "tokens adds about ε·log m: the floor grows with the log of the vocabulary.")
    missed = _floor_misses(floor_formula, FLOOR_VOCABULARY, FLOOR_EPSILON)
    if missed:
        return _finish(name, False, f"at m = {FLOOR_VOCABULARY:,}: {missed[1]}", missed[0])
    epsilon, m, predicted, truth = next(r for r in rows if abs(r[2] - r[3]) > FLOOR_TOLERANCE)
    direction = "too high" if predicted > truth else "too low"
    return _finish(name, False, f"at ε = {epsilon}, m = {m:,} your formula gives {predicted:.3f}, {direction}: "
                   "write H(q) as the right token's term plus m - 1 equal terms of the other tokens.",
                   direction)


def check_label_smoothing_file(fn: Callable, prediction: object = None) -> CheckResult:
    """``label_smoothed_loss(logits (B, T, V), targets (B, T), pad_id, epsilon, excluded_ids) -> float``
    with ``prediction_label_smoothed_loss`` (the floor H(q) as a function of epsilon and m): the command
    line's form of ``check_smoothing_floor_prediction`` (the function is checked first)."""
    if not check_label_smoothed_loss(fn):
        return _finish("label-smoothing floor formula", False, "fix label_smoothed_loss first: the floor "
                       "is measured with it.")
    if prediction is None:
        return _finish("label-smoothing floor formula", False, "not done yet: define "
                       "prediction_label_smoothed_loss(epsilon, m), H(q) in nats as a closed form, in your "
                       "file before you run the check.")
    return check_smoothing_floor_prediction(prediction, fn, _loss_checked=True)

# --- greedy decoding of a batch with a length cap per row -------------------------------------
def _decoding_model(seed: int, eos_bias: float) -> Transformer:
    torch.manual_seed(seed)
    model = Transformer(TransformerConfig(9, 10, d_model=16, num_heads=2, d_ff=32, dropout=0.0, tie_output=False))
    with torch.no_grad():
        model.readout.bias[2] += eos_bias  # tuned so that rows end at different steps (<eos> is id 2)
    return model.eval()


def _capped_variant(model, src, src_lengths, bos_id, eos_id, extra, thread=True, feed_bos=False,
                    stop_any=False, cut="first", keep_eos=False, caps="own", cap_shift=0):
    """Greedy decoding with a cap of src_lengths[b] + extra tokens per row, one known mistake
    switched on (all defaults: the right answer)."""
    B = src.shape[0]
    limit = {"own": src_lengths + extra, "padded": torch.full((B,), src.shape[1] + extra),
             "shared": torch.full((B,), int(src_lengths.max()) + extra), "no extra": src_lengths}[caps]
    limit = (limit + cap_shift).clamp(min=0).tolist()  # (B,) each row's own cap
    first = state = model.start(src, src_lengths)
    tokens = torch.full((B,), bos_id, dtype=torch.long)
    ended = torch.zeros(B, dtype=torch.bool)
    out = []
    for n in range(1, max(limit) + 1):
        logits, new_state = model.step(torch.full((B,), bos_id) if feed_bos else tokens, state)
        state = new_state if thread else first
        tokens = logits.argmax(-1)
        out.append(tokens)
        ended |= tokens == eos_id
        finished = ended | (torch.tensor(limit) <= n)
        if finished.all() or (stop_any and ended.any()):
            break
    rows = torch.stack(out, 1).tolist() if out else [[] for _ in range(B)]
    rows = [r[:cap] for r, cap in zip(rows, limit)]
    if cut == "none":
        return rows
    if cut == "all eos":
        return [[t for t in r if t != eos_id] for r in rows]
    return [r[: r.index(eos_id) + (1 if keep_eos else 0)] if eos_id in r else r for r in rows]


def _kept_after_eos(args, got):
    """True if some row is the right row followed by more tokens, and the loop had given that row
    <eos> just where the right row ends (it went on appending after the row's <eos>)."""
    if not isinstance(got, list):
        return False
    eos = args[4]
    right = _capped_variant(*args)
    longer = _capped_variant(*args[:5], args[5] + 64, cut="none")  # the rows as the loop goes on
    for row, r, full in zip(got, right, longer):
        if isinstance(row, list) and len(row) > len(r) and row[: len(r)] == r and eos in full \
                and full.index(eos) == len(r):
            return True
    return False


def _stopped_with_first(args, got):
    """True if got is every row cut after the same number of steps n, fewer than the right loop ran:
    the loop stopped all rows when the first row finished (at its <eos>, or at its cap)."""
    if not isinstance(got, list):
        return False
    right = _capped_variant(*args)
    eos, caps = args[4], (args[2] + args[5]).clamp(min=0).tolist()
    full = _capped_variant(*args[:5], args[5] + 64, cut="none")  # every row as the loop goes on
    for n in range(max(caps)):
        rows = [r[: min(n, cap)] for r, cap in zip(full, caps)]
        rows = [r[: r.index(eos)] if eos in r else r for r in rows]
        if rows == got and rows != right:
            return True
    return False


def _shifted(args, got, shift):
    return got == _capped_variant(*args, cap_shift=shift)


GREEDY_MISTAKES = [
    Mistake("state not threaded", "your loop never uses the new state returned by step: write "
            "`logits, state = model.step(tokens, state)`.", gives=lambda *a: _capped_variant(*a, thread=False)),
    Mistake("always feeds bos", "your loop feeds <bos> at every step: feed back the tokens just chosen.",
            gives=lambda *a: _capped_variant(*a, feed_bos=True)),
    Mistake("stops at the first eos", "your loop stopped every row when the first row finished (at its "
            "<eos>, or its cap): one row's <eos> must not stop the others; stop when every row has produced "
            "<eos> or reached its own cap.", when=_stopped_with_first),
    Mistake("drops every eos", "you removed the <eos> tokens but kept what a row generated after its first "
            "<eos>: cut the row there (the loop goes on for the other rows, so a finished row's later "
            "tokens are noise).", gives=lambda *a: _capped_variant(*a, cut="all eos")),
    Mistake("keeps eos", "your rows include <eos>: cut each row before it.",
            gives=lambda *a: _capped_variant(*a, keep_eos=True)),
    Mistake("not cut at eos", "cut each row at its first <eos>: the tokens after it are not part of the output.",
            gives=lambda *a: _capped_variant(*a, cut="none")),
    Mistake("tokens kept after eos", "a row kept tokens generated after its <eos>: once a row has produced "
            "<eos> it is finished, and whatever the loop generates for it later (while other rows go on) "
            "is not part of its output; cut each row before its first <eos>.",
            when=lambda args, got: _kept_after_eos(args, got)),
    Mistake("hard-coded ids", "use the bos_id and eos_id arguments, not fixed numbers.",
            gives=lambda m, src, lengths, b, e, n: _capped_variant(m, src, lengths, 1, 2, n)),
    Mistake("cap off by one", "your rows are one token too long or too short: a row may call step (generate "
            "a token, <eos> included) at most src_lengths[b] + extra times.",
            when=lambda args, got: _shifted(args, got, 1) or _shifted(args, got, -1)),
    Mistake("one cap for all", "every row got the cap of the longest source (max(src_lengths) + extra): "
            "each row has its own, src_lengths[b] + extra.",
            gives=lambda *a: _capped_variant(*a, caps="shared")),
    Mistake("padded length", "you took the cap from the padded source width src.shape[1]: use each row's "
            "real length, src_lengths[b] + extra.", gives=lambda *a: _capped_variant(*a, caps="padded")),
    Mistake("ignores extra", "the cap is src_lengths[b] + extra; you left out extra.",
            gives=lambda *a: _capped_variant(*a, caps="no extra")),
]


def check_capped_greedy_decode(fn: Callable) -> CheckResult:
    """``capped_greedy_decode(model, src (B, S), src_lengths (B,), bos_id, eos_id, extra) -> list of B
    lists of ids`` through ``model.start`` / ``model.step``; row b generates at most
    ``src_lengths[b] + extra`` tokens and is cut before its first ``<eos>``."""
    cases = []
    for seed, eos_bias, extra in ((29, 0.5, 2), (28, -0.5, 3), (4, -1.0, 1), (0, 1.0, 3), (5, -3.0, 0)):
        model = _decoding_model(seed, eos_bias)
        g = torch.Generator().manual_seed(seed)
        src = torch.randint(4, 9, (4, 7), generator=g)  # (B, S), padded one wider than the longest
        lengths = torch.randint(1, 6, (4,), generator=g)
        lengths[0] = 6
        expected = _capped_variant(model, src, lengths, 1, 2, extra)
        cases.append(Case(
            f"Transformer {seed}, B=4, source lengths {lengths.tolist()}, extra={extra}: output lengths "
            f"{[len(r) for r in expected]}", (model, src, lengths, 1, 2, extra), expected,
            hint="each row b has its own cap, src_lengths[b] + extra generated tokens (<eos> counts); a row "
                 "is finished at its first <eos> or at its cap, and the loop runs until every row is "
                 "finished. Feed back the argmax (not a sample: greedy is deterministic) with the new "
                 "state; cut each row before its FIRST <eos>, dropping everything after it."))
    for seed, (B, V, bos, eos, extra) in enumerate([(1, 8, 1, 2, 2), (3, 11, 0, 7, 1), (5, 6, 3, 0, 0)]):
        model = BatchedPrefixModel(PrefixModel(V, 40 + seed, eos, eos_growth=0.2), None)
        g = torch.Generator().manual_seed(seed)
        src = torch.randint(0, V, (B, 4), generator=g)
        lengths = torch.randint(1, 5, (B,), generator=g)
        expected = _capped_variant(model, src, lengths, bos, eos, extra)
        cases.append(Case(
            f"a stand-in whose logits depend on its state, B={B}, V={V}, bos_id={bos}, eos_id={eos}, "
            f"source lengths {lengths.tolist()}, extra={extra}", (model, src, lengths, bos, eos, extra), expected,
            hint="use bos_id, eos_id and extra as given; thread the state returned by step."))
    return run_cases("capped greedy decode", no_grad(fn), cases, GREEDY_MISTAKES)


# --- one decoder step with a key-value cache (touches the model) -----------------------------------
def _decoder_block(seed: int, d_model: int, num_heads: int) -> DecoderBlock:
    torch.manual_seed(seed)
    block = DecoderBlock(d_model, num_heads, 2 * d_model, norm_first=True).eval()
    with torch.no_grad():  # LayerNorms away from (1, 0), so that a skipped or swapped norm shows
        for norm in (block.norm1, block.norm2, block.norm3):
            norm.weight.normal_(1.0, 0.3)
            norm.bias.normal_(0.0, 0.3)
    return block


def _self_mask(past_mask, pad="mask"):
    """The new query's mask over the P cached slots and itself, (B, 1, P + 1), or None (no padding).
    ``pad`` switches on a mistake: "none" (padding seen), "inverted" (True read as 'hidden'), "new hidden"
    (the new position's own slot marked as padding; padded cases only)."""
    if pad == "new hidden" and past_mask is None:
        raise ValueError("no padding in this case: the new slot cannot be marked as padding")
    if past_mask is None or pad == "none":
        return None
    own = torch.full((past_mask.shape[0], 1), pad != "new hidden", dtype=torch.bool)
    return torch.cat([~past_mask if pad == "inverted" else past_mask, own], dim=1)[:, None, :]


def _step_variant(block, x, past, memory_kv, memory_mask, past_mask=None, keys="h", sees="all", cache="new",
                  order="pre", use_memory_mask=True, new_first=False, cross_reads="y", cross_residual=True,
                  ffn_norm="norm3", residual="x", ffn_reads="y", ffn_residual=True, pad="mask"):
    """One cached pre-norm decoder step with one known mistake switched on (defaults: the right answer)."""
    sa = block.self_attn
    self_mask = _self_mask(past_mask, pad)
    if order == "post":
        new = sa.project_kv(x, x)
        kv = past.extend(new.key, new.value)
        y = block.norm1(x + sa.attend(x, kv, mask=self_mask))
        y = block.norm2(y + block.cross_attn.attend(y, memory_kv, mask=memory_mask))
        return block.norm3(y + block.feed_forward(y)), kv
    h = block.norm1(x)
    source = x if keys == "x" else h
    new = sa.project_kv(source, source)  # (B, H, 1, Dh) each
    kv = (KVCache(new.key, new.value).extend(past.key, past.value) if new_first
          else past.extend(new.key, new.value))  # (B, H, P+1, Dh)
    if sees == "all":
        y = (h if residual == "h" else x) + sa.attend(h, kv, mask=self_mask)
    elif sees == "past":
        y = x + sa.attend(h, past, mask=None if past_mask is None else past_mask[:, None, :])
    elif sees == "itself":
        y = x + sa.attend(h, new)
    else:  # a lower-triangular mask cut from the top-left corner: the query sees the first key only
        y = x + sa.attend(h, kv, mask=torch.ones(1, len(kv), dtype=torch.bool).tril())
    mask = memory_mask if use_memory_mask else None
    if cross_reads == "unnormalised":  # the stream itself, without norm2
        crossed = block.cross_attn.attend(y, memory_kv, mask=mask)
    elif cross_reads == "norm1":  # the self-attention's LayerNorm reused
        crossed = block.cross_attn.attend(block.norm1(y), memory_kv, mask=mask)
    else:
        crossed = block.cross_attn.attend(block.norm2(x if cross_reads == "x" else y), memory_kv, mask=mask)
    before_cross = y
    y = y + crossed if cross_residual else crossed
    ffn_in = before_cross if ffn_reads == "before cross" else y  # the mistake: z1, not z2
    ffn_out = block.feed_forward(getattr(block, ffn_norm)(ffn_in))  # (B, 1, D)
    y = y + ffn_out if ffn_residual else ffn_out
    return y, (past if cache == "old" else kv)


class _BlockCalled(Exception):
    """Raised, during the decoder-step check, by a call of the block's own forward."""


class _CalledTheBlock:
    """What a decoder step that called the whole block returns to the checker."""

    def __repr__(self) -> str:
        return "<the block's own forward was called>"


BLOCK_CALLED = _CalledTheBlock()


def _without_the_block(fn: Callable) -> Callable:
    """``fn`` with ``DecoderBlock.forward`` (so ``block(...)`` too) and ``Transformer.step``
    made to raise while it runs: the exercise is to write the block's sublayers, and calling
    the block itself would reproduce the expected answer exactly. A call returns BLOCK_CALLED."""
    if not callable(fn):
        return fn

    def refuse(*args, **kwargs):
        raise _BlockCalled

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with mock.patch.object(DecoderBlock, "forward", refuse), \
                mock.patch.object(Transformer, "step", refuse):
            try:
                return fn(*args, **kwargs)
            except _BlockCalled:
                return BLOCK_CALLED

    return wrapped


STEP_MISTAKES = [
    Mistake("called the block", "you called the block (block(...) or block.forward), which is the "
            "answer itself: write its three sublayers (self-attention with the cache, "
            "cross-attention, feed-forward), each with its own LayerNorm and residual.",
            when=lambda args, got: got is BLOCK_CALLED),
    Mistake("new slot marked as padding", "your mask marks the new position's own slot as padding "
            "(False in its last column), so the new query sees only the real cached slots: the new "
            "position is always real, so the mask is past_mask followed by one True, shaped (B, 1, P + 1).",
            gives=lambda *a, **k: _step_variant(*a, **k, pad="new hidden")),
    Mistake("past only", "the new position must see itself too: extend the cache with its key and value "
            "first, then attend to all P + 1 positions (with padding: the mask's last slot, the new "
            "position's own, is True).", gives=lambda *a, **k: _step_variant(*a, **k, sees="past")),
    Mistake("itself only", "the new position attended only to itself: its query reads the cached keys of "
            "the P earlier positions and its own (past.extend(...)).",
            gives=lambda *a, **k: _step_variant(*a, **k, sees="itself")),
    Mistake("top-left causal mask", "the one new query comes after every cached position, so it may see all "
            "P + 1 keys: no mask is needed (a (1, P + 1) lower triangle keeps only the first key).",
            gives=lambda *a, **k: _step_variant(*a, **k, sees="first")),
    Mistake("old cache returned", "return the extended cache (P + 1 positions), so that the next step "
            "sees this position.", gives=lambda *a, **k: _step_variant(*a, **k, cache="old")),
    Mistake("only the new position returned", "the cache you return holds only the new position's key and "
            "value: return the extended cache, the P cached positions followed by the new one (P + 1 in all), "
            "so that the next step sees every earlier position.",
            when=lambda args, got: (isinstance(got, tuple) and len(got) == 2 and args[2].key.shape[-2] > 0
                                    and tuple(got[1].key.shape) == tuple(args[2].key.shape[:-2]) + (1,)
                                    + tuple(args[2].key.shape[-1:]))),
    Mistake("new key first", "the new position's key and value go after the cached ones "
            "(past.extend(key, value)): the cache keeps positions in order.",
            gives=lambda *a, **k: _step_variant(*a, **k, new_first=True)),
    Mistake("keys from x", "in a pre-norm block the keys and values of the new position are projected "
            "from LayerNorm1(x), like its query, not from x.", gives=lambda *a, **k: _step_variant(*a, **k, keys="x")),
    Mistake("residual adds to norm1(x)", "the self-attention's output is added to the stream x itself, "
            "not to its normalised copy norm1(x): y = x + self_attn(norm1(x)); the LayerNorm feeds the "
            "sublayer only, the residual path stays un-normalised.",
            gives=lambda *a, **k: _step_variant(*a, **k, residual="h")),
    Mistake("post-norm", "the block is pre-norm: x + sublayer(norm(x)) for each of the three sublayers.",
            gives=lambda *a, **k: _step_variant(*a, **k, order="post")),
    Mistake("cross-attention reads the old x", "the cross-attention's queries come from the stream "
            "AFTER the self-attention has been added (norm2 of the updated x), not from the input x.",
            gives=lambda *a, **k: _step_variant(*a, **k, cross_reads="x")),
    Mistake("cross-attention reads the unnormalised stream", "the cross-attention's queries read the "
            "stream itself; in a pre-norm block every sublayer reads a normalised copy: "
            "cross_attn.attend(norm2(x), ...), with x the stream after the self-attention.",
            gives=lambda *a, **k: _step_variant(*a, **k, cross_reads="unnormalised")),
    Mistake("cross-attention reads norm1", "your cross-attention's queries read norm1 of the stream, "
            "the self-attention's LayerNorm: each sublayer has its own, so the cross-attention reads "
            "norm2(y), with y the stream after the self-attention.",
            gives=lambda *a, **k: _step_variant(*a, **k, cross_reads="norm1")),
    Mistake("no residual around the feed-forward", "the feed-forward's output replaced the stream: like "
            "the two attentions, it is added to it (y + feed_forward(norm3(y))).",
            gives=lambda *a, **k: _step_variant(*a, **k, ffn_residual=False)),
    Mistake("no residual around cross-attention", "the cross-attention's output replaced the stream: "
            "like every sublayer, it is added to it (x + sublayer(norm(x))).",
            gives=lambda *a, **k: _step_variant(*a, **k, cross_residual=False)),
    Mistake("norm2 before the feed-forward", "each sublayer has its own LayerNorm: norm1 before "
            "self-attention, norm2 before cross-attention, norm3 before the feed-forward.",
            gives=lambda *a, **k: _step_variant(*a, **k, ffn_norm="norm2")),
    Mistake("feed-forward reads the stream before cross-attention", "your feed-forward reads norm3 of the "
            "stream after the self-attention but BEFORE the cross-attention's output was added (z1): each "
            "sublayer reads the stream as it is at that point, so the feed-forward reads norm3(z2), with "
            "z2 = z1 + cross_attn(norm2(z1)), and its output is added to z2.",
            gives=lambda *a, **k: _step_variant(*a, **k, ffn_reads="before cross")),
    Mistake("padding seen", "the new query attended to the padding slots of the cache: build its "
            "self-attention mask from past_mask, True on a row's real cached positions, and pass it to "
            "self_attn.attend (None when past_mask is None).",
            gives=lambda *a, **k: _step_variant(*a, **k, pad="none")),
    Mistake("padding mask inverted", "your mask is True on the padding: in this library a True entry "
            "means 'may attend' (PyTorch's nn.Transformer uses the opposite), so pass past_mask itself "
            "for the cached slots.", gives=lambda *a, **k: _step_variant(*a, **k, pad="inverted")),
    Mistake("ignores memory_mask", "the source padding got cross-attention: pass mask=memory_mask to "
            "cross_attn.attend.", gives=lambda *a, **k: _step_variant(*a, **k, use_memory_mask=False)),
]


def check_decoder_step(fn: Callable) -> CheckResult:
    """``decoder_step(block, x (B, 1, D), past: KVCache (B, H, P, Dh), memory_kv, memory_mask (B, 1, S),
    past_mask=None) -> (hidden (B, 1, D), KVCache of P + 1 positions)`` for a pre-norm ``DecoderBlock``;
    ``past_mask`` (B, P) is True on each row's real cached positions (None: all real). The answer is the
    last position of the block run on each row's real prefix at once (full recomputation)."""
    cases = []
    for seed, (B, P, S, D, H, lengths) in enumerate([
        (2, 3, 5, 16, 4, [5, 2]), (1, 0, 4, 8, 2, [4]), (3, 6, 3, 12, 3, [3, 1, 2]), (2, 1, 6, 16, 1, [6, 4]),
    ]):
        block = _decoder_block(seed, D, H)
        g = torch.Generator().manual_seed(100 + seed)
        prefix = torch.randn(B, P + 1, D, generator=g)  # (B, P+1, D): P earlier positions, then the new one
        memory = torch.randn(B, S, D, generator=g)
        memory_mask = token_mask(torch.tensor(lengths), S)[:, None, :]  # (B, 1, S)
        with torch.no_grad():
            memory_kv = block.project_memory(memory)
            full = block(prefix, memory_kv=memory_kv, memory_mask=memory_mask)  # every position at once
            past = (block(prefix[:, :P], memory_kv=memory_kv, memory_mask=memory_mask).cache if P
                    else KVCache(torch.zeros(B, H, 0, D // H), torch.zeros(B, H, 0, D // H)))
        expected = (full.hidden[:, -1:], full.cache)
        cases.append(Case(
            f"B={B}, P={P} cached positions, S={S}, D={D}, H={H}, source lengths {lengths}",
            (block, prefix[:, -1:], past, memory_kv, memory_mask), expected, atol=1e-5,
            hint="a pre-norm block is three sublayers in a row, each reading a normalised copy of the "
                 "stream as it is at that point and adding its output back. Only the self-attention "
                 "needs the cache: which positions must the new query see, and what must the cache "
                 "you return hold for the next step? Likely slips: a post-norm LayerNorm(y + cross-attention(y)) "
                 "around the cross-attention alone (pre-norm adds the sublayer of norm2(y) to y), a "
                 "cross-attention that reads the unnormalised stream y, or the old cache returned."))
    # per-row padding: row b has real cached positions only where past_mask[b] is True (left or right
    # padding); the padding slots hold large garbage. The answer for row b is the block run on that row's
    # real positions and the new one; the cache returned is past.extend(new key, new value), padding kept.
    for seed, (P, S, D, H, rows) in enumerate([
        (4, 5, 16, 4, ["1111", "0011", "1000"]), (3, 4, 12, 3, ["110", "011"]), (5, 3, 8, 2, ["00001", "11111"]),
    ], start=10):
        block = _decoder_block(seed, D, H)
        g = torch.Generator().manual_seed(100 + seed)
        B = len(rows)
        past_mask = torch.tensor([[c == "1" for c in row] for row in rows])  # (B, P)
        x = torch.randn(B, 1, D, generator=g)  # the new position's input
        inputs = torch.randn(B, P, D, generator=g)  # the cached positions' inputs (real where past_mask)
        memory = torch.randn(B, S, D, generator=g)
        lengths = torch.randint(1, S + 1, (B,), generator=g)
        memory_mask = token_mask(lengths, S)[:, None, :]  # (B, 1, S)
        Dh = D // H
        past_key, past_value = 3 * torch.randn(B, H, P, Dh, generator=g), 3 * torch.randn(B, H, P, Dh, generator=g)
        hidden, new_key, new_value = [], [], []
        with torch.no_grad():
            memory_kv = block.project_memory(memory)
            for b in range(B):
                prefix = torch.cat([inputs[b, past_mask[b]], x[b]])[None]  # (1, P_b + 1, D): row b alone
                row_kv = memory_kv.select(torch.tensor([b]))
                out = block(prefix, memory_kv=row_kv, memory_mask=memory_mask[b:b + 1])
                hidden.append(out.hidden[:, -1:])
                past_key[b, :, past_mask[b]] = out.cache.key[0, :, :-1]  # the real slots: the row's own keys
                past_value[b, :, past_mask[b]] = out.cache.value[0, :, :-1]
                new_key.append(out.cache.key[:, :, -1:])
                new_value.append(out.cache.value[:, :, -1:])
        past = KVCache(past_key, past_value)
        expected = (torch.cat(hidden), past.extend(torch.cat(new_key), torch.cat(new_value)))
        cases.append(Case(
            f"B={B}, P={P} cache slots with per-row padding, past_mask rows {rows} (1: real), S={S}, D={D}, H={H}",
            (block, x, past, memory_kv, memory_mask), expected, atol=1e-5, kwargs={"past_mask": past_mask},
            hint="rows now differ in which cached slots are real (past_mask, True on real ones; the others hold "
                 "garbage). Which keys may the new query of row b see, in what shape must that mask reach "
                 "self_attn.attend (it broadcasts to (B, 1 query, P + 1 keys)), and is the new position's own "
                 "slot real? The cache you return keeps every slot, padding included, then the new one."))
    return run_cases("decoder step", no_grad(_without_the_block(fn)), cases, STEP_MISTAKES)


# --- predict, then measure: how sure is a label-smoothed model? -----------------------------------
# With label smoothing 0.1 and V = 43 classes the loss of one position is lowest when the model
# puts 1 - 0.1 + 0.1/43 = 0.902 on the right token. The chapter's trained model (1,200 steps, peak
# rate 6e-3) measures 0.77 on this CPU (dev words, teacher-forced; the 1,200-step model at 3e-3 that
# the page trained before measured 0.763); CONFIDENCE_RANGE is the band a CPU or GPU re-run of it must
# land in. The reader predicts either one number, which passes within PREDICTION_TOLERANCE of the
# reader's own measurement, or a range (low, high), which passes when it contains the measurement
# and is at most MAX_RANGE_WIDTH wide: the chapter's own reasoning gives bounds (about 0.71-0.86),
# too wide to say much, so a reader must commit to a part of them (the reference: the middle 0.10).
# A miss is named by its direction.
SMOOTHING_OPTIMUM = 1 - 0.1 + 0.1 / 43
CONFIDENCE_RANGE = (0.70, 0.84)
CHAPTER_MEASUREMENT = 0.77  # the page's model on this CPU (the command line has no model)
PREDICTION_TOLERANCE = 0.03
MAX_RANGE_WIDTH = 0.10


def _target_probability(model, src, src_lengths, tgt_in, tgt_out, pad_id, kind="right"):
    probs = model(src, src_lengths, tgt_in).float().softmax(-1)  # (B, T, V)
    if kind == "max":
        p = probs.max(-1).values
    elif kind == "tgt_in":
        p = probs.gather(-1, tgt_in[..., None])[..., 0]
    else:
        p = probs.gather(-1, tgt_out[..., None])[..., 0]  # (B, T)
    if kind == "log":
        p = p.log()
    real = tgt_out != pad_id if kind != "pad" else torch.ones_like(tgt_out, dtype=torch.bool)
    if kind == "no last":  # the mistake: each row's last real target (its <eos>) left out
        last = real.sum(-1, keepdim=True) - 1  # (B, 1)
        real = real & (torch.arange(real.shape[1])[None, :] != last)
    if kind == "no eos id":  # the mistake: the targets equal to id 2 (a hard-coded <eos>) left out
        real = real & (tgt_out != 2)
    if kind == "rows":
        return float(((p * real).sum(-1) / real.sum(-1)).mean())
    if kind == "geometric":
        return float(p[real].log().mean().exp())
    return float(p[real].mean())


CONFIDENCE_MISTAKES = [
    Mistake("largest probability", "average the probability of the RIGHT phoneme (tgt_out), not the largest "
            "probability at each position.",
            gives=lambda *a: _target_probability(*a, kind="max")),
    Mistake("log-probability", "average the probability itself, not its logarithm.",
            gives=lambda *a: _target_probability(*a, kind="log")),
    Mistake("padding counted", "leave out the positions whose target is pad_id.",
            gives=lambda *a: _target_probability(*a, kind="pad")),
    Mistake("tgt_in", "gather the probability of tgt_out, the token each position must predict; tgt_in "
            "is the decoder's input, shifted one step right.", gives=lambda *a: _target_probability(*a, kind="tgt_in")),
    Mistake("geometric mean", "exp(-mean(-log p)) is the geometric mean of the probabilities (one over the "
            "perplexity); average the probabilities themselves.",
            gives=lambda *a: _target_probability(*a, kind="geometric")),
    Mistake("eos excluded", "you left out each word's last target, <eos>: predicting where the word ends "
            "is part of the output, so every position whose target is not pad_id counts, <eos> included.",
            gives=lambda *a: _target_probability(*a, kind="no last")),
    Mistake("eos id excluded", "you left out the targets equal to 2 (a fixed <eos> id?): <eos> is a target "
            "like any phoneme; leave out only the positions whose target is pad_id.",
            gives=lambda *a: _target_probability(*a, kind="no eos id")),
    Mistake("mean per word", "average over all real positions at once, not per word first.",
            gives=lambda *a: _target_probability(*a, kind="rows")),
]


def check_right_token_probability(fn: Callable) -> CheckResult:
    """``right_token_probability(model, src, src_lengths, tgt_in, tgt_out, pad_id) -> float``: the mean,
    over the positions whose target is not ``pad_id``, of the probability the teacher-forced model
    gives the right token ``tgt_out``."""
    cases = []
    for seed, (B, S, T, pad_id, lengths) in enumerate([(3, 5, 4, 0, [4, 2, 1]), (2, 3, 6, 0, [6, 6]),
                                                        (4, 6, 3, 5, [1, 3, 2, 3])]):
        torch.manual_seed(seed)
        model = Transformer(TransformerConfig(9, 10, d_model=16, num_heads=2, d_ff=32, dropout=0.0,
                                              pad_id=pad_id, tie_output=False)).eval()
        with torch.no_grad():
            model.readout.weight.mul_(8.0)  # confident enough that the variants differ clearly
        g = torch.Generator().manual_seed(seed)
        src = torch.randint(1, 9, (B, S), generator=g)
        src[src == pad_id] = 6
        src_lengths = torch.full((B,), S)
        tgt_in = torch.randint(1, 10, (B, T), generator=g)
        tgt_out = torch.randint(1, 10, (B, T), generator=g)
        tgt_in[tgt_in == pad_id], tgt_out[tgt_out == pad_id] = 7, 7
        real = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (B, T)
        tgt_out[~real] = pad_id
        with torch.no_grad():
            expected = _target_probability(model, src, src_lengths, tgt_in, tgt_out, pad_id)
        cases.append(Case(f"B={B}, S={S}, T={T}, pad_id={pad_id}, target lengths {lengths}",
                          (model, src, src_lengths, tgt_in, tgt_out, pad_id), expected, atol=1e-5,
                          hint="softmax the logits over V, gather each position's probability of tgt_out "
                               "(the targets, not tgt_in, which is shifted one step right), average "
                               "the probabilities themselves (not exp(-mean log p), a geometric "
                               "mean) over the positions whose target is not pad_id."))
    return run_cases("right-token probability", no_grad(fn), cases, CONFIDENCE_MISTAKES)


def check_confidence_prediction(predicted: float | None, fn: Callable, measure: Callable[[Callable], float]
                                ) -> CheckResult:
    """Check ``fn`` (``check_right_token_probability``), then ``measure(fn)`` on the trained model
    against ``CONFIDENCE_RANGE``, and compare the reader's ``predicted`` probability with it."""
    name = "confidence prediction"
    if predicted is None:
        return _finish(name, False, "not done yet: write your prediction into predicted_probability, then run "
                       "the cell.")
    is_range = isinstance(predicted, (tuple, list))
    if is_range:
        if len(predicted) != 2 or float(predicted[0]) > float(predicted[1]):
            return _finish(name, False, f"a range is two numbers (low, high) with low <= high; you gave {predicted}.")
        bounds = (float(predicted[0]), float(predicted[1]))
    else:
        bounds = (float(predicted), float(predicted))
    if not all(0.0 <= b <= 1.0 for b in bounds):
        return _finish(name, False, f"a probability lies between 0 and 1; you predicted {predicted}.")
    if is_range and bounds[1] - bounds[0] > MAX_RANGE_WIDTH + 1e-9:
        return _finish(name, False, f"your range {bounds[0]:.2f}-{bounds[1]:.2f} is "
                       f"{bounds[1] - bounds[0]:.2f} wide: a range passes when it is at most {MAX_RANGE_WIDTH:.2f} "
                       "wide, so narrow it with the chapter's numbers before measuring.", "range too wide")
    if not check_right_token_probability(fn):
        return _finish(name, False, "fix right_token_probability first: the measurement uses it.")
    measured = float(measure(fn))
    low, high = CONFIDENCE_RANGE
    if not low <= measured <= high:
        return _finish(name, False, f"the measurement gave {measured:.2f}, outside the {low:.2f}-{high:.2f} that "
                       "the chapter's trained model gives: measure the chapter's model on the dev words as set up.")
    print(f"   right-token probability on the dev words: {measured:.2f} (expected {low:.2f}-{high:.2f}) ok")
    if is_range:
        if bounds[0] <= measured <= bounds[1]:
            return _finish(name, True, f"you predicted {bounds[0]:.2f}-{bounds[1]:.2f}, the model's average is "
                           f"{measured:.2f}: inside your range ({bounds[1] - bounds[0]:.2f} wide, at most "
                           f"{MAX_RANGE_WIDTH:.2f} allowed).")
        predicted = bounds[0] if bounds[0] > measured else bounds[1]  # the nearer end
        gap = predicted - measured
        tolerance = "a range passes when it contains the measurement"
    else:
        gap = float(predicted) - measured
        if abs(gap) <= PREDICTION_TOLERANCE:
            return _finish(name, True, f"you predicted {float(predicted):.2f}, the model's average is "
                           f"{measured:.2f}: within {PREDICTION_TOLERANCE:.2f}.")
        tolerance = f"a pass is within {PREDICTION_TOLERANCE:.2f}"
    shown = f"{bounds[0]:.2f}-{bounds[1]:.2f}" if is_range else f"{float(predicted):.2f}"
    direction = "too high" if gap > 0 else "too low"
    said = (f"you predicted {shown}, the model's average is {measured:.2f}: your prediction is "
            f"{direction} by {abs(gap):.2f} ({tolerance}); a model that fit the "
            f"smoothed targets exactly would give {SMOOTHING_OPTIMUM:.3f} at every position")
    if float(predicted) > SMOOTHING_OPTIMUM:
        why = (f"no position gains from going above {SMOOTHING_OPTIMUM:.3f}: with ε = 0.1 over 43 classes the "
               "loss is lowest there, so training pulls a certain model back; and the average is lower "
               f"still, by {SMOOTHING_OPTIMUM - measured:.3f}, because of the positions where the model is unsure "
               "or wrong (its PER is about 12%)")
        diagnosis = "above the smoothing optimum"
    elif gap > 0:
        why = ("you allowed for smoothing, and perhaps for the wrong phonemes, but two things pull the "
               f"average down: about one position in eight is wrong (PER about 12%) and gives the right "
               f"phoneme little, and after only 1,200 steps even the right positions sit below "
               f"{SMOOTHING_OPTIMUM:.3f} (the training loss ends well above its smoothing floor)")
        diagnosis = "too confident"
    else:
        why = ("the model is surer than you thought: it gets most phonemes right (its test PER is about "
               f"12%), so the right phoneme gets {measured:.2f} of the probability on average")
        diagnosis = "too unsure"
    return _finish(name, False, f"{said}. {why[0].upper() + why[1:]}. Note what surprised you, then set "
                   "predicted_probability to the measured value to move on.", diagnosis)


# --- beam search with a length penalty (one sequence) ------------------------------------------------
def _beam_variant(step, state, bos_id, eos_id, max_len, beam_size, length_penalty, *, thread=True,
                  count_eos=True, count_bos=False, set_aside=False, prune_normalised=False, drop_finished=False,
                  stop_on_top=False, extend_finished=None, multiply=False, finished_only=False,
                  steps_offset=0, raw_logits=False):
    """``set_aside``: False (right), True (finished ones among the beam_size best leave the beam; stop once
    beam_size have finished), "max_len" (the same, but run to max_len) or "all finished" (every finished
    candidate leaves, not only those among the beam_size best). ``multiply``: score * n**alpha, not
    score / n**alpha; ``finished_only``: the final choice ignores the hypotheses still live at max_len."""
    """Beam search for one sequence with one known mistake switched on (all off: the right answer)."""
    first = state
    beams = [(0.0, [], state, False)]  # (log-probability, tokens, state, finished)
    done = []
    for _ in range(max_len + steps_offset):  # steps_offset -1 / +1: the off-by-one mistakes
        candidates = []
        for score, tokens, st, finished in beams:
            if finished and not extend_finished:
                if not drop_finished:  # the mistake: a finished hypothesis is lost, not kept
                    candidates.append((score, tokens, st, True))
                continue
            logits, new = step(tokens[-1] if tokens else bos_id, st if thread else first)
            logp = (logits.float() if raw_logits else torch.log_softmax(logits.float(), dim=-1)).tolist()
            candidates += [(score + lp, tokens + [v], new, finished or v == eos_id) for v, lp in enumerate(logp)]
        if extend_finished:  # the mistake: finished ones are extended too; stop at max_len or all finished
            candidates.sort(key=lambda c: -c[0])
            beams = candidates[:beam_size]
            if extend_finished == "stop" and all(b[3] for b in beams):
                break
            continue
        if not candidates:
            break
        if prune_normalised:  # ranks by score / n**alpha at every step, not at the end
            candidates.sort(key=lambda c: -c[0] / len(c[1]) ** length_penalty)
        else:
            candidates.sort(key=lambda c: -c[0])
        if set_aside:  # the other common variant: finished hypotheses leave the beam
            live = [c for c in candidates if not c[3]]
            done += [c for c in (candidates if set_aside == "all finished" else candidates[:beam_size]) if c[3]]
            beams = live[:beam_size]
            if not beams or (set_aside != "max_len" and len(done) >= beam_size):
                break
        else:
            beams = candidates[:beam_size]
            if stop_on_top and beams[0][3]:  # the mistake: stops as soon as the best one has finished
                break
            if all(b[3] for b in beams):
                break
    pool = done + beams
    if finished_only and any(c[3] for c in pool):  # the mistake: live ones at max_len cannot win
        pool = [c for c in pool if c[3]]
    if not pool:
        return []

    if extend_finished:  # truncated at the first <eos>, n counted up to it (<eos> included)
        def cut(c):  # "full": n counts every token, those generated after <eos> too
            if extend_finished == "full" or eos_id not in c[1]:
                return c[1]
            return c[1][: c[1].index(eos_id) + 1]
        best = max(pool, key=lambda c: c[0] / max(len(cut(c)), 1) ** length_penalty)[1]
        return best[: best.index(eos_id)] if eos_id in best else best

    def final(c):
        length = len(c[1]) - (1 if (c[3] and not count_eos) else 0) + (1 if count_bos else 0)
        if multiply:  # the mistake: the penalty multiplies (favouring short outputs even more)
            return c[0] * max(length, 1) ** length_penalty
        return c[0] / max(length, 1) ** length_penalty if length_penalty else c[0]
    best = max(pool, key=final)[1]
    return best[: best.index(eos_id)] if eos_id in best else best


BEAM_MISTAKES = [
    Mistake("state not threaded", "your search never uses the new state returned by step: each hypothesis "
            "must carry its own state and pass it to the next step.",
            gives=lambda *a: _beam_variant(*a, thread=False)),
    Mistake("greedy", "your result is greedy search's: keep beam_size hypotheses at every step, not one.",
            gives=lambda step, state, b, e, n, k, a: _beam_variant(step, state, b, e, n, 1, a)),
    Mistake("penalty multiplied", "you multiplied the score by n ** length_penalty: divide it. Scores are "
            "negative, so multiplying makes long hypotheses look worse, the opposite of the penalty's purpose.",
            gives=lambda *a: _beam_variant(*a, multiply=True)),
    Mistake("only finished at max_len", "when max_len stops the search, the hypotheses still running compete "
            "too: choose among ALL kept hypotheses (finished or not) by score / n ** length_penalty, with n "
            "counting the tokens each has so far.",
            gives=lambda *a: _beam_variant(*a, finished_only=True)),
    Mistake("ignores length_penalty", "your result ignores length_penalty: pick the hypothesis with the "
            "highest score / n ** length_penalty.",
            gives=lambda step, state, b, e, n, k, a: _beam_variant(step, state, b, e, n, k, 0.0)),
    # before 'n counts <bos>': a search that extends finished hypotheses can give the same tokens
    Mistake("finished hypotheses extended", "your search goes on extending hypotheses that have produced <eos> "
            "(their scores keep falling with the tokens after it) and cuts them at the first <eos> only at the "
            "end: a finished hypothesis must stay in the beam with its score frozen at <eos>, and is not "
            "extended again.",
            when=lambda args, got: any(got == _beam_variant(*args, extend_finished=e) for e in _EXTENDED)),
    Mistake("n counts <bos>", "your n counts <bos> too, (len + 1) ** length_penalty: n is the number of "
            "tokens the hypothesis generated, <eos> included and <bos> not (it was given, not chosen).",
            gives=lambda *a: _beam_variant(*a, count_bos=True)),
    Mistake("length without eos", "n counts the tokens a hypothesis generated, <eos> included.",
            gives=lambda *a: _beam_variant(*a, count_eos=False)),
    Mistake("finished set aside", "a finished hypothesis stays in the beam with its score frozen and "
            "competes with the live ones; you set finished ones aside and kept beam_size live ones.",
            gives=lambda *a: _beam_variant(*a, set_aside=True)),
    Mistake("normalised while pruning",
            "keep the beam_size best by their plain score (the sum of log-probabilities) "
            "at every step; divide by n ** length_penalty only to choose the final "
            "hypothesis. Normalising while pruning lets finished hypotheses and live "
            "ones trade places in the beam.",
            gives=lambda *a: _beam_variant(*a, prune_normalised=True)),
    Mistake("finished set aside, run to max_len", "you moved finished hypotheses out of the beam and kept "
            "beam_size live ones until max_len: here a finished hypothesis stays IN the beam with its score "
            "frozen, takes one of the beam_size places, and the search stops once all kept ones are finished.",
            gives=lambda *a: _beam_variant(*a, set_aside="max_len")),
    Mistake("finished set aside, all of them", "you moved every finished candidate out of the beam, even those "
            "not among the beam_size best: a finished hypothesis stays in the beam with its score frozen, and "
            "only the beam_size best candidates (finished or not) are kept at each step.",
            gives=lambda *a: _beam_variant(*a, set_aside="all finished")),
    Mistake("finished dropped", "a hypothesis that produced <eos> must stay in the beam, its score frozen, "
            "and compete with the live ones to the end; your search drops it at the next step, so a finished "
            "hypothesis can only win if it ends at the very last step.",
            gives=lambda *a: _beam_variant(*a, drop_finished=True)),
    Mistake("stops when the top beam finishes", "your search stops as soon as the best-scoring hypothesis "
            "has produced <eos>. Keep going until ALL beam_size kept hypotheses have finished (or max_len): "
            "the final choice divides by n ** length_penalty, so a longer hypothesis still running can overtake "
            "the finished one (with length_penalty 0 it cannot, as live scores only fall).",
            gives=lambda *a: _beam_variant(*a, stop_on_top=True)),
    Mistake("max_len - 1 steps", "your search stops one step early: it runs max_len - 1 steps (e.g. "
            "range(max_len - 1), or counting <bos> as a generated token), so a hypothesis can have at most "
            "max_len - 1 tokens. max_len counts the generated tokens, <eos> included and <bos> not: run up to "
            "max_len extension steps.",
            gives=lambda *a: _beam_variant(*a, steps_offset=-1)),
    Mistake("max_len + 1 steps", "your search runs one step too many (max_len + 1 extension steps): a "
            "hypothesis may have at most max_len tokens, <eos> included.",
            gives=lambda *a: _beam_variant(*a, steps_offset=1)),
    Mistake("ignores the initial state", "start every hypothesis from the state you are given (it stands for "
            "the encoded source), not from an empty one.",
            gives=lambda step, state, *rest: _beam_variant(step, (), *rest)),
    Mistake("scores from raw logits", "your scores add up the raw logits: a hypothesis's score is the sum "
            "of the log-probabilities log_softmax(logits) of its tokens. Logits are not normalised, so an "
            "extension's logit says nothing of its probability, and sums of logits from different steps "
            "and hypotheses cannot be compared.", gives=lambda *a: _beam_variant(*a, raw_logits=True)),
    Mistake("keeps eos", "return the tokens without <eos> (and without <bos>).",
            when=lambda args, got: isinstance(got, list) and args[3] in got),
]


def check_beam_search(fn: Callable) -> CheckResult:
    """``beam_search(step, state, bos_id, eos_id, max_len, beam_size, length_penalty) -> list[int]`` for one
    sequence; ``step(token, state) -> (logits (V,), new_state)``."""
    cases = []
    for V, seed, bos, eos, state, max_len, K, alpha, growth in [
        (6, 0, 1, 2, (), 5, 3, 0.0, 0.1),    # the answer has max_len tokens: max_len - 1 steps cut it
        (6, 15, 1, 2, (), 8, 4, 1.0, 0.4),  # ignoring the penalty, multiplying by it, counting <bos>: all differ
        (8, 143, 1, 2, (), 12, 4, 0.8, 0.4),  # n counting <bos> differs from ignoring the penalty here
        (8, 259, 1, 2, (), 12, 3, 0.8, 0.4),  # beam, greedy and every variant below all differ here
        (6, 6, 1, 2, (), 8, 3, 1.0, 0.35),
        (8, 2, 1, 2, (), 8, 4, 1.0, 0.25),
        (8, 1, 0, 5, (3,), 8, 4, 0.0, 0.3),
        (7, 4, 1, 2, (2, 2), 10, 2, 0.6, 0.35),
        (5, 3, 4, 0, (), 6, 1, 1.0, 0.5),    # one beam: greedy search
        (9, 2, 1, 2, (5,), 3, 3, 1.0, 0.0),  # max_len cuts every hypothesis
        (6, 5, 1, 2, (), 1, 2, 1.0, 0.4),    # a single step
        (9, 16, 3, 6, (4, 1), 9, 3, 0.7, 0.3),  # pruning by score / n**alpha differs
        (7, 3, 1, 2, (), 4, 3, 1.0, 0.3),    # max_len stops it: a live hypothesis beats the finished ones
    ]:
        model = PrefixModel(V, seed, eos, eos_growth=growth, spread=1.5)
        expected = _library_beam_search(BatchedPrefixModel(model, state), torch.zeros(1, 1), torch.ones(1), bos,
                                        eos, max_len, beam_size=K, length_penalty=alpha)[0]
        cases.append(Case(
            f"{model}, state={state}, bos_id={bos}, eos_id={eos}, max_len={max_len}, beam_size={K}, "
            f"length_penalty={alpha}: {len(expected)} tokens", (model, state, bos, eos, max_len, K, alpha), expected,
            hint="score = sum of log_softmax of the chosen tokens; keep the beam_size best of all extensions; "
                 "a finished hypothesis stays with its score frozen and is NOT extended again (no tokens after its "
                 "<eos>) and it keeps its place among the beam_size (not moved to a separate list); "
                 "the answer maximises score / n**length_penalty."))
    mistakes = [Mistake(m.name, m.message, when=_extended_past_eos(no_grad(fn)))
                if m.name == "finished hypotheses extended" else m for m in BEAM_MISTAKES]
    return run_cases("beam search", no_grad(fn), cases, mistakes)


_EXTENDED = ("stop", "max_len", "full")


def _extended_past_eos(fn: Callable) -> Callable:
    """The 'finished hypotheses extended' test. Where its output on a case equals counting <bos>
    (e.g. case 2), the reader's search is also run on a probe where the two differ."""
    def when(args, got):
        if not any(got == _beam_variant(*args, extend_finished=e) for e in _EXTENDED):
            return False
        # it used to be checked after these four: where one gives the same output, it keeps the name
        if any(got == _beam_variant(*args, **kw) for kw in (
                {"count_eos": False}, {"set_aside": True}, {"prune_normalised": True}, {"set_aside": "max_len"})):
            return False
        if got != _beam_variant(*args, count_bos=True):
            return True
        probe = (PrefixModel(6, 20, 2, eos_growth=0.4, spread=1.5), (), 1, 2, 8, 4, 1.0)
        try:
            probe_got = fn(*probe)
        except Exception:  # noqa: BLE001 - the reader's code may raise anything
            return False
        return (probe_got != _beam_variant(*probe, count_bos=True)
                and any(probe_got == _beam_variant(*probe, extend_finished=e) for e in _EXTENDED))
    return when


# --- the command line: the two predict-then-measure exercises read the file's prediction ----------
def check_parallel_layer_file(fn: Callable, prediction: object = None) -> CheckResult:
    """``parallel_encoder_layer(layer: EncoderBlock, x (B, S, D), mask (B, 1, S)) -> (B, S, D)``
    with ``prediction_parallel_encoder_layer`` (``{"pre-norm": (low, high), "post-norm": (low, high)}``):
    the command line's form of ``check_parallel_layer_prediction`` (the function is checked, then measured)."""
    if prediction is None:
        return _finish("parallel layer prediction", False, "not done yet: write "
                       "prediction_parallel_encoder_layer = {'pre-norm': (low, high), 'post-norm': (low, high)} "
                       "in your file (the relative distance of the parallel layer's output to each sequential "
                       "layer's) before you run the check.")
    return check_parallel_layer_prediction(prediction, fn)


def check_confidence_file(fn: Callable, prediction: object = None) -> CheckResult:
    """``right_token_probability(model, src, src_lengths, tgt_in, tgt_out, pad_id) -> float`` with
    ``prediction_right_token_probability`` (a probability, or a range (low, high)). The command line
    has no trained model, so the prediction is compared with ``CONFIDENCE_RANGE``, the range the
    notebook's check accepts for the chapter's trained model; the notebook measures the model itself."""
    name = "confidence prediction"
    if not check_right_token_probability(fn):
        return _finish(name, False, "fix right_token_probability first: the measurement uses it.")
    if prediction is None:
        return _finish(name, False, "not done yet: write prediction_right_token_probability (a probability, "
                       "or a range (low, high)) in your file before you run the check.")
    is_range = isinstance(prediction, (tuple, list))
    try:
        bounds = (float(prediction[0]), float(prediction[1])) if is_range else (float(prediction),) * 2
    except (TypeError, ValueError, IndexError):
        return _finish(name, False, f"a prediction is a number or two numbers (low, high); you gave {prediction!r}.")
    if (is_range and len(prediction) != 2) or bounds[0] > bounds[1]:
        return _finish(name, False, f"a range is two numbers (low, high) with low <= high; you gave {prediction}.")
    if not all(0.0 <= b <= 1.0 for b in bounds):
        return _finish(name, False, f"a probability lies between 0 and 1; you predicted {prediction}.")
    if is_range and bounds[1] - bounds[0] > MAX_RANGE_WIDTH + 1e-9:
        return _finish(name, False, f"your range {bounds[0]:.2f}-{bounds[1]:.2f} is {bounds[1] - bounds[0]:.2f} "
                       f"wide: at most {MAX_RANGE_WIDTH:.2f}, so narrow it with the chapter's numbers.",
                       "range too wide")
    low, high = CONFIDENCE_RANGE
    shown = f"{bounds[0]:.2f}-{bounds[1]:.2f}" if is_range else f"{bounds[0]:.2f}"
    rule = (f"a number passes inside that range; a range at most {MAX_RANGE_WIDTH:.2f} wide passes when "
            f"it contains the chapter's measured {CHAPTER_MEASUREMENT:.2f}, as in the notebook")
    where = (f"the command line has no trained model: it compares your prediction with {low:.2f}-{high:.2f}, "
             f"the range the notebook's check accepts for the chapter's trained model ({rule}; run the "
             "notebook's cell for the model's own number)")
    inside = (bounds[0] <= CHAPTER_MEASUREMENT <= bounds[1]) if is_range else low <= bounds[0] <= high
    if inside:
        return _finish(name, True, f"you predicted {shown}; {where}: consistent with it.")
    if bounds[0] > SMOOTHING_OPTIMUM:
        return _finish(name, False, f"you predicted {shown}, above {SMOOTHING_OPTIMUM:.3f}, the probability a "
                       "model that fit the smoothed targets exactly would give: with ε = 0.1 over 43 classes no "
                       "position gains from going higher, and the wrong positions pull the average lower still. "
                       f"({where}.)", "above the smoothing optimum")
    if bounds[0] > (CHAPTER_MEASUREMENT if is_range else high):
        return _finish(name, False, f"you predicted {shown}, too high: about one position in eight is wrong "
                       "(PER about 12%) and gives the right phoneme little, and after only 1,200 steps even the "
                       f"right positions sit below the smoothing optimum {SMOOTHING_OPTIMUM:.3f}. ({where}.)",
                       "too confident")
    return _finish(name, False, f"you predicted {shown}, too low: the model gets most phonemes right (test PER "
                   f"about 12%), so the right phoneme gets most of the probability. ({where}.)", "too unsure")


EXERCISES = {
    "parallel_encoder_layer": check_parallel_layer_file,
    "label_smoothed_loss": check_label_smoothing_file,
    "decoder_step": check_decoder_step,
    "right_token_probability": check_confidence_file,
    "capped_greedy_decode": check_capped_greedy_decode,
    "my_beam_search": check_beam_search,
}
