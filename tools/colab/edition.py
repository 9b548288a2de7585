"""Write a chapter's Colab edition: MyST-only syntax becomes plain Markdown.

Colab's Markdown renderer (like plain JupyterLab's) knows CommonMark, GitHub's tables and
``$``/``$$`` math, but not MyST. In a Colab edition:

- ```` ```{exercise} Title (about 10 min) ```` becomes **Exercise 3.1: Title (about 10 min)**
  and its wording plain Markdown; ``:label:``/``:class:`` option lines go;
- ``{solution-start}``/``{solution-end}`` become a "Solution to Exercise 3.1" line; the
  solution code cell stays a Colab form whose code is hidden (it never rebinds the learner's
  function), and prose inside a solution goes into a closed ``<details>`` block;
- an admonition becomes a blockquote headed by its title in bold;
- ``{footcite}`key``` becomes a number [1] in order of first citation, and
  ``{footbibliography}`` the numbered list of those references (formatted from references.bib);
- ``{ref}``/``{numref}``/``{eq}`` cross-references become their plain text ("Exercise 3.1");
  targets ``(label)=`` and MyST comments go;
- relative image paths become absolute URLs into the repository, links to the book's other
  pages become links to the HTML book (or, for a chapter, to its Colab edition).

Code cells and outputs are copied unchanged, except that a cell whose outputs the chapter
hides (``jupyter.outputs_hidden``: a solution whose output gives the answer away) loses its
stored outputs, since Colab shows a form's outputs whatever the metadata says. A directive or role this module does not know
stops it with an error naming the chapter, so nothing MyST slips through silently.
"""
from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS_DIR = ROOT / "chapters"
EDITIONS_DIR = ROOT / "colab"
CHAPTER_GLOB = "[0-9][0-9]_*.ipynb"
NOTE_CELL_ID = "colab-edition-note"

ADMONITIONS = {"admonition", "note", "tip", "hint", "important", "warning", "caution", "attention",
               "danger", "error", "seealso"}
IGNORED_OPTIONS = {"label", "class", "name", "nonumber", "hidden", "dropdown", "open"}


class MystError(ValueError):
    """MyST that this module has no plain-Markdown form for."""


@dataclass(frozen=True)
class Repository:
    """Where the book lives online: _config.yml's repository URL and branch."""

    url: str
    branch: str

    @classmethod
    def from_config(cls, config_path: Path = ROOT / "_config.yml") -> "Repository":
        repo = yaml.safe_load(config_path.read_text(encoding="utf-8"))["repository"]
        return cls(repo["url"].rstrip("/"), repo.get("branch", "main"))

    @property
    def org_repo(self) -> str:
        return self.url.removeprefix("https://github.com/")

    def raw(self, path: str) -> str:
        """A file of the repository as served raw (images load from here in Colab)."""
        return f"https://raw.githubusercontent.com/{self.org_repo}/{self.branch}/{path}"

    def colab(self, path: str) -> str:
        """Colab's URL that opens the notebook at ``path`` in the repository."""
        return f"https://colab.research.google.com/github/{self.org_repo}/blob/{self.branch}/{path}"

    def book(self, page: str) -> str:
        """A page of the HTML book on GitHub Pages (``page``: path without suffix)."""
        org, repo = self.org_repo.split("/")
        return f"https://{org}.github.io/{repo}/{page}.html"


def edition_path(chapter: Path, editions_dir: Path = EDITIONS_DIR) -> Path:
    """Where a chapter's Colab edition is written: ``colab/<same name>.ipynb``."""
    return editions_dir / chapter.name


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _lines(text: str) -> list[str]:
    """nbformat's on-disk form of a multi-line string."""
    return text.splitlines(keepends=True)


# --- parsing MyST blocks -------------------------------------------------------------------------
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|:{3,})\s*(?P<info>.*?)\s*$")
DIRECTIVE = re.compile(r"^\{(?P<name>[\w:.-]+)\}\s*(?P<argument>.*)$")


