"""Checkers for Chapter 6 (BERT).

Each checker varies every argument across its cases; ``run_cases`` checks that inputs are left
unchanged and names a known mistake when the output matches one. The masking checker is
statistical (the function draws random numbers), so it checks rates and properties instead.
``EXERCISES`` maps the notebook's function names to their checkers.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch

from attnbook.exercises.core import MUTATION, Case, CheckResult, Mistake, run_cases


# ----------------------------------------------------------------------------- 1. mean pooling
def _reference_mean_pool(hidden: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
    w = token_mask.to(hidden.dtype).unsqueeze(-1)  # (B, S, 1)
    return (hidden * w).sum(1) / w.sum(1)  # (B, D)


def _pooling_cases() -> list[Case]:
    shapes = [((1, 1, 3), [1]), ((2, 5, 4), [5, 2]), ((3, 6, 2), [1, 6, 3]), ((4, 4, 8), [4, 4, 1, 2])]
    cases = []
    for n, ((B, S, D), lengths) in enumerate(shapes):
        hidden = torch.randn(B, S, D, generator=torch.Generator().manual_seed(n))
        mask = torch.arange(S)[None, :] < torch.tensor(lengths)[:, None]  # (B, S)
        cases.append(Case(f"B={B}, S={S}, D={D}, lengths {lengths}", (hidden, mask),
                          _reference_mean_pool(hidden, mask),
                          hint="multiply by the mask (as floats, shape (B, S, 1)), sum over S, divide by "
                               "each row's number of real tokens."))
    return cases


POOLING_MISTAKES = (
    Mistake("padding averaged", "your average includes the padding positions: average over real tokens only.",
            gives=lambda h, m: h.mean(1)),
    Mistake("divided by S", "you zeroed the padding but divided by the padded length S: divide by each row's "
                            "number of real tokens.", gives=lambda h, m: (h * m.unsqueeze(-1)).sum(1) / h.shape[1]),
    Mistake("sum not mean", "you summed the real tokens' vectors but did not divide: this is a sum, not a mean.",
            gives=lambda h, m: (h * m.unsqueeze(-1)).sum(1)),
    Mistake("[CLS] vector", "you returned the first ([CLS]) vector: mean pooling averages every real token.",
            gives=lambda h, m: h[:, 0]),
)


def check_mean_pool(fn: Callable) -> CheckResult:
    """``fn(hidden (B, S, D), token_mask (B, S) bool) -> (B, D)``: the mean over real tokens only."""
    return run_cases("mean pooling", fn, _pooling_cases(), POOLING_MISTAKES)


# ----------------------------------------------------------------------------- 2. MLM accuracy
def _reference_mlm_accuracy(logits: torch.Tensor, targets: torch.Tensor, chosen: torch.Tensor) -> float:
    return float((logits.argmax(-1)[chosen] == targets[chosen]).float().mean())


def _accuracy_cases() -> list[Case]:
    cases = []
    for n, (B, S, V, rate) in enumerate([(1, 9, 5, 0.5), (2, 13, 7, 0.3), (3, 16, 11, 0.2), (4, 10, 3, 0.6)]):
        g = torch.Generator().manual_seed(10 + n)
        logits = torch.randn(B, S, V, generator=g)
        targets = torch.randint(0, V, (B, S), generator=g)
        right = torch.rand(B, S, generator=g) < 0.5
        targets = torch.where(right, logits.argmax(-1), targets)  # about half right everywhere
        chosen = torch.rand(B, S, generator=g) < rate
        chosen[0, 0] = True  # at least one chosen position
        cases.append(Case(f"B={B}, S={S}, V={V}, {int(chosen.sum())} chosen", (logits, targets, chosen),
                          _reference_mlm_accuracy(logits, targets, chosen),
                          hint="keep the chosen positions (boolean indexing), compare argmax with the targets "
                               "there, and divide by the number of chosen positions."))
    return cases


ACCURACY_MISTAKES = (
    Mistake("tensor, not float", "you returned a tensor: the exercise asks for a Python "
                                 "float (float(...) or .item() of the 0-d tensor).",
            when=lambda args, got: isinstance(got, _NotAFloat)),
    Mistake("all-positions denominator", "you divided the right answers by every position of the batch (seed 003's "
                                         "trap): divide by the number of chosen positions.",
            gives=lambda lo, t, c: float(((lo.argmax(-1) == t) & c).sum() / t.numel())),
    Mistake("scored every position", "you scored every position, not only the chosen ones: the unchosen tokens "
                                     "were visible to the model.",
            gives=lambda lo, t, c: float((lo.argmax(-1) == t).float().mean())),
)


class _NotAFloat:
    """A tensor the reader returned where the exercise asks for a Python float: never
    equal to the expected float, so that the ``tensor, not float`` mistake names it."""

    def __init__(self, value: torch.Tensor) -> None:
        self.value = value

    def __repr__(self) -> str:
        shape = tuple(self.value.shape)
        return f"{self.value!r} (a tensor of shape {shape}, not a Python float)"


def _float_please(fn: Callable) -> Callable:
    """``fn`` with a tensor result wrapped in ``_NotAFloat`` (same signature)."""
    if not callable(fn):
        return fn

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        got = fn(*args, **kwargs)
        return _NotAFloat(got) if isinstance(got, torch.Tensor) else got

    return wrapped


def check_mlm_accuracy(fn: Callable) -> CheckResult:
    """``fn(logits (B, S, V), targets (B, S), chosen (B, S) bool) -> float``: the
    accuracy over chosen positions, as a Python float (a tensor, even 0-d, is wrong)."""
    return run_cases("MLM accuracy", _float_please(fn), _accuracy_cases(),
                     ACCURACY_MISTAKES)


# ----------------------------------------------------------------------------- 3. WordPiece on one word
def _reference_wordpiece(word: str, vocab: set[str], max_chars: int) -> list[str]:
    if len(word) > max_chars:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start and (word[start:end] if start == 0 else "##" + word[start:end]) not in vocab:
            end -= 1
        if end == start:
            return ["[UNK]"]
        pieces.append(word[start:end] if start == 0 else "##" + word[start:end])
        start = end
    return pieces


_VOCAB_A = {"un", "una", "##aff", "##ffa", "##able", "##ble", "##a", "a", "##b", "b"}
_VOCAB_B = {"play", "##ing", "##er", "##s", "p", "##l", "##a", "##y", "pl", "##ay", "##in", "##g", "s", "##p"}


def _wordpiece_cases() -> list[Case]:
    specs = [
        ("unaffable", _VOCAB_A, 100), ("a", _VOCAB_A, 100), ("unab", _VOCAB_A, 100), ("unx", _VOCAB_A, 100),
        ("playing", _VOCAB_B, 100), ("players", _VOCAB_B, 100), ("splay", _VOCAB_B, 100),
        ("playing", _VOCAB_B, 6), ("play", _VOCAB_B, 4), ("ingplay", _VOCAB_B, 100),
    ]
    return [Case(f"word {w!r}, max_chars {m}", (w, frozenset(v), m), _reference_wordpiece(w, v, m),
                 hint="from the current start, try the longest remaining piece first and shorten it until it "
                      "is in the vocabulary (with '##' unless it starts the word); if nothing matches, "
                      "the whole word is ['[UNK]'].")
            for w, v, m in specs]


def _shortest_first(word: str, vocab: set[str], max_chars: int) -> list[str]:
    if len(word) > max_chars:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        for end in range(start + 1, len(word) + 1):
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
        else:
            return ["[UNK]"]
        pieces.append(piece)
        start = end
    return pieces


def _no_hashes(word: str, vocab: set[str], max_chars: int) -> list[str]:
    return [p.removeprefix("##") for p in _reference_wordpiece(word, vocab, max_chars)]


def _partial_unk(word: str, vocab: set[str], max_chars: int) -> list[str]:
    if len(word) > max_chars:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start and (word[start:end] if start == 0 else "##" + word[start:end]) not in vocab:
            end -= 1
        if end == start:
            return pieces + ["[UNK]"]
        pieces.append(word[start:end] if start == 0 else "##" + word[start:end])
        start = end
    return pieces


def _ignores_max_chars(word: str, vocab: set[str], max_chars: int) -> list[str]:
    return _reference_wordpiece(word, vocab, 10**9)


WORDPIECE_MISTAKES = (
    Mistake("shortest first", "you take the shortest piece that matches: WordPiece takes the longest first.",
            gives=_shortest_first),
    Mistake("no ## prefix", "pieces after the first must carry the '##' prefix (and be looked up with it).",
            gives=_no_hashes),
    Mistake("partial [UNK]", "when a remainder matches nothing, the *whole* word becomes ['[UNK]'], not the "
                             "pieces so far plus '[UNK]'.", gives=_partial_unk),
    Mistake("max_chars ignored", "a word longer than max_chars characters is ['[UNK]'] without trying to split it.",
            gives=_ignores_max_chars),
)


def check_wordpiece(fn: Callable) -> CheckResult:
    """``fn(word, vocab: set[str], max_chars: int) -> list[str]``: BERT's greedy longest-match-first split."""
    return run_cases("WordPiece", fn, _wordpiece_cases(), WORDPIECE_MISTAKES)


