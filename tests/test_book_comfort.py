"""Reading comfort in the HTML book: code that fits the column, figures with alt text, exercises
numbered per chapter; and a Binder environment that installs the book."""
import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("[0-9][0-9]_*.ipynb"))
HTML = ROOT / "_build" / "html"
MAX_CODE_LINE = 90  # the book theme's code column shows about 90 characters without scrolling


def _cells(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _source(cell):
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def wide_code_lines(cells, limit=MAX_CODE_LINE):
    """'cell N, line M: K characters' for every code line wider than ``limit``: code cells, and
    code blocks of markdown cells (fences with no info string or a language name, not directives)."""
    wide = []
    for n, cell in enumerate(cells):
        text = _source(cell)
        if cell["cell_type"] == "code":
            blocks = [text]
        elif cell["cell_type"] == "markdown":
            blocks = _markdown_code_blocks(text)
        else:
            continue
        for block in blocks:
            for m, line in enumerate(block.split("\n"), start=1):
                if len(line) > limit:
                    wide.append(f"cell {n}, line {m}: {len(line)} characters")
    return wide


def _markdown_code_blocks(text):
    """The bodies of fenced code blocks (```python, ```bash, ```) in markdown, also inside
    directive fences (````{exercise}), which are prose and not themselves counted."""
    blocks, stack = [], []  # stack: (fence, is_code, lines) of the open fences, innermost last
    for line in text.split("\n"):
        fence = re.match(r"\s*(`{3,}|:{3,})(.*)$", line)
        if fence and stack and fence.group(1) == stack[-1][0] and not fence.group(2).strip():
            _, is_code, lines = stack.pop()
            if is_code:
                blocks.append("\n".join(lines))
        elif fence and not (stack and stack[-1][1]):
            info = fence.group(2).strip()
            stack.append((fence.group(1), fence.group(1)[0] == "`" and not info.startswith("{"), []))
        elif stack:
            stack[-1][2].append(line)
    return blocks


def _has_image(cell):
    return any(mime.startswith("image/") for out in cell.get("outputs", []) for mime in out.get("data", {}))


def alt_text_problems(cells):
    """Every code cell with a stored image output needs MyST-NB's cell metadata
    ``{"mystnb": {"image": {"alt": "..."}}}`` (myst-nb's ``render_image_options``, cell key
    ``image``): a sentence saying what the figure shows, not a file name."""
    problems = []
    for n, cell in enumerate(cells):
        if cell["cell_type"] != "code" or not _has_image(cell):
            continue
        alt = cell.get("metadata", {}).get("mystnb", {}).get("image", {}).get("alt")
        if not isinstance(alt, str) or not alt.strip():
            problems.append(f"cell {n}: figure without alt text (metadata mystnb.image.alt)")
        elif len(alt.split()) < 8 or re.search(r"\.(png|svg|jpe?g)\b|/", alt):
            problems.append(f"cell {n}: alt text must say what the figure shows: {alt!r}")
    return problems


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_code_lines_fit_the_column(path):
    assert wide_code_lines(_cells(path)) == []


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_figure_has_alt_text(path):
    assert alt_text_problems(_cells(path)) == []


def _code(text, outputs=(), metadata=None):
    return {"cell_type": "code", "source": text, "metadata": metadata or {}, "outputs": list(outputs)}


PNG = {"output_type": "display_data", "data": {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}}
ALT = {"mystnb": {"image": {"alt": "Training loss against step for two models: both fall, then level off."}}}


@pytest.mark.parametrize(("cells", "expected"), [
    ([_code("x = 1\n" + "y = 2" + " " * 90)], ["cell 0, line 2: 95 characters"]),
    ([{"cell_type": "markdown", "source": "```python\n" + "z" * 91 + "\n```", "metadata": {}}],
     ["cell 0, line 1: 91 characters"]),
    ([{"cell_type": "markdown", "source": "````{exercise} T\n" + "prose " * 20 + "\n````", "metadata": {}}], []),
    ([{"cell_type": "markdown", "source": "````{solution-end}\n````\n\n````{exercise} T\n" + "prose " * 20
       + "\n\n```python\n" + "w" * 93 + "\n```\n````", "metadata": {}}], ["cell 0, line 1: 93 characters"]),
    ([_code("x = 1\n" + "y" * 90)], []),
])
def test_wide_code_lines_are_found(cells, expected):
    assert wide_code_lines(cells) == expected


@pytest.mark.parametrize(("cells", "problem"), [
    ([_code("plt.show()", [PNG])], "without alt text"),
    ([_code("plt.show()", [PNG], {"mystnb": {"image": {"alt": ""}}})], "without alt text"),
    ([_code("plt.show()", [PNG], {"mystnb": {"image": {"alt": "a plot"}}})], "must say what"),
    ([_code("plt.show()", [PNG], {"mystnb": {"image": {"alt": "../_images/3f2a9c.png shows the loss of the model"}}})],
     "must say what"),
    ([_code("plt.show()", [PNG], {"mystnb": {"image": {"width": "80%"}}})], "without alt text"),
])
def test_alt_text_problems_are_found(cells, problem):
    assert alt_text_problems([_code("plt.show()", [PNG], ALT), _code("print(1)")]) == []
    found = alt_text_problems(cells)
    assert any(problem in p for p in found), found


# --- exercises numbered per chapter --------------------------------------------------------
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())


