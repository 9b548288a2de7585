"""Checkers for Chapter 9 (the modern decoder).

Each ``check_*`` runs the reader's function on fixed cases and prints a verdict; when a wrong
answer is exactly what a known mistake gives, the verdict names the mistake in one line.
None of the answers is printed in the chapter: each exercise is a variant the chapter does not
show (RMSNorm's backward pass, ``repeat_kv``'s copies where the chapter broadcasts, the interleaved rotary layout, merging tiles kept as (output, log-sum-exp),
building grouped-query weights from a multi-head checkpoint). ``check_kv_cache_prediction``,
``check_crossing_prediction`` and
``check_interpolation_prediction`` compare a prediction with a measurement: their ``prediction``
parameter comes after the function (the command line, ``python -m attnbook.exercises ch09
answers.py``, passes the file's ``prediction_<function name>`` or ``prediction``). ``EXERCISES`` maps the notebook's function names to
their checkers.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import torch

from attnbook.exercises.core import Case, CheckResult, Mistake, _finish, no_grad, run_cases

# --- 1. RMSNorm's backward pass, by hand -------------------------------------------------------


def inverse_rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    """The forward pass's r = 1 / sqrt(mean(x²) + eps) over the last dimension, shape ``(..., 1)``:
    given to the reader of the RMSNorm-backward exercise, which is about the gradient, not about r."""
    return torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def _rms_backward(x: torch.Tensor, weight: torch.Tensor, grad_out: torch.Tensor, eps: float,
                  divisor: int | None = None, dim: int = -1) -> torch.Tensor:
    """dL/dx of y = x · r · w with r = 1 / sqrt(mean(x²) + eps); ``divisor`` and ``dim`` give mistakes."""
    n = x.shape[dim] if divisor is None else divisor
    r = torch.rsqrt(x.pow(2).sum(dim, keepdim=True) / n + eps)
    gw = grad_out * weight
    return r * gw - r.pow(3) * x * (gw * x).sum(dim, keepdim=True) / n


def _rms_second(x: torch.Tensor, weight: torch.Tensor, grad_out: torch.Tensor, eps: float) -> torch.Tensor:
    """The second term's size, r³ · x · mean(grad_out · w · x) (the backward pass subtracts it)."""
    r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return r.pow(3) * x * (grad_out * weight * x).mean(-1, keepdim=True)


def _rms_global(x: torch.Tensor, weight: torch.Tensor, grad_out: torch.Tensor, eps: float) -> torch.Tensor:
    """The mistake of taking both means over every number of the tensor, not per token."""
    r = torch.rsqrt(x.pow(2).mean() + eps)
    gw = grad_out * weight
    return r * gw - r.pow(3) * x * (gw * x).mean()


def _layer_norm_backward(x: torch.Tensor, weight: torch.Tensor, grad_out: torch.Tensor, eps: float) -> torch.Tensor:
    """LayerNorm's (bias-free) gradient, a plausible wrong answer for RMSNorm's."""
    centred = x - x.mean(-1, keepdim=True)
    r = torch.rsqrt(centred.pow(2).mean(-1, keepdim=True) + eps)
    gw, normed = grad_out * weight, centred * r
    return r * (gw - gw.mean(-1, keepdim=True) - normed * (gw * normed).mean(-1, keepdim=True))


