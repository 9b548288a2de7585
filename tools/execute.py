"""Re-execute chapter notebooks in place, refreshing their stored outputs.

Usage, from the repository root: ``python -m tools.execute [--no-write] [NOTEBOOK ...]`` (default:
every chapter notebook). Prints each notebook's wall-clock time; ``--no-write`` only runs and times them.
Cell timing metadata is not recorded, so a re-run changes only what the notebook shows.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def execute(path: Path, timeout: int = 600, write: bool = True) -> float:
    """Execute one notebook in its own folder, write it back (unless not ``write``), return seconds."""
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook, timeout=timeout, kernel_name="python3", record_timing=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    if write:
        nbformat.write(notebook, path)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.execute", description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--no-write", action="store_true", help="run only; keep the stored outputs")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(Path("chapters").glob("[0-9][0-9]_*.ipynb"))
    if not paths:
        print("no notebooks found (run from the repository root or name them)", file=sys.stderr)
        return 2
    for path in paths:
        if not path.is_file():
            print(f"no such notebook: {path}", file=sys.stderr)
            return 2
        print(f"{path}: {execute(path, write=not args.no_write):.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
