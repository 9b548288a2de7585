"""The package's layers cannot rot: no import from a lower layer to a higher one, no cycle.

Groups, lowest first: the foundation modules (env, cpu_share, progress, checks, metrics,
schedules, losses, train, decoding, plot, checkpoints) -> layers -> models -> tasks -> exercises. ``data``
sits beside ``models``: tasks join the two, so models never import data and data never imports
models or layers. Developer tooling is not in the package (``tools/``, ``benchmarks/``).
"""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lib" / "attnbook"

# What each group may import from the package (besides itself).
ALLOWED = {
    "foundation": {"foundation"},
    "layers": {"foundation", "layers"},
    "data": {"foundation", "data"},
    "models": {"foundation", "layers", "models"},
    "tasks": {"foundation", "layers", "models", "data", "tasks"},
    "exercises": {"foundation", "layers", "models", "data", "tasks", "exercises"},
}


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


def test_the_package_has_the_layered_folders():
    for folder in ("layers", "models", "tasks", "data", "exercises"):
        assert (PACKAGE / folder / "__init__.py").is_file(), f"missing package attnbook.{folder}"


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
