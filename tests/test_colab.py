"""The Colab editions (colab/, written by ``python -m tools.colab``): in sync with the chapters,
no MyST left in them, solutions still hidden forms, and the Colab buttons and links open them."""
import copy
import json
import re
import shutil
import zlib
from pathlib import Path

import pytest
import yaml

from tools.colab.edition import (EDITIONS_DIR, MystError, Repository, chapters, edition_path, hides_outputs,
                                 myst_left, stale_editions, write_all)
from tools.colab.launch_button import colab_edition_url

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = chapters()
EDITIONS = [edition_path(p) for p in CHAPTERS]
REGENERATE = "python -m tools.colab"


def _notebook(path):
    return json.loads(path.read_text(encoding="utf-8"))


def _source(cell):
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


# --- the committed editions ----------------------------------------------------------------------
def test_the_editions_are_those_the_chapters_give():
    """Fails after a chapter changed and its edition was not rewritten: run ``python -m tools.colab``."""
    assert stale_editions() == [], f"Colab editions out of date; run: {REGENERATE}"


@pytest.mark.parametrize("path", EDITIONS, ids=lambda p: p.name)
def test_no_myst_is_left_in_an_edition(path):
    assert myst_left(_notebook(path)) == []


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.name)
def test_an_edition_keeps_every_code_cell_and_output_and_hides_its_solutions(chapter):
    original = [c for c in _notebook(chapter)["cells"] if c["cell_type"] == "code"]
    edition = [c for c in _notebook(edition_path(chapter))["cells"] if c["cell_type"] == "code"]
    for cell in original:  # outputs the chapter hides are not shipped to Colab, which shows them
        if hides_outputs(cell):
            cell.update(outputs=[], execution_count=None)
    assert edition == original, "the edition changes only markdown cells and hidden outputs"
    markdown = "\n".join(_source(c) for c in _notebook(edition_path(chapter))["cells"] if c["cell_type"] == "markdown")
    titles = re.findall(r"\{exercise\} (.*)", "\n".join(_source(c) for c in _notebook(chapter)["cells"]))
    number = int(chapter.name[:2])
    for k, title in enumerate(titles, start=1):
        assert f"**Exercise {number}.{k}: {title.strip()}**" in markdown
        assert f"**Solution to Exercise {number}.{k}.**" in markdown
    assert re.search(r"## References\s+1\. ", markdown), "the references are listed, numbered"
    for image in re.findall(r"!\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(([^)\s]+)", markdown):
        assert image.startswith(Repository.from_config().raw("")), f"a relative image path: {image}"
        local = ROOT / image.removeprefix(Repository.from_config().raw(""))
        assert local.is_file(), f"the image URL names no file of the repository: {image}"


# --- the generator and the checks can fail (synthetic chapters) ----------------------------------
MD = "markdown"


def _cell(kind, text, metadata=None, cell_id=None):
    cell = {"cell_type": kind, "id": cell_id or f"c{zlib.crc32(text.encode())}", "metadata": metadata or {},
            "source": text}
    if kind == "code":
        cell.update(outputs=[], execution_count=1)
    return cell


def _chapter(*cells):
    return {"cells": list(cells), "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
            "nbformat": 4, "nbformat_minor": 5}


