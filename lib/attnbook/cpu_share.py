"""Share the CPU: fewer PyTorch threads while other programs keep the cores busy.

On a CPU, PyTorch splits an operation over one OpenMP thread per core, and those threads spin
while they wait for each other. That is fastest when a notebook has the machine to itself and
very slow when two such programs share the cores, because each one's threads keep waiting for
threads the other program has pushed off a core. On the book's 2-core machine Chapter 3 took
9.6 s alone and 172 s beside a second copy of itself.

``share_cpu()`` measures how much CPU the *other* programs used since its last look (every
quarter second while models run, and before each notebook cell) and sets PyTorch's thread
count to the share of the cores they leave free: at least one, at most the count PyTorch
started with. Alone, nothing changes. It reads Linux's ``/proc/stat``; elsewhere it does
nothing. In a container capped by a CPU quota (not by a CPU set) ``/proc/stat`` shows the whole
host, so other tenants count as other programs. Only the thread that called ``share_cpu()``
(the notebook's main thread) adjusts the count: OpenMP keeps one per calling thread.
``ATTNBOOK_SHARE_CPU=0`` turns it off.
"""
from __future__ import annotations

import math
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

PROC_STAT = Path("/proc/stat")
# /proc/stat columns counted as busy: user, nice, system, irq, softirq, and steal (time the
# hypervisor gave these CPUs to someone else); not idle or iowait
BUSY_COLUMNS = (0, 1, 2, 5, 6, 7)


@dataclass(frozen=True)
class CpuSample:
    """A snapshot of CPU use; differences of two snapshots give use over a window."""

    wall_s: float  # time.monotonic()
    busy_s: float  # CPU seconds every program has spent on the watched cores
    own_s: float  # CPU seconds this process has spent (all its threads)


def busy_seconds(stat_text: str, cpus: frozenset[int], ticks_per_s: float) -> float:
    """CPU seconds spent busy on ``cpus``, read from the text of ``/proc/stat``."""
    total, seen = 0, set()
    for line in stat_text.splitlines():
        name, _, rest = line.partition(" ")
        if not (name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus):
            continue
        columns = [int(value) for value in rest.split()]
        total += sum(columns[i] for i in BUSY_COLUMNS)
        seen.add(int(name[3:]))
    if seen != set(cpus):
        raise ValueError(f"/proc/stat lists cpus {sorted(seen)}; expected {sorted(cpus)}")
    return total / ticks_per_s


def read_sample(cpus: frozenset[int]) -> CpuSample:
    """Read this machine's CPU use now (Linux only)."""
    ticks_per_s = os.sysconf("SC_CLK_TCK")
    busy = busy_seconds(PROC_STAT.read_text(), cpus, ticks_per_s)
    return CpuSample(wall_s=time.monotonic(), busy_s=busy, own_s=time.process_time())


def others_busy_cores(before: CpuSample, after: CpuSample) -> float:
    """How many cores other programs kept busy, on average, between two samples."""
    wall = after.wall_s - before.wall_s
    if wall <= 0:
        raise ValueError(f"samples must be taken in order; got a window of {wall} s")
    others = (after.busy_s - before.busy_s) - (after.own_s - before.own_s)
    return max(0.0, others / wall)


def threads_for(others_cores: float, n_cpus: int, max_threads: int) -> int:
    """Threads to use: ``max_threads`` times the share of the CPUs left free, rounded, >= 1.

    The share, not the count: PyTorch often starts with one thread per physical core while
    ``n_cpus`` counts hyperthreads.
    """
    if others_cores < 0 or n_cpus < 1 or max_threads < 1:
        raise ValueError(
            f"need others_cores >= 0, n_cpus >= 1, max_threads >= 1; "
            f"got {others_cores}, {n_cpus}, {max_threads}"
        )
    free_share = max(0.0, n_cpus - others_cores) / n_cpus
    return max(1, min(max_threads, math.floor(max_threads * free_share + 0.5)))