# ----------------------------------------------------------------------------- 4. BERT's masking
def _masking_inputs(n: int, rows: int, cols: int, vocab_size: int, mask_id: int):
    g = torch.Generator().manual_seed(100 + n)
    ids = torch.randint(mask_id + 1, vocab_size, (rows, cols), generator=g)
    maskable = torch.rand(rows, cols, generator=g) < 0.8
    return ids, maskable


SELECT, MASK, RANDOM, KEEP = 0.15, 0.8, 0.1, 0.1  # BERT's rates
# Tolerances: about 4.5 standard errors for the share chosen (over 100k maskable
# tokens per case, one standard error is about 0.11 points), about 9 for the 80/10/10
# split of the chosen (about 15k per case). Seed 003's selection (13.9%) is 10
# standard errors below 15%.
SELECT_TOL, MASK_TOL, SPLIT_TOL = 0.005, 0.03, 0.025


def _with_replacement_share(maskable: torch.Tensor) -> float:
    """Share of maskable tokens chosen by k = round(15% of n) draws *with* replacement
    among each row's n maskable positions (seed 003's selection): n(1 - (1 - 1/n)^k)
    distinct ones."""
    n = maskable.sum(-1).double()  # (B,)
    k = (SELECT * n).round()
    distinct = torch.where(n > 0, n * (1 - (1 - 1 / n.clamp(min=1)) ** k), n)
    return float(distinct.sum() / n.sum())


