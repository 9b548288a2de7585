"""Checkers for Chapter 5 (the Transformer).

Expected answers come from the book's library (``attnbook.layers.EncoderBlock``,
``attnbook.losses.sequence_cross_entropy``, ``attnbook.decoding``); the stand-in decoders'
logits depend on their state (``attnbook.exercises.standins``). Each checker lists the known
mistakes it can name. ``EXERCISES`` maps the notebook's function names to their checkers.
Legend: B batch, S source length, T target length, D model width, V vocabulary, K beams.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from attnbook.decoding import beam_search as _library_beam_search
from attnbook.decoding import greedy_decode as _library_greedy
from attnbook.exercises.core import Case, CheckResult, Mistake, no_grad, run_cases
from attnbook.exercises.standins import BatchedPrefixModel, PrefixModel
from attnbook.layers import EncoderBlock
from attnbook.layers.masks import token_mask
from attnbook.losses import sequence_cross_entropy
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


def _layer_variant(layer, x, mask, order="post", attn_mask="given", norms=(1, 2), ffn_input="z"):
    n1, n2 = (layer.norm1, layer.norm2) if norms == (1, 2) else (layer.norm2, layer.norm1)
    m = mask if attn_mask == "given" else (None if attn_mask == "none" else ~mask)
    if order == "pre":
        h = n1(x)
        z = x + layer.self_attn(h, h, h, mask=m)
        return z + layer.feed_forward(n2(z))
    if order == "no residual":
        z = n1(layer.self_attn(x, x, x, mask=m))
        return n2(layer.feed_forward(z))
    if order == "norm inside":
        z = x + n1(layer.self_attn(x, x, x, mask=m))
        return z + n2(layer.feed_forward(z))
    z = n1(x + layer.self_attn(x, x, x, mask=m))
    return n2(z + layer.feed_forward(z if ffn_input == "z" else x))


ENCODER_MISTAKES = [
    Mistake("pre-norm", "that is a pre-norm layer (x + sublayer(norm(x))); this one is post-norm: "
            "norm(x + sublayer(x)).", gives=lambda *a: _layer_variant(*a, order="pre")),
    Mistake("no residual", "the residual connections are missing: add each sublayer's input to its output "
            "before the LayerNorm.", gives=lambda *a: _layer_variant(*a, order="no residual")),
    Mistake("norm inside the residual", "the LayerNorm goes after the addition, norm(x + sublayer(x)), not "
            "x + norm(sublayer(x)).", gives=lambda *a: _layer_variant(*a, order="norm inside")),
    Mistake("ignores mask", "padding keys got attention: pass mask=mask to self_attn.",
            gives=lambda *a: _layer_variant(*a, attn_mask="none")),
    Mistake("inverted mask", "the mask is inverted: True means 'may attend' (a real key); pass it as it is.",
            gives=lambda *a: _layer_variant(*a, attn_mask="inverted")),
    Mistake("norms swapped", "norm1 belongs to the attention sublayer and norm2 to the feed-forward one.",
            gives=lambda *a: _layer_variant(*a, norms=(2, 1))),
    Mistake("feed-forward on x", "the feed-forward sublayer reads z, the output of the attention sublayer, "
            "not the layer's input x.", gives=lambda *a: _layer_variant(*a, ffn_input="x")),
]


def check_encoder_layer(fn: Callable) -> CheckResult:
    """``encoder_layer(layer: EncoderBlock, x (B, S, D), mask (B, 1, S)) -> (B, S, D)``, post-norm:
    ``z = LayerNorm1(x + MHA(x, x, x)); out = LayerNorm2(z + FFN(z))`` with the layer's modules."""
    cases = []
    for seed, (B, S, D, H, lengths) in enumerate([
        (3, 6, 16, 4, [6, 3, 1]), (1, 4, 8, 2, [4]), (2, 1, 12, 3, [1, 1]), (4, 5, 16, 1, [2, 5, 5, 4]),
    ]):
        layer = _encoder_layer(seed, D, H)
        x = torch.randn(B, S, D, generator=torch.Generator().manual_seed(seed))
        mask = token_mask(torch.tensor(lengths), S)[:, None, :]  # (B, 1, S)
        with torch.no_grad():
            expected = layer(x, mask).hidden
        cases.append(Case(
            f"B={B}, S={S}, D={D}, H={H}, lengths {lengths}", (layer, x, mask), expected,
            hint="post-norm: add the sublayer's output to its input, THEN apply the LayerNorm "
                 "(norm1 after attention, norm2 after the feed-forward); pass the mask to self_attn.",
        ))
    return run_cases("encoder layer", no_grad(fn), cases, ENCODER_MISTAKES)


