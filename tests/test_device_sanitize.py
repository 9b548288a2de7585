"""On another device (``ATTNBOOK_DEVICE=cuda``), checked cells compare with every number masked
(tools/nbval_device.py, applied by tests/conftest.py for the whole run): digits and column padding may differ, words may not, and a range report
that raises still fails its cell."""
import re
from pathlib import Path
from types import SimpleNamespace

from nbval.plugin import get_sanitize_patterns

from tools.nbval_device import mask_trained_digits

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


def test_a_range_over_seeds_matches_one_number():
    sanitize = sanitizer()  # seeds that agree on one device may disagree on another
    assert sanitize("none of 7 or more (seeds 0-2)") == sanitize("none of 7-8 or more (seeds 0-2)")
    assert sanitize("none of 7 or more") != sanitize("none of 7 or fewer")


def test_words_still_count():
    sanitize = sanitizer()
    assert sanitize("beam wins 12 of 40") != sanitize("greedy wins 12 of 40")
    assert sanitize("WER 41.0%") != sanitize("WER 41.0 points")


def test_the_chapters_own_rules_come_first():
    sanitize = sanitizer()
    assert sanitize("PER: 0.0649 (expected -0.06–0.06)") == "PER:<measured>(expectedN–N)"


def test_the_notebooks_conftest_masks_numbers_only_on_another_device(tmp_path):
    """A checked cell whose stored number differs from the one it prints passes under
    ATTNBOOK_DEVICE=cuda (masked) and fails on the CPU (where the digits are pinned)."""
    import inspect

    import conftest as tests_conftest
    wiring = inspect.getsource(tests_conftest.pytest_configure)
    assert "mask_trained_digits(config)" in wiring and "on_another_device()" in wiring
    import json
    import os
    import shutil
    import subprocess
    import sys

    cell = {"cell_type": "code", "execution_count": 1, "id": "c1",
            "metadata": {"tags": ["nbval-check-output"]}, "source": "print('WER 39.5%')",
            "outputs": [{"name": "stdout", "output_type": "stream", "text": "WER 41.0%\n"}]}
    notebook = {"cells": [cell], "metadata": {"kernelspec": {"name": "python3",
                "display_name": "Python 3", "language": "python"}}, "nbformat": 4,
                "nbformat_minor": 5}
    (tmp_path / "digits.ipynb").write_text(json.dumps(notebook))
    (tmp_path / "conftest.py").write_text(  # the two calls tests/conftest.py makes
        "from tools.nbval_device import mask_trained_digits, on_another_device, remove_sanitizer\n"
        "def pytest_configure(config):\n"
        "    if on_another_device():\n"
        "        mask_trained_digits(config)\n"
        "def pytest_unconfigure(config):\n"
        "    remove_sanitizer(config)\n")
    shutil.copy(ROOT / "tests" / "nbval_sanitize.cfg", tmp_path / "sanitize.cfg")

    def passes(device):
        env = {**os.environ, "ATTNBOOK_DEVICE": device,
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
             "--nbval-lax", "--nbval-current-env", "--nbval-sanitize-with", "sanitize.cfg",
             "digits.ipynb"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        return result.returncode == 0
    assert passes("cuda") and not passes("cpu")
