"""Time a chapter alone and beside another: how much does running two at once cost?

Usage::

    python benchmarks/chapters_side_by_side.py 04 --beside 04
    python benchmarks/chapters_side_by_side.py 05 --beside 02
    python benchmarks/chapters_side_by_side.py 03 --beside 03 --no-share   # PyTorch's default
    python benchmarks/chapters_side_by_side.py 04 --beside busy   # beside a one-core busy loop

Runs each notebook alone, then both at the same time, then each alone again, every run as
``python -m tools.execute --no-write`` (its own kernel; stored outputs untouched),
and prints wall times (kernel start included) and each side-by-side time over the mean of
its two alone times (before and after, so a drift in the machine's speed shows). ``--beside busy`` puts a
plain Python busy loop (one core, no PyTorch) beside the chapter instead: other work on a laptop. ``--no-share`` sets
``ATTNBOOK_SHARE_CPU=0``, so the chapters keep PyTorch's default thread count throughout.
Run it on an otherwise idle machine: anything else running is a third program. It writes no file;
the committed measurements are its output, kept in ``lib/attnbook/results/chapters_side_by_side.log``.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import common

CHAPTERS = common.ROOT / "chapters"


def chapter_path(number: str) -> Path:
    matches = sorted(CHAPTERS.glob(f"{int(number):02d}_*.ipynb"))
    if len(matches) != 1:
        raise SystemExit(f"expected one notebook chapters/{int(number):02d}_*.ipynb; found {len(matches)}")
    return matches[0]


def start(path: Path, share: bool) -> subprocess.Popen:
    env = dict(os.environ, ATTNBOOK_SHARE_CPU="1" if share else "0")
    command = [sys.executable, "-m", "tools.execute", "--no-write", str(path)]  # from the repository root
    log = tempfile.TemporaryFile()  # not a pipe: a full pipe would stall the run
    # its own session, so that stopping it stops its children (the kernel notices its parent
    # is gone and exits about a second later)
    run = subprocess.Popen(command, env=env, cwd=common.ROOT, stdout=subprocess.DEVNULL, stderr=log,
                           start_new_session=True)
    run.log = log
    return run


def stop(runs: list[subprocess.Popen]) -> None:
    """Stop every run still going, then give the orphaned kernels time to exit."""
    going = [run for run in runs if run.poll() is None]
    for run in going:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    if going:
        time.sleep(3)


def wait_all(runs: list[subprocess.Popen], limit_s: float) -> list[float | None]:
    """Wall seconds each run took, None for a run stopped at ``limit_s``; fails on an error."""
    began, seconds = time.perf_counter(), [None] * len(runs)
    try:
        while any(s is None for s in seconds) and time.perf_counter() - began < limit_s:
            for i, run in enumerate(runs):
                if seconds[i] is None and run.poll() is not None:
                    if run.returncode != 0:
                        run.log.seek(0)
                        raise SystemExit(f"a notebook failed:\n{run.log.read().decode()[-2000:]}")
                    seconds[i] = time.perf_counter() - began
            time.sleep(0.1)
    finally:  # also on an error or Ctrl-C: no run may outlive the benchmark
        stop(runs)
    return seconds


def time_alone(paths: list[Path], share: bool, limit_s: float, when: str) -> dict[Path, float]:
    alone = {}
    for path in dict.fromkeys(paths):  # a chapter beside itself runs alone once
        (seconds,) = wait_all([start(path, share)], limit_s)
        if seconds is None:
            raise SystemExit(f"{path.name} alone took over {limit_s:.0f} s")
        alone[path] = seconds
        print(f"  {path.name} alone ({when}): {seconds:.1f} s")
    return alone


def show(label: str, seconds: float | None, alone: float, limit_s: float) -> None:
    if seconds is None:
        print(f"  {label}: over {limit_s:.0f} s (stopped), more than {limit_s / alone:.1f}x alone")
    else:
        print(f"  {label}: {seconds:.1f} s, {seconds / alone:.2f}x alone")


def side_by_side(paths: list[Path], share: bool, limit_s: float) -> None:
    """Both chapters at once, or (one path) the chapter beside a one-core busy loop."""
    before = time_alone(paths, share, limit_s, "before")
    spinner = None
    if len(paths) == 1:
        spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        together = wait_all([start(path, share) for path in paths], limit_s)
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    after = time_alone(paths, share, limit_s, "after")
    print("beside a one-core busy loop:" if spinner is not None else "side by side:")
    for path, seconds in zip(paths, together):
        show(path.name, seconds, (before[path] + after[path]) / 2, limit_s)


def main() -> None:
    parser = common.parser(__doc__)
    parser.add_argument("chapter", help="chapter number, e.g. 04")
    parser.add_argument("--beside", required=True,
                        help="the chapter run at the same time, or 'busy' for a busy loop")
    parser.add_argument("--no-share", action="store_true", help="ATTNBOOK_SHARE_CPU=0")
    parser.add_argument("--limit", type=float, default=600, help="stop a run after this many s")
    args = parser.parse_args()
    share = not args.no_share
    print(f"CPU sharing {'on' if share else 'off'}; {os.cpu_count()} CPUs")
    paths = [chapter_path(args.chapter)]
    if args.beside != "busy":
        paths.append(chapter_path(args.beside))
    side_by_side(paths, share, args.limit)


if __name__ == "__main__":
    main()
