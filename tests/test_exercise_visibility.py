"""No exercise's answer is in sight: each hidden solution is compared with the code its chapter
shows (every other code cell, every printed output such as an ``inspect.getsource``, the
markdown's code blocks) by ``tools.exercise_visibility``; a solution fails when more than
``THRESHOLD`` (half) of its normalised tokens sit, in runs of a statement or more, in one
visible source. ``python -m tools.exercise_visibility`` prints every score.

Why one half. On the book as the exercise review found it, the solutions that review named as
printed above (Chapter 2's additive score, Chapter 4's split and merge, Chapter 5's encoder
layer, Chapter 7's patchify, class token and rollout) scored 0.63-0.92. Every other solution
scored 0.46 or less (those near 0.4 reuse a few of the chapter's lines to measure something, or
are variants of a shown function, such as an interleaved rotation), except Chapter 9's RMSNorm
backward at 0.54, most of whose code that chapter shows. 0.5 lies in the gap, and it reads
plainly: a reader who could copy more than half of the answer from a cell just run has nothing
left to work out.
"""
import copy

import pytest

from tools import exercise_visibility as vis

CHAPTERS = vis.chapter_paths()


def _cell(kind, source, outputs=(), title=False):
    cell = {"cell_type": kind, "metadata": {}, "source": source}
    if kind == "code":
        cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": text}
                           for text in outputs]
    return cell


SHOWN = '''class MultiHeadFused(nn.Module):
    def forward(self, x, mask=None):
        B, T, D = x.shape
        H, Dh = self.num_heads, D // self.num_heads
        split = lambda t: t.view(B, T, H, Dh).transpose(1, 2)  # to (B, H, T, Dh)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        z, weights = scaled_dot_product_attention(q, k, v, mask)
        merged = z.transpose(1, 2).contiguous().view(B, T, D)  # the heads side by side
        return self.out(merged), weights
'''
# the chapter's own merge, renamed and reformatted: what a copied solution looks like
COPIED = '''# @title Solution (try the exercise first)
def reference_merge_heads(inputs):
    batch, heads, length, width = inputs.shape
    # heads next to each other for every position
    return inputs.transpose(1, 2).contiguous().view(batch, length, heads * width)

check_merge_heads(reference_merge_heads)
'''
# a variant the chapter did not show: heads interleaved column by column
VARIANT = '''# @title Solution (try the exercise first)
def reference_merge_heads_strided(x):
    B, H, T, Dh = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, T, Dh * H)  # column c * H + h holds head h

check_merge_heads_strided(reference_merge_heads_strided)
'''


def _notebook(visible_code, solution, printed=()):
    return {"cells": [
        _cell("markdown", "# A chapter"),
        _cell("code", visible_code, outputs=printed),
        _cell("code", "def merge_heads(x):\n    raise NotImplementedError\n"),
        _cell("code", solution),
    ]}


def test_a_copied_solution_is_caught():
    """The chapter's merge, renamed, with its comment changed, scores far above the threshold."""
    (finding,) = vis.findings_for(_notebook(SHOWN, COPIED), "xx")
    assert finding.score > vis.THRESHOLD, finding.line()
    assert finding.where == "cell 1"


def test_a_copy_of_a_printed_source_is_caught():
    """The same copy found in a cell's printed output (an inspect.getsource)."""
    nb = _notebook("print(inspect.getsource(MultiHeadFused.forward))", COPIED, printed=[SHOWN])
    (finding,) = vis.findings_for(nb, "xx")
    assert finding.score > vis.THRESHOLD and finding.where == "cell 1 output", finding.line()


def test_a_variant_passes():
    """A different layout of the same idea is not flagged: the test asks for new work, not for
    unrelated topics."""
    (finding,) = vis.findings_for(_notebook(SHOWN, VARIANT), "xx")
    assert finding.score < vis.THRESHOLD, finding.line()