# --- the label-smoothed loss ------------------------------------------------------------------------
def _smoothed(logits, targets, pad_id, epsilon, spread="V", ignore_pad=True, reduce="tokens"):
    logp = torch.log_softmax(logits.double(), dim=-1)  # (B, T, V)
    V = logits.shape[-1]
    nll = -logp.gather(-1, targets.clamp(0, V - 1)[..., None])[..., 0]  # (B, T)
    if spread == "V":
        smooth = -logp.mean(-1)
        loss = (1 - epsilon) * nll + epsilon * smooth
    else:  # epsilon / (V - 1) on every wrong class
        wrong = (-logp.sum(-1) - nll) / (V - 1)
        loss = (1 - epsilon) * nll + epsilon * wrong
    real = (targets != pad_id) if ignore_pad else torch.ones_like(targets, dtype=torch.bool)
    if reduce == "sum":
        return float((loss * real).sum())
    if reduce == "rows":
        return float(((loss * real).sum(-1) / real.sum(-1).clamp(min=1)).mean())
    return float((loss * real).sum() / real.sum())


SMOOTHING_MISTAKES = [
    Mistake("ignores epsilon", "your loss is plain cross-entropy: mix (1 - ε) of it with ε times the "
            "cross-entropy against the uniform distribution.", gives=lambda lg, t, p, e: _smoothed(lg, t, p, 0.0)),
    Mistake("epsilon over V-1", "you spread ε over the V - 1 wrong classes; here (as in PyTorch's "
            "label_smoothing) ε is spread over all V classes: target = (1 - ε)·one-hot + ε / V.",
            gives=lambda lg, t, p, e: _smoothed(lg, t, p, e, spread="V-1")),
    Mistake("padding counted", "padding positions count in your loss: ignore every position whose target "
            "is pad_id (in the sum and in the count).", gives=lambda lg, t, p, e: _smoothed(lg, t, p, e, ignore_pad=False)),
    Mistake("ignores pad_id", "use the pad_id argument: the padding id is not always 0.",
            gives=lambda lg, t, p, e: _smoothed(lg, t, 0, e)),
    Mistake("sum, not mean", "average over the real target tokens; you summed them.",
            gives=lambda lg, t, p, e: _smoothed(lg, t, p, e, reduce="sum")),
    Mistake("mean per sequence", "average over all real tokens of the batch at once, not per sequence and "
            "then over sequences (long sequences weigh more).",
            gives=lambda lg, t, p, e: _smoothed(lg, t, p, e, reduce="rows")),
]


