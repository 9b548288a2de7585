"""Checkers for Chapter 7 (the Vision Transformer); ``EXERCISES`` maps the notebook's names to them.

The exercises are variants the chapter does not show: patches cut with an overlapping stride put
back into an image, attention rollout with one residual weight per layer, and a ViT read out by
mean pooling instead of its class token, and the local attention mask of Section 7.5's
``vit_local`` for any grid and radius. ``check_patch_halving_prediction`` compares a prediction
with a measurement; on the command line it reads the answers file's ``predicted_ratio`` (its
``reads_variables``), not a ``prediction_<name>`` variable.

Each checker varies every argument of the exercise; ``attnbook.exercises.core.run_cases`` guards
the inputs against in-place changes and names a known mistake when a wrong answer equals its answer.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import functools
import inspect
import traceback

import torch
import torch.nn.functional as F

from attnbook.exercises.core import (Case, CheckResult, Mistake, _finish, _fresh, compare, no_grad,
                                     run_cases)
from attnbook.layers import run_blocks
from attnbook.models.vit import ViT, ViTConfig


def _explained_first(fn: Callable, cases: Sequence[Case], mistakes: Sequence[Mistake]) -> tuple:
    """``mistakes`` with those that explain every case ``fn`` gets wrong moved to the front (order kept
    otherwise): two mistakes can agree on the first failing case (a disc and a diamond at radius 1)
    and differ on a later one, and the verdict should name the one that explains them all."""
    if not callable(fn):
        return tuple(mistakes)
    wrong = []
    for case in cases:
        try:
            with torch.no_grad():
                got = fn(*_fresh(case.args), **case.kwargs)
        except Exception:  # noqa: BLE001 - run_cases reports it
            return tuple(mistakes)
        if compare(got, case.expected, case.atol, case.rtol):
            wrong.append((case, got))
    full = [m for m in mistakes if wrong and all(m.matches(c.args, g, c) for c, g in wrong)]
    return (*full, *(m for m in mistakes if all(m is not f for f in full)))


def _randn(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# ----- 1. how many tokens, how many parameters --------------------------------------------------

def _sizes(image_size: int, patch_size: int, channels: int, d_model: int) -> tuple[int, int, int, int]:
    """(tokens, projection parameters, class-token parameters, position parameters)."""
    n = (image_size // patch_size) ** 2
    projection = channels * patch_size ** 2 * d_model + d_model  # weight + bias
    return n + 1, projection, d_model, (n + 1) * d_model  # + class token + one position per token


def _size_part(index: int, wrong: Callable[[int, int, int, int], int]) -> Callable[[tuple, object], bool]:
    """A predicate: part ``index`` of the reader's 4-tuple equals ``wrong(s, p, c, d)``."""
    def when(args: tuple, got: object) -> bool:
        return (isinstance(got, (tuple, list)) and len(got) == 4
                and got[index] != _sizes(*args)[index] and got[index] == wrong(*args))
    return when


