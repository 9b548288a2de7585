"""Checkers for Chapter 1: the RNN encoder-decoder."""
from __future__ import annotations

from collections.abc import Callable

import torch

from attnbook.exercises.core import Case, CheckResult, run_cases


def check_one_hot(one_hot: Callable[[torch.Tensor, int], torch.Tensor]) -> CheckResult:
    """``one_hot(ids (...,), num_classes) -> (..., num_classes)`` float tensor of 0s and 1s."""
    eye = torch.eye(5)
    return run_cases("one_hot", one_hot, [
        Case("a single id", (torch.tensor([2]), 5), eye[torch.tensor([2])],
             "row i must have a 1 at column ids[i] and 0 elsewhere; ids start at 0"),
        Case("several ids, including the first and last class", (torch.tensor([0, 4, 1]), 5), eye[torch.tensor([0, 4, 1])],
             "ids start at 0: id 0 sets column 0, id num_classes-1 sets the last column"),
        Case("a (2, 3) batch of ids", (torch.tensor([[1, 1, 3], [0, 2, 4]]), 5), eye[torch.tensor([[1, 1, 3], [0, 2, 4]])],
             "the new axis goes last: (B, T) ids -> (B, T, V)"),
    ])


class _TableModel:
    """A stand-in decoder: the next token's logits depend only on the previous token."""

    def __init__(self, next_token: dict[int, int], vocab_size: int) -> None:
        self.next_token, self.vocab_size = next_token, vocab_size

    def __call__(self, token: int, steps_taken: int) -> tuple[torch.Tensor, int]:
        logits = torch.full((self.vocab_size,), -1.0)
        logits[self.next_token[int(token)]] = 2.0
        logits[(self.next_token[int(token)] + 1) % self.vocab_size] = 1.5  # a close runner-up
        return logits, steps_taken + 1


def check_greedy_decode(greedy_decode: Callable[..., list[int]]) -> CheckResult:
    """``greedy_decode(step, state, bos_id, eos_id, max_len) -> list[int]`` for one sequence.

    ``step(token, state) -> (logits (V,), state)`` is the model's one-step function.
    """
    chain = _TableModel({1: 5, 5: 6, 6: 7, 7: 2, 2: 2, 3: 3, 4: 4}, 8)
    loop = _TableModel({1: 4, 4: 5, 5: 4, 2: 2, 3: 3, 6: 6, 7: 7}, 8)
    return run_cases("greedy_decode", greedy_decode, [
        Case("a model that says 5 6 7 <eos>", (chain, 0, 1, 2, 10), [5, 6, 7],
             "start from bos_id, feed each argmax back in, and stop at eos_id without returning it"),
        Case("a model that never says <eos>", (loop, 0, 1, 2, 5), [4, 5, 4, 5, 4],
             "stop after max_len tokens when <eos> never comes"),
        Case("max_len shorter than the answer", (chain, 0, 1, 2, 2), [5, 6],
             "max_len counts generated tokens (not including <bos>)"),
    ])


def check_shift_targets(shift_targets: Callable[..., tuple[list[int], list[int]]]) -> CheckResult:
    """``shift_targets(ids, bos_id, eos_id) -> (decoder_input, decoder_target)`` for teacher forcing."""
    return run_cases("shift_targets", shift_targets, [
        Case("the word 'knight' -> N AY T as ids [20, 8, 34]", ([20, 8, 34], 1, 2), ([1, 20, 8, 34], [20, 8, 34, 2]),
             "the decoder reads <bos> y1 .. yn and must predict y1 .. yn <eos>: both are n + 1 long"),
        Case("a one-phoneme word", ([7], 1, 2), ([1, 7], [7, 2]),
             "the input starts with <bos>; the target ends with <eos>"),
        Case("other special ids", ([5, 6], 10, 11), ([10, 5, 6], [5, 6, 11]),
             "use the bos_id and eos_id arguments, not hard-coded numbers"),
    ])


def check_edit_distance(edit_distance: Callable[[list[str], list[str]], int]) -> CheckResult:
    """``edit_distance(hyp, ref) -> int``: fewest insertions, deletions and substitutions."""
    return run_cases("edit_distance", edit_distance, [
        Case("identical", (["N", "AY", "T"], ["N", "AY", "T"]), 0, "identical sequences are 0 apart"),
        Case("one extra symbol", (["K", "N", "AY", "T"], ["N", "AY", "T"]), 1,
             "deleting the extra K costs 1"),
        Case("empty hypothesis", ([], ["F", "OW", "N"]), 3, "from nothing, every reference symbol is an insertion"),
        Case("substitution vs delete+insert", (["F", "OW", "N"], ["F", "AO", "N"]), 1,
             "a substitution costs 1, not 2"),
        Case("needs the full table", (["K", "AE", "T", "S"], ["S", "K", "AE", "T"]), 2,
             "take the minimum of three moves at every cell of the (len(hyp)+1) x (len(ref)+1) table"),
    ])