def check_label_smoothed_loss(fn: Callable) -> CheckResult:
    """``label_smoothed_loss(logits (B, T, V), targets (B, T), pad_id, epsilon) -> float`` (or a 0-d tensor): the mean over
    non-padding positions of the cross-entropy against (1 - ε)·one-hot + ε / V."""
    cases = []
    for seed, (B, T, V, pad_id, epsilon, lengths) in enumerate([
        (2, 5, 7, 0, 0.1, [5, 2]), (3, 4, 10, 3, 0.3, [4, 4, 1]), (1, 1, 5, 4, 0.2, [1]),
        (4, 6, 6, 0, 0.0, [3, 6, 1, 2]), (2, 3, 12, 11, 0.5, [3, 0]),
    ]):
        g = torch.Generator().manual_seed(seed)
        logits = 2.0 * torch.randn(B, T, V, generator=g)
        targets = torch.randint(0, V, (B, T), generator=g)
        targets[targets == pad_id] = (pad_id + 1) % V  # a real token never equals pad_id
        real = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (B, T)
        targets[~real] = pad_id
        expected = sequence_cross_entropy(logits, targets, pad_id, label_smoothing=epsilon).item()
        cases.append(Case(
            f"B={B}, T={T}, V={V}, pad_id={pad_id}, epsilon={epsilon}, real lengths {lengths}",
            (logits, targets, pad_id, epsilon), expected, atol=1e-5, rtol=1e-5,
            hint="per position: (1 - ε)·(-log p[target]) + ε·mean over the V classes of (-log p); "
                 "then the mean over positions whose target is not pad_id."))
    return run_cases("label-smoothed loss", no_grad(fn), cases, SMOOTHING_MISTAKES)


# --- greedy decoding of a batch through start/step -------------------------------------------------
def _decoding_model(seed: int, eos_bias: float) -> Transformer:
    torch.manual_seed(seed)
    model = Transformer(TransformerConfig(9, 10, d_model=16, num_heads=2, d_ff=32, dropout=0.0, tie_output=False))
    with torch.no_grad():
        model.readout.bias[2] += eos_bias  # tuned so that rows end at different steps (<eos> is id 2)
    return model.eval()


def _greedy_variant(model, src, src_lengths, bos_id, eos_id, max_len, thread=True, feed_bos=False,
                    stop_any=False, cut=True, keep_eos=False):
    B = src.shape[0]
    first = state = model.start(src, src_lengths)
    tokens = torch.full((B,), bos_id, dtype=torch.long)
    done = torch.zeros(B, dtype=torch.bool)
    out = []
    for _ in range(max_len):
        logits, new_state = model.step(torch.full((B,), bos_id) if feed_bos else tokens, state)
        state = new_state if thread else first
        tokens = logits.argmax(-1)
        out.append(tokens)
        done |= tokens == eos_id
        if done.all() or (stop_any and done.any()):
            break
    rows = torch.stack(out, 1).tolist()
    if not cut:
        return rows
    return [r[: r.index(eos_id) + (1 if keep_eos else 0)] if eos_id in r else r for r in rows]


GREEDY_MISTAKES = [
    Mistake("state not threaded", "your loop never uses the new state returned by step: write "
            "`logits, state = model.step(tokens, state)`.", gives=lambda *a: _greedy_variant(*a, thread=False)),
    Mistake("always feeds bos", "your loop feeds <bos> at every step: feed back the tokens just chosen.",
            gives=lambda *a: _greedy_variant(*a, feed_bos=True)),
    Mistake("stops at the first eos", "one row's <eos> must not stop the others: stop when every row has "
            "produced <eos> (or after max_len steps).", gives=lambda *a: _greedy_variant(*a, stop_any=True)),
    Mistake("not cut at eos", "cut each row at its first <eos>: the tokens after it are not part of the output.",
            gives=lambda *a: _greedy_variant(*a, cut=False)),
    Mistake("keeps eos", "your rows include <eos>: cut each row before it.",
            gives=lambda *a: _greedy_variant(*a, keep_eos=True)),
    Mistake("hard-coded ids", "use the bos_id and eos_id arguments, not fixed numbers.",
            gives=lambda m, src, lengths, b, e, n: _greedy_variant(m, src, lengths, 1, 2, n)),
    Mistake("max_len off by one", "your rows are one token too long or too short: max_len counts generated "
            "tokens (at most max_len calls of step).",
            when=lambda args, got: got in (_greedy_variant(*args[:5], args[5] + 1),
                                           _greedy_variant(*args[:5], args[5] - 1) if args[5] > 1 else None)),
]


