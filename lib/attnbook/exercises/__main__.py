"""Check a chapter's exercises in a plain Python file.

    python -m attnbook.exercises ch03 answers.py   # run every Chapter 3 checker on answers.py
    python -m attnbook.exercises ch03              # list the functions Chapter 3 expects

The file is run as a script (its ``if __name__ == "__main__":`` block is skipped); each function
the chapter's exercises ask for is looked up by name and given to its checker; a
predict-then-measure checker also gets the file's ``prediction_<function name>`` (or, failing
that, its ``prediction``) variable, and a checker with a ``reads_variables`` attribute gets those
variables of the file as keyword arguments (None where the file has none); a checker marked
``prediction_only`` needs no function, only the prediction variable. The exit status is 0
only if every exercise passes.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import re
import runpy
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

CHAPTERS = tuple(sorted(p.stem for p in Path(__file__).parent.glob("ch[0-9][0-9].py")))  # one module per chapter


def chapter_name(text: str) -> str:
    """'ch03', 'ch3', '3' and '03' all name Chapter 3's checkers."""
    match = re.fullmatch(r"(?:ch)?0*(\d+)", text.strip().lower())
    name = f"ch{int(match.group(1)):02d}" if match else text
    if name not in CHAPTERS:
        raise ValueError(f"unknown chapter {text!r}; expected one of {', '.join(CHAPTERS)}")
    return name


def expected_functions(chapter: str) -> dict:
    """The chapter's ``EXERCISES``: function name -> checker."""
    return importlib.import_module(f"attnbook.exercises.{chapter}").EXERCISES


def check_file(chapter: str, path: Path) -> int:
    """Run every checker of ``chapter`` on the functions ``path`` defines; return the exit status."""
    exercises = expected_functions(chapter)
    if not path.is_file():
        print(f"✗ {path}: no such file")
        return 2
    try:
        namespace = runpy.run_path(str(path), run_name="attnbook_answers")
    except Exception as err:  # noqa: BLE001 - the learner's file may raise anything
        last = traceback.extract_tb(err.__traceback__)[-1]
        print(f"✗ {path.name} could not be run: {type(err).__name__}: {err} (line {last.lineno})")
        return 2
    passed = 0
    for name, checker in exercises.items():
        fn = namespace.get(name)
        if getattr(checker, "prediction_only", False):  # predict-then-measure with no function to write
            passed += bool(checker(fn, **_prediction(checker, name, namespace)))
            continue
        if fn is None:
            keyword = "class" if name[:1].isupper() else "def"  # SelfAttention is a class
            print(f"✗ {name}: {path.name} defines no `{name}`; write `{keyword} {name}(...)` "
                  "(see the chapter's exercise).")
            continue
        if not callable(fn):
            print(f"✗ {name}: `{name}` in {path.name} is a {type(fn).__name__}, not a function.")
            continue
        # a checker may also read variables of the file (a predict-then-measure exercise's prediction)
        extra = {var: namespace.get(var) for var in getattr(checker, "reads_variables", ())}
        extra.update(_prediction(checker, name, namespace))
        passed += bool(checker(fn, **extra))
    total = len(exercises)
    print(f"\n{chapter}: {passed} of {total} exercises pass" + (" ✓" if passed == total else ""))
    return 0 if passed == total else 1


def _prediction(checker, name: str, namespace: dict) -> dict:
    """``{"prediction": ...}`` for a predict-then-measure checker (one with a ``prediction``
    parameter): the file's ``prediction_<name>`` if it defines one, else its ``prediction``."""
    try:
        takes = "prediction" in list(inspect.signature(checker).parameters)[1:]  # after the function
    except (TypeError, ValueError):
        return {}
    if not takes:
        return {}
    for variable in (f"prediction_{name}", "prediction"):
        if variable in namespace:
            return {"prediction": namespace[variable]}
    return {}


def list_functions(chapter: str) -> int:
    print(f"{chapter} checks these functions:")
    for name, checker in expected_functions(chapter).items():
        found = re.search(r"``(.+?)``", checker.__doc__ or "", flags=re.DOTALL)
        print(f"  {' '.join(found.group(1).split()) if found else name}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnbook.exercises",
                                     description="Check the exercises of one chapter in a .py file.")
    parser.add_argument("chapter", help="ch01 .. ch05 (or 1 .. 5)")
    parser.add_argument("answers", nargs="?", type=Path, help="your .py file; leave out to list what it must define")
    args = parser.parse_args(argv)
    try:
        chapter = chapter_name(args.chapter)
    except ValueError as err:
        print(f"✗ {err}")
        return 2
    return check_file(chapter, args.answers) if args.answers else list_functions(chapter)


if __name__ == "__main__":
    sys.exit(main())