def check_rms_norm_backward(fn: Callable) -> CheckResult:
    """``fn(x (..., D), weight (D,), grad_out (..., D), eps) -> (..., D)``: the gradient of the loss
    with respect to ``x`` through ``y = x / sqrt(mean(x²) + eps) * weight``, given ``grad_out = dL/dy``
    (checked against autograd)."""
    g = torch.Generator().manual_seed(0)
    cases = []
    for shape, eps, scale in (((2, 5, 8), 1e-6, 1.0), ((3, 16), 1e-2, 0.1), ((4, 6), 0.5, 0.3), ((2, 3, 4), 1e-6, 2.0)):
        x = (torch.randn(*shape, generator=g, dtype=torch.float64) * scale + 0.4).requires_grad_()
        w = torch.randn(shape[-1], generator=g, dtype=torch.float64) * 0.5 + 1
        grad_out = torch.randn(*shape, generator=g, dtype=torch.float64)
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
        (expected,) = torch.autograd.grad(y, x, grad_out)
        x = x.detach()
        cases.append(Case(f"x of shape {shape}, eps={eps}", (x, w, grad_out, eps), expected,
                          hint="two paths lead from x to y: directly, and through r = 1/sqrt(mean(x²) + eps)"))
    mistakes = [
        Mistake("rms held constant", "you treated r = 1/sqrt(mean(x²) + eps) as a constant: it depends on x too, "
                "which adds -r³ · x · mean(grad_out · w · x).",
                gives=lambda x, w, go, eps: torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * go * w),
        Mistake("weight forgotten", "the weight multiplies the output, so the gradient reaching the normalised "
                "vector is grad_out · weight.", gives=lambda x, w, go, eps: _rms_backward(x, torch.ones_like(w), go, eps)),
        Mistake("weight in one term", "the weight scales grad_out on both paths: the second term is "
                "-r³ · x · mean(grad_out · w · x), not mean(grad_out · x).",
                gives=lambda x, w, go, eps: _rms_backward(x, w, go, eps) + _rms_second(x, w, go, eps)
                - _rms_second(x, torch.ones_like(w), go, eps)),
        Mistake("r² for r³", "the path through r gives d r / d x = -r³ · x / D (r is a power -1/2 of the mean, "
                "whose derivative brings 2x/D): the second term carries r³, not r².",
                gives=lambda x, w, go, eps: _rms_backward(x, w, go, eps) + _rms_second(x, w, go, eps)
                - _rms_second(x, w, go, eps) / torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)),
        Mistake("r for r³", "the path through r carries r³, not r: d r / d x_i = -r³ · x_i / D, because r is "
                "mean(x²) + eps to the power -1/2 (the power drops by one and a half).",
                gives=lambda x, w, go, eps: _rms_backward(x, w, go, eps) + _rms_second(x, w, go, eps)
                - _rms_second(x, w, go, eps) / torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps).pow(2)),
        Mistake("half the second term", "the second term is -r³ · x · mean(grad_out · w · x), not half of it: "
                "the -1/2 of the power and the 2 of d(x²)/dx cancel, so no factor 1/2 stays.",
                gives=lambda x, w, go, eps: _rms_backward(x, w, go, eps) + 0.5 * _rms_second(x, w, go, eps)),
        Mistake("D - 1 divisor", "RMSNorm's mean divides by D, not D - 1 (there is no variance estimate here).",
                gives=lambda x, w, go, eps: _rms_backward(x, w, go, eps, divisor=x.shape[-1] - 1)),
        Mistake("eps dropped", "eps stays inside the root in the backward pass too: r = 1/sqrt(mean(x²) + eps).",
                gives=lambda x, w, go, eps: _rms_backward(x, w, go, 0.0)),
        Mistake("sum, not mean", "the second term averages over the D features: mean(grad_out · w · x), "
                "not their sum.", gives=lambda x, w, go, eps: _rms_backward(x, w, go, eps)
                + (1 - x.shape[-1]) * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps).pow(3) * x
                * (go * w * x).mean(-1, keepdim=True)),
        Mistake("wrong axis", "the means run over the last dimension (each token's D features), not over "
                "the tokens.", gives=lambda x, w, go, eps: _rms_backward(x, w, go, eps, dim=0)),
        Mistake("wrong axis", "the means run over the last dimension (each token's D features), not over "
                "the positions (dimension -2).", gives=lambda x, w, go, eps: _rms_backward(x, w, go, eps, dim=-2)),
        Mistake("wrong axis", "the means run over each token's D features (the last dimension), one r per token; "
                "you took them over every number of the tensor at once.",
                gives=lambda x, w, go, eps: _rms_global(x, w, go, eps)),
        Mistake("mean subtracted (LayerNorm's gradient)", "you subtracted the mean of the gradient, "
                "mean(grad_out · w), as LayerNorm's backward pass does: RMSNorm never subtracts a mean in "
                "its forward pass, so its gradient has no such term.",
                gives=lambda x, w, go, eps: _rms_backward(x, w, go, eps)
                - torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (go * w).mean(-1, keepdim=True)),
        Mistake("mean subtracted (LayerNorm's gradient)", "you wrote LayerNorm's gradient (centred x, the mean "
                "of grad_out · w subtracted): RMSNorm neither centres x nor subtracts a mean.",
                gives=lambda x, w, go, eps: _layer_norm_backward(x, w, go, eps)),
        Mistake("sign", "the term through r enters with a minus sign: a larger x[i] makes r smaller.",
                gives=lambda x, w, go, eps: 2 * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * go * w
                - _rms_backward(x, w, go, eps)),
    ]
    return run_cases("RMSNorm backward", fn, cases, mistakes)


# --- 2. repeat_kv: the copies grouped-query attention can be computed with -----------------------


