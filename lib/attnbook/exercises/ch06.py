"""Checkers for Chapter 6 (BERT).

Each checker varies every argument across its cases; ``run_cases`` checks that inputs are left
unchanged and names a known mistake when the output matches one. The masking checker is
statistical (the function draws random numbers), so it checks rates and properties instead.
``EXERCISES`` maps the notebook's function names to their checkers.
"""
from __future__ import annotations

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
    Mistake("all-positions denominator", "you divided the right answers by every position of the batch (seed 003's "
                                         "trap): divide by the number of chosen positions.",
            gives=lambda lo, t, c: float(((lo.argmax(-1) == t) & c).sum() / t.numel())),
    Mistake("scored every position", "you scored every position, not only the chosen ones: the unchosen tokens "
                                     "were visible to the model.",
            gives=lambda lo, t, c: float((lo.argmax(-1) == t).float().mean())),
)


def check_mlm_accuracy(fn: Callable) -> CheckResult:
    """``fn(logits (B, S, V), targets (B, S), chosen (B, S) bool) -> float``: accuracy over chosen positions."""
    return run_cases("MLM accuracy", fn, _accuracy_cases(), ACCURACY_MISTAKES)


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


def masking_report(fn: Callable, ids: torch.Tensor, maskable: torch.Tensor, mask_id: int, vocab_size: int,
                   seed: int) -> dict[str, bool]:
    """The properties a correct masking function has on one input (each True when it holds)."""
    before_ids, before_mask = ids.clone(), maskable.clone()
    corrupted, chosen = fn(ids, maskable, mask_id, vocab_size, torch.Generator().manual_seed(seed))
    again, chosen_again = fn(ids.clone(), maskable.clone(), mask_id, vocab_size, torch.Generator().manual_seed(seed))
    ok_shape = (isinstance(corrupted, torch.Tensor) and isinstance(chosen, torch.Tensor)
                and corrupted.shape == ids.shape and chosen.shape == ids.shape and chosen.dtype == torch.bool)
    if not ok_shape:
        return {"returns (corrupted ids, chosen bool mask) shaped like input_ids": False}
    n_chosen = int(chosen.sum())
    seen, original = corrupted[chosen], ids[chosen]
    share = (lambda x: float(x.float().mean())) if n_chosen else (lambda x: float("nan"))
    return {
        "input_ids and maskable are left unchanged": torch.equal(ids, before_ids) and torch.equal(maskable, before_mask),
        "only maskable positions are chosen": not bool((chosen & ~maskable).any()),
        "positions not chosen keep their token": torch.equal(corrupted[~chosen], ids[~chosen]),
        "about 15% of maskable tokens are chosen": abs(n_chosen / int(maskable.sum()) - 0.15) < 0.015,
        "about 80% of chosen become [MASK]": abs(share(seen == mask_id) - 0.8) < 0.03,
        "about 10% of chosen become another token": abs(share((seen != mask_id) & (seen != original)) - 0.1) < 0.025,
        "about 10% of chosen stay unchanged": abs(share(seen == original) - 0.1) < 0.025,
        "random tokens are valid ids (0 <= id < vocab_size)": bool(((corrupted >= 0) & (corrupted < vocab_size)).all()),
        "the same generator seed gives the same result": torch.equal(corrupted, again) and torch.equal(chosen, chosen_again),
    }


_MASKING_DIAGNOSES = {  # property that fails first -> (diagnosis name, message)
    "input_ids and maskable are left unchanged": (
        MUTATION, "your function changed its input in place; work on a copy (torch.where or .clone())."),
    "only maskable positions are chosen": (
        "unmaskable chosen", "you chose positions where maskable is False (special tokens or padding)."),
    "about 15% of maskable tokens are chosen": (
        "selection rate", "choose each maskable token with probability 0.15 (sampling a count with replacement, "
                          "as seed 003 does, picks some positions twice)."),
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
}


def check_masking(fn: Callable) -> CheckResult:
    """``fn(input_ids (B, S), maskable (B, S) bool, mask_id, vocab_size, generator)
    -> (corrupted (B, S), chosen (B, S) bool)``.

    Checked statistically on over 100k tokens per case, with tolerances several standard errors wide."""
    exercise = "BERT masking"
    specs = [(0, 400, 320, 1000, 3), (1, 300, 500, 30522, 103), (2, 700, 200, 50, 4)]
    if not callable(fn):
        return _verdict(exercise, False, f"expected a function, got {type(fn).__name__}")
    for n, rows, cols, vocab_size, mask_id in specs:
        ids, maskable = _masking_inputs(n, rows, cols, vocab_size, mask_id)
        try:
            report = masking_report(fn, ids, maskable, mask_id, vocab_size, seed=n)
        except NotImplementedError:
            return _verdict(exercise, False, "not done yet: the function still raises NotImplementedError.")
        except Exception as err:  # noqa: BLE001 - the reader's code may raise anything
            return _verdict(exercise, False, f"case {n + 1} raised {type(err).__name__}: {err}")
        failed = [k for k, ok in report.items() if not ok]
        if failed:
            where = (f"failing case {n + 1} ({rows}x{cols} tokens, vocab_size {vocab_size}, mask_id {mask_id}): "
                     + "; ".join(failed) + ".")
            name, message = _MASKING_DIAGNOSES.get(failed[0], ("", ""))
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
