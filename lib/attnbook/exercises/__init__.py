"""Checkers for the book's exercises: one module per chapter, each function ``check_<name>``.

A checker runs the reader's function on known cases and prints a verdict: when the output
matches a known mistake, one line naming it, then the failing case with what was expected and
what came back (or a hint when the mistake is not a known one). Inputs are checked for changes
in place. It returns a ``CheckResult`` (truthy when every case passes; ``diagnosis`` names the
mistake found) so tests can prove that each checker rejects plausible wrong answers.
Each chapter module's ``EXERCISES`` maps function names to checkers, for the command line:
``python -m attnbook.exercises ch03 answers.py``.
"""
from attnbook.exercises.core import Case, CheckResult, Mistake, run_cases

__all__ = ["Case", "CheckResult", "Mistake", "run_cases"]
