"""The shared checker machinery: fresh inputs, mutation checks, diagnoses, robust comparison."""
import torch
from torch import nn

from attnbook.exercises.core import MUTATION, Case, Mistake, compare, no_grad, run_cases
from attnbook.layers import KVCache


def _double_cases():
    return [Case("two numbers", (torch.tensor([1.0, 2.0]),), torch.tensor([2.0, 4.0])),
            Case("three numbers", (torch.tensor([3.0, -1.0, 0.5]),), torch.tensor([6.0, -2.0, 1.0]))]


MISTAKES = [Mistake("added", "you added instead of multiplying.", gives=lambda x: x + 2),
            Mistake("squared", "you squared.", when=lambda args, got: torch.allclose(got, args[0] ** 2))]


def test_pass_and_fail(capsys):
    assert run_cases("double", lambda x: 2 * x, _double_cases(), MISTAKES)
    result = run_cases("double", lambda x: x * 3, _double_cases(), MISTAKES)
    assert not result and result.diagnosis == ""
    out = capsys.readouterr().out
    assert "✓ double: all 2 cases pass." in out and "case 1 (two numbers): values differ" in out


def test_diagnosis_by_output_and_by_predicate(capsys):
    assert run_cases("double", lambda x: x + 2, _double_cases(), MISTAKES).diagnosis == "added"
    assert run_cases("double", lambda x: x ** 2, _double_cases(), MISTAKES).diagnosis == "squared"
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "✗ double: you added instead of multiplying."
    assert lines[1].startswith("   failing case 1 (two numbers)")


def test_a_mistake_that_cannot_run_does_not_match():
    broken = [Mistake("broken", "never", gives=lambda x: 1 / 0)]
    assert run_cases("double", lambda x: x, _double_cases(), broken).diagnosis == ""


def test_in_place_changes_are_caught_and_do_not_leak_into_later_cases():
    seen = []

    def doubles_in_place(x):
        seen.append(x.clone())
        return x.mul_(2)
    result = run_cases("double", doubles_in_place, _double_cases(), MISTAKES)
    assert result.diagnosis == MUTATION and "`x`" in result.message
    cases = _double_cases()
    assert torch.equal(cases[0].args[0], torch.tensor([1.0, 2.0]))


def test_a_set_argument_changed_in_place_is_caught():
    cases = [Case("vocabulary", ({"a", "b"}, "c"), 3)]

    def adds_to_the_set(vocab, word):
        vocab.add(word)
        return len(vocab)
    result = run_cases("grow", adds_to_the_set, cases)
    assert result.diagnosis == MUTATION and "`vocab`" in result.message
    assert cases[0].args[0] == {"a", "b"}  # the case itself is untouched
    assert run_cases("grow", lambda vocab, word: len(vocab | {word}), cases)


def test_module_and_dataclass_arguments_are_checked():
    layer = nn.Linear(2, 2)
    case = Case("a layer", (layer, torch.ones(1, 2)), layer(torch.ones(1, 2)).detach())

    def trains(module, x):
        out = module(x)
        module.weight.data.add_(1.0)
        return out
    assert run_cases("linear", no_grad(trains), [case]).diagnosis == MUTATION
    cache = KVCache(torch.zeros(1, 1, 2, 3), torch.zeros(1, 1, 2, 3))

    def clears(c):
        c.key.fill_(1.0)
        return len(c)
    assert run_cases("cache", clears, [Case("a cache", (cache,), 2)]).diagnosis == MUTATION
    assert run_cases("cache", len, [Case("a cache", (cache,), 2)])


def test_compare_never_crashes_on_odd_answers():
    assert compare(torch.tensor([1, 2]), [1, 2], 1e-5, 1e-5) == "expected a list, got a tensor"
    assert compare([torch.tensor([1, 2])], [[1, 2]], 1e-5, 1e-5) is not None
    assert compare([[1], [2]], ([1], [2]), 1e-5, 1e-5) is None  # a pair returned as a list
    assert compare(torch.tensor(0.5), 0.5, 1e-5, 1e-5) is None
    assert compare((torch.ones(2), 3), (torch.ones(2), 3), 1e-5, 1e-5) is None
    assert "item 0" in compare((torch.zeros(2), 3), (torch.ones(2), 3), 1e-5, 1e-5)


def test_not_a_function():
    result = run_cases("double", 3, _double_cases())
    assert not result and "expected a function, got int" in result.message
