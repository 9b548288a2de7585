"""Three fixes of the chapters themselves, for JupyterLab and Colab readers (tests/test_jupyterlab.py
checks them), made so that nothing else in the notebook moves:

- the kernelspec's ``display_name`` is the one ipykernel declares ("Python 3 (ipykernel)"):
  JupyterLab writes the running kernel's spec into the notebook on opening, so any other name
  shows the chapter as changed before the reader has done anything;
- the first line of every solution cell is SOLUTION_TITLE_LINE, a wording right in every client
  (JupyterLab opens a collapsed cell with one click, Colab a form with "Show code" or a double
  click, the HTML book shows the code in its drop-down);
- every solution cell's stored outputs are hidden (``jupyter.outputs_hidden``): a solution's
  output can give the answer away (a measured number that a predict-then-measure exercise asks
  for), and JupyterLab shows a collapsed cell's outputs unless told not to. The Colab edition
  drops hidden outputs (Colab shows a form's outputs whatever the metadata says).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

SOLUTION_TITLE_LINE = "# @title Solution (try the exercise first)"
_TITLE = re.compile(r'"# @title Solution(?: \([^()"\\]*\))?\\n"')
_DISPLAY_NAME = re.compile(r'("kernelspec": \{[^{}]*"display_name": )"[^"]*"')


def fix_chapter(path: Path) -> list[str]:
    """Apply the three fixes to ``path`` in place; what changed (empty: nothing)."""
    from ipykernel.kernelspec import get_kernel_dict

    text = path.read_text(encoding="utf-8")
    display_name = json.dumps(get_kernel_dict()["display_name"])
    title = json.dumps(SOLUTION_TITLE_LINE + "\n")
    fixed = _TITLE.sub(lambda m: title, text)
    fixed, _ = _DISPLAY_NAME.subn(lambda m: m.group(1) + display_name, fixed, count=1)
    fixed, hidden = _hide_solution_outputs(fixed)
    changes = []
    if fixed != text:
        before, after = json.loads(text), json.loads(fixed)
        if before["metadata"].get("kernelspec") != after["metadata"].get("kernelspec"):
            changes.append("kernelspec display_name")
        changed = [(a, b) for a, b in zip(before["cells"], after["cells"])
                   if {**a, "metadata": {}} != {**b, "metadata": {}}]  # beyond the metadata
        if any(a["cell_type"] != "code" or a["source"][0] == b["source"][0] for a, b in changed):
            raise ValueError(f"{path}: a solution title outside the first line of a code cell; fix it by hand")
        if changed:
            changes.append(f"{len(changed)} solution titles")
        if hidden:
            changes.append(f"{hidden} solution outputs hidden")
        path.write_text(fixed, encoding="utf-8")
    return changes


def _hide_solution_outputs(text: str) -> tuple[str, int]:
    """``text`` with ``outputs_hidden`` set on every solution cell, and how many it had to set.

    The chapters are written as ``nbformat`` writes them (keys sorted, one-space indent), so a
    JSON round trip changes nothing else; it is checked, and the text is left alone if not."""
    notebook = json.loads(text)
    if json.dumps(notebook, sort_keys=True, indent=1, ensure_ascii=False) + "\n" != text:
        return text, 0
    hidden = 0
    for cell in notebook["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "code" and source.startswith(SOLUTION_TITLE_LINE):
            jupyter = cell["metadata"].setdefault("jupyter", {})
            if not jupyter.get("outputs_hidden"):
                jupyter["outputs_hidden"] = True
                hidden += 1
    if not hidden:
        return text, 0
    return json.dumps(notebook, sort_keys=True, indent=1, ensure_ascii=False) + "\n", hidden