def masking_report(
    fn: Callable, ids: torch.Tensor, maskable: torch.Tensor, mask_id: int,
    vocab_size: int, seed: int,
) -> tuple[dict[str, bool], dict[str, float]]:
    """The properties a correct masking function has on one input (each True when it
    holds), and the shares it gave (``chosen`` of the maskable tokens; ``mask``,
    ``random``, ``keep`` of the chosen ones). The function runs three times: with a
    generator seeded ``seed``, again with the same seed, and with another seed."""
    before_ids, before_mask = ids.clone(), maskable.clone()
    global_before = torch.random.get_rng_state()

    def run(s):
        generator = torch.Generator().manual_seed(s)
        return fn(ids.clone(), maskable.clone(), mask_id, vocab_size, generator)

    corrupted, chosen = fn(ids, maskable, mask_id, vocab_size, torch.Generator().manual_seed(seed))
    unchanged = torch.equal(ids, before_ids) and torch.equal(maskable, before_mask)
    again, chosen_again = run(seed)
    other, chosen_other = run(seed + 1000)
    global_kept = torch.equal(torch.random.get_rng_state(), global_before)
    ok_shape = (isinstance(corrupted, torch.Tensor) and isinstance(chosen, torch.Tensor)
                and corrupted.shape == ids.shape and chosen.shape == ids.shape and chosen.dtype == torch.bool)
    if not ok_shape:
        return {"returns (corrupted ids, chosen bool mask) like input_ids": False}, {}
    seen, original = corrupted[chosen], ids[chosen]

    def share(x):
        return float(x.float().mean()) if seen.numel() else math.nan

    shares = {"chosen": int(chosen.sum()) / int(maskable.sum()),
              "mask": share(seen == mask_id),
              "random": share((seen != mask_id) & (seen != original)),
              "keep": share(seen == original)}
    report = {
        "input_ids and maskable are left unchanged": unchanged,
        "only maskable positions are chosen": not bool((chosen & ~maskable).any()),
        "positions not chosen keep their token": torch.equal(corrupted[~chosen], ids[~chosen]),
        "about 15% of maskable tokens are chosen":
            abs(shares["chosen"] - SELECT) < SELECT_TOL,
        "about 80% of chosen become [MASK]": abs(shares["mask"] - MASK) < MASK_TOL,
        "about 10% of chosen become another token":
            abs(shares["random"] - RANDOM) < SPLIT_TOL,
        "about 10% of chosen stay unchanged": abs(shares["keep"] - KEEP) < SPLIT_TOL,
        "random tokens are valid ids (0 <= id < vocab_size)": bool(((corrupted >= 0) & (corrupted < vocab_size)).all()),
        "the same generator seed gives the same result": torch.equal(corrupted, again) and torch.equal(chosen, chosen_again),
        "another generator seed gives another result":
            not (torch.equal(corrupted, other) and torch.equal(chosen, chosen_other)),
        "the global random state is left as it was": global_kept,
    }
    return report, shares


