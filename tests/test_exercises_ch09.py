"""Chapter 9 checkers: each accepts the reference solution, rejects a table of plausible wrong
answers, and names the mistake where it knows it."""
import pytest
import torch

from attnbook.exercises.ch09 import (
    EXERCISES, KV_SETTING, check_kv_cache_prediction, check_merge_partials, check_mha_to_gqa,
    check_repeat_kv, check_rms_norm_backward, check_rotate_interleaved, kv_cache_bytes,
)
from attnbook.models.llama import Llama, LlamaConfig


# --- reference solutions (as in the chapter) ---

def rms_norm_backward(x, weight, grad_out, eps):
    r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    gw = grad_out * weight
    return r * gw - r**3 * x * (gw * x).mean(-1, keepdim=True)


def _rms_bw(x, w, go, eps, n=None, dim=-1):
    n = x.shape[dim] if n is None else n
    r = torch.rsqrt(x.pow(2).sum(dim, keepdim=True) / n + eps)
    return r * go * w - r**3 * x * (go * w * x).sum(dim, keepdim=True) / n


def repeat_kv(kv, group):
    B, Hkv, S, Dh = kv.shape
    return kv[:, :, None].expand(B, Hkv, group, S, Dh).reshape(B, Hkv * group, S, Dh)


def merge_partials(outs, lses):
    weights = torch.softmax(lses, dim=0).nan_to_num(0.0)  # (N, T)
    return (weights[..., None] * outs).sum(0)


def mha_to_gqa(weight, num_heads, num_kv_heads):
    rows, D = weight.shape
    Dh = rows // num_heads
    groups = weight.view(num_kv_heads, num_heads // num_kv_heads, Dh, D)
    return groups.mean(1).reshape(num_kv_heads * Dh, D)


def rotate_interleaved(x, offset, base):
    T, Dh = x.shape[-2:]
    theta = base ** (-torch.arange(0, Dh, 2, dtype=torch.float64) / Dh)
    angle = (offset + torch.arange(T, dtype=torch.float64))[:, None] * theta
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2)


@pytest.mark.parametrize("check, solution", [
    (check_rms_norm_backward, rms_norm_backward), (check_repeat_kv, repeat_kv),
    (check_merge_partials, merge_partials),
    (check_mha_to_gqa, mha_to_gqa), (check_rotate_interleaved, rotate_interleaved),
])
def test_reference_passes(check, solution, capsys):
    assert check(solution)
    assert "✓" in capsys.readouterr().out


def not_done(*args):
    raise NotImplementedError


@pytest.mark.parametrize("check", list(EXERCISES.values()))
def test_stub_is_not_done(check, capsys):
    assert not check(not_done)
    assert "not done yet" in capsys.readouterr().out


def _naive_merge(outs, lses):
    w = torch.exp(lses)
    return (w[..., None] * outs).sum(0) / w.sum(0)[..., None]


def _sign_flipped_merge(outs, lses):
    top = lses.max(0).values
    w = torch.exp(top - lses)  # the exponent's sign flipped
    return (w[..., None] * outs).sum(0) / w.sum(0)[..., None]


def _modulo_groups(w, H, K):  # head h pooled into key/value head h % Hkv, not h // (H / Hkv)
    heads = w.view(H, -1, w.shape[1])
    return torch.cat([heads[torch.arange(H) % K == j].mean(0) for j in range(K)])


def _rotate_halves(x, offset, base):
    from attnbook.layers.rotary import RotaryEmbedding
    return RotaryEmbedding(x.shape[-1], offset + x.shape[-2], base).double()(x.double(), offset).to(x.dtype)


def _halves_table(x, offset, base):  # Section 9.3's (T, Dh) table, read at column 2i
    T, Dh = x.shape[-2:]
    theta = base ** (-torch.arange(0, Dh, 2, dtype=torch.float64) / Dh)
    angles = (offset + torch.arange(T, dtype=torch.float64))[:, None] * theta
    cos, sin = angles.cos().repeat(1, 2)[:, 0::2], angles.sin().repeat(1, 2)[:, 0::2]
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2)


