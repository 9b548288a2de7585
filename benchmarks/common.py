"""What every script in ``benchmarks/`` shares: where results go, timing, running jobs, arguments.

- **Results** have one home, ``lib/attnbook/results/`` (``RESULTS``): a script writes its JSON
  there with ``write_result`` (which records the command that reproduces it), the chapters read it
  with ``attnbook.results.load_result``, and the log of the run that made it is kept beside it.
- **Timing**: ``timed`` (``attnbook.timing.timed``: one call, waiting for CUDA or MPS before and
  after) and ``interleaved`` (two rivals timed in alternating order, medians and the median of the
  per-pair ratios).
- **Jobs**: ``run_jobs`` runs one-thread training runs ``--jobs`` at a time, each in its own
  process; ``log_rows`` reads back the JSON lines an earlier run printed, for ``--resume``.
- **Arguments**: ``parser`` and ``experiment_parser`` (``--smoke``, ``--out``, ``--jobs``,
  ``--resume``), ``out_path`` (where a run writes), ``machine`` (for the results file).

Scripts import it as ``import common`` (Python puts a script's folder first on ``sys.path``).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import shlex
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Callable, Iterable, TypeVar

import torch

from attnbook.timing import timed  # noqa: F401 (the scripts call common.timed)

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "lib" / "attnbook" / "results"
R = TypeVar("R")


# --- results ------------------------------------------------------------------------------------

def command_line() -> str:
    """The command this process was started with, as run from the repository root."""
    script = Path(sys.argv[0]).resolve()
    shown = script.relative_to(ROOT) if script.is_relative_to(ROOT) else script
    return shlex.join(["python", str(shown), *sys.argv[1:]])


def write_result(path: Path, result: dict, indent: int = 1) -> None:
    """Write ``result`` as JSON to ``path``; a result that names no command gets the one that ran."""
    if "command" not in result:
        items = list(result.items())
        at = 1 if items and items[0][0] == "description" else 0
        result = dict(items[:at] + [("command", command_line())] + items[at:])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=indent) + "\n")
    print(f"wrote {path}")


def write_page_model(out: Path, model: torch.nn.Module, head: dict, history, test: list,
                     result) -> None:
    """Save a chapter's stored G2P model as ``out`` with ``.safetensors`` and write its results.

    ``head`` holds the fields that differ between scripts (description, command, machine, recipe,
    ...); the weights' name and SHA-256, the training time, the test scores and the loss curve
    follow it, the same for every page model.
    """
    from safetensors.torch import save_file

    from attnbook.checkpoints import sha256_of

    weights = Path(out).with_suffix(".safetensors")
    weights.parent.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    save_file(tensors, str(weights))  # clone: tied weights may not share storage in the file
    write_result(out, {
        **head,
        "weights": weights.name,
        "sha256": sha256_of(weights),
        "train_seconds": round(history.seconds, 1),
        "clipped_steps": history.clipped,
        "test_words": len(test),
        "test_wer": result.wer,
        "test_per": result.per,
        "steps": history.steps,
        "losses": history.losses,
    })


def machine(jobs: int | None = None) -> str:
    """The machine, for a results file: one run at a time (``jobs`` None) or ``jobs`` one-thread runs."""
    if jobs is None:
        return f"{platform.machine()}, torch {torch.__version__}, 1 thread"
    return (f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
            f"1 thread per run, {jobs} runs at a time")


# --- timing -------------------------------------------------------------------------------------

def interleaved(first: Callable[[], object], second: Callable[[], object], repeats: int,
                device: torch.device) -> tuple[float, float, float]:
    """Median ms of ``first`` and of ``second``, and the median of their per-pair ratios.

    The two alternate who goes first, so a change in the machine's load hits both alike."""
    t_first, t_second, ratios = [], [], []
    for r in range(repeats):
        order = (True, False) if r % 2 == 0 else (False, True)
        times = {is_first: timed(first if is_first else second, device)[0] for is_first in order}
        t_first.append(times[True])
        t_second.append(times[False])
        ratios.append(times[True] / times[False])
    return 1e3 * statistics.median(t_first), 1e3 * statistics.median(t_second), statistics.median(ratios)


def verdict(ratio: float, target: float) -> str:
    """``within the target of 1.20x`` or ``ABOVE the target of 1.20x``."""
    return f"{'within' if ratio <= target else 'ABOVE'} the target of {target:.2f}x"


# --- jobs ---------------------------------------------------------------------------------------

def run_jobs(fn: Callable[..., R], jobs_args: list[tuple], jobs: int) -> list[R]:
    """``fn(*args)`` for every tuple, in order: in this process if ``jobs`` is 1, else ``jobs``
    processes at a time (each run sets its own thread count)."""
    if jobs == 1:
        return [fn(*args) for args in jobs_args]
    # new processes, not forks: a fork after autograd has run in this process fails on a machine
    # with a GPU ("Unable to handle autograd's threading in combination with fork")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(fn, *args) for args in jobs_args]
        return [future.result() for future in futures]


