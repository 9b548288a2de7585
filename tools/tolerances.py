"""How much room each comparison in a chapter has: run notebooks and record, for every
``torch.testing.assert_close`` and ``torch.allclose`` call (``attnbook.checks.report_close`` calls
the first), the
largest difference and the headroom (how many times the difference could grow before the check
fails: min over elements of (atol + rtol |expected|) / |actual - expected|).

Usage, from the repository root: ``python -m tools.tolerances [--below 3] [--json F] [NOTEBOOK ...]``
(default: every chapter). The notebooks are not written back. Run it with ``ATTNBOOK_DEVICE=cuda``
to see the headroom on a GPU. The book's rule: a checked comparison keeps at least 3x headroom on
every device, or its cell says why not.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

# Runs first in the kernel (not saved): wraps the two comparison functions so that each call
# appends (cell source, function, largest difference, headroom) to a JSON-lines file.
RECORDER = r'''
import json as _json, math as _math, os as _os, torch as _torch
_RECORD = _os.environ["ATTNBOOK_TOLERANCE_LOG"]
_CELL = {"source": None}  # the source of the cell running now (IPython's pre_run_cell event)
get_ipython().events.register("pre_run_cell", lambda info: _CELL.update(source=info.raw_cell))


def _pairs(actual, expected):
    if isinstance(actual, (tuple, list)):
        for a, e in zip(actual, expected):
            yield from _pairs(a, e)
    else:
        yield _torch.as_tensor(actual), _torch.as_tensor(expected)


def _record(function, actual, expected, atol, rtol):
    """Largest difference; headroom = min (atol + rtol |e|) / |a - e| (how far from failing);
    apart = max |a - e| / (atol + rtol |e|) (how far from passing, for a check meant to fail)."""
    worst, room, apart = 0.0, _math.inf, 0.0
    if atol is None or rtol is None:  # assert_close's defaults for float32
        atol, rtol = 1e-5, 1.3e-6
    for a, e in _pairs(actual, expected):
        if a.is_complex() or not (a.is_floating_point() or e.is_floating_point()) or not a.numel():
            continue
        a, e = a.detach().cpu().double(), e.detach().cpu().double()
        diff, tol = (a - e).abs(), atol + rtol * e.abs()
        worst, apart = max(worst, diff.max().item()), max(apart, (diff / tol).max().item())
        nonzero = diff > 0
        if nonzero.any():
            room = min(room, (tol[nonzero] / diff[nonzero]).min().item())
    with open(_RECORD, "a") as f:
        f.write(_json.dumps(dict(source=_CELL["source"], function=function,
                                 worst=worst, headroom=room, apart=apart, close=apart <= 1,
                                 atol=atol, rtol=rtol)) + "\n")


def _wrap(function, name, atol_default, rtol_default):
    def wrapped(actual, expected, *args, **kwargs):
        atol = kwargs.get("atol", args[1] if len(args) > 1 else atol_default)
        rtol = kwargs.get("rtol", args[0] if args else rtol_default)
        _record(name, actual, expected, atol, rtol)
        return function(actual, expected, *args, **kwargs)
    return wrapped


_torch.testing.assert_close = _wrap(_torch.testing.assert_close, "assert_close", None, None)
_torch.allclose = _wrap(_torch.allclose, "allclose", 1e-8, 1e-5)
'''


def audit(path: Path, timeout: int = 900) -> list[dict]:
    """Run ``path`` with the recorder; one row per comparison, with its code cell's index."""
    notebook = nbformat.read(path, as_version=4)
    index: dict[str, int] = {}  # a cell's source -> its index (the first, if two are the same)
    for i, cell in enumerate(notebook.cells):
        index.setdefault(cell.source, i)
    notebook.cells.insert(0, nbformat.v4.new_code_cell(RECORDER))
    with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as log:
        os.environ["ATTNBOOK_TOLERANCE_LOG"] = log.name
    client = NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    rows = [json.loads(line) for line in Path(log.name).read_text().splitlines()]
    Path(log.name).unlink()
    for row in rows:
        row["cell"] = index[row.pop("source")]
        row["notebook"] = path.name
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.tolerances", description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--below", type=float, default=3.0, help="list comparisons with less headroom")
    parser.add_argument("--json", type=Path, help="write every row here")
    parser.add_argument("--show", type=int, default=10, help="how many of the tightest to list")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(Path("chapters").glob("[0-9][0-9]_*.ipynb"))
    rows = [row for path in paths for row in audit(path)]
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    tight = [r for r in rows if r["close"] and r["headroom"] < args.below]
    blurred = [r for r in rows if not r["close"] and r["apart"] < args.below]  # meant to differ
    device = os.environ.get("ATTNBOOK_DEVICE", "default")
    print(f"{len(rows)} comparisons in {len(paths)} notebooks (device: {device}); "
          f"{len(tight)} pass with headroom below {args.below:g}x; {len(blurred)} of the "
          f"{sum(not r['close'] for r in rows)} meant to differ are within {args.below:g}x of passing")
    for r in sorted((r for r in rows if r["close"]), key=lambda r: r["headroom"])[:args.show]:
        room = "inf" if math.isinf(r["headroom"]) else f"{r['headroom']:.1f}x"
        print(f"  {r['notebook']} cell {r['cell']:3d} {r['function']:12s} max |diff| {r['worst']:.1e}"
              f" (atol {r['atol']:.0e}, rtol {r['rtol']:.0e}): headroom {room}")
    for r in blurred:
        print(f"  {r['notebook']} cell {r['cell']:3d} {r['function']:12s} meant to differ, but only "
              f"{r['apart']:.1f}x the tolerance")
    return 1 if tight or blurred else 0


if __name__ == "__main__":
    sys.exit(main())