SOLUTION = {"jupyter": {"source_hidden": True}, "cellView": "form"}
SYNTHETIC = _chapter(
    _cell(MD, "# A chapter\n\nAttention {footcite}`vaswani2017attention`, and again "
              "{footcite}`bahdanau2015neural,vaswani2017attention`.\n\n(sec-first)=\n## First part\n\n"
              "![A picture of the model](figures/ch03_self_attention.svg)\n\nSee the [notation](notation.md) "
              "and `{footcite}` written as code."),
    _cell(MD, "```{admonition} The source gets this wrong\n:class: warning\nIt says $K = Q$.\n```"),
    _cell(MD, "````{exercise} Write f (about 5 min)\n:label: ex-ch03-f\n\nWrite `f` so that "
              "$f(x) = x$; {ref}`sec-first` has it.\n\n```python\nf(1)  # {footcite}`kept`\n```\n````"),
    _cell("code", "def f(x):\n    raise NotImplementedError\n\ncheck_f(f)"),
    _cell(MD, "````{solution-start} ex-ch03-f\n:class: dropdown\n````"),
    _cell("code", "# @title Solution (try the exercise first)\ndef reference_f(x):\n    return x", SOLUTION),
    _cell(MD, "It is the identity, as {numref}`ex-ch03-f` says.\n\n````{solution-end}\n````"),
    _cell(MD, "## References\n\n```{footbibliography}\n```"),
)


def _write_chapter(folder, notebook, name="03_synthetic.ipynb"):
    (folder / "chapters").mkdir(exist_ok=True)
    path = folder / "chapters" / name
    path.write_text(json.dumps(notebook), encoding="utf-8")
    return path


def test_a_synthetic_chapter_becomes_plain_markdown(tmp_path):
    _write_chapter(tmp_path, SYNTHETIC)
    assert myst_left(SYNTHETIC), "the synthetic chapter is MyST"
    [written] = write_all(tmp_path / "chapters", tmp_path / "colab")
    edition = _notebook(written)
    assert myst_left(edition) == []
    text = "\n\n".join(_source(c) for c in edition["cells"] if c["cell_type"] == MD)
    assert "Attention [1], and again [2, 1]." in text
    assert "**Exercise 3.1: Write f (about 5 min)**" in text
    assert "First part has it" in text and "(sec-first)=" not in text
    assert "> **The source gets this wrong**\n>\n> It says $K = Q$." in text
    assert "**Solution to Exercise 3.1.**" in text
    assert re.search(r"<details>\n<summary>[^<]*</summary>\n\nIt is the identity, as Exercise 3.1 says.", text)
    assert "](https://raw.githubusercontent.com/attnbook/attention-rebuilt/main/chapters/figures/" \
           "ch03_self_attention.svg)" in text
    assert "](https://attnbook.github.io/attention-rebuilt/chapters/notation.html)" in text
    assert "`{footcite}` written as code" in text and "f(1)  # {footcite}`kept`" in text
    assert re.search(r"## References\n\n1\. Ashish Vaswani.*\n2\. Dzmitry Bahdanau", text)
    code = [c for c in edition["cells"] if c["cell_type"] == "code"]
    assert code == [c for c in SYNTHETIC["cells"] if c["cell_type"] == "code"]
    assert not any(c["cell_type"] == MD and not _source(c).strip() for c in edition["cells"])


def test_a_solution_whose_output_is_hidden_ships_without_it(tmp_path):
    answer = {"output_type": "stream", "name": "stdout", "text": "the answer is 42\n"}
    hidden = {**SOLUTION, "jupyter": {"source_hidden": True, "outputs_hidden": True}}
    chapter = copy.deepcopy(SYNTHETIC)
    shown, kept = chapter["cells"][5], _cell("code", "# @title Solution (try the exercise first)\nprint(1)",
                                              hidden)
    shown["outputs"] = kept["outputs"] = [answer]
    chapter["cells"].insert(6, kept)
    _write_chapter(tmp_path, chapter)
    [written] = write_all(tmp_path / "chapters", tmp_path / "colab")
    code = [c for c in _notebook(written)["cells"] if c["cell_type"] == "code"]
    assert code[1]["outputs"] == [answer], "a solution's output the chapter shows stays"
    assert code[2]["outputs"] == [] and code[2]["execution_count"] is None, "a hidden output goes"