@dataclass
class Directive:
    name: str
    argument: str
    options: dict[str, str] = field(default_factory=dict)
    body: str = ""


def _split_options(lines: list[str]) -> tuple[dict[str, str], list[str]]:
    """MyST directive options: ``:key: value`` lines, or a ``---`` YAML block, at the top."""
    options: dict[str, str] = {}
    if lines and lines[0].strip() == "---":
        end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
        if end is not None:
            options = {str(k): str(v) for k, v in (yaml.safe_load("\n".join(lines[1:end])) or {}).items()}
            return options, lines[end + 1:]
    n = 0
    while n < len(lines):
        option = re.match(r"^:([\w-]+):\s*(.*)$", lines[n])
        if not option:
            break
        options[option.group(1)] = option.group(2)
        n += 1
    return options, lines[n:]


def blocks(text: str) -> list[str | Directive]:
    """Split markdown into plain text and top-level directives (with nested content unparsed)."""
    out: list[str | Directive] = []
    plain: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence:
            mark, info = fence.group("fence"), fence.group("info")
            end = i + 1
            while end < len(lines):
                close = FENCE.match(lines[end])
                if close and close.group("fence")[0] == mark[0] and len(close.group("fence")) >= len(mark) \
                        and not close.group("info"):
                    break
                end += 1
            directive = DIRECTIVE.match(info)
            if directive:
                if plain:
                    out.append("\n".join(plain))
                    plain = []
                options, body = _split_options(lines[i + 1:end])
                out.append(Directive(directive.group("name"), directive.group("argument").strip(), options,
                                     "\n".join(body).strip("\n")))
            else:  # a code block: copied as it is
                plain.extend(lines[i:end + 1])
            i = end + 1
            continue
        plain.append(lines[i])
        i += 1
    if plain:
        out.append("\n".join(plain))
    return out


# --- converting ----------------------------------------------------------------------------------
ROLE = re.compile(r"\{(?P<name>[\w:.-]+)\}`(?P<content>[^`]*)`")
TARGET = re.compile(r"^\((?P<label>[^()\s]+)\)=\s*$")
# link text may hold balanced brackets ("[CLS] my dog ...")
_TEXT = r"\[(?:[^\[\]\\]|\\.|\[[^\[\]]*\])*\]"
IMAGE = re.compile(r"(!" + _TEXT + r"\()(?P<path>[^)\s]+)((?:\s+\"[^\"]*\")?\))")
LINK = re.compile(r"(?<!!)(" + _TEXT + r"\()(?P<path>[^)\s]+)((?:\s+\"[^\"]*\")?\))")
HTML_IMG_SRC = re.compile(r"(<img\b[^>]*\bsrc=\")(?P<path>[^\"]+)(\")")


@dataclass
class Chapter:
    """What the conversion of one chapter needs to know and keeps track of."""

    path: Path
    repository: Repository
    bibliography: dict
    number: int
    labels: dict[str, str] = field(default_factory=dict)  # label -> plain text ("Exercise 3.1")
    cited: list[str] = field(default_factory=list)  # keys in order of first citation
    exercises: int = 0
    in_solution: bool = False

    def fail(self, message: str) -> MystError:
        return MystError(f"{self.path.name}: {message}")


# A role, or an inline code span (roles inside code spans are shown as code): leftmost wins.
INLINE_TOKEN = re.compile(r"\{[\w:.-]+\}`[^`]*`|(?P<span>`+)(?!`).*?(?<!`)(?P=span)(?!`)", re.S)


def _code_spans_masked(text: str) -> str:
    """``text`` with inline code spans (not role contents) blanked, for searching."""
    return INLINE_TOKEN.sub(lambda m: " " * len(m.group(0)) if m.group("span") else m.group(0), text)