_RESEEDED = "global RNG reseeded"
_MASKING_DIAGNOSES = {  # property that fails first -> (diagnosis name, message)
    "input_ids and maskable are left unchanged": (
        MUTATION, "your function changed its input in place; work on a copy (torch.where or .clone())."),
    "only maskable positions are chosen": (
        "unmaskable chosen", "you chose positions where maskable is False (special tokens or padding)."),
    "about 15% of maskable tokens are chosen": (
        "selection rate",
        "choose each maskable token with probability 0.15: the share chosen is off."),
    "about 80% of chosen become [MASK]": (
        "mask share", "split the *chosen* positions 80/10/10; applying 0.8 to all tokens, or masking every "
                      "chosen one, gives other rates."),
    "about 10% of chosen become another token": (
        "random share", "10% of chosen positions must become a random token drawn uniformly from [0, vocab_size)."),
    "about 10% of chosen stay unchanged": (
        "unchanged share", "10% of chosen positions must keep their token (and still count in the loss)."),
    "the same generator seed gives the same result": (
        "generator unused", "draw every random number from the generator you are given "
                            "(torch.rand(..., generator=generator))."),
    "another generator seed gives another result": (
        _RESEEDED,
        "your result is the same for every generator: you reseed the global random "
        "number generator (torch.manual_seed) or use a fixed seed. Draw every random "
        "number from the generator you are given "
        "(torch.rand(..., generator=generator))."),
    "the global random state is left as it was": (
        _RESEEDED,
        "your function changed the global random state (torch.manual_seed, or a draw "
        "without generator=): the caller's own random numbers would change. Draw every "
        "random number from the generator you are given."),
}

# Known mistakes that a failed share tells apart: property -> (name, message, test on the
# shares and the case's maskable positions); checked before the property's own diagnosis.
_MASKING_PATTERNS = {
    "about 15% of maskable tokens are chosen": (
        "drawn with replacement",
        "you drew round(15% of n) positions with replacement (seed 003's selection): "
        "some are drawn twice, so only about 13.9% are chosen. Choose each maskable "
        "position with probability 0.15 (torch.rand(...) < 0.15), or draw distinct "
        "positions.",
        lambda shares, maskable:
            abs(shares["chosen"] - _with_replacement_share(maskable)) < SELECT_TOL),
    "about 10% of chosen become another token": (
        "no unchanged tokens",
        "you split the chosen positions 80/20 between [MASK] and random tokens (seed "
        "003's split): 10% must stay unchanged, so 80% [MASK], 10% random, 10% "
        "unchanged.",
        lambda shares, maskable: shares["keep"] < KEEP - SPLIT_TOL
        and abs(shares["random"] - (RANDOM + KEEP)) < 2 * SPLIT_TOL),
}


def check_masking(fn: Callable) -> CheckResult:
    """``fn(input_ids (B, S), maskable (B, S) bool, mask_id, vocab_size, generator)
    -> (corrupted (B, S), chosen (B, S) bool)``.

    Checked statistically on over 100k tokens per case, with tolerances several
    standard errors wide; the function must draw from ``generator`` (same seed, same
    result; another seed, another result; the global random state untouched)."""
    exercise = "BERT masking"
    specs = [(0, 400, 320, 1000, 3), (1, 300, 500, 30522, 103), (2, 700, 200, 50, 4)]
    if not callable(fn):
        return _verdict(exercise, False, f"expected a function, got {type(fn).__name__}")
    for n, rows, cols, vocab_size, mask_id in specs:
        ids, maskable = _masking_inputs(n, rows, cols, vocab_size, mask_id)
        try:
            report, shares = masking_report(fn, ids, maskable, mask_id, vocab_size, n)
        except NotImplementedError:
            return _verdict(exercise, False, "not done yet: the function still raises NotImplementedError.")
        except Exception as err:  # noqa: BLE001 - the reader's code may raise anything
            return _verdict(exercise, False, f"case {n + 1} raised {type(err).__name__}: {err}")
        failed = [k for k, ok in report.items() if not ok]
        if failed:
            where = (f"failing case {n + 1} ({rows}x{cols} tokens, vocab_size {vocab_size}, mask_id {mask_id}): "
                     + "; ".join(failed) + ".")
            if shares:
                where += (f"\n   measured: {shares['chosen']:.1%} of maskable tokens "
                          f"chosen; of them {shares['mask']:.1%} [MASK], "
                          f"{shares['random']:.1%} random, "
                          f"{shares['keep']:.1%} unchanged.")
            name, message = _MASKING_DIAGNOSES.get(failed[0], ("", ""))
            pattern = _MASKING_PATTERNS.get(failed[0])
            if pattern is not None and pattern[2](shares, maskable):
                name, message = pattern[0], pattern[1]
            return _verdict(exercise, False, f"{message}\n   {where}" if message else where, name)
    return _verdict(exercise, True, f"all {len(specs)} cases pass.")


def _verdict(exercise: str, passed: bool, detail: str, diagnosis: str = "") -> CheckResult:
    message = f"{'✓' if passed else '✗'} {exercise}: {detail}"
    print(message)
    return CheckResult(exercise, passed, message, diagnosis)


EXERCISES = {
    "mean_pool": check_mean_pool,
    "mlm_accuracy": check_mlm_accuracy,
    "wordpiece": check_wordpiece,
    "mask_tokens": check_masking,
}