def check_greedy_decode(fn: Callable) -> CheckResult:
    """``greedy_decode(model, src (B, S), src_lengths (B,), bos_id, eos_id, max_len) -> list of B lists of ids``
    through ``model.start`` / ``model.step``; each list stops before ``<eos>`` or at ``max_len``."""
    cases = []
    for seed, eos_bias, max_len in ((3, 0.5, 10), (4, 0.0, 10), (0, 1.0, 10), (3, 0.5, 3)):
        model = _decoding_model(seed, eos_bias)
        g = torch.Generator().manual_seed(seed)
        src = torch.randint(4, 9, (4, 6), generator=g)  # (B, S)
        lengths = torch.randint(1, 7, (4,), generator=g)
        lengths[0] = 6
        expected = _library_greedy(model, src, lengths, 1, 2, max_len)
        cases.append(Case(
            f"Transformer {seed}, B=4, output lengths {[len(r) for r in expected]}, max_len={max_len}",
            (model, src, lengths, 1, 2, max_len), expected,
            hint="start with <bos> for every row; feed each step's argmax back as the next tokens with the new "
                 "state; cut every row at its first <eos> (not included); stop after max_len steps."))
    for seed, (B, V, bos, eos, max_len) in enumerate([(1, 8, 1, 2, 6), (3, 11, 0, 7, 8), (5, 6, 3, 0, 1)]):
        model = BatchedPrefixModel(PrefixModel(V, 40 + seed, eos, eos_growth=0.5), None)
        g = torch.Generator().manual_seed(seed)
        src = torch.randint(0, V, (B, 4), generator=g)
        lengths = torch.randint(1, 5, (B,), generator=g)
        expected = _library_greedy(model, src, lengths, bos, eos, max_len)
        cases.append(Case(
            f"a stand-in whose logits depend on its state, B={B}, V={V}, bos_id={bos}, eos_id={eos}, "
            f"max_len={max_len}", (model, src, lengths, bos, eos, max_len), expected,
            hint="use bos_id, eos_id and max_len as given; thread the state returned by step."))
    return run_cases("greedy decode", no_grad(fn), cases, GREEDY_MISTAKES)


# --- beam search with a length penalty (one sequence) ------------------------------------------------
def _beam_variant(step, state, bos_id, eos_id, max_len, beam_size, length_penalty, *, thread=True,
                  count_eos=True, set_aside=False, prune_normalised=False):
    """Beam search for one sequence with one known mistake switched on (all off: the right answer)."""
    first = state
    beams = [(0.0, [], state, False)]  # (log-probability, tokens, state, finished)
    done = []
    for _ in range(max_len):
        candidates = []
        for score, tokens, st, finished in beams:
            if finished:
                candidates.append((score, tokens, st, True))
                continue
            logits, new = step(tokens[-1] if tokens else bos_id, st if thread else first)
            logp = torch.log_softmax(logits.float(), dim=-1).tolist()
            candidates += [(score + lp, tokens + [v], new, v == eos_id) for v, lp in enumerate(logp)]
        if prune_normalised:  # ranks by score / L**alpha at every step, not at the end
            candidates.sort(key=lambda c: -c[0] / len(c[1]) ** length_penalty)
        else:
            candidates.sort(key=lambda c: -c[0])
        if set_aside:  # the other common variant: finished hypotheses leave the beam
            live = [c for c in candidates if not c[3]]
            done += [c for c in candidates[:beam_size] if c[3]]
            beams = live[:beam_size]
            if not beams or len(done) >= beam_size:
                break
        else:
            beams = candidates[:beam_size]
            if all(b[3] for b in beams):
                break
    pool = done + beams

    def final(c):
        length = len(c[1]) - (1 if (c[3] and not count_eos) else 0)
        return c[0] / max(length, 1) ** length_penalty if length_penalty else c[0]
    best = max(pool, key=final)[1]
    return best[: best.index(eos_id)] if eos_id in best else best


