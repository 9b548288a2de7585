"""The package's layers cannot rot: no import from a lower layer to a higher one, no cycle.

This file is the single source of the layer map: ``ALLOWED`` says, group by group (lowest
first), which groups each may import. The foundation is every top-level module of
``attnbook`` (and the ``FOUNDATION_FOLDERS``); each other group is a folder. ``data`` sits beside
``models``: tasks join the two, so models never import data and data never imports models or
layers. Developer tooling is not in the package (``tools/``, ``benchmarks/``). README.md
points here; the layer maps in ``attnbook/__init__.py`` and CONTRIBUTING.md
are checked against this one by the tests at the end of this file.
"""
import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lib" / "attnbook"

# What each group may import from the package (besides itself).
ALLOWED = {
    "foundation": {"foundation"},
    "layers": {"foundation", "layers"},
    "data": {"foundation", "data"},
    "models": {"foundation", "layers", "models"},
    "tasks": {"foundation", "layers", "models", "data", "tasks"},
    "exercises": {"foundation", "layers", "models", "data", "tasks", "exercises"},
}
FOUNDATION_FOLDERS = {"results"}  # packages that belong to the foundation (committed results and their loader)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def group_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ALLOWED:
        return parts[1]
    return "foundation"  # attnbook itself and its top-level modules


def package_imports(path: Path) -> set[str]:
    """Every ``attnbook...`` module that ``path`` imports (``from x import y`` may name a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("attnbook")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("attnbook"):
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names
                      if (PACKAGE.parent / f"{node.module}.{alias.name}".replace(".", "/")).with_suffix(".py").exists()
                      or (PACKAGE.parent / f"{node.module}.{alias.name}".replace(".", "/")).is_dir()}
    return found


def import_graph() -> dict[str, set[str]]:
    return {module_name(p): package_imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def layering_violations(graph: dict[str, set[str]]) -> list[str]:
    return [f"{src} ({group_of(src)}) imports {dst} ({group_of(dst)})"
            for src, targets in graph.items() for dst in sorted(targets)
            if group_of(dst) not in ALLOWED[group_of(src)]]


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A list of modules forming an import cycle, or None. A package importing its own
    submodules (``attnbook.layers`` -> ``attnbook.layers.masks``) is not a cycle."""
    edges = {src: {d for d in dsts if d in graph and not d.startswith(src + ".")} for src, dsts in graph.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def folder_groups() -> set[str]:
    return set(ALLOWED) - {"foundation"}


def foundation_modules() -> set[str]:
    return {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"} | FOUNDATION_FOLDERS


def test_every_folder_of_the_package_is_a_group_and_every_group_a_folder():
    folders = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert folders == folder_groups() | FOUNDATION_FOLDERS, (
        f"folders {sorted(folders)} vs groups {sorted(folder_groups())} + foundation {sorted(FOUNDATION_FOLDERS)}")


def test_no_import_goes_up_a_layer():
    violations = layering_violations(import_graph())
    assert not violations, "imports against the layering:\n" + "\n".join(violations)


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


@pytest.mark.parametrize("graph, expected", [
    ({"attnbook.layers.blocks": {"attnbook.models.transformer"}, "attnbook.models.transformer": set()},
     ["attnbook.layers.blocks (layers) imports attnbook.models.transformer (models)"]),
    ({"attnbook.models.tagger": {"attnbook.data.synthetic"}, "attnbook.data.synthetic": set()},
     ["attnbook.models.tagger (models) imports attnbook.data.synthetic (data)"]),
    ({"attnbook.tasks.g2p": {"attnbook.models.rnn", "attnbook.data.g2p"}}, []),
])
def test_the_checker_catches_an_upward_import(graph, expected):
    assert layering_violations(graph) == expected


def test_the_checker_catches_a_cycle():
    graph = {"attnbook.a": {"attnbook.b"}, "attnbook.b": {"attnbook.c"}, "attnbook.c": {"attnbook.a"}}
    assert find_cycle(graph) == ["attnbook.a", "attnbook.b", "attnbook.c", "attnbook.a"]
    assert find_cycle({"attnbook.a": {"attnbook.b"}, "attnbook.b": set()}) is None


# --- The other layer maps, checked against this one ------------------------------------------

def named_folders(text: str) -> set[str]:
    """Folder names written alone as ``name/`` (with or without backticks), not inside a path."""
    return set(re.findall(r"(?<![\w/.])`{0,2}([a-z_]+)/(?![\w.])", text))


def package_docstring() -> str:
    return ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8")))


def contributing_map() -> str:
    """The ``text`` block under "## The library" in CONTRIBUTING.md."""
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    return text.split("## The library", 1)[1].split("```text", 1)[1].split("```", 1)[0]


def test_the_package_docstring_names_every_group_and_foundation_module():
    doc = package_docstring()
    assert named_folders(doc) == folder_groups(), "attnbook/__init__.py: fix the folders it names"
    bullets = [b for b in doc.split("\n- ") if b.startswith("the foundation")]
    assert len(bullets) == 1, "attnbook/__init__.py needs one bullet starting '- the foundation'"
    foundation = bullets[0]
    assert set(re.findall(r"``(\w+)``", foundation)) == foundation_modules(), (
        f"attnbook/__init__.py's foundation bullet must name exactly {sorted(foundation_modules())}")


def test_contributing_draws_every_group_and_foundation_module():
    drawing = contributing_map()
    assert named_folders(drawing) == folder_groups(), "CONTRIBUTING.md: fix the folders the layer map draws"
    foundation = re.sub(r"\(.*?\)", "", drawing.split("foundation:", 1)[1])
    assert set(re.findall(r"\w+", foundation)) == foundation_modules(), (
        f"CONTRIBUTING.md's foundation line must name exactly {sorted(foundation_modules())}")


def test_readme_points_to_the_layer_map():
    assert "tests/test_layering.py" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_named_folders_reads_folder_names_only():
    text = "``layers/`` and models/ -> `tasks/`; lib/attnbook/, tests/test_layering.py and 1/2"
    assert named_folders(text) == {"layers", "models", "tasks"}