def run_missing(run_one: Callable[..., dict], kinds: tuple, seeds: tuple, smoke: bool, jobs: int,
                resume: Iterable[Path]) -> list[dict]:
    """``run_one(kind, seed, smoke)`` for every (kind, seed) whose row (keys ``model`` and ``seed``)
    is not in the ``--resume`` logs; every row, kind by kind, then seed by seed."""
    done = {(r["model"], r["seed"]): r for r in log_rows(resume) if "model" in r}
    todo = [(k, s) for s in seeds for k in kinds if (k, s) not in done]
    for row in run_jobs(run_one, [(k, s, smoke) for k, s in todo], jobs):
        done[(row["model"], row["seed"])] = row
    return [done[(k, s)] for k in kinds for s in seeds]


def run_and_write(fn: Callable[..., dict], jobs_args: list[tuple], jobs: int, out: Path,
                  description: str) -> None:
    """``run_jobs``, then write ``{"description", "machine", "runs"}`` to ``out``: the whole
    results file of a sweep whose rows are the runs themselves."""
    rows = run_jobs(fn, jobs_args, jobs)
    write_result(out, {"description": description,
                       "machine": machine(jobs if jobs > 1 else None), "runs": rows})


def grid_main(doc: str, run: Callable[..., dict], grid: Callable[[bool], list[tuple]], name: str,
              argv: list[str] | None = None) -> int:
    """The whole ``main`` of a sweep script: parse the experiment options, run ``run(*args)`` for
    every tuple of ``grid(smoke)``, and write the rows to ``name`` (``out_path``'s rule)."""
    p = experiment_parser(doc)
    args = p.parse_args(argv)
    check_jobs(p, args)
    out = out_path(args, name)
    rows = run_jobs(run, grid(args.smoke), args.jobs)
    if out is not None:
        write_result(out, {"description": doc.splitlines()[0],
                           "machine": machine(args.jobs if args.jobs > 1 else None), "runs": rows})
    return 0


def log_rows(paths: Iterable[Path]) -> list[dict]:
    """The JSON objects printed one per line in earlier runs' logs (other lines are skipped)."""
    return [json.loads(line) for path in paths for line in path.read_text().splitlines() if line.startswith("{")]


# --- arguments ----------------------------------------------------------------------------------

def parser(doc: str) -> argparse.ArgumentParser:
    """A parser described by the first line of the script's docstring."""
    return argparse.ArgumentParser(description=doc.splitlines()[0])


def experiment_parser(doc: str, conditions: bool = False) -> argparse.ArgumentParser:
    """``parser`` with the training experiments' options; ``conditions`` adds ``--conditions``."""
    p = parser(doc)
    p.add_argument("--smoke", action="store_true", help="tiny models, a few steps: seconds")
    p.add_argument("--out", type=Path, default=None,
                   help=f"where to write the JSON (default {RESULTS.relative_to(ROOT)}/; with --smoke, nowhere)")
    p.add_argument("--jobs", type=int, default=1, help="runs in parallel, one thread each (default 1)")
    p.add_argument("--resume", type=Path, nargs="*", default=[],
                   help="logs of earlier runs (their printed JSON lines): runs found there are not repeated")
    if conditions:
        p.add_argument("--conditions", default="", help="how the machine was shared, for the results file")
    return p


def check_jobs(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Stop with a usage error unless ``--jobs`` is at least 1."""
    if args.jobs < 1:
        p.error(f"--jobs must be >= 1, got {args.jobs}")


def out_path(args: argparse.Namespace, name: str) -> Path | None:
    """Where a run writes: ``--out`` if given, else nowhere for ``--smoke``, else ``RESULTS / name``."""
    if args.out is not None:
        return args.out
    return None if args.smoke else RESULTS / name


# --- the reversal task (Chapter 5's page task and its long-input variant) --------------------
# Token layout shared by the reversal scripts: 0 pad, 1 <bos>, 2 <eos>, symbols from 3.
REVERSAL_PAD, REVERSAL_BOS, REVERSAL_EOS, REVERSAL_FIRST = 0, 1, 2, 3


def reversal_strings(n: int, min_len: int, max_len: int, vocab: int,
                     generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random strings of ``min_len``..``max_len`` symbols: padded ids ``(n, max_len)``
    and their lengths ``(n,)``."""
    lengths = torch.randint(min_len, max_len + 1, (n,), generator=generator)
    src = torch.randint(REVERSAL_FIRST, vocab, (n, max_len), generator=generator)
    src[torch.arange(max_len)[None, :] >= lengths[:, None]] = REVERSAL_PAD
    return src, lengths


def reversal_targets(src: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Decoder input ``<bos> y`` and output ``y <eos>`` for ``y`` the reversed source, both
    ``(n, S + 1)``, padded."""
    n, max_len = src.shape
    rev = torch.full((n, max_len + 1), REVERSAL_PAD, dtype=torch.long)
    for i, length in enumerate(lengths.tolist()):
        rev[i, :length] = src[i, :length].flip(0)
        rev[i, length] = REVERSAL_EOS
    bos = torch.full((n, 1), REVERSAL_BOS, dtype=torch.long)
    tgt_in = torch.cat([bos, rev[:, :-1]], dim=1)
    tgt_in[tgt_in == REVERSAL_EOS] = REVERSAL_PAD  # <eos> is never an input
    return tgt_in, rev
