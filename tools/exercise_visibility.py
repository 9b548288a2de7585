"""How much of each hidden exercise solution a reader can already see in its chapter.

A solution teaches nothing when its code is printed a few cells above it (a function defined in
a visible cell, a library source printed with ``inspect.getsource``). This module compares every
hidden solution cell (first line ``# @title Solution``) with each *visible* source of the same
chapter: the source of every other code cell, and the text every cell prints (which holds the
printed library sources), each fenced code block of the markdown cells too.

Both sides are reduced to normalised tokens: comments dropped, string literals replaced by one
token, and the names the code binds itself (variables, parameters, the functions it defines)
replaced by one placeholder (a function's ``def`` line and a line unpacking ``x.shape`` are dropped: the exercise
gives both), so that renaming ``x`` to ``inputs`` or ``reference_f`` to ``f``
does not hide a copy; names it only uses (``torch``, ``view``, ``softmax``) and numbers are kept.
The solution's own boiler-plate (the ``# @title`` line, the ``check_...(...)`` call) is left out.

The **score** of a solution is the share of its tokens that one visible source holds *in the
same order in runs of at least* ``MIN_RUN`` *tokens* (``difflib`` matching blocks): 1.0 is a
verbatim copy, 0.0 means no run of ``MIN_RUN`` tokens in common. Short runs are ignored because
``v = v . view ( v`` occurs in any PyTorch code; a run of eight tokens is about one statement.

A reader has also seen the earlier chapters: ``earlier_sources`` gathers their visible sources
and their solutions, and ``findings_across`` scores a solution against them with the same
measure (an exercise that repeats an earlier chapter's exercise teaches nothing new either).

``python -m tools.exercise_visibility`` prints the score of every solution of every chapter,
against its own chapter and against the chapters before it.
"""
from __future__ import annotations

import ast
import difflib
import json
import keyword
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ROOT / "chapters"
SOLUTION_TITLE = "# @title Solution"
MIN_RUN = 8  # tokens: about one statement
# Above this share of its tokens in one visible source, a solution counts as "in sight": more
# than half of it can be copied from a cell the reader has just run. The calibration (solutions
# scored against the visible code of the *other* chapters, which never hold their answer)
# is in tests/test_exercise_visibility.py.
THRESHOLD = 0.5

_TOKEN = re.compile(
    r"""[A-Za-z_]\w*                        # a name
      | \d+\.\d*(?:[eE][-+]?\d+)? | \.\d+(?:[eE][-+]?\d+)? | \d+(?:[eE][-+]?\d+)?  # numbers
      | \*\*|//|->|==|!=|<=|>=|@=|\+=|-=|\*=|/=  # two-character operators
      | [^\s\w]                               # any other symbol
    """, re.VERBOSE)
_STRING = re.compile(r'''(?s)[rbfuRBFU]{0,2}("""|\'\'\'|"|')(?:\\.|(?!\1).)*?\1''')
_COMMENT = re.compile(r"#[^\n]*")
_KEEP = set(keyword.kwlist) | {"torch", "math", "F", "nn", "np", "True", "False", "None",
                               "print", "len", "range", "zip", "int", "float", "sum", "min", "max"}
_BOUND = re.compile(r"""(?x)
      \bdef\s+(\w+)\s*\(([^)]*)\)             # def name(params)
    | \bfor\s+([\w\s,()]+?)\s+in\b            # for a, b in
    | ^\s*([\w\s,()\[\]]+?)\s*(?<![=!<>+\-*/@])=(?!=)   # a, b = ... at the start of a line
    | \blambda\s+([^:]*):                      # lambda params:
    """, re.MULTILINE)


_UNPACK_SHAPE = re.compile(r"^[ \t]*[\w\t ,]+=[ \t]*\w+\.shape(?:\[[^\]\n]*\])?[ \t]*$", re.M)
_DEF_HEADER = re.compile(r"\bdef\s+\w+\s*\((?:[^()]|\([^()]*\))*\)\s*(?:->[^:]*)?:")


def _strip(code: str) -> str:
    code = _STRING.sub(" STR ", code)
    return _COMMENT.sub("", code)


def bound_names(code: str) -> set[str]:
    """Names the code binds itself: defined functions, parameters, assigned and loop variables."""
    names: set[str] = set()
    for match in _BOUND.finditer(_strip(code)):
        for group in match.groups():
            if group:
                for name in re.findall(r"[A-Za-z_]\w*", group.split("=")[0] if "(" not in group
                                       else group):
                    if name not in _KEEP:
                        names.add(name)
    return names


def tokens(code: str) -> list[str]:
    """Normalised tokens: no comments, strings as ``STR``, the code's own names as ``v``."""
    code = _strip(code)
    own = bound_names(code) | {"self"}  # a method's self is a function's first argument
    code = _DEF_HEADER.sub(" ", code)  # a signature is given in the exercise's text
    code = _UNPACK_SHAPE.sub("", code)  # so are the shapes: `B, T, D = x.shape` restates them
    out: list[str] = []
    for token in _TOKEN.findall(code):
        if token.startswith("reference_"):
            token = token[len("reference_"):]
        attribute = bool(out) and out[-1] == "."
        out.append("v" if not attribute and token in own else token)
    return out


