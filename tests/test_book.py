"""The book as a reader gets it: table of contents, Colab set-up, stored outputs, citations."""
import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("[0-9][0-9]_*.ipynb"))
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())


def _toc_files():
    files = [TOC["root"]]
    for part in TOC["parts"]:
        files += [entry["file"] for entry in part["chapters"]]
    return files


def _notebook(path):
    return json.loads(path.read_text(encoding="utf-8"))


def _source(cell):
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def test_there_are_chapters():
    assert CHAPTERS, "no chapter notebooks found"


def test_toc_lists_every_chapter_and_only_existing_files():
    files = _toc_files()
    for f in files:
        assert any((ROOT / f"{f}{ext}").is_file() for ext in (".md", ".ipynb")), f"_toc.yml names a missing file: {f}"
    for nb in CHAPTERS:
        assert f"chapters/{nb.stem}" in files, f"{nb.name} is not in _toc.yml"


def test_build_excludes_environment_and_caches():
    patterns = CONFIG["exclude_patterns"]
    for p in ("_build", ".venv", ".pytest_cache"):
        assert p in patterns
    assert CONFIG["execute"]["execute_notebooks"] == "off"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_first_cell_sets_up_colab_from_the_one_repository_url(path):
    first = _notebook(path)["cells"][0]
    assert first["cell_type"] == "code"
    src = _source(first)
    assert '"google.colab" in sys.modules' in src
    assert f"git+{CONFIG['repository']['url']}" in src, "the Colab cell must install from _config.yml's repository URL"
    assert "remove-input" in first.get("metadata", {}).get("tags", []), \
        "the Colab set-up cell must be hidden in the HTML book (tag it remove-input)"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_stored_outputs_are_clean(path):
    cells = [c for c in _notebook(path)["cells"] if c["cell_type"] == "code"]
    assert all(c.get("execution_count") for c in cells), "every code cell must have been executed"
    counts = [c["execution_count"] for c in cells]
    assert counts == sorted(counts), "cells were not executed top to bottom"
    local = re.compile(r"(/tmp/|/root/|/home/\w+/|site-packages)")
    for c in cells:
        for out in c.get("outputs", []):
            assert out["output_type"] != "error", f"stored error: {out.get('ename')}: {out.get('evalue')}"
            text = "".join(out.get("text", ""))
            assert not (out.get("name") == "stderr" and "Warning" in text), f"stored warning: {text[:200]}"
            assert not local.search(text), f"stored output shows a local path: {text[:200]}"
    assert path.stat().st_size < 2_500_000, "keep figures lean"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_key_numbers_are_checked_and_exercises_have_solutions(path):
    cells = _notebook(path)["cells"]
    checked = [c for c in cells if "nbval-check-output" in c.get("metadata", {}).get("tags", [])
               or "# NBVAL_CHECK_OUTPUT" in _source(c)]
    assert len(checked) >= 3, "tag the cells that print the chapter's key numbers with nbval-check-output"
    markdown = "\n".join(_source(c) for c in cells if c["cell_type"] == "markdown")
    labels = re.findall(r"\{exercise\}.*\n:label: (\S+)", markdown)
    assert len(labels) >= 3, "each chapter needs at least three exercises"
    for label in labels:
        assert re.search(r"\{solution-start\} " + re.escape(label) + r"\b", markdown), f"no solution for {label}"
    assert "{footbibliography}" in markdown, "end with a references section: ```{footbibliography}```"


def test_every_citation_is_in_the_bibliography():
    bib = (ROOT / "references.bib").read_text()
    keys = set(re.findall(r"@\w+\{([^,]+),", bib))
    for path in CHAPTERS:
        text = "\n".join(_source(c) for c in _notebook(path)["cells"] if c["cell_type"] == "markdown")
        assert not re.search(r"\{cite(?::\w+)?\}", text), "use {footcite}: per-page notes never clash between chapters"
        for group in re.findall(r"\{footcite(?::\w+)?\}`([^`]+)`", text):
            for key in group.split(","):
                assert key.strip() in keys, f"{path.name} cites unknown key {key.strip()!r}"


OUTSIDE_MARKER = "<!-- measured outside the notebooks"


def _printed_text(path):
    texts = []
    for cell in _notebook(path)["cells"]:
        for out in cell.get("outputs", []):
            texts.append("".join(out.get("text", "")))
            texts.append("".join(out.get("data", {}).get("text/plain", "")))
    return "\n".join(texts)


def test_prose_quotes_only_figures_the_book_printed():
    """A measured percentage quoted in a chapter's text must appear in some chapter's stored
    outputs, so re-executing a notebook cannot leave stale figures in its prose unnoticed.
    A cell whose figures come from elsewhere (a benchmark script) says so with OUTSIDE_MARKER."""
    printed = "\n".join(_printed_text(path) for path in CHAPTERS)
    stale = []
    for path in CHAPTERS:
        for cell in _notebook(path)["cells"]:
            src = _source(cell)
            if cell["cell_type"] != "markdown" or OUTSIDE_MARKER in src:
                continue
            for figure in re.findall(r"(?<![\d.])\d{2,3}\.\d%", src):
                if figure not in printed:
                    stale.append(f"{path.name}: {figure}")
    assert not stale, f"figures in the text that no stored output prints: {stale}"
