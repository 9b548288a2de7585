"""What the book test can check mechanically about figures and cross-references (issue 13):
every heatmap has a colour bar, and every "Chapter N", "Section N.M" and "Figure N.k" names
something that exists. (Alt text and code width: tests/test_book_comfort.py.)"""
import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("[0-9][0-9]_*.ipynb"))
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())
NO_COLOUR_BAR = "# no colour bar:"  # opt-out with a reason, for pictures that are not values


def _source(cell):
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _cells(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _pages():
    """Every page of the book, in table-of-contents order: (path, markdown text)."""
    files = [TOC["root"]] + [entry["file"] for part in TOC["parts"] for entry in part["chapters"]]
    pages = []
    for name in files:
        md, nb = ROOT / f"{name}.md", ROOT / f"{name}.ipynb"
        if md.is_file():
            pages.append((md, md.read_text(encoding="utf-8")))
        elif nb.is_file():
            text = "\n".join(_source(c) for c in _cells(nb) if c["cell_type"] == "markdown")
            pages.append((nb, text))
    return pages


# --- colour bars -------------------------------------------------------------------------------
DIRECT_DRAW = re.compile(r"\.(?:imshow|matshow|pcolormesh|pcolor)\(")
SEABORN_HEATMAP = r"(?<![\w.])(?:sns\.)?heatmap\("
ATTENTION_HEATMAP = r"(?<![\w.])attention_heatmap\("


def _calls(code, pattern):
    """The argument text of every call matching ``pattern`` (balanced parentheses)."""
    calls = []
    for match in re.finditer(pattern, code):
        depth, start = 1, match.end()
        for pos in range(start, len(code)):
            depth += {"(": 1, ")": -1}.get(code[pos], 0)
            if depth == 0:
                calls.append(code[start:pos])
                break
    return calls


def colour_bar_problems(cells):
    """Code cells that draw a heatmap without a colour bar, as short descriptions."""
    problems = []
    for index, cell in enumerate(cells):
        code = _source(cell)
        if cell["cell_type"] != "code" or NO_COLOUR_BAR in code:
            continue
        has_colorbar = re.search(r"\bcolorbar\(", code) is not None  # fig.colorbar, plt.colorbar
        if DIRECT_DRAW.search(code) and not has_colorbar:
            problems.append(f"cell {index}: imshow/matshow/pcolormesh without a colorbar()")
        for args in _calls(code, SEABORN_HEATMAP):
            if re.search(r"\bcbar\s*=\s*False\b", args) and not has_colorbar:
                problems.append(f"cell {index}: heatmap(..., cbar=False) and no colorbar()")
        panels = _calls(code, ATTENTION_HEATMAP)
        if panels and all(re.search(r"\bcolorbar\s*=\s*False\b", a) for a in panels) \
                and not has_colorbar:
            problems.append(f"cell {index}: every attention_heatmap has colorbar=False")
    return problems


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_heatmap_has_a_colour_bar(path):
    """A heatmap without its scale cannot be read. ``attention_heatmap`` draws one unless told
    not to (``tests/test_env_plot.py`` checks that); direct imshow/matshow/pcolormesh calls need
    ``colorbar()``. A picture that is not a value map opts out with ``# no colour bar: why``."""
    problems = colour_bar_problems(_cells(path))
    assert not problems, "\n".join(problems)


# --- cross-references --------------------------------------------------------------------------
NUMBER_LIST = r"\d+(?:\.\d+)?(?:\s*(?:,\s*(?:and\s+)?|\s+and\s+|\s+to\s+|\s*[–-]\s*)\d+(?:\.\d+)?)*"
REFERENCE = re.compile(r"\b(Chapters?|[Ss]ections?|Figures?)\s+(" + NUMBER_LIST + r")")


def book_targets(pages):
    """What exists: chapter numbers, numbered sections "N.M" and figure captions "N.k"."""
    chapters, sections, figures = set(), set(), set()
    for path, text in pages:
        number = re.match(r"(\d\d)[_.]", path.name)  # chapters/NN_name: the numbered toc makes it Chapter NN
        if number:
            chapters.add(str(int(number.group(1))))
        for line in text.splitlines():
            heading = re.match(r"#{2,}\s+(\d+\.\d+(?:\.\d+)?)\s", line)
            if heading:
                sections.add(heading.group(1))
        figures.update(re.findall(r"\*\*Figure (\d+\.\d+)\.\*\*", text))
    return {"chapter": chapters, "section": sections, "figure": figures}


def reference_problems(pages):
    """References to a chapter, section or figure that does not exist: "page: reference"."""
    targets = book_targets(pages)
    problems = []
    for path, text in pages:
        text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks are not prose
        for kind, numbers in REFERENCE.findall(text):
            kind = kind.lower().rstrip("s")
            for number in re.findall(r"\d+(?:\.\d+)?", numbers):
                if kind == "chapter" and "." in number:
                    continue  # "Chapter 1.2" is not a form the book uses
                if kind != "chapter" and "." not in number:
                    continue  # "Figure 7" alone: not a numbered reference
                if number not in targets[kind]:
                    problems.append(f"{path.name}: {kind} {number}")
    return problems


def test_cross_references_resolve():
    """Sections are numbered "## N.M Title" in chapter N (file chapters/0N_*), figures
    by their "**Figure N.k.**" caption; every reference must name one that exists."""
    pages = _pages()
    assert book_targets(pages)["chapter"] >= {p.name[:2].lstrip("0") for p in CHAPTERS}
    problems = reference_problems(pages)
    assert not problems, "\n".join(problems)


# --- each rule catches its breach --------------------------------------------------------------
def _code(text, outputs=(), metadata=None):
    return {"cell_type": "code", "source": text, "outputs": list(outputs),
            "metadata": metadata or {}}




@pytest.mark.parametrize(("cell", "broken"), [
    (_code("ax.imshow(w)\nplt.show()"), True),
    (_code("im = ax.imshow(w)\nfig.colorbar(im, ax=ax)"), False),
    (_code("ax.matshow(w)"), True),
    (_code("ax.pcolormesh(w)\nplt.colorbar()"), False),
    (_code("sns.heatmap(w, cbar=False)"), True),
    (_code("sns.heatmap(w)"), False),
    (_code("attention_heatmap(w, k, q, ax=a, colorbar=False)\n"
           "attention_heatmap(w, k, q, ax=b, colorbar=False)"), True),
    (_code("attention_heatmap(w, k, q, ax=a, colorbar=False)\n"
           "attention_heatmap(w, k, q, ax=b, colorbar=ax is axes[-1])"), False),
    (_code("attention_heatmap(w, k, q)"), False),
    (_code("ax.imshow(digit, cmap='gray')  # no colour bar: a picture of a digit"), False),
])
def test_colour_bar_rule_catches_its_breach(cell, broken):
    assert bool(colour_bar_problems([cell])) == broken


def _page(name, text):
    return (Path(name), text)


BOOK = [_page("03.ipynb", "# Self-attention\n## 3.1 One token\n## 3.2 Why\n"
                          "![a](f.svg)\n\n**Figure 3.1.** The picture."),
        _page("04.ipynb", "# Heads\n## 4.1 Simple\n")]


@pytest.mark.parametrize(("text", "problem"), [
    ("As section 3.2 measures", None),
    ("Sections 3.1 to 3.2 in one picture", None),
    ("Chapters 3 and 4 built it", None),
    ("Figure 3.1 shows it", None),
    ("```\nsection 9.9 in a code block\n```", None),
    ("section 4.6 measures what that saves", "note.md: section 4.6"),
    ("Sections 3.1 to 3.5", "note.md: section 3.5"),
    ("a mistake Chapter 6 meets", "note.md: chapter 6"),
    ("Chapters 1 and 3", "note.md: chapter 1"),
    ("Figure 4.1 shows", "note.md: figure 4.1"),
])
def test_cross_reference_rule_catches_its_breach(text, problem):
    problems = reference_problems(BOOK + [_page("note.md", text)])
    assert problems == ([problem] if problem else [])