def _is_checker_call(statement: ast.stmt) -> bool:
    value = getattr(statement, "value", None)
    return (isinstance(statement, (ast.Expr, ast.Assign)) and isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name) and value.func.id.startswith("check_"))


def solution_code(source: str) -> str:
    """A solution cell without its title line and its checker calls (each whole statement,
    however many lines it spans: the call repeats the exercise cell's own call)."""
    lines = source.splitlines()
    try:
        statements = ast.parse(source).body
    except SyntaxError:  # not plain Python: drop the one-line calls only
        statements = []
    dropped = {row for statement in statements if _is_checker_call(statement)
               for row in range(statement.lineno - 1, statement.end_lineno)}
    kept = [line for row, line in enumerate(lines)
            if row not in dropped and not line.startswith(SOLUTION_TITLE)
            and not re.match(r"\s*(\w+\s*=\s*)?check_\w+\(", line)]
    return "\n".join(kept)


def _text(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _outputs(cell: dict) -> list[str]:
    texts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            texts.append("".join(output.get("text", "")))
        elif "data" in output and "text/plain" in output["data"]:
            texts.append("".join(output["data"]["text/plain"]))
    return texts


def split_cells(nb: dict) -> tuple[list[tuple[int, str]], list[tuple[str, str]]]:
    """(solutions as (cell index, code), visible sources as (label, text)) of one notebook."""
    solutions, visible = [], []
    for index, cell in enumerate(nb["cells"]):
        text = _text(cell)
        if cell["cell_type"] == "code" and text.lstrip().startswith(SOLUTION_TITLE):
            solutions.append((index, solution_code(text)))
            continue
        if cell["cell_type"] == "code":
            visible.append((f"cell {index}", text))
            visible.extend((f"cell {index} output", out) for out in _outputs(cell))
        elif cell["cell_type"] == "markdown":
            for block in re.findall(r"```(?:python)?\n(.*?)```", text, re.S):
                visible.append((f"cell {index} markdown", block))
    return solutions, visible


def score(solution: str, source: str) -> float:
    """Share of the solution's normalised tokens found in ``source`` in order, in runs of at
    least ``MIN_RUN`` tokens."""
    sol, src = tokens(solution), tokens(source)
    if not sol:
        return 0.0
    blocks = difflib.SequenceMatcher(None, sol, src, autojunk=False).get_matching_blocks()
    return sum(b.size for b in blocks if b.size >= MIN_RUN) / len(sol)


@dataclass(frozen=True)
class Finding:
    chapter: str
    cell: int
    name: str  # the function the solution defines (or its first line)
    score: float
    where: str  # the visible source that holds most of it

    def line(self) -> str:
        flag = "IN SIGHT" if self.score > THRESHOLD else "ok"
        return (f"{self.chapter} cell {self.cell:3d} {self.name:32s} {self.score:5.2f} "
                f"({self.where}) {flag}")


def _name(code: str) -> str:
    match = re.search(r"def\s+(\w+)", code)
    if match:
        return match.group(1)
    first = next((line for line in code.splitlines() if line.strip()), "")
    return first.strip()[:32]


def findings_for(nb: dict, chapter: str, visible_from: dict | None = None) -> list[Finding]:
    """Score each solution of ``nb`` against the visible sources of ``visible_from`` (default:
    the same notebook)."""
    solutions, _ = split_cells(nb)
    _, visible = split_cells(visible_from if visible_from is not None else nb)
    found = []
    for index, code in solutions:
        best, where = 0.0, "-"
        for label, text in visible:
            value = score(code, text)
            if value > best:
                best, where = value, label
        found.append(Finding(chapter, index, _name(code), best, where))
    return found


def earlier_sources(earlier: list[dict], labels: list[str]) -> list[tuple[str, str]]:
    """What a reader has seen before a chapter: every visible source of the earlier chapters
    and their solutions too (an exercise already solved is not a new one)."""
    sources = []
    for nb, label in zip(earlier, labels):
        solutions, visible = split_cells(nb)
        sources += [(f"ch{label} {where}", text) for where, text in visible]
        sources += [(f"ch{label} cell {index} solution", code) for index, code in solutions]
    return sources


def findings_across(nb: dict, chapter: str, sources: list[tuple[str, str]]) -> list[Finding]:
    """Score each solution of ``nb`` against ``sources`` (such as ``earlier_sources``)."""
    solutions, _ = split_cells(nb)
    found = []
    for index, code in solutions:
        best, where = max(((score(code, text), label) for label, text in sources),
                          default=(0.0, "-"))
        found.append(Finding(chapter, index, _name(code), best, where))
    return found


def chapter_paths() -> list[Path]:
    return sorted(CHAPTERS.glob("[0-9][0-9]_*.ipynb"))


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def main() -> int:
    in_sight = 0
    paths = chapter_paths()
    books = [load(path) for path in paths]
    for number, (path, nb) in enumerate(zip(paths, books)):
        earlier = earlier_sources(books[:number], [p.stem[:2] for p in paths[:number]])
        own = findings_for(nb, path.stem[:2])
        for finding, seen in zip(own, findings_across(nb, path.stem[:2], earlier)):
            print(finding.line(), "| earlier chapters:", f"{seen.score:.2f} ({seen.where})")
            in_sight += max(finding.score, seen.score) > THRESHOLD
    print(f"{in_sight} solution(s) above the threshold {THRESHOLD}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