def _roles(text: str, chapter: Chapter) -> str:
    def replace(match: re.Match) -> str:
        name, content = match.group("name"), match.group("content")
        if name in ("footcite", "footcite:p", "footcite:t", "footcite:ps", "footcite:ts"):
            numbers = []
            for key in (k.strip() for k in content.split(",")):
                if key not in chapter.bibliography:
                    raise chapter.fail(f"{{footcite}} of unknown key {key!r}")
                if key not in chapter.cited:
                    chapter.cited.append(key)
                numbers.append(str(chapter.cited.index(key) + 1))
            return "[" + ", ".join(numbers) + "]"
        if name in ("ref", "numref", "eq", "doc", "term", "abbr"):
            explicit = re.match(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", content)
            if explicit:
                text = explicit.group("text")
                label = explicit.group("target")
                if name == "numref" and "%s" in text:
                    return text.replace("%s", _label_text(label, chapter).split()[-1])
                return text
            if name in ("term", "abbr"):
                return re.sub(r"\s*\(.*\)$", "", content) if name == "abbr" else content
            if name == "doc":
                raise chapter.fail(f"{{doc}}`{content}` needs a text: {{doc}}`text <{content}>`")
            text = _label_text(content, chapter)
            return f"({text.split()[-1]})" if name == "eq" else text
        if name == "math":
            return f"${content}$"
        if name in ("sub", "sup"):
            return f"<{name}>{content}</{name}>"
        raise chapter.fail(f"no plain-Markdown form for the role {{{name}}}")

    def token(match: re.Match) -> str:
        if match.group("span"):
            return match.group(0)
        plain = replace(ROLE.fullmatch(match.group(0)))
        following = match.string[match.end():match.end() + 1]
        if plain.startswith("[") and following in ("(", "[", ":"):  # would read as a link
            plain = "\\" + plain[:-1] + "\\]"
        return plain

    return INLINE_TOKEN.sub(token, text)


def _label_text(label: str, chapter: Chapter) -> str:
    if label not in chapter.labels:
        raise chapter.fail(f"a cross-reference to {label!r}, which names nothing in this chapter")
    return chapter.labels[label]


def _resolve_path(path: str, chapter: Chapter, image: bool) -> str:
    if re.match(r"^([a-z][a-z0-9+.-]*:|#|/)", path, re.I):  # absolute URL, in-page anchor or root path
        return path
    target, _, anchor = path.partition("#")
    repo_path = PurePosixPath(chapter.path.parent.name) / target  # chapters/<target>
    parts: list[str] = []
    for part in repo_path.parts:
        if part == "..":
            parts.pop()
        elif part != ".":
            parts.append(part)
    resolved = "/".join(parts)
    anchor = f"#{anchor}" if anchor else ""
    if image:
        return chapter.repository.raw(resolved)
    if resolved.endswith(".ipynb") and re.match(r"\d\d_", PurePosixPath(resolved).name):
        return chapter.repository.colab(f"{EDITIONS_DIR.name}/{PurePosixPath(resolved).name}")
    if resolved.endswith((".md", ".ipynb")):
        return chapter.repository.book(resolved.rsplit(".", 1)[0]) + anchor
    return chapter.repository.raw(resolved)


def _inline(text: str, chapter: Chapter) -> str:
    """Roles, targets, comments and paths of plain Markdown text (no directives in it); fenced
    code blocks are copied as they are."""
    pieces: list[tuple[bool, list[str]]] = []  # (is code, lines)
    in_code = None
    for line in text.split("\n"):
        fence = FENCE.match(line)
        if in_code is None and fence:
            in_code = fence.group("fence")
            pieces.append((True, [line]))
            continue
        if in_code is not None:
            pieces[-1][1].append(line)
            if fence and fence.group("fence")[0] == in_code[0] and len(fence.group("fence")) >= len(in_code) \
                    and not fence.group("info"):
                in_code = None
            continue
        if TARGET.match(line) or line.startswith("%") or line.strip() == "+++":
            continue
        if not pieces or pieces[-1][0]:
            pieces.append((False, []))
        pieces[-1][1].append(line)
    return "\n".join("\n".join(lines) if code else _prose("\n".join(lines), chapter) for code, lines in pieces)


def _prose(text: str, chapter: Chapter) -> str:
    text = _roles(text, chapter)
    text = IMAGE.sub(lambda m: m.group(1) + _resolve_path(m.group("path"), chapter, True) + m.group(3), text)
    text = HTML_IMG_SRC.sub(lambda m: m.group(1) + _resolve_path(m.group("path"), chapter, True) + m.group(3),
                            text)
    return LINK.sub(lambda m: m.group(1) + _resolve_path(m.group("path"), chapter, False) + m.group(3), text)


def _quote(text: str) -> str:
    return "\n".join(f"> {line}" if line.strip() else ">" for line in text.split("\n"))


def _details(summary: str, text: str) -> str:
    return f"<details>\n<summary>{summary}</summary>\n\n{text}\n\n</details>"


def convert_markdown(text: str, chapter: Chapter) -> str:
    """One markdown cell's source in plain Markdown; keeps ``chapter``'s state across cells."""
    out: list[str] = []
    solution_prose: list[str] = []

    def emit(piece: str) -> None:
        if not piece.strip():
            return
        (solution_prose if chapter.in_solution else out).append(piece.strip("\n"))

    def close_solution() -> None:
        if solution_prose:
            out.append(_details(f"The solution, explained (Exercise {chapter.number}.{chapter.exercises})",
                                "\n\n".join(solution_prose)))
            solution_prose.clear()

    for block in blocks(text):
        if isinstance(block, str):
            emit(_inline(block, chapter))
            continue
        name = block.name
        if name in ("exercise", "exercise-start"):
            chapter.exercises += 1
            number = f"{chapter.number}.{chapter.exercises}"
            title = _inline(block.argument, chapter)
            emit(f"**Exercise {number}: {title}**" if title else f"**Exercise {number}**")
            emit(convert_markdown(block.body, chapter))
        elif name in ("solution-start", "solution"):
            label = block.argument.split()[0] if block.argument else ""
            if label and label not in chapter.labels:
                raise chapter.fail(f"a solution to {label!r}, which is no exercise of this chapter")
            which = chapter.labels.get(label, f"Exercise {chapter.number}.{chapter.exercises}")
            emit(f"**Solution to {which}.** Try the exercise first; the solution's code is hidden "
                 f"in the next cell (show it to read it).")
            if name == "solution":
                out.append(_details(f"Solution to {which}", convert_markdown(block.body, chapter)))
            else:
                chapter.in_solution = True
        elif name in ("solution-end", "exercise-end"):
            if name == "solution-end":
                close_solution()
                chapter.in_solution = False
        elif name in ADMONITIONS:
            title = _inline(block.argument, chapter) if block.argument else name.capitalize()
            if name == "seealso" and not block.argument:
                title = "See also"
            body = convert_markdown(block.body, chapter)
            emit(_quote(f"**{title}**\n\n{body}" if body else f"**{title}**"))
        elif name == "footbibliography":
            emit(_references(chapter))
        elif name in ("math",):
            emit(f"$$\n{block.body}\n$$")
        elif name == "figure":
            alt = block.options.get("alt", "")
            image = _resolve_path(block.argument, chapter, True)
            caption = convert_markdown(block.body, chapter)
            emit(f"![{alt}]({image})" + (f"\n\n{caption}" if caption else ""))
        else:
            raise chapter.fail(f"no plain-Markdown form for the directive {{{name}}}")
    if chapter.in_solution:
        # prose continues in the next markdown cell until {solution-end}; keep it hidden there too
        if solution_prose:
            out.append(_details(f"The solution, explained (Exercise {chapter.number}.{chapter.exercises})",
                                "\n\n".join(solution_prose)))
    return "\n\n".join(out)


def _references(chapter: Chapter) -> str:
    from pybtex.backends.markdown import Backend
    from pybtex.style.formatting.plain import Style

    if not chapter.cited:
        return ""
    style, backend = Style(), Backend()
    items = []
    for n, key in enumerate(chapter.cited, start=1):
        entry = next(iter(style.format_entries([chapter.bibliography[key]])))
        text = re.sub(r"\s*\n\s*", " ", entry.text.render(backend)).strip()
        items.append(f"{n}. {text}")
    return "\n".join(items)


def _collect_labels(cells: list[dict], chapter: Chapter) -> None:
    """Exercises ("Exercise N.k") and targets before headings (their heading's text)."""
    exercises = 0
    for cell in cells:
        if cell["cell_type"] != "markdown":
            continue
        text = _source(cell)
        for block in blocks(text):
            if isinstance(block, Directive) and block.name in ("exercise", "exercise-start"):
                exercises += 1
                if "label" in block.options:
                    chapter.labels[block.options["label"]] = f"Exercise {chapter.number}.{exercises}"
        lines = text.split("\n")
        for n, line in enumerate(lines):
            target = TARGET.match(line)
            if target:
                heading = next((h for h in lines[n + 1:] if h.strip()), "")
                chapter.labels[target.group("label")] = re.sub(r"^#+\s*", "", heading).strip()


def load_bibliography(path: Path = ROOT / "references.bib") -> dict:
    from pybtex.database import parse_file

    return dict(parse_file(str(path)).entries)


def note_cell(chapter: Chapter) -> dict:
    name = chapter.path.name
    return {
        "cell_type": "markdown",
        "id": NOTE_CELL_ID,
        "metadata": {},
        "source": _lines(
            f"*This is the Colab edition of Chapter {chapter.number} of "
            f"[Attention and the Transformer, rebuilt step by step]"
            f"({chapter.repository.book('chapters/' + chapter.path.stem)}): the same notebook, with the "
            f"book's MyST markup written as plain Markdown. It is generated from `chapters/{name}` by "
            f"`python -m tools.colab`; change the chapter, not this file.*"),
    }


def hides_outputs(cell: dict) -> bool:
    """Whether a code cell's stored outputs are hidden in the chapter (JupyterLab's metadata)."""
    return cell["cell_type"] == "code" and bool(cell["metadata"].get("jupyter", {}).get("outputs_hidden"))


def convert_notebook(notebook: dict, path: Path, repository: Repository, bibliography: dict) -> dict:
    """The Colab edition of the chapter ``notebook`` read from ``path``."""
    chapter = Chapter(path, repository, bibliography, int(path.name[:2]))
    edition = copy.deepcopy(notebook)
    _collect_labels(edition["cells"], chapter)
    for cell in edition["cells"]:
        if cell["cell_type"] == "markdown":
            cell["source"] = _lines(convert_markdown(_source(cell), chapter))
        elif hides_outputs(cell):
            cell.update(outputs=[], execution_count=None)
    if chapter.in_solution:
        raise chapter.fail("a {solution-start} without its {solution-end}")
    if chapter.exercises and not any("footbibliography" in _source(c) for c in notebook["cells"]) \
            and chapter.cited:
        raise chapter.fail("citations without a {footbibliography} to list them")
    # empty markdown cells (a {solution-end} alone) would show as blank blocks: drop them
    edition["cells"] = [c for c in edition["cells"] if c["cell_type"] != "markdown" or _source(c).strip()]
    first_markdown = next((i for i, c in enumerate(edition["cells"]) if c["cell_type"] == "markdown"), 0)
    edition["cells"].insert(first_markdown + 1 if first_markdown == 1 else first_markdown, note_cell(chapter))
    edition["metadata"].setdefault("colab", {})["provenance"] = []
    return edition


def dumps(notebook: dict) -> str:
    """A notebook as nbformat writes it (so that regenerating gives the same bytes)."""
    return json.dumps(notebook, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def render(chapter: Path, repository: Repository | None = None, bibliography: dict | None = None) -> str:
    """The text of ``chapter``'s Colab edition."""
    notebook = json.loads(chapter.read_text(encoding="utf-8"))
    return dumps(convert_notebook(notebook, chapter, repository or Repository.from_config(),
                                  bibliography if bibliography is not None else load_bibliography()))


def chapters(chapters_dir: Path = CHAPTERS_DIR) -> list[Path]:
    return sorted(chapters_dir.glob(CHAPTER_GLOB))


def write_all(chapters_dir: Path = CHAPTERS_DIR, editions_dir: Path = EDITIONS_DIR) -> list[Path]:
    """(Re)write every chapter's edition, remove editions whose chapter is gone; the paths written."""
    repository, bibliography = Repository.from_config(), load_bibliography()
    editions_dir.mkdir(exist_ok=True)
    written = []
    sources = chapters(chapters_dir)
    for chapter in sources:
        target = edition_path(chapter, editions_dir)
        target.write_text(render(chapter, repository, bibliography), encoding="utf-8")
        written.append(target)
    for stale in editions_dir.glob(CHAPTER_GLOB):
        if stale not in written:
            stale.unlink()
    return written


def stale_editions(chapters_dir: Path = CHAPTERS_DIR, editions_dir: Path = EDITIONS_DIR) -> list[str]:
    """Every way the committed editions differ from what ``write_all`` would write (empty: in sync)."""
    repository, bibliography = Repository.from_config(), load_bibliography()
    problems = []
    sources = chapters(chapters_dir)
    for chapter in sources:
        target = edition_path(chapter, editions_dir)
        if not target.is_file():
            problems.append(f"{target.name}: no Colab edition")
        elif target.read_text(encoding="utf-8") != render(chapter, repository, bibliography):
            problems.append(f"{target.name}: the Colab edition differs from its chapter")
    names = {c.name for c in sources}
    problems += [f"{p.name}: an edition without a chapter" for p in sorted(editions_dir.glob(CHAPTER_GLOB))
                 if p.name not in names]
    return problems


# --- what must not be left in an edition ---------------------------------------------------------
LEFTOVERS = [
    (re.compile(r"^ {0,3}(`{3,}|:{3,})\s*\{[\w:.-]+\}", re.M), "a MyST directive"),
    (re.compile(r"\{[\w:.-]+\}`[^`]*`"), "a MyST role"),
    (re.compile(r"^:(label|class|name|nonumber|dropdown|alt|width|align):", re.M), "a directive option line"),
    (re.compile(r"^\([^()\s]+\)=\s*$", re.M), "a MyST target"),
]


def _outside_code(text: str) -> str:
    """Markdown with fenced code blocks (not directives) and inline code spans blanked."""
    kept, in_code = [], None
    for line in text.split("\n"):
        fence = FENCE.match(line)
        if fence and in_code is None and not DIRECTIVE.match(fence.group("info")):
            in_code = fence.group("fence")
            kept.append("")
            continue
        if in_code is not None:
            if fence and fence.group("fence")[0] == in_code[0] and len(fence.group("fence")) >= len(in_code) \
                    and not fence.group("info"):
                in_code = None
            kept.append("")
            continue
        kept.append(line)
    return _code_spans_masked("\n".join(kept))


def myst_left(notebook: dict) -> list[str]:
    """'cell N: a MyST role: {footcite}`x`' for each piece of MyST-only syntax in the markdown."""
    problems = []
    for n, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        text = _outside_code(_source(cell))
        for pattern, what in LEFTOVERS:
            for match in pattern.finditer(text):
                problems.append(f"cell {n}: {what}: {match.group(0).strip()[:60]}")
    return problems
