"""On another device (``ATTNBOOK_DEVICE=cuda``), checked cells compare with every number masked
(tests/conftest.py): digits and column padding may differ, words may not, and a range report
that raises still fails its cell."""
import re
from pathlib import Path
from types import SimpleNamespace

from nbval.plugin import get_sanitize_patterns

from conftest import mask_trained_digits

ROOT = Path(__file__).resolve().parents[1]


def sanitizer():
    config = SimpleNamespace(option=SimpleNamespace(
        nbval_sanitize_with=str(ROOT / "tests/nbval_sanitize.cfg")), stash={})
    mask_trained_digits(config)
    path = Path(config.option.nbval_sanitize_with)
    patterns = get_sanitize_patterns(path.read_text())
    path.unlink()

    def sanitize(text):
        for regex, replacement in patterns:
            text = re.sub(regex, replacement, text)
        return text
    return sanitize


def test_digits_and_column_widths_are_masked():
    sanitize = sanitizer()
    cpu = "  right |  41.7% |  94.4% |  98.9%\nlargest difference 15.6 (logit 1e-5)"
    gpu = "  right |  39.5% | 100.0% |  99.2%\nlargest difference 12.1 (logit 2e-7)"
    assert sanitize(cpu) == sanitize(gpu)


def test_words_still_count():
    sanitize = sanitizer()
    assert sanitize("beam wins 12 of 40") != sanitize("greedy wins 12 of 40")
    assert sanitize("WER 41.0%") != sanitize("WER 41.0 points")


def test_the_chapters_own_rules_come_first():
    sanitize = sanitizer()
    assert sanitize("PER: 0.0649 (expected -0.06–0.06)") == "PER:<measured>(expectedN–N)"
