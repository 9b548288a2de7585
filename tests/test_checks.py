import pytest
import torch
from torch import nn

from attnbook.checks import assert_same_outputs, check_shape, count_parameters, report_in_range


def test_check_shape_passes_and_names_the_mismatch():
    x = torch.zeros(2, 3, 4)
    assert check_shape(x, (2, None, 4)) is x
    with pytest.raises(ValueError, match=r"scores: expected shape \(2, \*, 5\), got \(2, 3, 4\)"):
        check_shape(x, (2, None, 5), "scores")
    with pytest.raises(ValueError, match="expected shape"):
        check_shape(x, (2, 3))
    with pytest.raises(TypeError):
        check_shape([1, 2], (2,))


def test_assert_same_outputs_detects_a_difference_and_restores_modes():
    torch.manual_seed(0)
    a, b = nn.Linear(4, 3), nn.Linear(4, 3)
    b.load_state_dict(a.state_dict())
    x = torch.randn(5, 4)
    assert assert_same_outputs(a, b, x) == 0
    assert a.training and b.training
    with torch.no_grad():
        b.bias[0] += 1e-2
    with pytest.raises(AssertionError):
        assert_same_outputs(a, b, x)


def test_count_parameters():
    assert count_parameters(nn.Linear(4, 3)) == 15


def test_report_in_range(capsys):
    report_in_range("test WER", 0.413, 0.30, 0.50, percent=True)
    assert capsys.readouterr().out == "test WER: 41.3% (expected 30.0%–50.0%) ok\n"
    with pytest.raises(AssertionError, match="outside the expected range"):
        report_in_range("test WER", 0.55, 0.30, 0.50, percent=True)


def test_sanitizer_masks_only_the_measured_value():
    import re
    from pathlib import Path

    from nbval.plugin import get_sanitize_patterns  # read the file exactly as nbval does

    patterns = get_sanitize_patterns((Path(__file__).parent / "nbval_sanitize.cfg").read_text())
    assert patterns, "no sanitize patterns found"

    def clean(text):
        for regex, replace in patterns:
            text = re.sub(regex, replace, text)
        return text

    a = clean("test WER: 41.3% (expected 30.0%–50.0%) ok")
    assert a == clean("test WER: 44.9% (expected 30.0%–50.0%) ok")
    assert a != clean("test WER: 44.9% (expected 35.0%–50.0%) ok")
    assert clean("loss: 0.1234 (expected 0.1–0.2) ok") == clean("loss: 0.1987 (expected 0.1–0.2) ok")
    assert clean("loss: 1.5 ok") != clean("loss: 1.6 ok"), "plain numbers must stay checked"


def _sanitize(text):
    """Apply the nbval sanitizer's rules, as nbval does before comparing outputs."""
    import re
    from pathlib import Path

    cfg = (Path(__file__).parent / "nbval_sanitize.cfg").read_text()
    for regex, replace in re.findall(r"regex: (.*)\nreplace: (.*)", cfg):
        text = re.sub(regex, replace, text)
    return text


def test_report_close_prints_the_difference_and_fails_when_not_close(capsys):
    from attnbook.checks import report_close

    a = torch.tensor([1.0, 2.0])
    assert report_close("same", a, a + 1e-7) is None  # nothing for a notebook cell to display
    line = capsys.readouterr().out.strip()
    assert line.startswith("same: max |difference| ") and line.endswith("(expected ≤ 1e-05) ok")
    assert _sanitize(line) == "same: max |difference| <measured> (expected ≤ 1e-05) ok"
    report_close("same", a, a)
    assert _sanitize(capsys.readouterr().out.strip()) == "same: max |difference| <measured> (expected ≤ 1e-05) ok"
    with pytest.raises(AssertionError):
        report_close("different", a, a + 1e-2)