def check_repeat_kv(fn: Callable) -> CheckResult:
    """``fn(kv (B, Hkv, S, Dh), group) -> (B, Hkv·group, S, Dh)``: head h of the result is key/value
    head h // group (each head repeated ``group`` times in a row), as ``transformers``' ``repeat_kv``."""
    g = torch.Generator().manual_seed(4)
    cases = []
    for shape, group in (((1, 2, 3, 4), 2), ((1, 4, 3, 2), 2), ((2, 3, 5, 2), 4), ((2, 1, 4, 3), 6),
                         ((1, 4, 2, 2), 1), ((2, 4, 2, 3), 3)):
        kv = torch.randn(*shape, generator=g)
        what = {1: "group 1: nothing to repeat"}.get(group, f"{shape[1]} key/value heads, groups of {group}")
        if shape[1] == 1:
            what = "one key/value head (multi-query)"
        cases.append(Case(what, (kv, group), kv.repeat_interleave(group, dim=1),
                          hint="query head h reads key/value head h // group: each head repeated in place"))
    mistakes = [
        Mistake("tiled", "you tiled the heads (0, 1, 0, 1, ...): query head h then reads key/value head "
                "h % Hkv. Each key/value head must serve a *consecutive* group: (0, 0, 1, 1, ...).",
                gives=lambda kv, group: kv.repeat(1, group, 1, 1)),
        Mistake("divided by Hkv", "query head h reads key/value head h // group, with group = H / Hkv query "
                "heads per key/value head; you used h // Hkv, which sends the first Hkv query heads to key/value "
                "head 0 and leaves some key/value heads unread.",
                gives=lambda kv, group: kv[:, torch.arange(kv.shape[1] * group) // kv.shape[1]]),
        Mistake("positions repeated", "you repeated along the positions (dimension 2): repeat the heads, "
                "dimension 1.", gives=lambda kv, group: kv.repeat_interleave(group, dim=2)),
        Mistake("Hkv for the group", "you repeated each head Hkv times: repeat it `group` (= H / Hkv) times, "
                "so that the result has H heads.", gives=lambda kv, group: kv.repeat_interleave(kv.shape[1], dim=1)),
    ]
    return run_cases("repeat_kv", fn, cases, mistakes)


# --- 3. merging partial attention outputs kept as (output, log-sum-exp) -------------------------


def _merge(outs: torch.Tensor, lses: torch.Tensor) -> torch.Tensor:
    total = torch.logsumexp(lses, dim=0)  # (T,)
    weights = torch.exp(lses - total).nan_to_num(0.0)  # (N, T)
    return (weights[..., None] * outs).sum(0)  # (T, Dv)


def _partials(scores: torch.Tensor, values: torch.Tensor, cuts: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Per chunk of keys: the normalised output and the log-sum-exp of the scores."""
    outs, lses = [], []
    for a, b in zip(cuts, cuts[1:]):
        s = scores[:, a:b]
        outs.append(s.softmax(-1).nan_to_num(0.0) @ values[a:b])
        lses.append(torch.logsumexp(s, -1))
    return torch.stack(outs), torch.stack(lses)


def check_merge_partials(fn: Callable) -> CheckResult:
    """``fn(outs (N, T, Dv), lses (N, T)) -> (T, Dv)``: the attention output over all keys, from N
    chunks' normalised outputs and the log-sum-exp of each chunk's scores."""
    g = torch.Generator().manual_seed(1)
    cases = []
    for T, S, Dv, cuts, shift in ((3, 8, 4, [0, 3, 8], 0.0), (5, 12, 2, [0, 2, 7, 12], 0.0),
                                  (2, 6, 3, [0, 5, 6], 0.0), (4, 10, 3, [0, 4, 10], 800.0)):
        scores = torch.randn(T, S, generator=g, dtype=torch.float64) * 2 + shift
        values = torch.randn(S, Dv, generator=g, dtype=torch.float64)
        outs, lses = _partials(scores, values, cuts)
        what = "scores near 800: exp overflows unless you subtract a maximum" if shift else f"chunks {cuts}"
        cases.append(Case(f"T={T}, S={S}, {what}", (outs, lses), scores.softmax(-1) @ values,
                          hint="weight chunk i by exp(lse_i - logsumexp(all lse)); the weights add up to 1"))
    scores = torch.randn(2, 6, generator=g, dtype=torch.float64)
    scores[:, 4:] = float("-inf")  # the last chunk is fully masked
    values = torch.randn(6, 3, generator=g, dtype=torch.float64)
    outs, lses = _partials(scores, values, [0, 4, 6])
    cases.append(Case("an empty (fully masked) chunk: lse = -inf, output 0", (outs, lses),
                      scores.softmax(-1) @ values, hint="a chunk with lse = -inf gets weight 0"))
    scores = torch.randn(3, 7, generator=g, dtype=torch.float64)
    scores[1] = float("-inf")  # query 1 sees no key at all (a padded row): every chunk's lse is -inf
    values = torch.randn(7, 2, generator=g, dtype=torch.float64)
    outs, lses = _partials(scores, values, [0, 3, 7])
    expected = scores.softmax(-1).nan_to_num(0.0) @ values  # that query's output is 0, as each chunk's is
    cases.append(Case("a query whose every key is masked: all its lse = -inf, output 0", (outs, lses), expected,
                      hint="a query with no key left gets output 0, as each of its chunks did, not nan"))
    mistakes = [
        Mistake("nan for a fully masked query", "a query whose every chunk has lse = -inf gets nan from the "
                "softmax over the chunks (-inf minus -inf): its output must be 0, as each of its chunks' is "
                "(replace the nan weights by 0, e.g. .nan_to_num(0.0)).",
                when=lambda args, got: isinstance(got, torch.Tensor) and bool(torch.isnan(got).any())
                and bool(torch.isneginf(args[1]).all(0).any())),
        Mistake("plain mean", "you averaged the chunks' outputs equally: each chunk must weigh as much as its share "
                "of the softmax mass, exp(lse_i) / Σ exp(lse_j).", gives=lambda o, l: o.mean(0)),
        Mistake("overflow", "exp(lse) overflowed (inf/inf = nan): subtract the largest lse before exp, as the online "
                "softmax subtracts the running max.",
                when=lambda args, got: isinstance(got, torch.Tensor) and bool(torch.isnan(got).any())
                and bool(torch.isfinite(args[1]).all()) and args[1].max() > 700),
        Mistake("unnormalised weights", "you weighted by exp(lse_i - max) without dividing by their sum: the weights "
                "must add up to 1.", gives=lambda o, l: (torch.exp(l - l.max(0).values)[..., None] * o).sum(0)),
        Mistake("largest chunk only", "you kept the output of the chunk with the largest lse (its maximum) and "
                "dropped the others: every chunk contributes, weighted by exp(lse_i - the largest lse), then "
                "normalised, as the online softmax rescales what it has instead of discarding it.",
                gives=lambda o, l: o.gather(0, l.argmax(0)[None, :, None].expand(1, *o.shape[1:]))[0]),
        Mistake("rescale sign flipped", "the rescale factor is exp(lse_i - max), at most 1; you used "
                "exp(max - lse_i), which weights the chunks with the *least* mass the most.",
                gives=lambda o, l: (torch.softmax(-l, dim=0).nan_to_num(0.0)[..., None] * o).sum(0)),
        Mistake("weights over the wrong axis", "you normalised the weights over the queries: normalise over the "
                "chunks (dimension 0), separately for each query.",
                gives=lambda o, l: (torch.softmax(l, dim=1)[..., None] * o).sum(0)),
    ]
    return run_cases("merge partial outputs", fn, cases, mistakes)


# --- 4. grouped-query weights from a multi-head checkpoint (Ainslie et al., 2023) ---------------


def _pool(weight: torch.Tensor, num_heads: int, num_kv_heads: int) -> torch.Tensor:
    out_dim, D = weight.shape
    Dh = out_dim // num_heads
    return weight.view(num_kv_heads, num_heads // num_kv_heads, Dh, D).mean(1).reshape(num_kv_heads * Dh, D)


def check_mha_to_gqa(fn: Callable) -> CheckResult:
    """``fn(weight (H·Dh, D), num_heads, num_kv_heads) -> (Hkv·Dh, D)``: a key (or value) projection
    of H heads turned into one of Hkv heads, each the mean of its group of H / Hkv consecutive heads
    (query head h reads key/value head h // (H / Hkv), as in the library)."""
    g = torch.Generator().manual_seed(2)
    cases = []
    for H, Hkv, Dh, D in ((4, 2, 3, 5), (8, 2, 2, 4), (6, 3, 4, 6), (4, 1, 2, 3), (4, 4, 2, 3), (8, 4, 2, 3),
                          (12, 4, 1, 2)):
        w = torch.randn(H * Dh, D, generator=g)
        what = {1: "multi-query (Hkv = 1)", H: "Hkv = H: nothing to pool"}.get(Hkv, f"groups of {H // Hkv}")
        cases.append(Case(f"H={H}, Hkv={Hkv}, Dh={Dh}: {what}", (w, H, Hkv), _pool(w, H, Hkv),
                          hint="view the rows as (Hkv, H / Hkv, Dh, D) and average over the group axis"))

    def strided(w, H, Hkv):
        Dh = w.shape[0] // H
        return w.view(H // Hkv, Hkv, Dh, -1).mean(0).reshape(Hkv * Dh, -1)

    mistakes = [
        Mistake("strided groups", "you grouped heads h, h + Hkv, h + 2·Hkv, ...: the library's query head h reads "
                "key/value head h // (H / Hkv), so a group is H / Hkv *consecutive* heads.", gives=strided),
        Mistake("sum", "you summed each group: take the mean, so the pooled head keeps the scale of one head.",
                gives=lambda w, H, Hkv: _pool(w, H, Hkv) * (H // Hkv)),
        Mistake("divided by H", "you summed each group and divided by H, the number of *all* heads: divide by "
                "the group's size, H / Hkv.", gives=lambda w, H, Hkv: _pool(w, H, Hkv) / Hkv),
        Mistake("first head", "you kept the first head of each group: the GQA paper mean-pools all of them "
                "(it found that better than keeping one).",
                gives=lambda w, H, Hkv: w.view(Hkv, H // Hkv, w.shape[0] // H, -1)[:, 0].reshape(-1, w.shape[1])),
        Mistake("first Hkv heads", "you kept the first Hkv heads of the checkpoint and dropped the rest: "
                "each new head stands for a group of H / Hkv consecutive heads, and is their mean.",
                gives=lambda w, H, Hkv: w[: Hkv * (w.shape[0] // H)]),
        Mistake("wrong view order", "you viewed the rows as (Hkv, Dh, H / Hkv, D): the rows of one head are "
                "consecutive, so view them as (Hkv, H / Hkv, Dh, D) and average row j of each head.",
                gives=lambda w, H, Hkv: w.view(Hkv, w.shape[0] // H, H // Hkv, -1).mean(2).reshape(-1, w.shape[1])),
    ]
    result = run_cases("MHA to GQA weights", fn, cases, mistakes)
    if result:  # then change a model with it
        same = _converted_llama_matches(fn)
        print(f"  a multi-head Llama (4 heads, 2 blocks) turned into a grouped-query one (2 key/value "
              f"heads) with your function: same logits where each group's heads were equal: {same}")
    return result


def _converted_llama_matches(fn: Callable, num_heads: int = 4, num_kv_heads: int = 2) -> bool:
    """Build a multi-head ``Llama`` whose key/value heads are equal within each group, convert its
    key and value projections with ``fn`` into a grouped-query ``Llama``, compare the logits."""
    from dataclasses import replace

    from attnbook.models.llama import Llama, LlamaConfig

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=50, max_len=16, d_model=32, num_heads=num_heads, num_kv_heads=num_heads,
                         d_ff=64, num_layers=2)
    mha = Llama(config).eval()
    with torch.no_grad():  # the heads of each group made equal: pooling them then loses nothing
        for block in mha.blocks:
            for proj in (block.self_attn.k_proj, block.self_attn.v_proj):
                heads = proj.weight.view(num_kv_heads, num_heads // num_kv_heads, -1, config.d_model)
                heads.copy_(heads[:, :1].expand_as(heads).clone())
    state = {name: (fn(w.clone(), num_heads, num_kv_heads) if name.endswith(("k_proj.weight", "v_proj.weight"))
                    else w) for name, w in mha.state_dict().items()}
    gqa = Llama(replace(config, num_kv_heads=num_kv_heads)).eval()
    gqa.load_state_dict(state)
    tokens = torch.randint(50, (2, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return bool(torch.allclose(gqa(tokens), mha(tokens), atol=1e-5))


# --- 5. rotary embeddings, interleaved pairs (RoFormer, GPT-J, Meta's Llama code) ---------------


def _interleaved(x: torch.Tensor, offset: int, base: float) -> torch.Tensor:
    T, Dh = x.shape[-2], x.shape[-1]
    theta = base ** (-torch.arange(0, Dh, 2, dtype=torch.float64) / Dh)  # (Dh/2,)
    angle = (offset + torch.arange(T, dtype=torch.float64))[:, None] * theta  # (T, Dh/2)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)


def _halves(x: torch.Tensor, offset: int, base: float) -> torch.Tensor:
    from attnbook.layers.rotary import RotaryEmbedding

    rope = RotaryEmbedding(x.shape[-1], offset + x.shape[-2], base).to(torch.float64)
    return rope(x.double(), offset).to(x.dtype)


def check_rotate_interleaved(fn: Callable) -> CheckResult:
    """``fn(x (..., T, Dh), offset, base) -> same shape``: turn each pair of dimensions (2d, 2d+1)
    of the vector at position i = offset + t by the angle i · base^(-2d/Dh) (the chapter's R(i θ_d))."""
    g = torch.Generator().manual_seed(3)
    cases = []
    for shape, offset, base in (((1, 5, 4), 0, 10000.0), ((2, 3, 6, 8), 7, 10000.0), ((4, 6), 3, 100.0),
                                ((2, 1, 2), 50, 10.0)):
        x = torch.randn(*shape, generator=g, dtype=torch.float64)
        cases.append(Case(f"x of shape {shape}, offset {offset}, base {base:g}", (x, offset, base),
                          _interleaved(x, offset, base),
                          hint="x'_{2d} = x_{2d} cos - x_{2d+1} sin, x'_{2d+1} = x_{2d} sin + x_{2d+1} cos"))
    mistakes = [
        Mistake("halves layout", "you paired dimension d with d + Dh/2 (the layout of transformers and of this "
                "book's library): this exercise pairs neighbours, 2d with 2d + 1.", gives=_halves),
        Mistake("halves concatenated", "you turned the right pairs but wrote the results as [all evens, all odds] "
                "(torch.cat): put each pair back in its place, 2d and 2d + 1 (torch.stack(..., -1).flatten(-2)).",
                gives=lambda x, o, b: _interleaved_cat(x, o, b)),
        Mistake("turned backwards", "you turned by -angle: the rotation is x'_{2d} = x_{2d} cos - x_{2d+1} sin.",
                gives=_backwards),
        Mistake("frequency exponent", "the frequencies are base^(-2d/Dh) for pair d (d = 0 .. Dh/2 - 1), "
                "not base^(-d/Dh).", gives=lambda x, o, b: _interleaved_freq(x, o, b, 1)),
        Mistake("halves-layout table", "your cos/sin table is the halves layout's (angles repeated as [θ, θ], as "
                "Section 9.3's rotate builds it): pair d at dimensions (2d, 2d+1) needs angle θ_d, so take one "
                "column per pair.", gives=lambda x, o, b: _interleaved_theta(x, o, b, halves_table=True)),
        Mistake("degrees", "the angles are in radians: i · θ_d goes straight into cos and sin.",
                gives=lambda x, o, b: _interleaved_theta(x, o, b, degrees=True)),
        Mistake("offset ignored", "positions start at offset, not at 0: a cached step's first new token sits at "
                "position offset.", gives=lambda x, o, b: _interleaved(x, 0, b)),
        Mistake("positions from 1", "the first position is offset + 0: position 0 is not turned at all.",
                gives=lambda x, o, b: _interleaved(x, o + 1, b)),
    ]
    return run_cases("interleaved rotary", fn, cases, mistakes)


def _interleaved_cat(x: torch.Tensor, offset: int, base: float) -> torch.Tensor:
    turned = _interleaved(x, offset, base)
    return torch.cat([turned[..., 0::2], turned[..., 1::2]], dim=-1)


def _backwards(x: torch.Tensor, offset: int, base: float) -> torch.Tensor:
    return _interleaved_freq(x, offset, base, 2, sign=-1.0)


def _interleaved_theta(x: torch.Tensor, offset: int, base: float, halves_table: bool = False,
                       degrees: bool = False) -> torch.Tensor:
    T, Dh = x.shape[-2], x.shape[-1]
    theta = base ** (-torch.arange(0, Dh, 2, dtype=torch.float64) / Dh)  # (Dh/2,)
    if halves_table:  # the (T, Dh) table [θ_0 .. θ_{Dh/2-1}, θ_0 ..] read at column 2i
        theta = theta.repeat(2)[0::2]
    angle = (offset + torch.arange(T, dtype=torch.float64))[:, None] * theta
    if degrees:
        angle = angle * math.pi / 180
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)


def _interleaved_freq(x: torch.Tensor, offset: int, base: float, two: int, sign: float = 1.0) -> torch.Tensor:
    T, Dh = x.shape[-2], x.shape[-1]
    theta = base ** (-two * torch.arange(Dh // 2, dtype=torch.float64) / Dh)
    angle = sign * (offset + torch.arange(T, dtype=torch.float64))[:, None] * theta
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)


# --- 6. predict, then measure: the bytes of a KV cache ------------------------------------------

KV_SETTING = dict(num_layers=3, d_model=64, num_heads=8, num_kv_heads=2, head_dim=8, batch=5, prompt=37,
                  new_tokens=11, bytes_per_number=4)


def kv_cache_bytes(num_layers: int, num_kv_heads: int, head_dim: int, batch: int, positions: int,
                   bytes_per_number: int, kv_factor: int = 2) -> int:
    """2 (keys and values) · blocks · Hkv · Dh · B · positions · bytes (``kv_factor`` gives a mistake)."""
    return kv_factor * num_layers * num_kv_heads * head_dim * batch * positions * bytes_per_number


def _kv_mistakes(s: dict, positions: int) -> list[tuple[str, dict]]:
    """Plausible wrong predictions in the setting ``s``: (what went wrong, the arguments that give it)."""
    base = dict(num_layers=s["num_layers"], num_kv_heads=s["num_kv_heads"], head_dim=s["head_dim"],
                batch=s["batch"], positions=positions, bytes_per_number=s["bytes_per_number"])
    kv_width = s["num_kv_heads"] * s["head_dim"]
    return [
        ("you counted the last generated token: it is returned, never fed back, so the cache holds "
         "prompt + new - 1 positions", dict(base, positions=positions + 1)),
        ("half the truth: either a factor 2 is missing (keys *and* values are cached, two tensors per block) "
         f"or you took 2 bytes per number, as for 16-bit numbers (this cache is float32: "
         f"{s['bytes_per_number']} bytes per number)", dict(base, kv_factor=1)),
        (f"you counted numbers, not bytes: each float32 number takes {s['bytes_per_number']} bytes",
         dict(base, bytes_per_number=1)),
        (f"you counted numbers, not bytes ({s['bytes_per_number']} per float32 number), and only one of the "
         "two cached tensors (keys and values)", dict(base, bytes_per_number=1, kv_factor=1)),
        (f"you counted one block (or took the formula's 2, which counts keys and values, for the blocks): each of "
         f"the {s['num_layers']} blocks keeps its own keys and values", dict(base, num_layers=1)),
        (f"you used 2 blocks, the size of Section 9.4's models: this one has {s['num_layers']}",
         dict(base, num_layers=2)),
        (f"you used D = H · Dh = {s['d_model']} numbers per position, the width of all {s['num_heads']} query "
         f"heads: the cache holds only Hkv · Dh = {s['num_kv_heads']} · {s['head_dim']} = {kv_width}",
         dict(base, num_kv_heads=s["num_heads"])),
        (f"you used D = {s['d_model']} numbers per position instead of Hkv · Dh = {kv_width}, and counted only "
         "one of keys and values", dict(base, num_kv_heads=s["num_heads"], kv_factor=1)),
        (f"you forgot the batch: each of the {s['batch']} sequences has its own cache", dict(base, batch=1)),
        ("you counted the prompt only: the generated tokens fed back are cached too (prompt + new - 1 positions)",
         dict(base, positions=s["prompt"])),
        ("you counted the generated tokens only: the prompt's keys and values are cached too (prompt + new - 1 "
         "positions)", dict(base, positions=s["new_tokens"])),
        ("you counted the generated tokens only, and the prompt is cached too (prompt + new - 1 positions)",
         dict(base, positions=s["new_tokens"] - 1)),
    ]


def check_kv_cache_prediction(measure: Callable[[], int], prediction: int | None = None) -> CheckResult:
    """``measure() -> int``, the bytes of every cached key and value after generating in the setting
    ``KV_SETTING``; ``prediction``, written before measuring (the command line passes the file's
    ``prediction_cache_bytes`` or ``prediction``), is compared with it and the gap explained."""
    name = "KV-cache bytes"
    if prediction is None:
        return _finish(name, False, "not done yet: write your prediction into prediction_cache_bytes, "
                       "then run the cell.")
    predicted = prediction
    s = KV_SETTING
    positions = s["prompt"] + s["new_tokens"] - 1  # the last generated token is never fed back
    truth = kv_cache_bytes(s["num_layers"], s["num_kv_heads"], s["head_dim"], s["batch"], positions,
                           s["bytes_per_number"])
    measured = int(no_grad(measure)())
    if measured != truth:
        return _finish(name, False, f"the measurement gave {measured:,} bytes, not the {truth:,} of this setting: "
                       "run the measurement as given (the settings of KV_SETTING).")
    if int(predicted) == truth:
        return _finish(name, True, f"predicted {int(predicted):,} bytes, measured {measured:,}: exactly right.")
    for why, setting in _kv_mistakes(s, positions):
        if int(predicted) == kv_cache_bytes(**setting):
            return _finish(name, False, f"predicted {int(predicted):,}, measured {measured:,}: {why}.")
    ratio = int(predicted) / truth
    return _finish(name, False, f"predicted {int(predicted):,}, measured {measured:,} ({ratio:.2f} times the truth). "
                   "Count: 2 (K and V) · blocks · key/value heads · head width · batch · positions · bytes.")


# --- 7. predict, then measure: where reading past the training length stops paying --------------

# Where the committed runs cross the bigram (benchmarks/modern_ablation.py, seeds 0-7, 600 steps,
# windows of 256 held-out tokens; lib/attnbook/results/modern_ablation.json): the first position
# past 64 at which 8 positions in a row average more than the bigram's loss. Per seed, +rotary:
# 124, 121, 120, 123, 88, 121, 121, 122; the mean curve of the 8 seeds: 121. The checker recomputes
# all of them from the file and passes a prediction anywhere inside the single seeds' range (88 to
# 124 in that file): one seed crosses at 88, so a reasoned guess of 100 is as good as any seed's.


def _crossing(curve: torch.Tensor, level: float, window: int = 8) -> int | None:
    """First position p (1-based, p >= 72) where positions p-window+1..p average above ``level``."""
    rolling = curve.unfold(0, window, 1).mean(1)  # rolling[p - window]: positions p-window+1..p
    return next((p for p in range(64 + window, len(curve) + 1) if rolling[p - window] > level), None)


def _crossings() -> dict:
    """The right measurement, the numbers some wrong ones give, and the single seeds' crossings
    with the tolerance they justify, all from the committed results."""
    from attnbook.results import load_result
    result = load_result("modern_ablation.json")
    bigram, unigram = result["bigram"]["held_out_loss"], result["unigram"]["held_out_loss"]

    def curves(variant: str) -> torch.Tensor:
        return torch.tensor([r["loss_by_position_256"] for r in result["runs"]
                             if r["variant"] == variant and "loss_by_position_256" in r])

    rotary = curves("+rotary")
    seeds = [_crossing(c, bigram) for c in rotary]
    spread = torch.tensor([float(x) for x in seeds if x is not None])
    return {"truth": _crossing(rotary.mean(0), bigram), "modern": _crossing(curves("modern").mean(0), bigram),
            "unigram": _crossing(rotary.mean(0), unigram),
            "one position": _crossing(rotary.mean(0), bigram, window=1),
            "seeds": seeds, "tolerance": max(1, round(spread.std().item()))}


def check_crossing_prediction(measure: Callable[[], int], prediction: int | None = None) -> CheckResult:
    """``measure() -> int``: the first position past 64 where the rotary-only model's mean loss (8
    positions in a row, mean curve of 8 seeds) rises above the bigram's; ``prediction``, written before
    measuring (the command line passes the file's ``prediction_crossing_position`` or ``prediction``),
    passes anywhere inside the single seeds' crossings (their range), the spread no reasoning can beat."""
    name = "where +rotary crosses the bigram"
    if prediction is None:
        return _finish(name, False, "not done yet: write your prediction (a position) into "
                       "prediction_crossing_position, then run the cell.")
    known = _crossings()
    measured = measure()
    if measured != known["truth"]:
        for what, why in (("modern", "the full modern block's curve, not the rotary-only model's"),
                          ("unigram", "the crossing of the unigram, not the bigram"),
                          ("one position", "one position above the bigram, not 8 in a row")):
            if measured == known[what]:
                return _finish(name, False, f"the measurement gave {measured}: that is {why}.")
        return _finish(name, False, f"the measurement gave {measured}, not {known['truth']}: run it as given.")
    seeds = [x for x in known["seeds"] if x is not None]
    low, high = min(seeds), max(seeds)
    p = int(prediction)
    if p <= 64:
        why = ("too early: the training length is not where the model breaks: up to well past 64, most of a "
               "query's neighbours sit at offsets it trained on, and the fast pairs' angles repeat; only the "
               "slow pairs meet new angles")
    elif p < low:
        why = (f"too early, before every seed's crossing ({low} to {high}): it holds longer than that: the loss "
               "climbs slowly at first, because the near tokens, which carry most of the prediction, are at "
               "offsets the model has seen")
    elif p <= high:
        why = (f"inside the single seeds' crossings ({low} to {high}), the spread a reasoned guess cannot "
               "beat; which seed, or the mean, lands where is luck")
    else:
        why = (f"too late, after every seed's crossing ({low} to {high}): relative offsets alone do not carry "
               "it that far: offsets past 63 and the slow pairs' angles were never trained, and the loss climbs "
               "steeply from about twice the training length")
    return _finish(name, low <= p <= high,
                   f"predicted position {p}, measured {measured} on the mean of {len(known['seeds'])} seeds "
                   f"(single seeds {low} to {high}): {why}.")


# --- 8. predict, then measure: what position interpolation costs, inside and past the window ----

# Positions (1-based, inclusive) of the two spans the prediction is about: the second half of the
# training window, and the last quarter of the 256-token window (four times the training length).
INTERPOLATION_SPANS = ((33, 64), (193, 256))
# How far (nats) each predicted mean loss may be from the measured one.
INTERPOLATION_TOLERANCE = 0.4


def _span_mean(curves: torch.Tensor, span: tuple[int, int]) -> float:
    return curves[:, span[0] - 1:span[1]].mean().item()


def _interpolation_measurements() -> dict[str, tuple[float, float]]:
    """From the committed runs (benchmarks/modern_ablation.py --interpolation, +rotary, seeds 3-5):
    the mean loss over each span, interpolated (the truth) and plain (a likely wrong measurement)."""
    from attnbook.results import load_result
    runs = load_result("modern_ablation_interpolation.json")["runs"]
    found = {}
    for name, key in (("interpolated", "loss_by_position_256_interpolated"),
                      ("plain", "loss_by_position_256")):
        curves = torch.tensor([r[key] for r in runs])
        found[name] = tuple(_span_mean(curves, span) for span in INTERPOLATION_SPANS)
    return found


def check_interpolation_prediction(measure: Callable[[], tuple[float, float]],
                                   prediction: tuple[float, float] | None = None) -> CheckResult:
    """``measure() -> (inside, far)``: the interpolated rotary model's mean held-out loss (nats) over
    positions 33-64 and 193-256 of windows of 256 tokens; ``prediction``, the same two numbers written
    before measuring (the command line passes the file's ``prediction_interpolated_losses`` or
    ``prediction``). Each must be within ``INTERPOLATION_TOLERANCE`` nats of the measurement."""
    name = "position interpolation, inside and past the window"
    if prediction is None:
        return _finish(name, False, "not done yet: write your two predictions (nats) into "
                       "prediction_interpolated_losses, then run the cell.")
    known = _interpolation_measurements()
    truth, plain = known["interpolated"], known["plain"]
    measured = tuple(float(x) for x in measure())
    if any(abs(m - t) > 1e-3 for m, t in zip(measured, truth)):
        if all(abs(m - p) <= 1e-3 for m, p in zip(measured, plain)):
            return _finish(name, False, "the measurement read the plain model's curves "
                           "(loss_by_position_256), not the interpolated ones.")
        return _finish(name, False, f"the measurement gave {measured[0]:.2f} and {measured[1]:.2f}, not "
                       f"{truth[0]:.2f} and {truth[1]:.2f}: run it as given.")
    try:
        inside, far = (float(x) for x in prediction)
    except (TypeError, ValueError):
        return _finish(name, False, "write two numbers: (loss over positions 33-64, loss over 193-256).")
    tol = INTERPOLATION_TOLERANCE
    problems = []
    if inside < truth[0] - tol:
        if abs(inside - plain[0]) <= tol:
            problems.append(f"inside the window you predicted about plain rotary's {plain[0]:.2f}: interpolation "
                            "rescales every position, those inside the training length too; neighbours end up a "
                            "quarter of a position apart, an offset the model never trained on, so even its "
                            "short-range attention blurs")
        else:
            problems.append("inside the window it is worse than that: the rescaled positions are new to the "
                            "model everywhere, not only past 64")
    elif inside > truth[0] + tol:
        problems.append("inside the window it is better than that: blurred positions still leave the tokens "
                        "themselves, and the loss stays well below the unigram's")
    if far > truth[1] + tol:
        problems.append(f"far out you predicted a climb (plain rotary reaches {plain[1]:.2f}): interpolated "
                        "angles stay inside the range trained on, so the loss does not climb past 64")
    elif far < truth[1] - tol:
        problems.append("far out it cannot beat its own level inside the window: a flat curve stays where "
                        "positions 33-64 put it")
    verdict = (f"predicted {inside:.2f} and {far:.2f} nats, measured {truth[0]:.2f} and {truth[1]:.2f} "
               f"(plain extrapolation: {plain[0]:.2f} and {plain[1]:.2f})")
    if problems:
        return _finish(name, False, verdict + ": " + "; ".join(problems) + ".")
    return _finish(name, True, verdict + f": both within {tol} nats. Flat, and poor everywhere: without "
                   "its fine-tuning the rescaling trades the short range for the long.")


EXERCISES = {
    "rms_norm_backward": check_rms_norm_backward,
    "repeat_kv": check_repeat_kv,
    "merge_partials": check_merge_partials,
    "mha_to_gqa": check_mha_to_gqa,
    "rotate_interleaved": check_rotate_interleaved,
    "cache_bytes": check_kv_cache_prediction,
    "crossing_position": check_crossing_prediction,
    "interpolated_losses": check_interpolation_prediction,
}