BEAM_MISTAKES = [
    Mistake("state not threaded", "your search never uses the new state returned by step: each hypothesis "
            "must carry its own state and pass it to the next step.",
            gives=lambda *a: _beam_variant(*a, thread=False)),
    Mistake("greedy", "your result is greedy search's: keep beam_size hypotheses at every step, not one.",
            gives=lambda step, state, b, e, n, k, a: _beam_variant(step, state, b, e, n, 1, a)),
    Mistake("ignores length_penalty", "your result ignores length_penalty: pick the hypothesis with the "
            "highest score / L ** length_penalty.",
            gives=lambda step, state, b, e, n, k, a: _beam_variant(step, state, b, e, n, k, 0.0)),
    Mistake("length without eos", "L counts the tokens a hypothesis generated, <eos> included.",
            gives=lambda *a: _beam_variant(*a, count_eos=False)),
    Mistake("finished set aside", "a finished hypothesis stays in the beam with its score frozen and "
            "competes with the live ones; you set finished ones aside and kept beam_size live ones.",
            gives=lambda *a: _beam_variant(*a, set_aside=True)),
    Mistake("normalised while pruning",
            "keep the beam_size best by their plain score (the sum of log-probabilities) "
            "at every step; divide by L ** length_penalty only to choose the final "
            "hypothesis. Normalising while pruning lets finished hypotheses and live "
            "ones trade places in the beam.",
            gives=lambda *a: _beam_variant(*a, prune_normalised=True)),
    Mistake("ignores the initial state", "start every hypothesis from the state you are given (it stands for "
            "the encoded source), not from an empty one.",
            gives=lambda step, state, *rest: _beam_variant(step, (), *rest)),
    Mistake("keeps eos", "return the tokens without <eos> (and without <bos>).",
            when=lambda args, got: isinstance(got, list) and args[3] in got),
]


def check_beam_search(fn: Callable) -> CheckResult:
    """``beam_search(step, state, bos_id, eos_id, max_len, beam_size, length_penalty) -> list[int]`` for one
    sequence; ``step(token, state) -> (logits (V,), new_state)``."""
    cases = []
    for V, seed, bos, eos, state, max_len, K, alpha, growth in [
        (8, 259, 1, 2, (), 12, 3, 0.8, 0.4),  # beam, greedy and every variant below all differ here
        (6, 6, 1, 2, (), 8, 3, 1.0, 0.35),
        (8, 2, 1, 2, (), 8, 4, 1.0, 0.25),
        (8, 1, 0, 5, (3,), 8, 4, 0.0, 0.3),
        (7, 4, 1, 2, (2, 2), 10, 2, 0.6, 0.35),
        (5, 3, 4, 0, (), 6, 1, 1.0, 0.5),    # one beam: greedy search
        (9, 2, 1, 2, (5,), 3, 3, 1.0, 0.0),  # max_len cuts every hypothesis
        (6, 5, 1, 2, (), 1, 2, 1.0, 0.4),    # a single step
        (9, 16, 3, 6, (4, 1), 9, 3, 0.7, 0.3),  # pruning by score / L**alpha differs
    ]:
        model = PrefixModel(V, seed, eos, eos_growth=growth, spread=1.5)
        expected = _library_beam_search(BatchedPrefixModel(model, state), torch.zeros(1, 1), torch.ones(1), bos,
                                        eos, max_len, beam_size=K, length_penalty=alpha)[0]
        cases.append(Case(
            f"{model}, state={state}, bos_id={bos}, eos_id={eos}, max_len={max_len}, beam_size={K}, "
            f"length_penalty={alpha}: {len(expected)} tokens", (model, state, bos, eos, max_len, K, alpha), expected,
            hint="score = sum of log_softmax of the chosen tokens; keep the beam_size best of all extensions; "
                 "a finished hypothesis stays with its score frozen; the answer maximises score / L**length_penalty."))
    return run_cases("beam search", no_grad(fn), cases, BEAM_MISTAKES)


EXERCISES = {
    "encoder_layer": check_encoder_layer,
    "label_smoothed_loss": check_label_smoothed_loss,
    "greedy_decode": check_greedy_decode,
    "beam_search": check_beam_search,
}
