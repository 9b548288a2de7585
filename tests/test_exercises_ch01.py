"""Every Chapter 1 checker accepts the reference solution and rejects plausible mistakes."""
import torch

from attnbook.exercises.ch01 import check_edit_distance, check_greedy_decode, check_one_hot, check_shift_targets
from attnbook.metrics import edit_distance


def test_one_hot():
    assert check_one_hot(lambda ids, n: torch.eye(n)[ids])
    assert not check_one_hot(lambda ids, n: torch.eye(n)[ids].long())  # wrong dtype
    assert not check_one_hot(lambda ids, n: torch.eye(n)[ids - 1])  # off by one
    assert not check_one_hot(lambda ids, n: torch.eye(n)[ids].movedim(-1, 0))  # class axis first
    assert not check_one_hot(lambda ids, n: torch.eye(n)[ids.flatten()])  # flattens the batch


def test_shift_targets():
    assert check_shift_targets(lambda ids, b, e: ([b, *ids], [*ids, e]))
    assert not check_shift_targets(lambda ids, b, e: ([b, *ids[:-1]], list(ids)))  # drops <eos>
    assert not check_shift_targets(lambda ids, b, e: ([1, *ids], [*ids, 2]))  # hard-coded ids
    assert not check_shift_targets(lambda ids, b, e: ([*ids, e], [b, *ids]))  # swapped


def _greedy(step, state, bos, eos, max_len, keep_eos=False, extra=0):
    token, out = bos, []
    for _ in range(max_len + extra):
        logits, state = step(token, state)
        token = int(logits.argmax())
        if token == eos:
            if keep_eos:
                out.append(token)
            break
        out.append(token)
    return out


def test_greedy_decode():
    assert check_greedy_decode(_greedy)
    assert not check_greedy_decode(lambda *a: _greedy(*a, keep_eos=True))
    assert not check_greedy_decode(lambda *a: _greedy(*a, extra=1))  # max_len off by one
    assert not check_greedy_decode(lambda step, state, bos, eos, n: [bos] + _greedy(step, state, bos, eos, n))


def test_edit_distance():
    assert check_edit_distance(edit_distance)
    assert not check_edit_distance(lambda h, r: abs(len(h) - len(r)))
    assert not check_edit_distance(lambda h, r: sum(a != b for a, b in zip(h, r)) + abs(len(h) - len(r)))
    assert not check_edit_distance(lambda h, r: len(set(h) ^ set(r)))  # substitution counted twice