def _class_token_forgotten(args: tuple, got: object) -> bool:
    s, p, c, d = args
    n = (s // p) ** 2
    return isinstance(got, (tuple, list)) and len(got) == 4 and (got[0], got[2], got[3]) == (n, 0, n * d)


def _channels_as_tokens(args: tuple, got: object) -> bool:
    s, p, c, d = args
    return (c > 1 and isinstance(got, (tuple, list)) and len(got) == 4
            and got[0] == c * (s // p) ** 2 + 1)


SIZE_MISTAKES = (
    Mistake("wrong_shape",
            "return four numbers: (tokens, projection parameters, class-token parameters, "
            "position parameters)",
            when=lambda args, got: not (isinstance(got, (tuple, list)) and len(got) == 4)),
    Mistake("channels_as_tokens",
            "each channel of each patch was made a token of its own (C * N + 1 tokens: 589 for "
            "ViT-B/16 on RGB images); a patch's C channels are flattened together into one token "
            "of C * P * P numbers, so the sequence is N + 1 tokens and E has C * P * P * D weights",
            when=_channels_as_tokens),
    Mistake("class_token_forgotten",
            "the class token is forgotten everywhere: the sequence is 1 + N tokens (the class token "
            "first), the class token is D learned numbers, and it has a learned position too",
            when=_class_token_forgotten),
    Mistake("tokens_no_class_token",
            "the sequence length leaves out the class token: the encoder reads 1 + N tokens",
            when=_size_part(0, lambda s, p, c, d: (s // p) ** 2)),
    Mistake("grid_not_squared",
            "N was computed as image_size / patch_size; the patches form a grid, N = (image_size / "
            "patch_size)^2",
            when=_size_part(0, lambda s, p, c, d: s // p + 1)),
    Mistake("area_over_patch",
            "N was computed as image_size^2 / patch_size: the patch's area is patch_size^2, so "
            "N = (image_size / patch_size)^2 = image_size^2 / patch_size^2",
            when=_size_part(0, lambda s, p, c, d: s * s // p + 1)),
    Mistake("no_bias",
            "the projection's bias is missing: E has C * P * P * D weights and D biases",
            when=_size_part(1, lambda s, p, c, d: c * p * p * d)),
    Mistake("bias_per_patch",
            "the bias was counted once per patch (N * D); E is one shared matrix applied to every "
            "patch, so it has C * P * P * D weights and one bias of D numbers",
            when=_size_part(1, lambda s, p, c, d: c * p * p * d + (s // p) ** 2 * d)),
    Mistake("projection_d_by_d",
            "the projection was counted as D x D (+ D); E maps one flattened patch of C * P * P "
            "numbers to D, so it has C * P * P * D weights and D biases",
            when=_size_part(1, lambda s, p, c, d: d * d + d)),
    Mistake("patch_not_squared",
            "a patch of P x P pixels holds C * P * P numbers, not C * P: the projection E has "
            "C * P^2 * D weights (and D biases)",
            when=_size_part(1, lambda s, p, c, d: c * p * d + d)),
    Mistake("no_channels",
            "the channels are not counted: a patch holds C * P * P numbers, so E has C * P * P * D weights",
            when=_size_part(1, lambda s, p, c, d: p * p * d + d)),
    Mistake("no_class_token",
            "the class token has no parameters here: it is one learned vector of D numbers",
            when=_size_part(2, lambda s, p, c, d: 0)),
    Mistake("class_position_missing",
            "the class token's position is missing: positions are learned for all 1 + N tokens, the "
            "class token's included",
            when=_size_part(3, lambda s, p, c, d: (s // p) ** 2 * d)),
    Mistake("one_position_extra",
            "one position too many: there are 1 + N tokens, so 1 + N learned positions",
            when=_size_part(3, lambda s, p, c, d: ((s // p) ** 2 + 2) * d)),
    Mistake("class_token_one_parameter",
            "the class token is one vector of D learned numbers, not one number",
            when=_size_part(2, lambda s, p, c, d: 1)),
    Mistake("not_integers",
            "counts are whole numbers: use integer division (//) or int(), not /",
            when=lambda args, got: isinstance(got, (tuple, list)) and len(got) == 4
            and any(isinstance(v, float) and v != int(v) for v in got)),
)


def check_vit_sizes(fn: Callable) -> CheckResult:
    """``fn(image_size, patch_size, channels, d_model) -> (tokens, projection, class_token, positions)``:
    the sequence length and the parameter counts of the embedding's three parts."""
    settings = [(8, 2, 1, 32), (8, 4, 1, 64), (224, 16, 3, 768), (32, 4, 3, 192), (28, 7, 1, 16), (6, 1, 2, 8)]
    cases = [
        Case(f"image {s}x{s}, patch {p}, {c} channel(s), D = {d}", (s, p, c, d), _sizes(s, p, c, d),
             hint="tokens = N + 1 with N = (image_size / patch_size)^2; the projection: its weight and "
                  "bias; the class token: one vector; the positions: one learned vector per token.")
        for s, p, c, d in settings
    ]
    return run_cases("tokens and parameters", fn, cases, SIZE_MISTAKES)


# ----- 2. predict, then measure: halving the patch size -------------------------------------------

def _scores(patch_size: int, image_size: int = 8, heads: int = 4) -> int:
    """Attention scores one layer computes for one image: heads x (1 + N)^2."""
    return heads * ((image_size // patch_size) ** 2 + 1) ** 2


def _measure_scores(count_scores: Callable[[int], int]) -> tuple[dict[int, int], tuple[str, str] | None]:
    """``count_scores(P)`` for P = 1, 2, 4, and (message, diagnosis) if one of them is wrong.

    The exercise is to *measure*: while ``count_scores(P)`` runs, the ViT's forward is watched, and
    a right number from a formula alone (no ViT with patch size P was run) is not accepted.
    """
    ran: list[tuple[int, bool]] = []  # (patch size, need_weights) of every ViT forward
    original = ViT.forward

    def watched(self, images, need_weights=False):
        ran.append((self.config.patch_size, bool(need_weights)))
        return original(self, images, need_weights)

    measured, runs = {}, {}
    ViT.forward = watched
    try:
        for P in (1, 2, 4):
            before = len(ran)
            measured[P] = int(no_grad(count_scores)(P))
            runs[P] = ran[before:]
    except NotImplementedError:
        return {}, ("not done yet: count_scores still raises NotImplementedError.", "")
    finally:
        ViT.forward = original
    for P, got in measured.items():
        truth = _scores(P)
        if got != truth:
            why, diagnosis = "", ""
            if got == truth // 4:
                why, diagnosis = " (that is one head's map: count the scores of all 4 heads)", "one_head"
            elif got == truth * 4:
                why, diagnosis = (" (that is all 4 layers, or 4 images: count one layer's map for one image)",
                                  "all_layers")
            elif got == 4 * ((8 // P) ** 2) ** 2:
                why, diagnosis = " (the class token is missing: the map is (1 + N) x (1 + N))", "no_class_token"
            elif got % truth == 0 and got // truth not in (1, 4):
                why, diagnosis = (f" (that is {got // truth} images' maps: the map of layer 1 is (B, heads, "
                                  "1 + N, 1 + N); run one digit, or count one image's slice, maps[0][0])"), "batch"
            return measured, (f"count_scores({P}) gave {got:,}; one layer's attention map for one image holds "
                              f"{truth:,} scores{why}. Build the ViT with that patch size, run one digit with "
                              "need_weights=True, and count the numbers in one layer's map for that image.",
                              diagnosis)
    for P, calls in runs.items():
        if (P, True) not in calls:
            return measured, (f"count_scores({P}) gave the right number, {measured[P]:,}, but ran no "
                              f"ViT(ViTConfig(patch_size={P})) with need_weights=True: the exercise is to "
                              "measure the prediction, not to compute it. Build the model, run one digit, "
                              "and count the numbers in one layer's attention map.", "no_model_run")
    return measured, None


_NOT_GIVEN = object()


def check_count_scores(count_scores: Callable[[int], int], predicted_ratio: object = _NOT_GIVEN,
                       prediction: object = _NOT_GIVEN) -> CheckResult:
    """``count_scores(P), and predicted_ratio = <your prediction>``: the attention scores one layer of ``ViT(ViTConfig(patch_size=P))``
    computes for one 8x8 digit (all heads); the measuring half of the prediction exercise.

    The command line passes the answers file's ``predicted_ratio`` too (``reads_variables``);
    then this is ``check_patch_halving_prediction(predicted_ratio, count_scores)``. A file that
    follows the command line's generic convention (``prediction_count_scores`` or ``prediction``)
    is accepted too when it has no ``predicted_ratio``."""
    if predicted_ratio is None and prediction is not _NOT_GIVEN:
        predicted_ratio = prediction  # the CLI's documented name for a prediction
    if predicted_ratio is not _NOT_GIVEN:
        return check_patch_halving_prediction(predicted_ratio, count_scores)
    measured, problem = _measure_scores(count_scores)
    if problem is not None:
        return _finish("counting attention scores", False, problem[0], problem[1])
    return _finish("counting attention scores", True,
                   ", ".join(f"P = {P}: {n:,}" for P, n in sorted(measured.items(), reverse=True)) + " scores.")


check_count_scores.reads_variables = ("predicted_ratio",)  # the answers file's prediction, for the CLI


def check_patch_halving_prediction(predicted: float | None, count_scores: Callable[[int], int]) -> CheckResult:
    """Compare the reader's predicted ratio (scores at P = 1 over scores at P = 2, one layer, one
    8x8 digit) with ``count_scores(P)`` measured on the chapter's ViT, and explain the gap."""
    name = "halving the patch size"
    if predicted is None:
        return _finish(name, False, "not done yet: write your prediction into predicted_ratio, then run the cell.")
    measured, problem = _measure_scores(count_scores)
    if problem is not None:
        return _finish(name, False, problem[0], problem[1])
    ratio = measured[1] / measured[2]
    tokens = ((8 // 1) ** 2 + 1) / ((8 // 2) ** 2 + 1)
    note = (f"measured {measured[2]:,} scores at P = 2 and {measured[1]:,} at P = 1: x{ratio:.1f}. Halving P "
            f"gives 4 times the patches (x{tokens:.2f} tokens with the class token), and every token is "
            "compared with every token, so the scores grow with the square: (1 + 4N)^2 / (1 + N)^2, which "
            "tends to 16 as N grows (the class token keeps it at 14.6 here)")
    try:
        guess = float(predicted)
    except (TypeError, ValueError):
        return _finish(name, False, f"predicted_ratio must be a number, got {predicted!r}.")
    if abs(guess - ratio) <= 0.1 * ratio:
        return _finish(name, True, f"you predicted x{guess:g}; {note}.")
    if abs(guess - 4) < 0.5 or abs(guess - tokens) < 0.1:
        why, diagnosis = ("you predicted the growth of the sequence (x4 patches), not of the scores: attention "
                          "compares pairs"), "tokens_not_pairs"
    elif abs(guess - 2) < 0.3:
        why, diagnosis = ("halving P halves the patch's side, not the number of patches: there are (H / P)^2 "
                          "of them"), "side_not_area"
    elif abs(guess - 0.25) < 0.05 or abs(guess - 1 / 16) < 0.01 or abs(guess - 1 / ratio) < 0.01:
        why, diagnosis = ("upside down: smaller patches mean more tokens, so more scores (P = 1 over P = 2)",
                          "upside_down")
    elif abs(guess - 8) < 0.5:
        why, diagnosis = ("x8 = 2^3 counts neither the patches nor the pairs: halving P doubles the patches "
                          "along each side, so x4 patches, and the scores count pairs of tokens, about 4^2"), "two_cubed"
    elif abs(guess - 256) < 16:
        why, diagnosis = ("x256 = 16^2 squares the growth of the scores again: the patches grow x4, and "
                          "the scores count pairs of tokens, so about x4^2 = x16, not x16^2"), "squared_twice"
    elif 9 <= guess <= 13:
        why, diagnosis = ("x{:g} lies between the tokens' growth (x4) and the pairs' (x16), as if the scores grew "
                          "faster than the tokens but slower than their square: each head scores every token "
                          "against every token, (1 + N)^2 numbers, so x4 tokens give about x4^2".format(guess),
                          "between_linear_and_square")
    elif abs(guess - 64) < 4:
        why, diagnosis = "x64 would be cubic in the tokens; the scores are N x N, square", "cubic"
    else:
        why, diagnosis = "the scores are (tokens)^2 per head", "other"
    return _finish(name, False, f"you predicted x{guess:g}: {why}. {note}.", diagnosis)


def grade_position_free_prediction(predicted: object, measured: float) -> CheckResult:
    """Grade Section 7.5's prediction: the unshifted test accuracy of the ViT without position
    embeddings, trained on the plain digits (``measured``, a fraction), and name the misconception
    behind a prediction that is far off. Within 5 points passes."""
    name = "predicting the ViT without positions"
    if predicted is None:
        return _finish(name, False, "not done yet: write your prediction into predicted_accuracy, then "
                       "run this cell again (the measurement is printed once you have committed to one).")
    try:
        guess = float(predicted)
    except (TypeError, ValueError):
        return _finish(name, False, f"predicted_accuracy must be a number, got {predicted!r}.", "not_a_number")
    if not 0 <= guess <= 1:
        hint = f" (did you mean {guess / 100:g}?)" if 1 < guess <= 100 else ""
        return _finish(name, False, f"{guess:g} is not a fraction from 0 to 1{hint}: write 0.9, not 90.",
                       "percent" if hint else "out_of_range")
    gap = 100 * (guess - measured)
    told = f"you predicted {100 * guess:.1f}%, measured {100 * measured:.1f}% ({gap:+.1f} points)"
    if abs(gap) <= 5:
        return _finish(name, True, f"{told}. A 2x2 patch is 4 numbers: without its position the encoder "
                       "reads an unordered set of small pieces, which still tells many digits apart "
                       "but not where each stroke sits.")
    if guess >= 0.93:
        why, diagnosis = ("you expected the paper's small loss (about 3 points). Its 16x16 patches hold 768 "
                          "numbers, a recognisable piece of a digit; a 2x2 patch holds 4, so without its position "
                          "the ViT knows which kinds of pieces a digit has, not where they are"), "paper_three_points"
    elif guess <= 0.2:
        why, diagnosis = ("you expected the ViT to be lost without positions, near chance (10%). An unordered set "
                          "of patches still carries information: which kinds of 2x2 pieces (edges, corners, "
                          "blank) a digit contains, and how many, already tells most digits apart"), "chance"
    elif gap > 0:
        why, diagnosis = ("the set of patches carries less than you thought: digits with the same kinds of "
                          "pieces in other places are hard to tell apart without positions (the chapter's "
                          "position-free bag of patches confuses 2 with 5 most often, then 3 with 7)"), "too_high"
    else:
        why, diagnosis = ("the set of patches carries more than you thought: counting which kinds of pieces a "
                          "digit contains already separates most digits"), "too_low"
    return _finish(name, False, f"{told}: {why}.", diagnosis)


def grade_augmentation_guess(predicted: object, plain: float, augmented: float) -> CheckResult:
    """Grade Section 7.5's second guess: does the recipe's augmentation raise the unshifted test
    accuracy of the ViT without positions? ``predicted`` is True (it helps) or False; ``plain`` and
    ``augmented`` are the measured accuracies (fractions) without and with the augmentation."""
    name = "does the augmentation help the ViT without positions?"
    if predicted is None:
        return _finish(name, False, "not done yet: write True (it helps) or False into "
                       "predicted_augmentation_helps, then run this cell again.")
    if not isinstance(predicted, bool):
        return _finish(name, False, f"predicted_augmentation_helps must be True or False, got {predicted!r}.",
                       "not_a_bool")
    helps = augmented > plain
    told = (f"you guessed that it {'helps' if predicted else 'does not help'}; measured "
            f"{100 * plain:.1f}% without it, {100 * augmented:.1f}% with it "
            f"({100 * (augmented - plain):+.1f} points)")
    if predicted == helps:
        return _finish(name, True, f"{told}.")
    # the chapter does not test why: the reason is offered as a candidate, not as a fact
    why = ("the augmentation lowered it. Why is not tested; one candidate: a move of one pixel cuts a "
           "digit into a different set of 2x2 patches, so a model that reads only the set sees each "
           "training digit as many different sets"
           if not helps else
           "the augmentation raised it. Why is not tested; one candidate: the moved copies gave the "
           "position-free model more sets of patches per digit to learn from")
    return _finish(name, False, f"{told}: {why}.", "wrong_direction")


def committed_position_free_accuracies() -> tuple[float, float]:
    """The unshifted test accuracy of the ViT without positions on all the training digits, plain and
    augmented (means over the seeds of ``vit_data_efficiency.json``, as fractions)."""
    from statistics import mean

    from attnbook.results import load_result
    result = load_result("vit_data_efficiency.json")
    rows = result["runs"] + result["controls"]
    return tuple(mean(r["test_accuracy"] for r in rows if r["model"] == model and r["fraction"] == 1.0)
                 for model in ("vit_nopos_noaug", "vit_nopos"))


def check_position_free_prediction(predicted_accuracy: object, predicted_augmentation_helps: object,
                                   measured: tuple[float, float] | None = None) -> CheckResult:
    """Grade both predictions of the position-free exercise against ``measured`` (plain, augmented),
    by default the committed results; nothing measured is printed before both are given. Returns one
    ``CheckResult``: passed when both guesses pass; its diagnosis is the first failing guess's."""
    name = "a ViT without positions"
    if predicted_accuracy is None or predicted_augmentation_helps is None:
        missing = [label for label, value in (("predicted_accuracy", predicted_accuracy),
                                              ("predicted_augmentation_helps", predicted_augmentation_helps))
                   if value is None]
        return _finish(name, False, f"not done yet: set {' and '.join(missing)}, then run the cell again "
                       "(the measurements are printed once you have committed to both).", "not_done")
    plain, augmented = measured if measured is not None else committed_position_free_accuracies()
    first = grade_position_free_prediction(predicted_accuracy, plain)
    second = grade_augmentation_guess(predicted_augmentation_helps, plain, augmented)
    passed = bool(first) and bool(second)
    diagnosis = "" if passed else (first.diagnosis if not first else second.diagnosis)
    return CheckResult(name, passed, "\n".join((first.message, second.message)), diagnosis)


# ----- 3. patches back into an image (overlapping windows) ----------------------------------------

def _windows(images: torch.Tensor, P: int, stride: int) -> torch.Tensor:
    """(B, C, H, W) -> (B, N, C*P*P): P x P windows every ``stride`` pixels, row by row, channel-first."""
    return torch.nn.functional.unfold(images, P, stride=stride).transpose(1, 2)


def _unpatchify(patches: torch.Tensor, P: int, stride: int, H: int, W: int) -> torch.Tensor:
    B, N, CPP = patches.shape
    C = CPP // (P * P)
    rows, cols = (H - P) // stride + 1, (W - P) // stride + 1
    out = patches.new_zeros(B, C, H, W)
    count = patches.new_zeros(1, 1, H, W)
    windows = patches.reshape(B, rows, cols, C, P, P)
    for r in range(rows):
        for c in range(cols):
            out[:, :, r * stride:r * stride + P, c * stride:c * stride + P] += windows[:, r, c]
            count[:, :, r * stride:r * stride + P, c * stride:c * stride + P] += 1
    return out / count


def _unpatchify_sum(patches, P, stride, H, W):
    return torch.nn.functional.fold(patches.transpose(1, 2), (H, W), P, stride=stride)


def _unpatchify_last_wins(patches, P, stride, H, W):
    B, N, CPP = patches.shape
    C = CPP // (P * P)
    rows, cols = (H - P) // stride + 1, (W - P) // stride + 1
    out = patches.new_zeros(B, C, H, W)
    windows = patches.reshape(B, rows, cols, C, P, P)
    for r in range(rows):
        for c in range(cols):
            out[:, :, r * stride:r * stride + P, c * stride:c * stride + P] = windows[:, r, c]
    return out


def _unpatchify_first_wins(patches, P, stride, H, W):
    flipped = patches.reshape(patches.shape[0], (H - P) // stride + 1, (W - P) // stride + 1, -1).flip(1, 2)
    # writing the windows in reverse order lets the first one win
    B, rows, cols, CPP = flipped.shape
    C = CPP // (P * P)
    out = patches.new_zeros(B, C, H, W)
    for r in range(rows):
        for c in range(cols):
            rr, cc = rows - 1 - r, cols - 1 - c
            out[:, :, rr * stride:rr * stride + P, cc * stride:cc * stride + P] = flipped[:, r, c].view(B, C, P, P)
    return out


def _unpatchify_channel_last(patches, P, stride, H, W):
    B, N, CPP = patches.shape
    C = CPP // (P * P)
    channel_first = patches.reshape(B, N, P, P, C).permute(0, 1, 4, 2, 3).reshape(B, N, CPP)
    return _unpatchify(channel_first, P, stride, H, W)


def _unpatchify_column_major(patches, P, stride, H, W):
    B, N, CPP = patches.shape
    rows, cols = (H - P) // stride + 1, (W - P) // stride + 1
    row_major = patches.reshape(B, cols, rows, CPP).transpose(1, 2).reshape(B, N, CPP)
    return _unpatchify(row_major, P, stride, H, W)


def _unpatchify_patch_transposed(patches, P, stride, H, W):
    B, N, CPP = patches.shape
    transposed = patches.reshape(B, N, CPP // (P * P), P, P).transpose(-1, -2).reshape(B, N, CPP)
    return _unpatchify(transposed, P, stride, H, W)


def _unpatchify_sqrt_count(patches, P, stride, H, W):
    ones = torch.ones_like(patches[:1]).transpose(1, 2)  # (1, C*P*P, N)
    count = torch.nn.functional.fold(ones, (H, W), P, stride=stride)
    return _unpatchify_sum(patches, P, stride, H, W) / count.sqrt()


def _unpatchify_max(patches, P, stride, H, W):
    """The largest of the overlapping copies of each pixel, not their mean."""
    B, N, CPP = patches.shape
    C = CPP // (P * P)
    rows, cols = (H - P) // stride + 1, (W - P) // stride + 1
    out = patches.new_full((B, C, H, W), float("-inf"))
    windows = patches.reshape(B, rows, cols, C, P, P)
    for r in range(rows):
        for c in range(cols):
            where = (slice(None), slice(None), slice(r * stride, r * stride + P),
                     slice(c * stride, c * stride + P))
            out[where] = torch.maximum(out[where], windows[:, r, c])
    return out


def _unpatchify_constant_overlap(patches, P, stride, H, W):
    return _unpatchify_sum(patches, P, stride, H, W) / (P / stride) ** 2


def _unpatchify_cols_over_stride(patches, P, stride, H, W):
    """Windows per row counted as W // stride (too many where windows overlap); cut at the border."""
    B, N, CPP = patches.shape
    C, cols = CPP // (P * P), W // stride
    total, count = patches.new_zeros(B, C, H, W), patches.new_zeros(H, W)
    for n in range(N):
        r, c = divmod(n, cols)
        y, x = r * stride, c * stride
        h, w = max(0, min(P, H - y)), max(0, min(P, W - x))
        total[:, :, y:y + h, x:x + w] += patches[:, n].view(B, C, P, P)[:, :, :h, :w]
        count[y:y + h, x:x + w] += 1
    return total / count.clamp(min=1)


def _unpatchify_count_capped(args: tuple, got: object) -> bool:
    """The sum of the copies divided by min(count, k) for some k below the largest count (k = 2: "a
    pixel is in at most two windows", true only where the stride is at least half the window)."""
    patches, P, stride, H, W = args
    if not isinstance(got, torch.Tensor):
        return False
    ones = torch.ones_like(patches[:1]).transpose(1, 2)
    count = torch.nn.functional.fold(ones, (H, W), P, stride=stride)
    total = _unpatchify_sum(patches, P, stride, H, W)
    for cap in range(2, int(count.max().item())):
        wrong = total / count.clamp(max=cap)
        if got.shape == wrong.shape and torch.allclose(got.detach().double(), wrong.double(), atol=1e-5):
            return True
    return False


def _unpatchify_stride_ignored(patches, P, stride, H, W):
    """The windows laid side by side every P pixels, as if the stride were P (no overlap)."""
    B, N, CPP = patches.shape
    C = CPP // (P * P)
    rows, cols = H // P, W // P
    x = patches[:, :rows * cols].reshape(B, rows, cols, C, P, P).permute(0, 3, 1, 4, 2, 5)
    return x.reshape(B, C, rows * P, cols * P)


class RaisedError:
    """What the reader's function raised on a case whose shape suggests why (see ``_explain_crash``)."""

    def __init__(self, error: Exception, line: str) -> None:
        self.error, self.line = error, line

    def __repr__(self) -> str:
        return f"{type(self.error).__name__}: {self.error} (at: {self.line})"


def _explain_crash(fn: Callable) -> Callable:
    """``fn``, except that a shape error on a case with overlapping windows or a non-square image is
    returned as a ``RaisedError`` value, so that the mistakes below can name it."""
    def call(patches, P, stride, H, W):
        try:
            return fn(patches, P, stride, H, W)
        except (RuntimeError, IndexError, ValueError) as err:
            if stride < P or H != W:
                where = traceback.extract_tb(err.__traceback__)[-1]
                return RaisedError(err, f"line {where.lineno}: {where.line}")
            raise
    try:  # the verdicts name the reader's own parameters
        call.__signature__ = inspect.signature(fn)
    except (TypeError, ValueError):
        pass
    return call


def _crashed(overlap_on_square: bool) -> Callable[[tuple, object], bool]:
    def when(args, got):
        _, P, stride, H, W = args
        return isinstance(got, RaisedError) and (H == W and stride < P if overlap_on_square else H != W)
    return when


def _unpatchify_output_transposed(args: tuple, got: object) -> bool:
    patches, P, stride, H, W = args
    flipped = _unpatchify(patches, P, stride, H, W).transpose(-1, -2)  # (B, C, W, H)
    return (isinstance(got, torch.Tensor) and got.shape == flipped.shape
            and torch.allclose(got.detach().double(), flipped.double(), atol=1e-5))


UNPATCHIFY_MISTAKES = (
    Mistake("grid_without_overlap",
            "your function raised an error on the first windows that overlap (it passed the windows that "
            "do not): with a stride smaller than the window there are (W - P) // stride + 1 windows per "
            "row, not W // P or W // stride, and (H - P) // stride + 1 rows",
            when=_crashed(overlap_on_square=True)),
    Mistake("rows_cols_swapped",
            "your function raised an error on the first image that is not square (it passed the square "
            "ones): rows and columns are swapped somewhere; the windows per row come from the width, "
            "cols = (W - P) // stride + 1, and the rows from the height",
            when=_crashed(overlap_on_square=False)),
    Mistake("constant_overlap",
            "the sum of the copies was divided by one constant (here (P / stride)^2, the largest count); pixels near the border are "
            "in fewer windows than those in the middle: divide each pixel by its own count (F.fold of a "
            "tensor of ones gives it)",
            gives=_unpatchify_constant_overlap),
    Mistake("summed",
            "where windows overlap their copies were added (F.fold sums); average them: divide by how "
            "many windows cover each pixel (fold a tensor of ones the same way)",
            gives=_unpatchify_sum),
    Mistake("last_wins",
            "each window overwrote the ones before it, so the last copy of a pixel wins; every copy "
            "counts: average them",
            gives=_unpatchify_last_wins),
    Mistake("first_wins",
            "only the first window's copy of each pixel was kept; average all the copies",
            gives=_unpatchify_first_wins),
    Mistake("max_of_copies",
            "each pixel kept the largest of its overlapping copies (a max, as in max-pooling); the "
            "exercise asks for their mean: add the copies and divide by each pixel's count",
            gives=_unpatchify_max),
    Mistake("count_capped",
            "each pixel's sum was divided by its count capped at a small number (min(count, 2), as if "
            "a pixel were in at most two windows); with a stride below half the window a pixel is in "
            "up to (P / stride)^2 windows: divide by its full count (F.fold of a tensor of ones)",
            when=_unpatchify_count_capped),
    Mistake("sqrt_count",
            "each pixel's sum was divided by the square root of its count; the mean divides by the "
            "count itself",
            gives=_unpatchify_sqrt_count),
    Mistake("patch_transposed",
            "each patch was put back transposed (its rows as columns): a flattened patch is (C, P, P) "
            "with the row index before the column index, as F.unfold flattens it",
            gives=_unpatchify_patch_transposed),
    Mistake("output_transposed",
            "the image came back transposed (its rows as columns, (B, C, W, H) or .transpose(-1, -2) "
            "at the end): window n = row * cols + col starts at pixel row row * stride (the height) "
            "and column col * stride (the width)",
            when=_unpatchify_output_transposed),
    Mistake("channel_last",
            "each patch was read channel-last (P, P, C); the patches are channel-first (C, P, P), the "
            "layout of F.unfold and of a Conv2d weight",
            gives=_unpatchify_channel_last),
    Mistake("column_major",
            "the windows were placed column by column; they are in reading order, row by row "
            "(window n = row * cols + col)",
            gives=_unpatchify_column_major),
    Mistake("cols_w_over_stride",
            "the windows per row were counted as W // stride; the last window must fit inside the "
            "image, so there are (W - P) // stride + 1 per row (and (H - P) // stride + 1 rows): "
            "window n = row * cols + col",
            gives=_unpatchify_cols_over_stride),
    Mistake("stride_ignored",
            "the windows were laid side by side every P pixels, as if the stride were the window "
            "size; window (row, col) starts at pixel row * stride, col * stride, so with a stride "
            "smaller than P the windows overlap",
            gives=_unpatchify_stride_ignored),
)


def check_unpatchify(fn: Callable) -> CheckResult:
    """``fn(patches (B, N, C*P*P), patch_size, stride, height, width) -> (B, C, H, W)``, the mean of
    every copy of each pixel."""
    settings = [((1, 1, 4, 4), 2, 2), ((2, 1, 4, 4), 2, 1), ((1, 1, 8, 8), 4, 2), ((2, 3, 6, 4), 2, 1),
                ((1, 2, 7, 5), 3, 2), ((2, 1, 5, 5), 3, 1), ((1, 3, 3, 3), 1, 1)]
    cases = []
    for n, (shape, P, stride) in enumerate(settings):
        B, C, H, W = shape
        # windows of a real image (every copy agrees) and windows that disagree where they overlap
        consistent = _windows(_randn(n, *shape), P, stride)
        noisy = consistent + _randn(100 + n, *consistent.shape)
        for label, patches in (("windows of one image", consistent), ("overlapping copies that differ", noisy)):
            cases.append(Case(f"images {shape}, window {P}, stride {stride}, {label}", (patches, P, stride, H, W),
                              _unpatchify(patches, P, stride, H, W),
                              hint="window n = (row, col) with n = row * cols + col covers pixels "
                                   "row*stride : row*stride + P (and the same for columns); add each "
                                   "window into its place, count the copies of each pixel, divide."))
    return run_cases("patches back into an image", _explain_crash(fn) if callable(fn) else fn, cases,
                     UNPATCHIFY_MISTAKES)


# ----- 4. attention rollout with one residual weight per layer -------------------------------------

def _rollout(maps: Sequence[torch.Tensor], residuals: Sequence[float]) -> torch.Tensor:
    T = maps[0].shape[-1]
    eye = torch.eye(T)
    out = eye.expand(maps[0].shape[0], T, T)
    for layer, r in zip(maps, residuals):
        out = ((1 - r) * layer.mean(1) + r * eye) @ out  # (B, T, T)
    return out


def _rollout_wrong_order(maps, residuals):
    return _rollout(list(maps)[::-1], list(residuals)[::-1])


def _rollout_residuals_reversed(maps, residuals):
    return _rollout(maps, list(residuals)[::-1])


def _rollout_first_residual(maps, residuals):
    return _rollout(maps, [residuals[0]] * len(maps))


def _rollout_mean_residual(maps, residuals):
    return _rollout(maps, [sum(residuals) / len(residuals)] * len(maps))


def _rollout_per_head(maps, residuals):
    T = maps[0].shape[-1]
    out = torch.eye(T).expand(*maps[0].shape[:2], T, T)
    for layer, r in zip(maps, residuals):
        out = ((1 - r) * layer + r * torch.eye(T)) @ out  # (B, H, T, T)
    return out.mean(1)


def _rollout_one_head(maps, residuals, head=0):
    """One head's map in every layer (layer[:, 0], or the last head) instead of the mean."""
    return _rollout([layer[:, [head]] for layer in maps], residuals)


def _rollout_fixed_half(maps, residuals):
    return _rollout(maps, [0.5] * len(maps))


def _rollout_heads_summed(maps, residuals):
    T = maps[0].shape[-1]
    out = torch.eye(T).expand(maps[0].shape[0], T, T)
    for layer, r in zip(maps, residuals):
        out = ((1 - r) * layer.sum(1) + r * torch.eye(T)) @ out
    return out


def _rollout_swapped(maps, residuals):
    return _rollout(maps, [1 - r for r in residuals])


def _rollout_added_and_renormalised(maps, residuals):
    T = maps[0].shape[-1]
    out = torch.eye(T).expand(maps[0].shape[0], T, T)
    for layer, r in zip(maps, residuals):
        mixed = layer.mean(1) + r * torch.eye(T)
        out = (mixed / mixed.sum(-1, keepdim=True)) @ out
    return out


def _rollout_columns_renormalised(maps, residuals, each_layer=True):
    T = maps[0].shape[-1]
    out = torch.eye(T).expand(maps[0].shape[0], T, T)
    for layer, r in zip(maps, residuals):
        mixed = (1 - r) * layer.mean(1) + r * torch.eye(T)
        out = (mixed / mixed.sum(-2, keepdim=True) if each_layer else mixed) @ out
    return out if each_layer else out / out.sum(-2, keepdim=True)


def _rollout_max_heads(maps, residuals, renormalise=True):
    T = maps[0].shape[-1]
    out = torch.eye(T).expand(maps[0].shape[0], T, T)
    for layer, r in zip(maps, residuals):
        mixed = (1 - r) * layer.amax(1) + r * torch.eye(T)
        out = (mixed / mixed.sum(-1, keepdim=True) if renormalise else mixed) @ out
    return out


def _rollout_first_layer_bare(maps, residuals):
    return _rollout(maps[1:], residuals[1:]) @ maps[0].mean(1) if len(maps) > 1 else maps[0].mean(1)


def _rollout_no_identity(maps, residuals):
    out = torch.eye(maps[0].shape[-1]).expand(maps[0].shape[0], *maps[0].shape[-2:])
    for layer, r in zip(maps, residuals):
        out = ((1 - r) * layer.mean(1)) @ out  # the r I term forgotten: rows no longer sum to 1
    return out


def _rollout_residuals_ignored(maps, residuals):
    return _rollout(maps, [0.0] * len(maps))


def _rollout_last_layer_only(maps, residuals):
    return _rollout(maps[-1:], residuals[-1:])


def _rollout_transposed(maps, residuals):
    """R transposed: the column-vector form (out @ Â^T each layer), or .transpose at the end."""
    return _rollout(maps, residuals).transpose(-1, -2)


def _rollout_each_layer_transposed(maps, residuals):
    T = maps[0].shape[-1]
    out = torch.eye(T).expand(maps[0].shape[0], T, T)
    for layer, r in zip(maps, residuals):
        out = ((1 - r) * layer.mean(1) + r * torch.eye(T)).transpose(-1, -2) @ out
    return out


def _rollout_last_layer_skipped(maps, residuals):
    """The loop stops one layer early (range(len(maps) - 1), or maps[:-1])."""
    T = maps[0].shape[-1]
    return _rollout(maps[:-1], residuals[:-1]) if len(maps) > 1 else torch.eye(T).expand(
        maps[0].shape[0], T, T)


def _rollout_map_columns_renormalised(maps, residuals, per_head=False):
    """Each attention map divided by its column sums (dim=-2) before it is mixed with r I."""
    T = maps[0].shape[-1]
    out = torch.eye(T).expand(maps[0].shape[0], T, T)
    for layer, r in zip(maps, residuals):
        if per_head:
            averaged = (layer / layer.sum(-2, keepdim=True)).mean(1)
        else:
            averaged = layer.mean(1) / layer.mean(1).sum(-2, keepdim=True)
        out = ((1 - r) * averaged + r * torch.eye(T)) @ out
    return out


def _rollout_layers_averaged(maps, residuals):
    T = maps[0].shape[-1]
    eye = torch.eye(T)
    return torch.stack([(1 - r) * m.mean(1) + r * eye for m, r in zip(maps, residuals)]).mean(0)


def _rollout_raw_layers_averaged(maps, residuals):
    return torch.stack([m.mean(1) for m in maps]).mean(0)


ROLLOUT_MISTAKES = (
    Mistake("layers_averaged",
            "the layers were averaged, not multiplied: rollout follows attention through the "
            "layers, so layer l's mixed map acts on what the layers below passed up, "
            "R = Â_L @ ... @ Â_1",
            gives=_rollout_layers_averaged),
    Mistake("layers_averaged",
            "the layers' head-averaged maps were averaged, not multiplied (and without the identity): "
            "R = Â_L @ ... @ Â_1 with Â = (1 - r) A + r I",
            gives=_rollout_raw_layers_averaged),
    Mistake("last_layer_only",
            "only the last layer's map was used; rollout multiplies every layer's (r I + (1 - r) A), "
            "first layer on the right",
            gives=_rollout_last_layer_only),
    Mistake("last_layer_skipped",
            "the last layer was left out (the loop stopped one layer early, range(len(maps) - 1)); "
            "rollout multiplies all L layers' (1 - r) A + r I, the last one on the left",
            gives=_rollout_last_layer_skipped),
    Mistake("product_transposed",
            "the product came back transposed, R^T (the column-vector form, out @ Â^T, or a "
            ".transpose at the end): in this book's row form A[i, j] is how much query i reads key j, "
            "so R = Â_L @ ... @ Â_1 with no transpose, and each row of R sums to 1",
            gives=_rollout_transposed),
    Mistake("product_transposed",
            "each layer's mixed map was transposed before the product; in this book's row form "
            "A[i, j] is how much query i reads key j: R = Â_L @ ... @ Â_1 with Â = (1 - r) A + r I, "
            "no transposes",
            gives=_rollout_each_layer_transposed),
    Mistake("map_columns_renormalised",
            "each attention map was renormalised over its columns (a division by sum(dim=-2)) before "
            "it was mixed; attention's rows already sum to 1 (each query's weights over the keys): "
            "use the head-averaged map as it is",
            gives=_rollout_map_columns_renormalised),
    Mistake("map_columns_renormalised",
            "each head's map was renormalised over its columns (a division by sum(dim=-2)) before the "
            "heads were averaged; attention's rows already sum to 1: average the maps as they are",
            gives=lambda maps, residuals: _rollout_map_columns_renormalised(maps, residuals, True)),
    Mistake("no_identity",
            "the identity is missing: (1 - r) A alone shrinks every layer's rows to sum to 1 - r; add r I "
            "for the residual connection, Â = (1 - r) A + r I",
            gives=_rollout_no_identity),
    Mistake("residuals_ignored",
            "the residual weights were ignored: this is the plain product of the head-averaged maps (every "
            "r = 0); mix each layer with the identity, Â = (1 - r) A + r I, to follow the residual path",
            gives=_rollout_residuals_ignored),
    Mistake("added_and_renormalised",
            "the identity was added with weight r and the rows renormalised, (A + rI) / (1 + r); the "
            "exercise mixes them, (1 - r) A + r I (the two agree only at r = 0)",
            gives=_rollout_added_and_renormalised),
    Mistake("columns_renormalised",
            "the columns were renormalised to sum to 1 (a division by sum(dim=-2)); attention's rows "
            "are what sum to 1 (each query's weights over the keys), and (1 - r) A + r I keeps them so: "
            "no renormalising is needed",
            gives=_rollout_columns_renormalised),
    Mistake("columns_renormalised",
            "the product's columns were renormalised to sum to 1 (a division by sum(dim=-2)); its rows "
            "already sum to 1, because every (1 - r) A + r I has rows summing to 1: return the product as "
            "it is",
            gives=lambda maps, residuals: _rollout_columns_renormalised(maps, residuals, each_layer=False)),
    Mistake("max_over_heads",
            "the heads were combined with a maximum; average them (mean over the head dimension)",
            gives=_rollout_max_heads),
    Mistake("max_over_heads",
            "the heads were combined with a maximum; average them (mean over the head dimension)",
            gives=lambda maps, residuals: _rollout_max_heads(maps, residuals, renormalise=False)),
    Mistake("first_layer_bare",
            "the product starts from the first layer's head-averaged map without its residual; start "
            "from the identity so that the first layer is mixed with r_1 I like every other",
            gives=_rollout_first_layer_bare),
    Mistake("wrong_order",
            "the layers are multiplied in the wrong order: the last layer goes on the left, "
            "R = Â_L @ ... @ Â_1",
            gives=_rollout_wrong_order),
    Mistake("residuals_reversed",
            "the residual weights are paired with the wrong layers: residuals[l] belongs to maps[l] "
            "(first layer first)",
            gives=_rollout_residuals_reversed),
    Mistake("one_residual",
            "every layer used the first layer's residual weight; each layer has its own",
            gives=_rollout_first_residual),
    Mistake("mean_residual",
            "every layer used the mean residual weight; each layer has its own",
            gives=_rollout_mean_residual),
    Mistake("swapped",
            "the weights of the attention and the identity are swapped: (1 - r) * A + r * I",
            gives=_rollout_swapped),
    Mistake("fixed_half",
            "every layer used r = 0.5, the library's attention_rollout default: use residuals[l] "
            "for layer l",
            gives=_rollout_fixed_half),
    Mistake("heads_summed",
            "the heads were summed; average them (mean over the head dimension), or the rows no "
            "longer sum to 1",
            gives=_rollout_heads_summed),
    Mistake("one_head",
            "only head 0's map was used (layer[:, 0]) instead of the mean over heads: average each "
            "layer's map over all its heads (mean over dim 1) before mixing it with r I",
            gives=_rollout_one_head),
    Mistake("one_head",
            "only the last head's map was used (layer[:, -1]) instead of the mean over heads: average "
            "each layer's map over all its heads (mean over dim 1) before mixing it with r I",
            gives=lambda maps, residuals: _rollout_one_head(maps, residuals, head=-1)),
    Mistake("per_head",
            "each head was rolled out on its own and averaged at the end; average the heads in each "
            "layer first",
            gives=_rollout_per_head),
)


def _maps(seed: int, layers: int, B: int, H: int, T: int) -> list[torch.Tensor]:
    return [_randn(seed + l, B, H, T, T).mul(2).softmax(-1) for l in range(layers)]


def check_attention_rollout(fn: Callable) -> CheckResult:
    """``fn(maps: list of (B, H, T, T), residuals: one float per layer) -> (B, T, T)``."""
    settings = [(2, 1, 2, 3, [0.5, 0.5]), (3, 2, 4, 5, [0.2, 0.5, 0.9]), (1, 1, 3, 4, [0.3]),
                (4, 2, 1, 6, [0.9, 0.0, 0.6, 0.3]), (2, 3, 2, 17, [0.8, 0.1]), (3, 1, 2, 4, [1.0, 0.0, 1.0])]
    cases = []
    for n, (layers, B, H, T, rs) in enumerate(settings):
        maps = _maps(10 * n, layers, B, H, T)
        cases.append(Case(f"{layers} layer(s), B = {B}, H = {H}, T = {T}, residuals {rs}", (maps, rs),
                          _rollout(maps, rs),
                          hint="start from the identity; for layer l from the first, average the heads, mix "
                               "with the identity using residuals[l], multiply on the left of the product."))
    return run_cases("attention rollout, one weight per layer", fn, cases, ROLLOUT_MISTAKES)


# ----- 5. a ViT read out by mean pooling (no class token) -------------------------------------------

def _mean_pool(model: ViT, images: torch.Tensor) -> torch.Tensor:
    x = model.embeddings.tokens.patch_embedding(images) + model.position_embeddings[1:]  # (B, N, D)
    x = run_blocks(model.blocks, x).hidden  # (B, N, D)
    return model.readout(model.final_norm(x).mean(dim=1))  # (B, classes)


def _mean_pool_with_class_token(model, images):
    x = run_blocks(model.blocks, model.embeddings(images)).hidden  # (B, 1 + N, D)
    return model.readout(model.final_norm(x).mean(dim=1))


def _mean_pool_positions_shifted(model, images):
    x = model.embeddings.tokens.patch_embedding(images) + model.position_embeddings[:-1]
    return model.readout(model.final_norm(run_blocks(model.blocks, x).hidden).mean(dim=1))


def _mean_pool_no_positions(model, images):
    x = model.embeddings.tokens.patch_embedding(images)
    return model.readout(model.final_norm(run_blocks(model.blocks, x).hidden).mean(dim=1))


def _mean_pool_norm_after_mean(model, images):
    x = model.embeddings.tokens.patch_embedding(images) + model.position_embeddings[1:]
    return model.readout(model.final_norm(run_blocks(model.blocks, x).hidden.mean(dim=1)))


def _mean_pool_no_norm(model, images):
    x = model.embeddings.tokens.patch_embedding(images) + model.position_embeddings[1:]
    return model.readout(run_blocks(model.blocks, x).hidden.mean(dim=1))


def _mean_pool_embeddings_only(model, images):
    x = model.embeddings.tokens.patch_embedding(images) + model.position_embeddings[1:]
    return model.readout(model.final_norm(x).mean(dim=1))


def _mean_pool_first_block_only(model, images):
    x = model.embeddings.tokens.patch_embedding(images) + model.position_embeddings[1:]
    return model.readout(model.final_norm(model.blocks[0](x).hidden).mean(dim=1))


def _mean_pool_class_token_not_pooled(model, images):
    x = run_blocks(model.blocks, model.embeddings(images)).hidden  # (B, 1 + N, D)
    return model.readout(model.final_norm(x[:, 1:]).mean(dim=1))


def _sum_pool(model, images):
    x = model.embeddings.tokens.patch_embedding(images) + model.position_embeddings[1:]
    return model.readout(model.final_norm(run_blocks(model.blocks, x).hidden).sum(dim=1))


def _sum_over_n_plus_one(model, images):  # the class token's slot still counted in the mean
    x = model.embeddings.tokens.patch_embedding(images) + model.position_embeddings[1:]
    hidden = model.final_norm(run_blocks(model.blocks, x).hidden)  # (B, N, D)
    return model.readout(hidden.sum(dim=1) / (hidden.shape[1] + 1))


def _class_position_everywhere(model, images):
    x = model.embeddings.tokens.patch_embedding(images) + model.position_embeddings[0]
    return model.readout(model.final_norm(run_blocks(model.blocks, x).hidden).mean(dim=1))


def _class_position_added(model, images):
    x = (model.embeddings.tokens.patch_embedding(images) + model.position_embeddings[1:]
         + model.position_embeddings[0])
    return model.readout(model.final_norm(run_blocks(model.blocks, x).hidden).mean(dim=1))


def _max_pool(model, images):
    x = model.embeddings.tokens.patch_embedding(images) + model.position_embeddings[1:]
    return model.readout(model.final_norm(run_blocks(model.blocks, x).hidden).amax(dim=1))


def _median_pool(model, images):
    x = model.embeddings.tokens.patch_embedding(images) + model.position_embeddings[1:]
    return model.readout(model.final_norm(run_blocks(model.blocks, x).hidden).median(dim=1).values)


def _first_patch(model, images):
    x = model.embeddings.tokens.patch_embedding(images) + model.position_embeddings[1:]
    return model.readout(model.final_norm(run_blocks(model.blocks, x).hidden)[:, 0])


MEAN_POOL_MISTAKES = (
    Mistake("class_token_not_pooled",
            "the class token is still in the sequence, though left out of the mean: through attention it "
            "changes every patch's output; the model has no class token at all, so run the blocks on the "
            "N patch tokens alone",
            gives=_mean_pool_class_token_not_pooled),
    Mistake("max_pool",
            "the patches' outputs were max-pooled; take their mean",
            gives=_max_pool),
    Mistake("median_pool",
            "the patches' outputs were pooled with a median; take their mean (.mean(dim=1))",
            gives=_median_pool),
    Mistake("sum_pool",
            "the patches' outputs were summed; take their mean (divide by N)",
            gives=_sum_pool),
    Mistake("divided_by_n_plus_one",
            "the sum of the N patches' outputs was divided by N + 1, as if the class token were still "
            "counted; this model has no class token, so divide by N (or take .mean(dim=1))",
            gives=_sum_over_n_plus_one),
    Mistake("class_position_everywhere",
            "every patch got the class token's position (row 0); patch i gets row 1 + i, "
            "position_embeddings[1:]",
            gives=_class_position_everywhere),
    Mistake("class_position_added",
            "every patch got its own position plus the class token's (row 0): the class token is "
            "gone, and its position with it; add position_embeddings[1:] alone",
            gives=_class_position_added),
    Mistake("first_patch",
            "token 0 was read, as for the class token; without one, token 0 is the top-left patch: "
            "average all N patches' outputs",
            gives=_first_patch),
    Mistake("class_token_read",
            "this is the unchanged model: it reads the class token's output; drop the class token and "
            "average the patches' outputs",
            gives=lambda model, images: model(images)),
    Mistake("class_token_kept",
            "the class token is still in the sequence (and in the mean): run the blocks on the N patch "
            "tokens alone",
            gives=_mean_pool_with_class_token),
    Mistake("positions_shifted",
            "the patches got positions[:N]; positions[0] was the class token's slot, the patches' are "
            "positions[1:]",
            gives=_mean_pool_positions_shifted),
    Mistake("no_positions",
            "the positions were not added to the patch embeddings",
            gives=_mean_pool_no_positions),
    Mistake("norm_after_mean",
            "the final LayerNorm was applied to the mean; apply it to every patch's output, then average",
            gives=_mean_pool_norm_after_mean),
    Mistake("no_final_norm",
            "the final LayerNorm is missing: a pre-norm stack ends with one",
            gives=_mean_pool_no_norm),
    Mistake("blocks_skipped",
            "the encoder blocks were not run: the patch embeddings went straight to the head",
            gives=_mean_pool_embeddings_only),
    Mistake("first_block_only",
            "only the first encoder block ran: run all of model.blocks (run_blocks), then the final norm",
            gives=_mean_pool_first_block_only),
)


def _random_vit(seed: int, config: ViTConfig) -> ViT:
    torch.manual_seed(seed)
    model = ViT(config).eval()
    with torch.no_grad():  # every weight random, so that no part can hide behind a 0 or a 1
        for p in model.parameters():
            p.normal_(0, 0.3)
    return model


def check_mean_pool_logits(fn: Callable) -> CheckResult:
    """``fn(model: ViT, images (B, C, H, W)) -> (B, classes)`` logits read by mean pooling."""
    settings = [
        (ViTConfig(image_size=4, patch_size=2, d_model=8, num_heads=2, num_layers=1, d_ff=16), 2),
        (ViTConfig(image_size=8, patch_size=2, d_model=16, num_heads=4, num_layers=2, d_ff=32), 3),
        (ViTConfig(image_size=6, patch_size=3, in_channels=3, num_classes=5, d_model=12, num_heads=3,
                   num_layers=3, d_ff=24), 1),
        (ViTConfig(image_size=8, patch_size=4, in_channels=2, num_classes=4, d_model=8, num_heads=1,
                   num_layers=2, d_ff=8), 4),
    ]
    cases = []
    for n, (config, B) in enumerate(settings):
        model = _random_vit(n, config)
        images = _randn(50 + n, B, config.in_channels, config.image_size, config.image_size)
        with torch.no_grad():
            expected = _mean_pool(model, images)
        cases.append(Case(f"ViT {config.image_size}x{config.image_size}, P = {config.patch_size}, "
                          f"C = {config.in_channels}, D = {config.d_model}, {config.num_layers} layer(s), B = {B}",
                          (model, images), expected, atol=1e-5, rtol=1e-4,
                          hint="patch_embedding(images) + position_embeddings[1:], run_blocks(...).hidden, "
                               "final_norm on every token, mean over the patches, readout."))
    return run_cases("mean pooling instead of the class token", no_grad(fn), cases, MEAN_POOL_MISTAKES)


# ----- 6. a local attention mask for any grid and radius ------------------------------------------

def _local_mask(grid_size: int, radius: int, distance: str = "chebyshev") -> torch.Tensor:
    index = torch.arange(grid_size * grid_size)
    rows, cols = index // grid_size, index % grid_size  # (N,) each
    dr, dc = (rows[:, None] - rows[None]).abs(), (cols[:, None] - cols[None]).abs()  # (N, N)
    if distance == "chebyshev":
        d = torch.maximum(dr, dc)
    elif distance == "euclidean":  # a disc: (dr^2 + dc^2)^(1/2) < radius + 1
        d = torch.where((dr ** 2 + dc ** 2) < (radius + 1) ** 2, 0, radius + 1)
    elif distance == "euclidean_within":  # a disc: (dr^2 + dc^2)^(1/2) <= radius
        d = torch.where((dr ** 2 + dc ** 2) <= radius ** 2, 0, radius + 1)
    else:
        d = dr + dc
    mask = torch.ones(1 + grid_size ** 2, 1 + grid_size ** 2, dtype=torch.bool)
    mask[1:, 0] = False  # patches do not read the class token
    mask[1:, 1:] = d <= radius
    return mask


def _local_mask_wrapped(grid_size: int, radius: int, rows: bool, cols: bool) -> torch.Tensor:
    """The square neighbourhood on a torus: distances wrap around the grid's edges (in the rows,
    the columns or both), so the left edge's patches read the right edge's."""
    index = torch.arange(grid_size * grid_size)
    r, c = index // grid_size, index % grid_size  # (N,) each
    dr, dc = (r[:, None] - r[None]).abs(), (c[:, None] - c[None]).abs()  # (N, N)
    if rows:
        dr = torch.minimum(dr, grid_size - dr)
    if cols:
        dc = torch.minimum(dc, grid_size - dc)
    mask = _local_mask(grid_size, radius)
    mask[1:, 1:] = torch.maximum(dr, dc) <= radius
    return mask


def _wraps_around(args: tuple, got: object) -> bool:
    """The mask is the square neighbourhood with distances wrapped around the grid's edges."""
    if not (isinstance(got, torch.Tensor) and got.dtype == torch.bool
            and got.shape == _local_mask(*args).shape):
        return False
    got = got.cpu()
    return not torch.equal(got, _local_mask(*args)) and any(
        torch.equal(got, _local_mask_wrapped(*args, rows, cols))
        for rows, cols in ((True, True), (False, True), (True, False)))


def _local_mask_flat(grid_size, radius):  # neighbours along the flattened sequence, not the grid
    n = grid_size * grid_size
    mask = _local_mask(grid_size, radius)
    index = torch.arange(n)
    mask[1:, 1:] = (index[:, None] - index[None]).abs() <= radius
    return mask


def _banded_in_sequence(args, got) -> bool:
    """The patch block allows |n - m| <= w for some width w: a 1-D distance along the flattened
    sequence, however it was scaled (w = radius * (grid_size + 1), say), with the class token's
    row and column right."""
    grid_size, radius = args
    if not isinstance(got, torch.Tensor) or got.dtype != torch.bool:
        return False
    right = _local_mask(grid_size, radius)
    if got.shape != right.shape or not (torch.equal(got[0], right[0])
                                         and torch.equal(got[:, 0], right[:, 0])):
        return False
    index = torch.arange(grid_size * grid_size)
    gap = (index[:, None] - index[None]).abs()  # (N, N)
    return any(torch.equal(got[1:, 1:], gap <= width) for width in range(len(index)))


def _patch_block_inverted(grid_size: int, radius: int, got: object) -> bool:
    """The (N, N) patch block is the right block negated, whatever the class token's row and
    column hold (``mask[1:, 1:] = ~near``, or every patch row negated)."""
    right = _local_mask(grid_size, radius)
    return (isinstance(got, torch.Tensor) and got.dtype == torch.bool and got.shape == right.shape
            and torch.equal(got[1:, 1:], ~right[1:, 1:]))


def _local_mask_edit(**changes):
    def wrong(grid_size, radius):
        mask = _local_mask(grid_size, radius)
        if "patches_read_class" in changes:
            mask[1:, 0] = True
        if "class_reads_self_only" in changes:
            mask[0, 1:] = False
        if "class_skips_itself" in changes:
            mask[0, 0] = False
        return mask
    return wrong


def _local_mask_no_self(grid_size, radius):  # the neighbourhood without the patch itself
    mask = _local_mask(grid_size, radius)
    mask[1:, 1:] &= ~torch.eye(grid_size * grid_size, dtype=torch.bool)
    return mask


LOCAL_MASK_MISTAKES = (
    Mistake("self_excluded",
            "each patch may not attend to itself here (the diagonal of the patch block is False); a "
            "convolution's 3x3 kernel includes its centre pixel, and the neighbourhood includes the "
            "patch itself (radius 0 keeps only it)",
            gives=_local_mask_no_self),
    Mistake("inverted",
            "True and False are swapped: in this book True means 'may attend' (the opposite of "
            "nn.MultiheadAttention's attn_mask)",
            gives=lambda g, r: ~_local_mask(g, r)),
    Mistake("inverted_patches",
            "the patch-to-patch block is inverted: True marks the patches too far away, the "
            "PyTorch attn_mask convention; in this book True means 'may attend' (a patch reads "
            "its neighbours, itself included)",
            when=lambda args, got: _patch_block_inverted(*args, got)),
    Mistake("manhattan",
            "this is a diamond (|row difference| + |column difference| <= radius); the 3x3 neighbourhood "
            "of a convolution is a square: the larger of the two differences <= radius",
            gives=lambda g, r: _local_mask(g, r, "manhattan")),
    Mistake("euclidean_within_radius",
            "this is a disc (Euclidean distance between patch centres <= radius), which leaves out the "
            "square's corners (at radius 1 and 2 it is the same mask as a diamond); the neighbourhood of a "
            "convolution is a square: the larger of the row and column differences <= radius",
            gives=lambda g, r: _local_mask(g, r, "euclidean_within")),
    Mistake("euclidean",
            "this is a disc (Euclidean distance between patch centres); the neighbourhood is a square "
            "(its corners included): the larger of the row and column differences <= radius",
            gives=lambda g, r: _local_mask(g, r, "euclidean")),
    Mistake("strict",
            "one ring too small: use distance <= radius (radius 0 keeps each patch's own position)",
            gives=lambda g, r: _local_mask(g, r - 1)),
    Mistake("flattened_sequence",
            "neighbours along the flattened sequence are not neighbours on the grid: patch n is at row "
            "n // grid_size, column n % grid_size",
            gives=_local_mask_flat),
    Mistake("flattened_distance",
            "this is a distance along the flattened sequence, |n - m| <= some width (such as "
            "radius * (grid_size + 1)): at the end of a row it lets in the far end of the next "
            "row. Patch n sits at row n // grid_size, column n % grid_size; compare rows and "
            "columns separately",
            when=_banded_in_sequence),
    Mistake("wrap_around",
            "the distances wrap around the grid's edges (a torus: the difference taken as "
            "min(d, grid_size - d)), so a patch on the left edge reads the right edge; an image "
            "has edges, as a convolution padded with zeros does: use the plain differences, "
            "max(|row difference|, |column difference|) <= radius",
            when=_wraps_around),
    Mistake("class_skips_itself",
            "the class token does not read itself here (mask[0, 0] is False); row 0 is all True: "
            "the class token reads every token, itself included",
            gives=_local_mask_edit(class_skips_itself=True)),
    Mistake("patches_read_class",
            "the patches may read the class token here; in vit_local they attend only to patches "
            "(column 0 is False below row 0)",
            gives=_local_mask_edit(patches_read_class=True)),
    Mistake("class_reads_self_only",
            "the class token must still read every patch (row 0 is all True), or the read-out sees nothing",
            gives=_local_mask_edit(class_reads_self_only=True)),
    Mistake("no_class_token",
            "the class token is missing: the mask is (1 + N, 1 + N), row and column 0 for the class token",
            when=lambda args, got: isinstance(got, torch.Tensor)
            and tuple(got.shape) == (args[0] ** 2, args[0] ** 2)),
    Mistake("radius_fixed",
            "the radius is fixed at 1: use the radius argument (radius 0 keeps each patch's own "
            "position, radius 2 a 5x5 square)",
            when=lambda args, got: args[1] != 1 and isinstance(got, torch.Tensor)
            and got.dtype == torch.bool and torch.equal(got.cpu(), _local_mask(args[0], 1))),
    Mistake("grid_fixed",
            "the grid is fixed at 4x4: use grid_size (N = grid_size^2 patches)",
            when=lambda args, got: args[0] != 4 and isinstance(got, torch.Tensor)
            and got.dtype == torch.bool and tuple(got.shape) == (17, 17)
            and torch.equal(got.cpu(), _local_mask(4, args[1]))),
    Mistake("not_boolean",
            "the pattern is right but the mask is not boolean: return a torch.bool tensor "
            "(True = may attend), not 0/1 numbers",
            when=lambda args, got: isinstance(got, torch.Tensor) and got.dtype != torch.bool
            and got.shape == _local_mask(*args).shape
            and torch.equal(got.cpu() != 0, _local_mask(*args))),
)


def check_local_attention_mask(fn: Callable) -> CheckResult:
    """``fn(grid_size, radius) -> (1 + N, 1 + N)`` bool mask, True = may attend: the class token reads
    every token; a patch reads the patches within Chebyshev distance ``radius`` on the grid, not the
    class token."""
    cases = [Case(f"a {g}x{g} grid, radius {r}", (g, r), _local_mask(g, r),
                  hint="patch n sits at (n // g, n % g); a patch may attend to a patch when "
                       "max(|row difference|, |column difference|) <= radius; row 0 (the class token) "
                       "is all True, column 0 below it all False.")
             for g, r in ((4, 1), (3, 1), (4, 0), (5, 2), (2, 1), (6, 1), (5, 3), (1, 1))]
    if not callable(fn):
        return run_cases("a local attention mask", fn, cases, LOCAL_MASK_MISTAKES)
    outputs: list = []

    @functools.wraps(fn)
    def recorded(grid_size, radius):  # the reader's function, its last output kept
        out = fn(grid_size, radius)
        outputs.append(((grid_size, radius), out))
        return out

    mistakes = _explained_first(fn, cases, LOCAL_MASK_MISTAKES)
    result = run_cases("a local attention mask", recorded, cases, mistakes)
    if not result and not result.diagnosis and outputs:
        first = _first_mask_difference(*outputs[-1])
        if first:
            print("   " + first)
    return result


def _first_mask_difference(args: tuple, got: object) -> str:
    """The first (query, key) entry where a mask of the right shape and dtype is wrong, named."""
    g, r = args
    right = _local_mask(g, r)
    if not (isinstance(got, torch.Tensor) and got.shape == right.shape and got.dtype == torch.bool):
        return ""
    wrong = torch.nonzero(got.cpu() != right)
    if len(wrong) == 0:
        return ""

    def token(n: int) -> str:
        return "the class token" if n == 0 else f"the patch at grid row {(n - 1) // g}, column {(n - 1) % g}"

    i, j = wrong[0].tolist()
    return (f"first wrong entry of {len(wrong)}: mask[{i}, {j}], {token(i)} attending to "
            f"{token(j)}: expected {bool(right[i, j])}, got {bool(got[i, j])}")


def _layers_to_cross(grid_size: int, radius: int) -> int:
    """Measured on the mask: how many layers of ``_local_mask`` until every patch has reached every
    other (boolean products of the patch block)."""
    step = _local_mask(grid_size, radius)[1:, 1:]
    reach, layers = step.clone(), 1
    while not bool(reach.all()):
        reach = (reach.float() @ step.float()) > 0
        layers += 1
    return layers if grid_size > 1 else 0


LAYERS_MISTAKES = (
    Mistake("no_minus_one",
            "ceil(grid_size / radius) counts one step too many: a patch already holds its own "
            "column, so it must travel grid_size - 1 patches",
            when=lambda args, got: got != _layers_to_cross(*args)
            and got == -(-args[0] // args[1])),
    Mistake("radius_ignored",
            "the radius is left out: each layer moves information radius patches, so the count is "
            "ceil((grid_size - 1) / radius)",
            when=lambda args, got: args[1] != 1 and got == args[0] - 1),
    Mistake("floor",
            "rounded down: a remainder still needs one more layer, ceil((grid_size - 1) / radius)",
            when=lambda args, got: got != _layers_to_cross(*args)
            and got == (args[0] - 1) // args[1]),
    Mistake("halves_rounded_up",
            "2 * ceil((grid_size - 1) / (2 * radius)) crosses the grid in two halves and rounds each "
            "half up, which can add a layer; the far corner is grid_size - 1 patches away and each "
            "layer moves information radius patches: ceil((grid_size - 1) / radius)",
            when=lambda args, got: got != _layers_to_cross(*args) and args[0] > 1
            and got == 2 * -(-(args[0] - 1) // (2 * args[1]))),
    Mistake("two_radius_per_layer",
            "each layer was counted as moving information 2 * radius patches (the width of the "
            "square's growth); a patch's information travels radius patches per layer towards the "
            "far corner, grid_size - 1 patches away: ceil((grid_size - 1) / radius)",
            when=lambda args, got: got != _layers_to_cross(*args)
            and got == -(-(args[0] - 1) // (2 * args[1]))),
    Mistake("both_directions",
            "counted as the trip there and back (or across twice); one pass of grid_size - 1 "
            "patches in each direction at once is enough, since the square grows on every side",
            when=lambda args, got: args[0] > 1
            and got == 2 * _layers_to_cross(*args)),
    Mistake("whole_grid",
            "the number of patches is not the distance: information crosses grid_size - 1 patch "
            "steps along a row or column, not grid_size^2",
            when=lambda args, got: args[0] > 2 and got in (args[0] ** 2, args[0] ** 2 - 1)),
)


def check_layers_to_cross(fn: Callable) -> CheckResult:
    """``fn(grid_size, radius) -> int``: the layers of the local mask after which every patch's
    information has reached every patch; the expected count is measured on the mask itself."""
    cases = [Case(f"a {g}x{g} grid, radius {r}", (g, r), _layers_to_cross(g, r),
                  hint="each layer widens the square a patch has read by radius on every side; "
                       "the far corner is grid_size - 1 patches away.")
             for g, r in ((4, 1), (14, 1), (5, 2), (7, 3), (6, 2), (2, 1), (9, 4), (3, 5))]
    return run_cases("layers to cross the grid", fn, cases, _explained_first(fn, cases, LAYERS_MISTAKES))


# ----- 7. the position table interpolated in 2-D for a larger grid ---------------------------------

def _interpolate(positions: torch.Tensor, new_grid: int, mode: str = "bilinear",
                 align_corners: bool | None = False, antialias: bool = False) -> torch.Tensor:
    D = positions.shape[-1]
    g = round((positions.shape[0] - 1) ** 0.5)
    grid = positions[1:].reshape(g, g, D).permute(2, 0, 1)[None]  # (1, D, g, g)
    kwargs = {} if mode == "nearest" else {"align_corners": align_corners}
    if antialias:
        kwargs["antialias"] = True
    resized = F.interpolate(grid, size=(new_grid, new_grid), mode=mode, **kwargs)  # (1, D, G, G)
    return torch.cat([positions[:1], resized[0].permute(1, 2, 0).reshape(new_grid * new_grid, D)])


def _interpolate_no_permute(positions, new_grid):
    D = positions.shape[-1]
    g = round((positions.shape[0] - 1) ** 0.5)
    grid = positions[1:].reshape(1, D, g, g)  # the (N, D) memory read as (D, g, g): scrambled
    resized = F.interpolate(grid, size=(new_grid, new_grid), mode="bilinear", align_corners=False)
    return torch.cat([positions[:1], resized.reshape(new_grid * new_grid, D)])


def _interpolate_permute_out_only(positions, new_grid):
    """Reshaped straight to (D, g, g) on the way in, permuted back on the way out."""
    D = positions.shape[-1]
    g = round((positions.shape[0] - 1) ** 0.5)
    grid = positions[1:].reshape(1, D, g, g)
    resized = F.interpolate(grid, size=(new_grid, new_grid), mode="bilinear", align_corners=False)
    return torch.cat([positions[:1], resized[0].permute(1, 2, 0).reshape(new_grid * new_grid, D)])


def _interpolate_permute_in_only(positions, new_grid):
    """Permuted to (D, g, g) on the way in, reshaped straight back to (G*G, D) on the way out."""
    D = positions.shape[-1]
    g = round((positions.shape[0] - 1) ** 0.5)
    grid = positions[1:].reshape(g, g, D).permute(2, 0, 1)[None]
    resized = F.interpolate(grid, size=(new_grid, new_grid), mode="bilinear", align_corners=False)
    return torch.cat([positions[:1], resized.reshape(new_grid * new_grid, D)])


def _interpolate_transposed(positions, new_grid):
    D = positions.shape[-1]
    out = _interpolate(positions, new_grid)
    return torch.cat([out[:1], out[1:].reshape(new_grid, new_grid, D).transpose(0, 1).reshape(-1, D)])


def _interpolate_1d(positions, new_grid):
    rows = positions[1:].T[None]  # (1, D, N): the table as a 1-D sequence
    resized = F.interpolate(rows, size=new_grid * new_grid, mode="linear", align_corners=False)
    return torch.cat([positions[:1], resized[0].T])


def _interpolate_with_class_row(positions, new_grid):
    out = _interpolate(positions, new_grid)
    return out[1:]


def _class_row_from_grid(positions, new_grid):
    return _interpolate(torch.cat([positions[1:2], positions[1:]]), new_grid)


def _class_row_mean(positions, new_grid):
    out = _interpolate(positions, new_grid).clone()
    out[0] = positions[1:].mean(0)
    return out


def _class_row_reset(positions, new_grid):
    out = _interpolate(positions, new_grid).clone()
    out[0] = 0
    return out


INTERPOLATE_MISTAKES = (
    Mistake("class_row_dropped",
            "the class token's row 0 is missing: keep it unchanged in front of the resized grid, "
            "(1 + G*G, D) rows",
            gives=_interpolate_with_class_row),
    Mistake("class_row_from_grid",
            "row 0 came out as the first patch's position: the class token's row is no grid point; "
            "copy positions[0] as it is and resize only rows 1 to N",
            gives=_class_row_from_grid),
    Mistake("class_row_reset",
            "row 0, the class token's position, was reset; it belongs to no patch and is copied as it is",
            gives=_class_row_reset),
    Mistake("no_permute",
            "the (N, D) table was reshaped straight to (D, g, g), which reads it in the wrong memory order; "
            "reshape to (g, g, D) first, then move D to the front (permute(2, 0, 1)), and back at the end",
            gives=_interpolate_no_permute),
    Mistake("permute_out_only",
            "half the permute: on the way in the (N, D) table was reshaped straight to (D, g, g), "
            "which scrambles it; reshape to (g, g, D) and permute(2, 0, 1) before resizing (the way "
            "back, permute(1, 2, 0), is right)",
            gives=_interpolate_permute_out_only),
    Mistake("permute_in_only",
            "half the permute: the grid went in right, but the (1, D, G, G) result was reshaped "
            "straight to (G*G, D), which mixes the D channels into the rows; permute(1, 2, 0) "
            "first, then reshape",
            gives=_interpolate_permute_in_only),
    Mistake("one_d",
            "the table was stretched as a 1-D sequence of N rows; the positions form a g x g grid, resize "
            "it in 2-D so that rows stay rows",
            gives=_interpolate_1d),
    Mistake("transposed",
            "the new grid comes back transposed (rows and columns swapped): read it back row by row, "
            "permute(1, 2, 0) from (D, G, G)",
            gives=_interpolate_transposed),
    Mistake("align_corners",
            "align_corners=True lines up the corner pixels' centres; the exercise (like timm and the "
            "paper's code) uses align_corners=False",
            gives=lambda positions, new_grid: _interpolate(positions, new_grid, align_corners=True)),
    Mistake("bicubic",
            "this is bicubic interpolation (timm's choice); the exercise asks for mode='bilinear'",
            gives=lambda positions, new_grid: _interpolate(positions, new_grid, mode="bicubic")),
    Mistake("class_row_mean",
            "row 0 was replaced by the mean of the patch rows; the class token's position is its "
            "own learned vector: copy row 0 unchanged",
            gives=_class_row_mean),
    Mistake("bicubic_align_corners",
            "this is bicubic interpolation with align_corners=True: use mode='bilinear' with "
            "align_corners=False",
            gives=lambda positions, new_grid: _interpolate(positions, new_grid, mode="bicubic",
                                                          align_corners=True)),
    Mistake("antialiased",
            "antialias=True smooths the grid before shrinking it (it changes only the grids that get "
            "smaller); the exercise's bilinear resize uses the default antialias=False",
            gives=lambda positions, new_grid: _interpolate(positions, new_grid, antialias=True)),
    Mistake("nearest",
            "this is nearest-neighbour resizing, which copies rows in blocks; use mode='bilinear'",
            gives=lambda positions, new_grid: _interpolate(positions, new_grid, mode="nearest")),
)


def check_interpolate_positions(fn: Callable) -> CheckResult:
    """``fn(positions (1 + g*g, D), new_grid G) -> (1 + G*G, D)``: the class token's row 0 unchanged,
    the g x g grid of patch positions resized to G x G with bilinear interpolation
    (``align_corners=False``)."""
    settings = [(2, 4, 3), (4, 8, 5), (3, 6, 1), (4, 4, 6), (4, 6, 8), (3, 2, 4), (2, 5, 2)]
    cases = []
    for n, (g, G, D) in enumerate(settings):
        positions = _randn(50 + n, 1 + g * g, D)
        cases.append(Case(f"a {g}x{g} grid to {G}x{G}, D = {D}", (positions, G), _interpolate(positions, G),
                          hint="keep row 0; reshape rows 1: to (g, g, D), permute to (1, D, g, g), "
                               "F.interpolate(size=(G, G), mode='bilinear', align_corners=False), "
                               "permute back and flatten to (G*G, D)."))
    return run_cases("position table, interpolated in 2-D", fn, cases, INTERPOLATE_MISTAKES)


EXERCISES = {
    "interpolate_positions": check_interpolate_positions,
    "vit_sizes": check_vit_sizes,
    "count_scores": check_count_scores,
    "unpatchify": check_unpatchify,
    "rollout": check_attention_rollout,
    "mean_pool_logits": check_mean_pool_logits,
    "local_attention_mask": check_local_attention_mask,
    "layers_to_cross": check_layers_to_cross,
}
