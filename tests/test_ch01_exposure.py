"""Chapter 1's exposure-bias measure: the first mistake is charged once, not again by a shift."""
import pytest

from attnbook.tasks.g2p_errors import edits_after_first_mistake

REF = list("ABCDEF")


@pytest.mark.parametrize("out, expected", [
    (list("ABCDEF"), None),  # all right
    (list("ABCDEFG"), None),  # an extra token after the end is not counted
    (list("ABXDEF"), (2, 0)),  # substitution: nothing wrong after it
    (list("ABDEF"), (2, 0)),  # deletion at 2: the old slice out[3:] vs ref[3:] charged it again
    (list("ABXCDEF"), (2, 0)),  # insertion at 2: the old slice charged it again
    (list("ABDEX"), (2, 1)),  # deletion, then one later substitution
    (list("ABXDEY"), (2, 1)),  # substitution, then one later substitution
    (list("AB"), (2, 3)),  # stops early: C is the first mistake, D E F are missing
    (list("XBCDEF"), (0, 0)),  # first position
])
def test_first_mistake_charged_once(out, expected):
    assert edits_after_first_mistake(out, REF) == expected


def test_old_double_count_differs():
    """The shifted slice the chapter used before charges a dropped phoneme again; this must not."""
    from attnbook.metrics import edit_distance

    out = list("ABDEF")
    first, edits = edits_after_first_mistake(out, REF)
    assert edit_distance(out[first + 1:], REF[first + 1:]) > edits
