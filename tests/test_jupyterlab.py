"""The chapters as JupyterLab shows them: no unsaved changes on open, one solution placeholder
wording that is right in every client, and (where Chromium is installed) the browser check of
tools/colab/browser_check.py over every chapter in JupyterLab and every Colab edition."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tools.colab.browser_check import find_chromium

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("[0-9][0-9]_*.ipynb"))
# JupyterLab shows a collapsed input's first line and opens it with one click; Colab shows the
# @title of a form and opens it with "Show code" or a double click; the HTML book shows the code
# inside the dropdown. So the placeholder says what to do, not how to click.
SOLUTION_TITLE_LINE = "# @title Solution (try the exercise first)"


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
def test_every_solution_placeholder_has_the_one_wording(path):
    titles = [_source(c).split("\n", 1)[0] for c in _notebook(path)["cells"]
              if c["cell_type"] == "code" and _source(c).startswith("# @title")]
    assert titles and set(titles) == {SOLUTION_TITLE_LINE}


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
