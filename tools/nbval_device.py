"""nbval on another device: the checked cells compare with every number masked.

On a GPU (``ATTNBOOK_DEVICE=cuda``) trained numbers differ in their last digits from the stored
CPU outputs (other kernels, other summation orders). There the checked cells compare with every
number and the column padding masked: the text around the numbers must still match, and the
claims themselves are held by the range reports (``attnbook.checks.report_in_range``), which
raise when a value leaves its range. ``tests/conftest.py`` applies it: run the whole suite
(``ATTNBOOK_DEVICE=cuda pytest``), as the GPU workflow does, so that it is loaded (a conftest in
``chapters/`` would shadow the tests' ``from conftest import ...``).
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

DEVICE_SANITIZE = (  # (why, regex, replacement), written in nbval's sanitizer format
    ("a number: on another device a trained one differs in its digits",
     r"-?[0-9][0-9.,]*(e[+-]?[0-9]+)?", "N"),
    ("the padding of table columns, which follows the numbers' widths", r"[ \t]+", ""),
    ("a run of masked numbers: a range over seeds (7-8) on one device is one number (7) on "
     "another", r"N+", "N"),
)
SANITIZE_FILE = pytest.StashKey[str]()


def on_another_device() -> bool:
    return os.environ.get("ATTNBOOK_DEVICE", "cpu") != "cpu"


def mask_trained_digits(config) -> None:
    """Point nbval at the chapters' sanitizer plus ``DEVICE_SANITIZE`` (a file of this process's)."""
    base = Path(config.option.nbval_sanitize_with or os.devnull).read_text()
    handle, name = tempfile.mkstemp(prefix="attnbook-sanitize-", suffix=".cfg")
    with os.fdopen(handle, "w") as out:
        out.write(base + "".join(f"\n[{why}]\nregex: {regex}\nreplace: {replacement}\n"
                                 for why, regex, replacement in DEVICE_SANITIZE))
    config.option.nbval_sanitize_with = config.stash[SANITIZE_FILE] = name


def remove_sanitizer(config) -> None:
    name = config.stash.get(SANITIZE_FILE, None)
    if name:
        os.unlink(name)
