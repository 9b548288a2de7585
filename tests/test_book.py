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
def test_set_up_shares_the_cpu_before_any_work(path):
    """Two chapters at once must not slow each other many times over (attnbook.cpu_share)."""
    code = [c for c in _notebook(path)["cells"] if c["cell_type"] == "code"]
    set_up = _source(code[1])
    assert "from attnbook.cpu_share import share_cpu" in set_up, "import share_cpu in the set-up cell"
    calls = [line for line in set_up.splitlines() if line.startswith("share_cpu()")]
    assert len(calls) == 1, "call share_cpu() once, at the top level of the set-up cell"
    assert set_up.index(calls[0]) < set_up.index("device = get_device()"), \
        "call share_cpu() before the chapter's first line of work"


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


def test_the_bibliography_parses():
    """A merge that drops one closing brace breaks the whole book build; catch it here."""
    from pybtex.database import parse_file

    entries = parse_file(str(ROOT / "references.bib")).entries
    keys = re.findall(r"@\w+\{([^,]+),", (ROOT / "references.bib").read_text())
    assert sorted(entries) == sorted(keys), "every @entry must parse as its own entry"


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


# --- exercises: hidden solutions that never rebind the learner's function ---------------------
SOLUTION_TITLE = "# @title Solution"


def _bound_names(code):
    """Names a code cell binds at top level or anywhere: defs, classes, assignments, imports, loop targets."""
    import ast
    names = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _checker_arguments(code):
    """Names passed directly to a ``check_*`` call."""
    import ast
    return {arg.id for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name) and node.func.id.startswith("check_")
            for arg in node.args if isinstance(arg, ast.Name)}


def exercise_problems(cells):
    """Every way the exercises of a notebook break the house rules (empty: none)."""
    problems, label, solution, stubs, sol_code, minutes = [], None, None, [], [], []
    for n, cell in enumerate(cells):
        text = _source(cell)
        if cell["cell_type"] == "markdown":
            found = re.search(r"\{exercise\}(.*)\n:label: (\S+)", text)
            if found:
                label, stubs = found.group(2), []
                time = re.search(r"\(about (\d+) min\)\s*$", found.group(1))
                if not time:
                    problems.append(f"{label}: the title must end with its expected time, '(about N min)'")
                else:
                    minutes.append((label, int(time.group(1))))
            if re.search(r"\{solution-start\}", text):
                solution, sol_code = re.search(r"\{solution-start\} (\S+)", text).group(1), []
            if "{solution-end}" in text and solution is not None:
                problems += _solution_problems(solution, stubs, sol_code)
                solution = None
            continue
        if solution is None:
            if SOLUTION_TITLE in text or re.search(r"^def reference_", text, re.M):
                problems.append(f"cell {n}: a solution outside a {{solution-start}}/{{solution-end}} dropdown")
            elif label is not None:
                stubs.append(cell)
            continue
        meta = cell.get("metadata", {})
        if meta.get("jupyter", {}).get("source_hidden") is not True:
            problems.append(f"{solution}: solution cell not hidden in JupyterLab (metadata jupyter.source_hidden)")
        if meta.get("cellView") != "form":
            problems.append(f"{solution}: solution cell not a Colab form (metadata cellView: form)")
        if not text.startswith(SOLUTION_TITLE):
            problems.append(f"{solution}: solution cell must start with '{SOLUTION_TITLE} ...' (Colab hides it)")
        sol_code.append(cell)
    order = [m for _, m in minutes]
    if order != sorted(order):
        problems.append(f"exercises are not ordered from quick to long: {minutes}")
    return problems


def _solution_problems(label, stubs, solution_cells):
    problems = []
    learner = set()
    for stub in stubs:
        text = _source(stub)
        if "raise NotImplementedError" not in text:
            continue
        learner |= {name for name in _bound_names(text) if not name.startswith("_")}
        printed = "".join("".join(o.get("text", "")) for o in stub.get("outputs", []))
        if "not done yet" not in printed:
            problems.append(f"{label}: the stub cell must print '✗ ...: not done yet' on a fresh run")
    for cell in solution_cells:
        text = _source(cell)
        rebound = learner & _bound_names(text)
        if rebound:
            problems.append(f"{label}: the solution rebinds the learner's {sorted(rebound)}; define reference_<name>")
        for name in learner:
            if f"reference_{name}" not in _checker_arguments(text):
                problems.append(f"{label}: the solution must define reference_{name} and pass it to its checker")
    if learner and not solution_cells:
        problems.append(f"{label}: no solution code cell")
    return problems


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_exercises_hide_their_solutions_and_leave_the_learner_alone(path):
    assert exercise_problems(_notebook(path)["cells"]) == []