class CpuSharer:
    """Sets PyTorch's CPU thread count from the load other programs put on the cores.

    ``check()`` does nothing until ``interval_s`` has passed since the last look; then it
    samples, and lowers the thread count at once, or raises it once two windows in a row
    agree (so a short pause in another program does not bring the contention back).
    """

    def __init__(
        self,
        *,
        max_threads: int,
        cpus: frozenset[int],
        interval_s: float = 0.25,
        sample: Callable[[frozenset[int]], CpuSample] = read_sample,
        set_threads: Callable[[int], None] = torch.set_num_threads,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_threads < 1 or not cpus or interval_s <= 0:
            raise ValueError(
                f"need max_threads >= 1, some cpus, interval_s > 0; "
                f"got {max_threads}, {sorted(cpus)}, {interval_s}"
            )
        self.max_threads, self.cpus, self.interval_s = max_threads, cpus, interval_s
        self._sample, self._set_threads, self._clock = sample, set_threads, clock
        self.threads = max_threads
        self.seconds_at: dict[int, float] = {}  # wall seconds spent at each thread count
        self._last = sample(cpus)
        self._wants_more = False

    def check(self) -> int:
        """Look at the load if it is time to; return the thread count now in use."""
        if self._clock() - self._last.wall_s < self.interval_s:
            return self.threads
        now = self._sample(self.cpus)
        window = now.wall_s - self._last.wall_s
        self.seconds_at[self.threads] = self.seconds_at.get(self.threads, 0.0) + window
        target = threads_for(others_busy_cores(self._last, now), len(self.cpus), self.max_threads)
        self._last = now
        if target > self.threads and not self._wants_more:
            self._wants_more = True
            return self.threads
        self._wants_more = False
        if target != self.threads:
            self._set_threads(target)
            self.threads = target
        return self.threads

    def describe(self) -> str:
        """One line: the thread counts used so far and for how long."""
        spent = ", ".join(f"{n} for {s:.1f} s" for n, s in sorted(self.seconds_at.items()))
        return f"CPU sharing: up to {self.max_threads} threads; used {spent or 'none yet'}"


_active: dict[str, object] = {}  # the one sharer of this process, its thread and its hooks
# torch.compile must not trace the check (a clock and a file read); older torch lacks the flag
_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)


def share_cpu(interval_s: float = 0.25) -> CpuSharer | None:
    """Start sharing the CPU for this process (once; later calls return the same sharer).

    Checks run before every ``nn.Module`` forward (at most one sample per ``interval_s``)
    and, in a notebook, before every cell. Returns None where it cannot run: not Linux,
    ``ATTNBOOK_SHARE_CPU=0``, or a ``/proc/stat`` it cannot read (with a warning). While it runs it owns ``torch.set_num_threads``: to choose a
    thread count yourself, call ``stop_sharing()`` first.
    """
    if "sharer" in _active:
        return _active["sharer"]
    switch = os.environ.get("ATTNBOOK_SHARE_CPU", "1")
    if switch not in {"0", "1"}:
        raise ValueError(f"ATTNBOOK_SHARE_CPU must be '0' (off) or '1' (on); got {switch!r}")
    if switch == "0" or not PROC_STAT.exists():
        return None
    try:
        sharer = CpuSharer(max_threads=torch.get_num_threads(),
                           cpus=frozenset(os.sched_getaffinity(0)), interval_s=interval_s)
    except (OSError, ValueError) as err:  # a /proc/stat that does not match this process's CPUs
        warnings.warn(f"CPU sharing is off, PyTorch keeps its threads: {err}")
        return None
    _active.update(sharer=sharer, thread=threading.get_ident())
    _active["hook"] = torch.nn.modules.module.register_module_forward_pre_hook(
        lambda module, args: _check(sharer)
    )
    shell = _ipython_shell()
    if shell is not None:
        _active.update(shell=shell, cell_hook=lambda *info: _check(sharer))
        shell.events.register("pre_run_cell", _active["cell_hook"])
    return sharer


def active_sharer() -> CpuSharer | None:
    """The sharer ``share_cpu()`` started in this process, or None."""
    return _active.get("sharer")


def stop_sharing() -> None:
    """Remove the hooks and give PyTorch back the thread count it started with."""
    sharer = _active.get("sharer")
    if sharer is None:
        return
    hook, shell, cell_hook = _active["hook"], _active.get("shell"), _active.get("cell_hook")
    _active.clear()
    try:
        hook.remove()
        if cell_hook is not None:
            shell.events.unregister("pre_run_cell", cell_hook)
    finally:
        torch.set_num_threads(sharer.max_threads)


def _check(sharer: CpuSharer) -> None:
    """The hooks' call (they must return None); a failed reading stops sharing, not the model."""
    if threading.get_ident() != _active.get("thread") or _is_compiling():
        return  # another thread's count is its own, and two threads must not share a window
    try:
        sharer.check()
    except (OSError, ValueError) as err:  # e.g. /proc/stat unreadable, or a CPU went offline
        warnings.warn(f"CPU sharing stopped, PyTorch keeps {sharer.max_threads} threads: {err}")
        stop_sharing()


def _ipython_shell():
    module = sys.modules.get("IPython")
    return module.get_ipython() if module is not None else None