def _chapter_title(path):
    for cell in _cells(path):
        if cell["cell_type"] == "markdown":
            for line in _source(cell).split("\n"):
                if line.startswith("# "):
                    return line[2:]
    return None


def test_chapters_are_numbered_by_the_table_of_contents():
    """sphinx-exercise numbers exercises with Sphinx's numfig: per chapter ("Exercise 6.1") only
    under a numbered toctree with numfig_secnum_depth 1; unnumbered, across the whole book."""
    part = next(p for p in TOC["parts"] if any(e["file"].startswith("chapters/0") for e in p["chapters"]))
    assert part.get("numbered") in (1, True), "number the part that lists the chapters (numbered: 1)"
    assert [e["file"] for e in part["chapters"]] == [f"chapters/{p.stem}" for p in CHAPTERS], \
        "the numbered part must list the chapters in order, so that Chapter N gets number N"
    config = CONFIG["sphinx"]["config"]
    assert config.get("numfig") is True and config.get("numfig_secnum_depth") == 1


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_chapter_title_leaves_its_number_to_the_table_of_contents(path):
    """The numbered toc writes "6. " before the title; a title that says "6. BERT" shows twice."""
    title = _chapter_title(path)
    assert title, "a chapter starts with a '# Title' heading"
    assert not re.match(r"\d+\.?\s", title), f"drop the hand-written number from the title {title!r}"


# --- the built book, when there is one (CI builds it after the tests; locally: build first) ---
def html_problems(html_dir):
    """Exercises numbered "Exercise N.k" from 1 in chapter N, and every <img> of a chapter page
    with alt text that is not a file path."""
    problems = []
    for path in CHAPTERS:
        page = html_dir / "chapters" / f"{path.stem}.html"
        if not page.is_file():
            problems.append(f"{page.name}: not built")
            continue
        text = page.read_text(encoding="utf-8")
        chapter = int(path.name[:2])
        shown = re.findall(r'<span class="caption-number">Exercise ([\d.]+)', text) or \
            re.findall(r"Exercise ([\d.]+) \(", text)
        expected = [f"{chapter}.{k}" for k in range(1, len(shown) + 1)]
        if not shown or shown != expected:
            problems.append(f"{page.name}: exercises numbered {shown}, expected {expected}")
        for img in re.findall(r"<img\b[^>]*>", text):
            alt = re.search(r'\balt="([^"]*)"', img)
            if not alt or not alt.group(1).strip() or re.search(r"_images/|\.(png|svg|jpe?g)$", alt.group(1)):
                problems.append(f"{page.name}: {img[:120]}")
    return problems


@pytest.mark.skipif(not (HTML / "chapters").is_dir(), reason="the book is not built (jupyter-book build .)")
def test_built_book_numbers_exercises_per_chapter_and_shows_alt_text():
    assert html_problems(HTML) == []


def test_html_problems_are_found(tmp_path):
    (tmp_path / "chapters").mkdir()
    for path in CHAPTERS:
        (tmp_path / "chapters" / f"{path.stem}.html").write_text(
            '<span class="caption-number">Exercise 5 </span><img alt="../_images/ab12.png" src="x.png"/>')
    found = html_problems(tmp_path)
    assert any("expected ['1.1']" in p for p in found), found
    assert any("_images/ab12.png" in p for p in found), found


# --- Binder (mybinder.org) ---------------------------------------------------------------------
BINDER = ROOT / "binder"


def _requirement_lines(path):
    return [line.split("#")[0].strip() for line in path.read_text().splitlines() if line.split("#")[0].strip()]


def test_binder_installs_the_cpu_build_of_the_pinned_torch():
    """Binder reads binder/ instead of the root: its requirements must give the CPU build of the
    same torch the root pins (PyPI's Linux wheel is the CUDA build, several GB)."""
    lines = _requirement_lines(BINDER / "requirements.txt")
    root_torch = [line for line in _requirement_lines(ROOT / "requirements.txt") if line.startswith("torch")]
    assert root_torch == ["torch==2.13.0"]
    assert [line for line in lines if line.startswith("torch")] == root_torch
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in lines


def test_binder_installs_the_book_package_with_every_chapter_extra():
    lines = _requirement_lines(BINDER / "requirements.txt")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    editable = [line for line in lines if re.fullmatch(r"-e \.(\[[\w,]+\])?", line)]
    assert editable, "binder/requirements.txt must install the package itself: -e .[...]"
    installed = set(re.search(r"\[([\w,]+)\]", editable[0]).group(1).split(",")) if "[" in editable[0] else set()
    assert installed == set(extras), f"install every extra the chapters need: {sorted(extras)}"


def test_binder_python_and_launch_button():
    assert (BINDER / "runtime.txt").read_text().strip() == "python-3.11"
    assert CONFIG["launch_buttons"]["binderhub_url"] == "https://mybinder.org"
    url, branch = CONFIG["repository"]["url"], CONFIG["repository"]["branch"]
    assert url.startswith("https://github.com/") and branch
    readme = (ROOT / "README.md").read_text()
    assert f"https://mybinder.org/v2/gh/{url.removeprefix('https://github.com/')}/{branch}" in readme, \
        "the README's Binder link must point at _config.yml's repository and branch"