@pytest.mark.parametrize(("text", "leftover"), [
    ("````{exercise} T\n:label: ex-t\n````", "a MyST directive"),
    (":::{note}\nHi\n:::", "a MyST directive"),
    ("As {footcite}`vaswani2017attention` says.", "a MyST role"),
    ("See {ref}`sec-x`.", "a MyST role"),
    ("```\n```\n:class: dropdown", "a directive option line"),
    ("(sec-x)=\n## X", "a MyST target"),
])
def test_myst_left_finds_each_leftover(text, leftover):
    found = myst_left(_chapter(_cell(MD, "Plain *text* with `{footcite}` as code.\n\n```\n:label: x\n```"),
                               _cell(MD, text)))
    assert found and all(p.startswith("cell 1:") for p in found), found
    assert any(leftover in p for p in found), found


def test_the_sync_check_fails_on_a_stale_missing_or_orphan_edition(tmp_path):
    chapter = _write_chapter(tmp_path, SYNTHETIC)
    editions = tmp_path / "colab"
    write_all(tmp_path / "chapters", editions)
    assert stale_editions(tmp_path / "chapters", editions) == []
    edition = edition_path(chapter, editions)
    edition.write_text(edition.read_text().replace("Exercise 3.1", "Exercise 3.2"))
    assert stale_editions(tmp_path / "chapters", editions) == ["03_synthetic.ipynb: the Colab edition differs "
                                                               "from its chapter"]
    shutil.copy(edition, editions / "04_gone.ipynb")
    edition.unlink()
    assert stale_editions(tmp_path / "chapters", editions) == ["03_synthetic.ipynb: no Colab edition",
                                                               "04_gone.ipynb: an edition without a chapter"]


@pytest.mark.parametrize(("text", "message"), [
    ("```{glossary}\nterm\n: def\n```", "the directive {glossary}"),
    ("{cite}`vaswani2017attention`", "the role {cite}"),
    ("{footcite}`nobody2020`", "unknown key 'nobody2020'"),
    ("{ref}`nowhere`", "names nothing in this chapter"),
])
def test_the_generator_stops_on_myst_it_cannot_write_plainly(tmp_path, text, message):
    _write_chapter(tmp_path, _chapter(_cell(MD, text)))
    with pytest.raises(MystError, match=re.escape(message)):
        write_all(tmp_path / "chapters", tmp_path / "colab")


# --- the buttons and links that open them --------------------------------------------------------
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())


def test_the_book_loads_the_colab_button_extension_and_leaves_the_editions_out():
    assert CONFIG["sphinx"]["local_extensions"] == {"tools.colab.launch_button": "./"}
    assert EDITIONS_DIR.name in CONFIG["exclude_patterns"]
    assert CONFIG["launch_buttons"]["colab_url"] == "https://colab.research.google.com"


def test_the_colab_button_opens_the_edition():
    repo = Repository.from_config()
    for chapter in CHAPTERS:
        url = colab_edition_url(repo.colab(f"chapters/{chapter.name}"))
        assert url == repo.colab(f"colab/{chapter.name}")
    assert colab_edition_url(repo.colab("chapters/99_none.ipynb")) == repo.colab("chapters/99_none.ipynb")


def test_readme_and_how_to_use_link_to_the_editions():
    repo = Repository.from_config()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"https://colab\.research\.google\.com/github/\S+?\.ipynb", readme)
    assert links, "the README links to a Colab edition"
    for link in links:
        name = link.rsplit("/", 1)[1]
        assert link == repo.colab(f"colab/{name}") and edition_path(ROOT / "chapters" / name).is_file(), link


HTML = ROOT / "_build" / "html" / "chapters"


@pytest.mark.skipif(not HTML.is_dir(), reason="the book is not built (jupyter-book build .)")
def test_the_built_books_colab_buttons_open_the_editions():
    repo = Repository.from_config()
    for chapter in CHAPTERS:
        page = (HTML / f"{chapter.stem}.html").read_text(encoding="utf-8")
        assert repo.colab(f"colab/{chapter.name}") in page, chapter.name
        assert repo.colab(f"chapters/{chapter.name}") not in page, chapter.name
