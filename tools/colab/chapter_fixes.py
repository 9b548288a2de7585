"""Two fixes of the chapters themselves, for JupyterLab and Colab readers (tests/test_jupyterlab.py
checks both), made on the file's text so that nothing else in the notebook moves:

- the kernelspec's ``display_name`` is the one ipykernel declares ("Python 3 (ipykernel)"):
  JupyterLab writes the running kernel's spec into the notebook on opening, so any other name
  shows the chapter as changed before the reader has done anything;
- the first line of every solution cell is SOLUTION_TITLE_LINE, a wording right in every client
  (JupyterLab opens a collapsed cell with one click, Colab a form with "Show code" or a double
  click, the HTML book shows the code in its drop-down).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

SOLUTION_TITLE_LINE = "# @title Solution (try the exercise first)"
_TITLE = re.compile(r'"# @title Solution(?: \([^()"\\]*\))?\\n"')
_DISPLAY_NAME = re.compile(r'("kernelspec": \{[^{}]*"display_name": )"[^"]*"')


def fix_chapter(path: Path) -> list[str]:
    """Apply both fixes to ``path`` in place; what changed (empty: nothing)."""
    from ipykernel.kernelspec import get_kernel_dict

    text = path.read_text(encoding="utf-8")
    display_name = json.dumps(get_kernel_dict()["display_name"])
    title = json.dumps(SOLUTION_TITLE_LINE + "\n")
    fixed = _TITLE.sub(lambda m: title, text)
    fixed, _ = _DISPLAY_NAME.subn(lambda m: m.group(1) + display_name, fixed, count=1)
    changes = []
    if fixed != text:
        before, after = json.loads(text), json.loads(fixed)
        if before["metadata"].get("kernelspec") != after["metadata"].get("kernelspec"):
            changes.append("kernelspec display_name")
        changed = [(a, b) for a, b in zip(before["cells"], after["cells"]) if a != b]
        if any(a["cell_type"] != "code" or a["source"][0] == b["source"][0] for a, b in changed):
            raise ValueError(f"{path}: a solution title outside the first line of a code cell; fix it by hand")
        changed_titles = len(changed)
        if changed_titles:
            changes.append(f"{changed_titles} solution titles")
        path.write_text(fixed, encoding="utf-8")
    return changes