def _degrees(x, offset, base):
    T, Dh = x.shape[-2:]
    theta = base ** (-torch.arange(0, Dh, 2, dtype=torch.float64) / Dh)
    angle = torch.deg2rad((offset + torch.arange(T, dtype=torch.float64))[:, None] * theta)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * angle.cos() - x2 * angle.sin(), x1 * angle.sin() + x2 * angle.cos()], -1).flatten(-2)


def _layer_norm_grad(x, w, go, eps):  # LayerNorm's gradient (no bias), written as a reader might
    xc = x - x.mean(-1, keepdim=True)
    r = torch.rsqrt(xc.pow(2).mean(-1, keepdim=True) + eps)
    g, xhat = go * w, xc * r
    return r * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True))


@pytest.mark.parametrize("check, wrong, diagnosis", [
    (check_rms_norm_backward, lambda x, w, go, e: go * w * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + e),
     "rms held constant"),
    (check_rms_norm_backward, lambda x, w, go, e: rms_norm_backward(x, torch.ones_like(w), go, e), "weight forgotten"),
    (check_rms_norm_backward, lambda x, w, go, e: _rms_bw(x, w, go, e, n=x.shape[-1] - 1), "D - 1 divisor"),
    (check_rms_norm_backward, lambda x, w, go, e: rms_norm_backward(x, w, go, 0.0), "eps dropped"),
    (check_rms_norm_backward, lambda x, w, go, e: (lambda r: r * go * w - r**3 * x * (go * w * x).sum(
        -1, keepdim=True))(torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + e)), "sum, not mean"),
    (check_rms_norm_backward, lambda x, w, go, e: _rms_bw(x, w, go, e, dim=0), "wrong axis"),
    (check_rms_norm_backward, lambda x, w, go, e: (lambda r: r * go * w - r**3 * x * (go * x).mean(
        -1, keepdim=True))(torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + e)), "weight in one term"),
    (check_rms_norm_backward, lambda x, w, go, e: (lambda r: r * go * w - r**2 * x * (go * w * x).mean(
        -1, keepdim=True))(torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + e)), "r² for r³"),
    (check_rms_norm_backward, lambda x, w, go, e: (lambda r: r * go * w - r * x * (go * w * x).mean(
        -1, keepdim=True))(torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + e)), "r for r³"),
    (check_rms_norm_backward, lambda x, w, go, e: (lambda r: r * go * w - 0.5 * r**3 * x * (go * w * x).mean(
        -1, keepdim=True))(torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + e)), "half the second term"),
    (check_rms_norm_backward, lambda x, w, go, e: (lambda r: r * go * w + r**3 * x * (go * w * x).mean(
        -1, keepdim=True))(torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + e)), "sign"),
    (check_rms_norm_backward, lambda x, w, go, e: rms_norm_backward(x, w, go, e) + x, ""),
    (check_rms_norm_backward, lambda x, w, go, e: (lambda g: rms_norm_backward(x, w, go, e) - g.mean(-1, keepdim=True)
     * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + e))(go * w), "mean subtracted (LayerNorm's gradient)"),
    (check_rms_norm_backward, _layer_norm_grad, "mean subtracted (LayerNorm's gradient)"),
    (check_rms_norm_backward, lambda x, w, go, e: _rms_bw(x, w, go, e, dim=-2), "wrong axis"),
    (check_rms_norm_backward, lambda x, w, go, e: (lambda r: r * go * w - r**3 * x * (go * w * x).mean())(
        torch.rsqrt(x.pow(2).mean() + e)), "wrong axis"),
    (check_repeat_kv, lambda kv, g: kv.repeat(1, g, 1, 1), "tiled"),
    (check_repeat_kv, lambda kv, g: kv[:, torch.arange(kv.shape[1] * g) % kv.shape[1]], "tiled"),  # h % Hkv
    (check_repeat_kv, lambda kv, g: kv[:, torch.arange(kv.shape[1] * g) // kv.shape[1]], "divided by Hkv"),
    (check_repeat_kv, lambda kv, g: kv.repeat_interleave(g, dim=2), "positions repeated"),
    (check_repeat_kv, lambda kv, g: kv.repeat_interleave(kv.shape[1], dim=1), "Hkv for the group"),
    (check_repeat_kv, lambda kv, g: kv.repeat_interleave(g, dim=1)[:, :-1], ""),
    (check_repeat_kv, lambda kv, g: kv.expand(-1, g, -1, -1) if kv.shape[1] == 1 else kv, ""),
    (check_merge_partials, lambda o, l: (torch.softmax(l, 0)[..., None] * o).sum(0), "nan for a fully masked query"),
    (check_merge_partials, lambda o, l: o.mean(0), "plain mean"),
    (check_merge_partials, _naive_merge, "overflow"),
    (check_merge_partials, lambda o, l: (torch.exp(l - l.max(0).values)[..., None] * o).sum(0),
     "unnormalised weights"),
    (check_merge_partials, lambda o, l: (torch.softmax(l, 1)[..., None] * o).sum(0), "weights over the wrong axis"),
    (check_merge_partials, lambda o, l: o[l.argmax(0), torch.arange(o.shape[1])], "largest chunk only"),
    (check_merge_partials, _sign_flipped_merge, "rescale sign flipped"),
    (check_mha_to_gqa, lambda w, H, K: w.view(H // K, K, w.shape[0] // H, -1).mean(0).reshape(-1, w.shape[1]),
     "strided groups"),
    (check_mha_to_gqa, _modulo_groups, "strided groups"),  # group of head h: h % Hkv
    (check_mha_to_gqa, lambda w, H, K: mha_to_gqa(w, H, K) * (H // K), "sum"),
    (check_mha_to_gqa, lambda w, H, K: w.view(K, H // K, w.shape[0] // H, -1).sum(1).reshape(-1, w.shape[1]) / H,
     "divided by H"),
    (check_mha_to_gqa, lambda w, H, K: w.view(K, H // K, w.shape[0] // H, -1)[:, 0].reshape(-1, w.shape[1]),
     "first head"),
    (check_mha_to_gqa, lambda w, H, K: w.view(K, w.shape[0] // H, H // K, -1).mean(2).reshape(-1, w.shape[1]),
     "wrong view order"),
    (check_mha_to_gqa, lambda w, H, K: w[: K * (w.shape[0] // H)], "first Hkv heads"),
    (check_rotate_interleaved, _rotate_halves, "halves layout"),
    (check_rotate_interleaved, lambda x, o, b: rotate_interleaved(x.flip(-1), o, b).flip(-1), ""),
    (check_rotate_interleaved, lambda x, o, b: rotate_interleaved(x, 0, b), "offset ignored"),
    (check_rotate_interleaved, _halves_table, "halves-layout table"),
    (check_rotate_interleaved, lambda x, o, b: (lambda y: torch.cat([y[..., 0::2], y[..., 1::2]], -1))(
        rotate_interleaved(x, o, b)), "halves concatenated"),
    (check_rotate_interleaved, _degrees, "degrees"),
    (check_rotate_interleaved, lambda x, o, b: rotate_interleaved(x, o + 1, b), "positions from 1"),
])
def test_wrong_answers_are_rejected_and_named(check, wrong, diagnosis, capsys):
    result = check(wrong)
    assert not result
    if diagnosis:
        assert result.diagnosis == diagnosis, result.message


def test_rotation_backwards_and_wrong_frequencies_are_named():
    def backwards(x, offset, base):
        T, Dh = x.shape[-2:]
        theta = base ** (-torch.arange(0, Dh, 2, dtype=torch.float64) / Dh)
        angle = -(offset + torch.arange(T, dtype=torch.float64))[:, None] * theta
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x1 * angle.cos() - x2 * angle.sin(), x1 * angle.sin() + x2 * angle.cos()], -1).flatten(-2)

    def slow(x, offset, base):
        T, Dh = x.shape[-2:]
        theta = base ** (-torch.arange(Dh // 2, dtype=torch.float64) / Dh)
        angle = (offset + torch.arange(T, dtype=torch.float64))[:, None] * theta
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack([x1 * angle.cos() - x2 * angle.sin(), x1 * angle.sin() + x2 * angle.cos()], -1).flatten(-2)

    assert check_rotate_interleaved(backwards).diagnosis == "turned backwards"
    assert check_rotate_interleaved(slow).diagnosis == "frequency exponent"


def _measure():
    s = KV_SETTING
    torch.manual_seed(0)
    model = Llama(LlamaConfig(vocab_size=64, d_model=s["d_model"], num_heads=s["num_heads"],
                              num_kv_heads=s["num_kv_heads"], num_layers=s["num_layers"]))
    prompt = torch.randint(64, (s["batch"], s["prompt"]))
    _, state = model.start(prompt)
    tokens = torch.zeros(s["batch"], dtype=torch.long)
    for _ in range(s["new_tokens"] - 1):  # the last token is chosen, never fed back
        _, state = model.step(tokens, state)
    return sum(c.key.nbytes + c.value.nbytes for c in state.caches)


def test_kv_cache_prediction(capsys):
    s = KV_SETTING
    positions = s["prompt"] + s["new_tokens"] - 1
    setting = (s["num_layers"], s["num_kv_heads"], s["head_dim"], s["batch"])
    truth = kv_cache_bytes(*setting, positions, 4)
    assert check_kv_cache_prediction(_measure, truth)
    assert not check_kv_cache_prediction(_measure, None)
    assert "not done yet" in capsys.readouterr().out
    L, Hkv, Dh, B = setting
    H = s["num_heads"]
    for wrong, why in ((kv_cache_bytes(*setting, positions + 1, 4), "last generated token"),
                       (truth // 2, "keys *and* values"),
                       (kv_cache_bytes(*setting, positions, 2), "2 bytes per number"),
                       (truth // 4, "numbers, not bytes: each float32"),
                       (truth // 8, "numbers, not bytes (4 per float32 number), and only one"),
                       (kv_cache_bytes(1, Hkv, Dh, B, positions, 4), "one block"),
                       (kv_cache_bytes(2, Hkv, Dh, B, positions, 4), "2 blocks"),
                       (2 * L * 2 * Hkv * Dh * B * positions * 4 // 2 // 3, "one block"),  # "2" read as blocks
                       (kv_cache_bytes(L, H, Dh, B, positions, 4), "D = H · Dh = 64"),
                       (L * s["d_model"] * B * positions * 4, "instead of Hkv · Dh"),  # D, and no K/V factor
                       (kv_cache_bytes(L, Hkv, Dh, 1, positions, 4), "forgot the batch"),
                       (kv_cache_bytes(*setting, s["prompt"], 4), "prompt only"),
                       (kv_cache_bytes(*setting, s["new_tokens"], 4), "generated tokens only"),
                       (truth + 1, "times the truth")):
        result = check_kv_cache_prediction(_measure, wrong)
        assert not result and why in result.message, result.message
    assert not check_kv_cache_prediction(lambda: 123, truth)  # a measurement of another setting


def test_kv_cache_mistakes_are_told_apart():
    """Every named mistake gives a different number, none of them the truth."""
    from attnbook.exercises.ch09 import _kv_mistakes
    s = KV_SETTING
    positions = s["prompt"] + s["new_tokens"] - 1
    values = [kv_cache_bytes(**setting) for _, setting in _kv_mistakes(s, positions)]
    truth = kv_cache_bytes(s["num_layers"], s["num_kv_heads"], s["head_dim"], s["batch"], positions, 4)
    assert len(set(values)) == len(values) and truth not in values


def test_mha_to_gqa_changes_a_model():
    """The checker's model step: a right conversion keeps the logits of a multi-head Llama whose
    grouped heads are equal; a strided grouping does not."""
    from attnbook.exercises.ch09 import _converted_llama_matches
    assert _converted_llama_matches(mha_to_gqa)
    assert not _converted_llama_matches(
        lambda w, H, K: w.view(H // K, K, w.shape[0] // H, -1).mean(0).reshape(-1, w.shape[1]))


def test_crossing_prediction(capsys):
    from attnbook.exercises.ch09 import _crossings, check_crossing_prediction
    known = _crossings()
    truth, tol, seeds = known["truth"], known["tolerance"], known["seeds"]
    assert min(seeds) <= truth <= max(seeds)  # the committed mean curve lies inside its seeds' range
    assert 5 <= tol <= 20  # one standard deviation of the seeds' crossings (12 in the committed file)
    assert not check_crossing_prediction(lambda: truth, None)
    assert "not done yet" in capsys.readouterr().out
    low, high = min(seeds), max(seeds)
    for prediction, passes, says in (
            (64, False, "training length is not where"),
            (low - 1, False, "too early"), (low, True, "inside the single seeds"),
            # new: inside the seeds' range but more than one standard deviation from the mean's
            # crossing; the old checker (mean +- 12) rejected 100 as "too early"
            (100, True, "inside the single seeds"), (truth - tol - 1, True, "inside"),
            (truth, True, "inside"), (high, True, "inside"),
            (high + 1, False, "too late"), (high + 40, False, "never trained")):
        result = check_crossing_prediction(lambda: truth, prediction)
        assert bool(result) == passes, (prediction, result.message)
        assert says in result.message, result.message
    for wrong, why in ((known["modern"], "full modern block"), (known["unigram"], "unigram"),
                       (known["one position"], "8 in a row"), (truth + 50, "run it as given")):
        result = check_crossing_prediction(lambda w=wrong: w, truth)
        assert not result and why in result.message, result.message


def test_prediction_checkers_reach_the_command_line(tmp_path):
    """The CLI passes prediction_<function> to the two predict-then-measure checkers."""
    from attnbook.exercises.__main__ import _prediction
    from attnbook.exercises.ch09 import check_crossing_prediction
    namespace = {"prediction_cache_bytes": 7, "prediction_crossing_position": 99, "prediction": 1}
    assert _prediction(check_kv_cache_prediction, "cache_bytes", namespace) == {"prediction": 7}
    assert _prediction(check_crossing_prediction, "crossing_position", namespace) == {"prediction": 99}
    assert set(EXERCISES) >= {"cache_bytes", "crossing_position", "interpolated_losses"}
    assert EXERCISES["cache_bytes"] is check_kv_cache_prediction


def test_interpolation_prediction(capsys):
    from attnbook.exercises.ch09 import (
        INTERPOLATION_TOLERANCE, _interpolation_measurements, check_interpolation_prediction,
    )
    known = _interpolation_measurements()
    truth, plain = known["interpolated"], known["plain"]
    assert truth[0] - plain[0] > 2 * INTERPOLATION_TOLERANCE  # the committed runs: worse inside,
    assert plain[1] - truth[1] > 2 * INTERPOLATION_TOLERANCE  # better far out, so plain fails
    assert not check_interpolation_prediction(lambda: truth, None)
    assert "not done yet" in capsys.readouterr().out
    assert check_interpolation_prediction(lambda: truth, truth)
    assert check_interpolation_prediction(lambda: truth, (truth[0] + 0.3, truth[1] - 0.3))
    for prediction, says in (
        ((plain[0], truth[1]), "rescales every position"),  # "inside the window nothing changes"
        ((truth[0], plain[1]), "does not climb"),  # "it climbs like plain extrapolation"
        (plain, "rescales every position"),  # interpolation changes nothing at all
        ((truth[0] - 0.6, truth[0] - 0.6), "worse than that"),  # about the bigram's level
        ((truth[0] + 0.6, truth[1]), "better than that"),
        ((truth[0], truth[0] - 1.0), "own level"),  # better far out than inside
        (("a", "b"), "two numbers"),
    ):
        result = check_interpolation_prediction(lambda: truth, prediction)
        assert not result and says in result.message, (prediction, result.message)
    result = check_interpolation_prediction(lambda: plain, truth)  # measured the plain curves
    assert not result and "plain model's curves" in result.message
    result = check_interpolation_prediction(lambda: (1.0, 1.0), truth)
    assert not result and "run it as given" in result.message


def test_interpolation_prediction_reaches_the_command_line():
    from attnbook.exercises.__main__ import _prediction
    from attnbook.exercises.ch09 import check_interpolation_prediction
    namespace = {"prediction_interpolated_losses": (3.9, 3.9), "prediction": 1}
    assert _prediction(check_interpolation_prediction, "interpolated_losses",
                       namespace) == {"prediction": (3.9, 3.9)}
    assert EXERCISES["interpolated_losses"] is check_interpolation_prediction
