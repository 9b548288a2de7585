"""Checkers for the book's exercises: one module per chapter, each function ``check_<name>``.

A checker runs the reader's function on known cases and prints a verdict: which case failed,
what was expected and what came back, and a hint. It returns a ``CheckResult`` (truthy when
every case passes) so tests can prove that each checker rejects plausible wrong answers.
"""
from attnbook.exercises.core import Case, CheckResult, run_cases

__all__ = ["Case", "CheckResult", "run_cases"]
