"""The chapters as JupyterLab shows them: no unsaved changes on open, one solution placeholder
wording that is right in every client, and (where Chromium is installed) the browser check of
tools/colab/browser_check.py over every chapter in JupyterLab and every Colab edition."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tools.colab.browser_check import find_chromium
from tools.colab.chapter_fixes import SOLUTION_TITLE_LINE, fix_chapter

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("[0-9][0-9]_*.ipynb"))
# SOLUTION_TITLE_LINE: JupyterLab shows a collapsed input's first line and opens it with one
# click; Colab shows the @title of a form and opens it with "Show code" or a double click; the
# HTML book shows the code inside the drop-down. So the placeholder says what to do, not how.


def _notebook(path):
    return json.loads(path.read_text(encoding="utf-8"))


def _source(cell):
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_the_kernelspec_is_the_one_jupyterlab_writes(path):
    """On opening a notebook JupyterLab writes the kernel's spec into its metadata: a stored spec
    that differs ("Python 3" for ipykernel's "Python 3 (ipykernel)") shows as unsaved changes."""
    from ipykernel.kernelspec import get_kernel_dict

    spec = get_kernel_dict()
    assert _notebook(path)["metadata"]["kernelspec"] == {
        "name": "python3", "display_name": spec["display_name"], "language": spec["language"]}


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_solution_hides_its_stored_outputs(path):
    """A solution's output can be the answer (a measured number a prediction asks for): JupyterLab
    keeps it collapsed, and the Colab edition drops it."""
    solutions = [c for c in _notebook(path)["cells"]
                 if c["cell_type"] == "code" and _source(c).startswith(SOLUTION_TITLE_LINE)]
    assert solutions and all(c["metadata"].get("jupyter", {}).get("outputs_hidden") for c in solutions)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_solution_placeholder_has_the_one_wording(path):
    titles = [_source(c).split("\n", 1)[0] for c in _notebook(path)["cells"]
              if c["cell_type"] == "code" and _source(c).startswith("# @title")]
    assert titles and set(titles) == {SOLUTION_TITLE_LINE}


def test_fix_chapters_sets_both_and_moves_nothing_else(tmp_path):
    """``python -m tools.colab --fix-chapters`` on a chapter as it was before (issue 25)."""
    import nbformat

    old = nbformat.v4.new_notebook(metadata={"kernelspec": {"display_name": "Python 3", "language": "python",
                                                            "name": "python3"}})
    old.cells = [nbformat.v4.new_code_cell("# @title Solution (double-click to show)\nx = 1  # @title Solution\n"),
                 nbformat.v4.new_code_cell("# @title Solution\ny = 2"),
                 nbformat.v4.new_markdown_cell("# @title Solution (double-click to show)")]
    path = tmp_path / "03_old.ipynb"
    nbformat.write(old, path)
    assert fix_chapter(path) == ["kernelspec display_name", "2 solution titles", "2 solution outputs hidden"]
    new = nbformat.read(path, as_version=4)
    assert new.metadata.kernelspec.display_name == "Python 3 (ipykernel)"
    assert [c.source for c in new.cells] == [f"{SOLUTION_TITLE_LINE}\nx = 1  # @title Solution\n",
                                             f"{SOLUTION_TITLE_LINE}\ny = 2", old.cells[2].source]
    assert [c.metadata.get("jupyter", {}).get("outputs_hidden") for c in new.cells] == [True, True, None]
    assert fix_chapter(path) == []


def test_requirements_install_jupyterlab_myst():
    lines = [line.split("#")[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    assert any(line.startswith("jupyterlab-myst") for line in lines)


@pytest.mark.skipif(find_chromium() is None,
                    reason="no Chromium installed (apt-get install chromium, or set CHROMIUM=...): the browser "
                           "check of the chapters in JupyterLab and of the Colab editions did not run")
def test_chapters_render_in_jupyterlab_and_the_colab_editions_render_in_a_browser():
    result = subprocess.run([sys.executable, "-m", "tools.colab.browser_check"], cwd=ROOT,
                            capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(find_chromium() is None, reason="no Chromium installed: the browser check cannot be tried")
def test_the_browser_check_fails_on_a_chapter_colab_cannot_render(tmp_path):
    """The Colab half of the browser check, on a synthetic chapter: its MyST source fails, the
    edition that tools.colab writes for it passes."""
    from tools.colab.browser_check import check_edition, chromium
    from tools.colab.edition import write_all

    (tmp_path / "chapters").mkdir()
    chapter = tmp_path / "chapters" / "03_synthetic.ipynb"
    markdown = ["# Synthetic\n\nAs {footcite}`vaswani2017attention` shows, $\\sqrt{d_k}$ matters.\n\n"
                "```{admonition} The source gets this wrong\n:class: warning\nIt says $K = Q$.\n```",
                "````{exercise} Write f (about 5 min)\n:label: ex-ch03-f\n\nReturn $\\frac{x}{2}$.\n````",
                "````{solution-start} ex-ch03-f\n:class: dropdown\n````", "````{solution-end}\n````",
                "## References\n\n```{footbibliography}\n```"]
    cells = [{"cell_type": "markdown", "id": f"m{n}", "metadata": {}, "source": text} for n, text in enumerate(markdown)]
    cells.insert(3, {"cell_type": "code", "id": "s", "execution_count": 1, "outputs": [], "source": "# @title "
                     "Solution (try the exercise first)\nx = 1", "metadata": {"cellView": "form",
                                                                        "jupyter": {"source_hidden": True}}})
    chapter.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    [edition] = write_all(tmp_path / "chapters", tmp_path / "colab")
    with chromium(find_chromium()) as new_page:
        garbled = check_edition(new_page, chapter, tmp_path, tmp_path, edition=chapter)
        plain = check_edition(new_page, chapter, tmp_path, tmp_path, edition=edition)
    assert plain == []
    for problem in ("a visible option line: :label: ex-ch03-f", "visible MyST: {footcite}",
                    "exercise title not shown in bold", "no references listed",
                    "callout not shown as a titled quote: 'The source gets this wrong'"):
        assert any(problem in p for p in garbled), garbled