def test_the_solution_cell_itself_is_not_counted_as_visible():
    nb = _notebook("x = 1", COPIED)
    nb["cells"].append(copy.deepcopy(nb["cells"][-1]))  # a second solution cell, same code
    assert all(f.score == 0 for f in vis.findings_for(nb, "xx"))


def test_names_are_normalised_but_calls_are_not():
    ours = "def f(x, B, T):\n    y = x.view(B, T)  # a comment\n    return y"
    theirs = "def g(inputs, b, t):\n    out = inputs.view(b, t)\n    return out"
    assert vis.tokens(ours) == vis.tokens(theirs)
    assert vis.tokens(ours) != vis.tokens(ours.replace("view", "reshape"))


def test_a_checker_call_over_several_lines_is_boiler_plate():
    """A predict-then-measure solution is a number and the exercise's own (multi-line) checker
    call; the call is the exercise cell's, so it is not counted, while the prediction is."""
    call = ("check_swapped_context(predicted_per, lambda: measure_swapped_context(\n"
            "    model, data.test[::5], src_vocab, tgt_vocab))\n")
    solution = ("# @title Solution (try the exercise first)\n"
                "reference_predicted_per = 0.9\n\n" + call.replace("predicted_per",
                                                                 "reference_predicted_per", 1))
    assert "measure_swapped_context" not in vis.solution_code(solution)
    assert "0.9" in vis.solution_code(solution)
    (finding,) = vis.findings_for(_notebook("predicted_per = None\n" + call, solution), "xx")
    assert finding.score < vis.THRESHOLD, finding.line()


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem[:2])
def test_no_solution_is_in_sight(path):
    nb = vis.load(path)
    findings = vis.findings_for(nb, path.stem[:2])
    assert findings, f"{path.name}: no solution cell found (first line {vis.SOLUTION_TITLE!r})"
    in_sight = [f.line() for f in findings if f.score > vis.THRESHOLD]
    assert not in_sight, ("solutions whose code the chapter shows (score = share of the "
                          "solution's tokens found in one visible source):\n"
                          + "\n".join(in_sight))


def test_an_earlier_chapters_exercise_repeated_is_caught():
    """A solution copied from an earlier chapter's shown code or from its *solution* counts: the
    reader has done that exercise once already."""
    earlier = _notebook("x = 1", COPIED.replace("merge_heads", "join_heads"))
    later = _notebook("y = 2", COPIED)
    (own,) = vis.findings_for(later, "yy")
    assert own.score == 0, own.line()
    (seen,) = vis.findings_across(later, "yy", vis.earlier_sources([earlier], ["xx"]))
    assert seen.score > vis.THRESHOLD and seen.where == "chxx cell 3 solution", seen.line()
    (variant,) = vis.findings_across(_notebook("y = 2", VARIANT), "yy",
                                     vis.earlier_sources([earlier], ["xx"]))
    assert variant.score < vis.THRESHOLD, variant.line()


def _with_earlier():
    books = [vis.load(path) for path in CHAPTERS]
    for number, (path, nb) in enumerate(zip(CHAPTERS, books)):
        if number:
            labels = [p.stem[:2] for p in CHAPTERS[:number]]
            yield pytest.param(path, nb, vis.earlier_sources(books[:number], labels),
                               id=path.stem[:2])


@pytest.mark.parametrize("path, nb, earlier", list(_with_earlier()))
def test_no_solution_repeats_an_earlier_chapter(path, nb, earlier):
    """A reader arrives at a chapter having run every earlier one: an exercise whose answer an
    earlier chapter showed, or asked for, teaches nothing new."""
    repeated = [f.line() for f in vis.findings_across(nb, path.stem[:2], earlier)
                if f.score > vis.THRESHOLD]
    assert not repeated, ("solutions an earlier chapter already shows or asks for (score = "
                          "share of the solution's tokens in one earlier source):\n"
                          + "\n".join(repeated))