@pytest.mark.parametrize("path", [p for p in CHAPTERS if (ROOT / "lib" / "attnbook" / "exercises" /
                                                            f"ch{p.name[:2]}.py").is_file()], ids=lambda p: p.name)
def test_command_line_checks_the_functions_the_notebook_asks_for(path):
    """``python -m attnbook.exercises chNN answers.py`` looks up the same names as the stubs."""
    import importlib
    exercises = importlib.import_module(f"attnbook.exercises.ch{path.name[:2]}").EXERCISES
    stubs = {m for c in _notebook(path)["cells"] if c["cell_type"] == "code" and "raise NotImplementedError" in _source(c)
             for m in re.findall(r"^(?:def|class) (\w+)\(", _source(c), re.M)}
    # a predict-then-measure cell gives its measurement function and asks for prediction_<name>
    stubs |= {m for c in _notebook(path)["cells"] if c["cell_type"] == "code"
              for m in re.findall(r"^def (\w+)\(", _source(c), re.M)
              if re.search(rf"^prediction_{m} = None", _source(c), re.M)}
    # a prediction-only checker (no function to write) asks for prediction_<name> alone
    stubs |= {m for c in _notebook(path)["cells"] if c["cell_type"] == "code"
              for m in re.findall(r"^prediction_(\w+) = None", _source(c), re.M)
              if getattr(exercises.get(m), "prediction_only", False)}
    assert stubs == set(exercises)


def _md(text):
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def _code(text, metadata=None, printed=""):
    return {"cell_type": "code", "metadata": metadata or {}, "source": text,
            "outputs": [{"output_type": "stream", "name": "stdout", "text": printed}] if printed else []}


HIDDEN = {"jupyter": {"source_hidden": True}, "cellView": "form"}


def _exercise(solution_code, metadata=HIDDEN, stub_printed="✗ f: not done yet: ..."):
    return [
        _md("````{exercise} F (about 5 min)\n:label: ex-f\n\nWrite f.\n````"),
        _code("def f(x):\n    raise NotImplementedError\n\ncheck_f(f)", printed=stub_printed),
        _md("````{solution-start} ex-f\n:class: dropdown\n````"),
        _code(solution_code, metadata),
        _md("````{solution-end}\n````"),
    ]


GOOD_SOLUTION = "# @title Solution (double-click to show)\ndef reference_f(x):\n    return x\n\ncheck_f(reference_f)"


@pytest.mark.parametrize(("cells", "problem"), [
    (_exercise(GOOD_SOLUTION, {"cellView": "form"}), "not hidden in JupyterLab"),
    (_exercise(GOOD_SOLUTION, {"jupyter": {"source_hidden": True}}), "not a Colab form"),
    (_exercise(GOOD_SOLUTION.replace("# @title Solution (double-click to show)\n", "")), "must start with"),
    (_exercise("# @title Solution\ndef f(x):\n    return x\n\ncheck_f(f)"), "rebinds the learner's ['f']"),
    (_exercise(GOOD_SOLUTION + "\nf = reference_f"), "rebinds the learner's ['f']"),
    (_exercise("# @title Solution\ndef reference_f(x):\n    return x"), "pass it to its checker"),
    (_exercise(GOOD_SOLUTION, stub_printed=""), "not done yet"),
    (_exercise(GOOD_SOLUTION)[:2] + [_code(GOOD_SOLUTION, HIDDEN)], "outside a {solution-start}"),
    ([_md("````{exercise} F\n:label: ex-f\n````")], "expected time"),
    (_exercise(GOOD_SOLUTION) + [_md("````{exercise} G (about 2 min)\n:label: ex-g\n````")], "not ordered"),
])
def test_exercise_rules_catch_each_breach(cells, problem):
    assert exercise_problems(_exercise(GOOD_SOLUTION)) == []
    found = exercise_problems(cells)
    assert any(problem in p for p in found), found


def backticked_exercise_titles(cells):
    """Exercise titles with inline code: sphinx-exercise then loses the exercise's label, and its
    solution's reference fails the -W build ("undefined label"), as it did for Chapter 3's
    "Self-attention as an `nn.Module`"."""
    titles = [line for cell in cells if cell["cell_type"] == "markdown"
              for line in _source(cell).splitlines() if re.match(r"`{3,}\{exercise\}", line)]
    return [title for title in titles if "`" in title.split("}", 1)[1]]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_exercise_titles_have_no_inline_code(path):
    assert backticked_exercise_titles(_notebook(path)["cells"]) == []


def test_backticked_title_rule_catches_one():
    cells = [{"cell_type": "markdown", "source": "````{exercise} Write an `nn.Module` (10 min)\n:label: x\n````"},
             {"cell_type": "markdown", "source": "````{exercise} Write a module (10 min)\n:label: y\n````"}]
    assert backticked_exercise_titles(cells) == ["````{exercise} Write an `nn.Module` (10 min)"]
