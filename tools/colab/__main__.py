"""``python -m tools.colab``: rewrite every chapter's Colab edition in ``colab/``.

``python -m tools.colab --fix-chapters`` also fixes three things in the chapters first (see
``chapter_fixes.py``). ``python -m tools.colab --check`` writes nothing and exits with status 1 if an edition is out of
date (what ``tests/test_colab.py`` checks).
"""
from __future__ import annotations

import argparse
import sys

from tools.colab.edition import EDITIONS_DIR, ROOT, myst_left, stale_editions, write_all


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report editions that are out of date")
    parser.add_argument("--fix-chapters", action="store_true",
                        help="first set, in chapters/*.ipynb, the kernelspec JupyterLab writes, the one "
                             "solution placeholder wording and hidden solution outputs "
                             "(tests/test_jupyterlab.py checks them)")
    args = parser.parse_args(argv)
    if args.fix_chapters:
        from tools.colab.edition import chapters
        from tools.colab.chapter_fixes import fix_chapter

        for chapter in chapters():
            changes = fix_chapter(chapter)
            if changes:
                print(f"{chapter.relative_to(ROOT)}: {changes}")
    if args.check:
        problems = stale_editions()
        for problem in problems:
            print(problem, file=sys.stderr)
        if problems:
            print("run: python -m tools.colab", file=sys.stderr)
        return 1 if problems else 0
    import json

    for path in write_all():
        left = myst_left(json.loads(path.read_text(encoding="utf-8")))
        print(f"{path.relative_to(ROOT)}" + (f": MyST left: {left}" if left else ""))
        if left:
            return 1
    print(f"Colab editions written to {EDITIONS_DIR.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
