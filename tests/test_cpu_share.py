"""CPU sharing: reading /proc/stat, choosing a thread count, and the hooks that apply it."""
import subprocess
import sys
import time

import pytest
import torch
from torch import nn

from attnbook import cpu_share
from attnbook.cpu_share import (CpuSample, CpuSharer, busy_seconds, others_busy_cores,
                                share_cpu, stop_sharing, threads_for)

# Some tests here read how busy the other programs keep the CPU: under pytest-xdist, the other
# workers wait while they run (tests/conftest.py).
pytestmark = pytest.mark.runs_alone

STAT = """cpu  300 10 40 900 5 0 3 7 0 0
cpu0 100 5 20 400 2 0 1 3 0 0
cpu1 200 5 20 500 3 0 2 4 0 0
intr 12 0 0
"""


def test_busy_seconds_counts_all_but_idle_and_iowait_on_the_watched_cpus():
    # user, nice, system, irq, softirq, steal
    assert busy_seconds(STAT, frozenset({0}), 100) == pytest.approx((100 + 5 + 20 + 0 + 1 + 3) / 100)
    assert busy_seconds(STAT, frozenset({0, 1}), 100) == pytest.approx((129 + 231) / 100)


def test_busy_seconds_names_a_missing_cpu():
    with pytest.raises(ValueError, match=r"lists cpus \[0, 1\]; expected \[0, 1, 2\]"):
        busy_seconds(STAT, frozenset({0, 1, 2}), 100)


def test_others_busy_cores_leaves_out_this_process():
    before = CpuSample(wall_s=10.0, busy_s=100.0, own_s=5.0)
    after = CpuSample(wall_s=12.0, busy_s=103.0, own_s=6.0)  # 3 CPU-s in 2 s, 1 of them ours
    assert others_busy_cores(before, after) == pytest.approx(1.0)
    # counters sampled at different resolutions can make others slightly negative: clamp
    assert others_busy_cores(before, CpuSample(12.0, 101.0, 6.5)) == 0.0
    with pytest.raises(ValueError, match="in order"):
        others_busy_cores(after, before)


@pytest.mark.parametrize(
    "others, n_cpus, max_threads, expected",
    [(0.05, 2, 2, 2), (0.4, 2, 2, 2), (0.6, 2, 2, 1), (1.0, 2, 2, 1), (1.9, 2, 2, 1),
     (3.0, 8, 8, 5), (10.0, 8, 8, 1), (0.0, 8, 4, 4), (0.0, 2, 1, 1),
     (4.0, 8, 4, 2), (1.0, 8, 4, 4), (6.0, 8, 4, 1)],  # 4 threads on 8 hyperthreads
)
def test_threads_for_uses_the_share_of_cores_left_free(others, n_cpus, max_threads, expected):
    assert threads_for(others, n_cpus, max_threads) == expected


@pytest.mark.parametrize("args", [(-0.1, 2, 2), (0.0, 0, 2), (0.0, 2, 0)])
def test_threads_for_rejects_impossible_inputs(args):
    with pytest.raises(ValueError, match="need others_cores >= 0"):
        threads_for(*args)


class FakeMachine:
    """A clock and a /proc/stat whose other programs' load the test sets per window."""

    def __init__(self):
        self.now, self.busy, self.own, self.others = 0.0, 0.0, 0.0, 0.0
        self.samples, self.set_calls = 0, []

    def advance(self, seconds, own_cores=1.0):
        self.now += seconds
        self.own += own_cores * seconds
        self.busy += (own_cores + self.others) * seconds

    def sample(self, cpus):
        self.samples += 1
        return CpuSample(self.now, self.busy, self.own)

    def sharer(self, max_threads=2):
        return CpuSharer(max_threads=max_threads, cpus=frozenset({0, 1}), interval_s=0.25,
                         sample=self.sample, set_threads=self.set_calls.append,
                         clock=lambda: self.now)


def test_sharer_lowers_at_once_and_raises_only_after_two_quiet_windows():
    machine = FakeMachine()
    sharer = machine.sharer()
    machine.advance(0.3)
    assert sharer.check() == 2 and machine.set_calls == []  # alone: nothing changes
    machine.others = 1.0
    machine.advance(0.3)
    assert sharer.check() == 1 and machine.set_calls == [1]  # another program: down at once
    machine.advance(0.3)
    assert sharer.check() == 1 and machine.set_calls == [1]
    machine.others = 0.0
    machine.advance(0.3)
    assert sharer.check() == 1  # one quiet window is not enough
    machine.others = 1.0
    machine.advance(0.3)
    assert sharer.check() == 1  # the other program was only pausing
    machine.others = 0.0
    machine.advance(0.3)
    assert sharer.check() == 1
    machine.advance(0.3)
    assert sharer.check() == 2 and machine.set_calls == [1, 2]  # two quiet windows: back up
    assert sharer.seconds_at == pytest.approx({2: 0.6, 1: 1.5})
    assert sharer.describe() == "CPU sharing: up to 2 threads; used 1 for 1.5 s, 2 for 0.6 s"


def test_sharer_samples_at_most_once_per_interval():
    machine = FakeMachine()
    sharer = machine.sharer()
    for _ in range(10):
        machine.advance(0.02)
        sharer.check()
    assert machine.samples == 1  # the sample taken when the sharer was made


def test_sharer_never_goes_above_the_threads_it_started_with():
    machine = FakeMachine()
    sharer = machine.sharer(max_threads=1)
    for _ in range(4):
        machine.advance(0.3)
        assert sharer.check() == 1
    assert machine.set_calls == []


def test_sharer_rejects_bad_settings():
    with pytest.raises(ValueError, match="max_threads >= 1"):
        CpuSharer(max_threads=0, cpus=frozenset({0}), sample=FakeMachine().sample)


linux_only = pytest.mark.skipif(not cpu_share.PROC_STAT.exists(), reason="reads /proc/stat")


def others_during(seconds, spin):
    """Cores other programs kept busy while this process slept or spun for ``seconds``."""
    cpus = frozenset(cpu_share.os.sched_getaffinity(0))
    before = cpu_share.read_sample(cpus)
    end = time.perf_counter() + seconds
    while spin and time.perf_counter() < end:
        pass
    time.sleep(max(0.0, end - time.perf_counter()))
    return others_busy_cores(before, cpu_share.read_sample(cpus))


@linux_only
def test_our_own_work_does_not_count_as_another_program():
    idle = others_during(0.5, spin=False)
    assert others_during(0.5, spin=True) < idle + 0.5


@linux_only
def test_a_busy_program_beside_us_is_seen():
    idle = others_during(0.5, spin=False)
    if idle > len(cpu_share.os.sched_getaffinity(0)) - 1:
        pytest.skip(f"the machine is already busy ({idle:.1f} cores): no room to see one more")
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)  # let it start
        assert others_during(0.6, spin=False) > idle + 0.6
    finally:
        spinner.kill()


@pytest.fixture
def sharing(monkeypatch):
    """A started sharer; afterwards sharing is stopped and PyTorch's thread count restored."""
    if not cpu_share.PROC_STAT.exists():
        pytest.skip("reads /proc/stat")
    monkeypatch.delenv("ATTNBOOK_SHARE_CPU", raising=False)
    threads = torch.get_num_threads()
    yield share_cpu()
    stop_sharing()
    torch.set_num_threads(threads)


def test_share_cpu_checks_before_each_forward_and_stops_cleanly(sharing, monkeypatch):
    threads = torch.get_num_threads()
    assert share_cpu() is sharing  # once per process
    calls = []
    monkeypatch.setattr(sharing, "check", lambda: calls.append(1) or 1)
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    model(torch.zeros(1, 3))
    assert len(calls) == 3  # the Sequential and its two layers
    sharing.threads = 1  # as if it had lowered the count
    torch.set_num_threads(1)
    stop_sharing()
    model(torch.zeros(1, 3))
    assert len(calls) == 3  # hook removed
    assert torch.get_num_threads() == threads  # restored
    assert cpu_share._active == {}


def test_only_the_thread_that_started_sharing_checks(sharing, monkeypatch):
    import threading

    calls = []
    monkeypatch.setattr(sharing, "check", lambda: calls.append(1) or 1)
    model = nn.Linear(2, 2)
    worker = threading.Thread(target=model, args=(torch.zeros(1, 2),))
    worker.start()
    worker.join()
    assert calls == []  # OpenMP's thread count belongs to the calling thread
    model(torch.zeros(1, 2))
    assert calls == [1]


def test_share_cpu_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("ATTNBOOK_SHARE_CPU", "0")
    assert share_cpu() is None
    monkeypatch.setenv("ATTNBOOK_SHARE_CPU", "off")
    with pytest.raises(ValueError, match=r"must be '0' \(off\) or '1' \(on\); got 'off'"):
        share_cpu()


@linux_only
def test_describe_runtime_says_when_the_cpu_is_shared(monkeypatch):
    from attnbook.env import describe_runtime

    monkeypatch.delenv("ATTNBOOK_SHARE_CPU", raising=False)
    monkeypatch.setenv("ATTNBOOK_DEVICE", "cpu")  # threads are named on the CPU only
    assert "fewer while other programs" not in describe_runtime()
    share_cpu()
    try:
        assert describe_runtime().endswith("CPU threads (fewer while other programs keep the CPU busy)")
    finally:
        stop_sharing()


class FakeShell:
    def __init__(self):
        self.callbacks = []
        self.events = self

    def register(self, event, callback):
        assert event == "pre_run_cell"
        self.callbacks.append(callback)

    def unregister(self, event, callback):
        self.callbacks.remove(callback)


@linux_only
def test_in_a_notebook_each_cell_starts_with_a_check(monkeypatch):
    monkeypatch.delenv("ATTNBOOK_SHARE_CPU", raising=False)
    shell = FakeShell()
    monkeypatch.setattr(cpu_share, "_ipython_shell", lambda: shell)
    sharer = share_cpu()
    try:
        calls = []
        monkeypatch.setattr(sharer, "check", lambda: calls.append(1) or 1)
        (callback,) = shell.callbacks
        assert callback(object()) is None  # IPython passes the cell's info
        assert calls == [1]
    finally:
        stop_sharing()
    assert shell.callbacks == []


def test_a_failed_reading_stops_sharing_instead_of_breaking_the_model(sharing, monkeypatch):
    threads = torch.get_num_threads()
    sharing.threads = 1  # as if it had lowered the count
    torch.set_num_threads(1)

    def unreadable():
        raise ValueError("/proc/stat lists cpus [0]; expected [0, 1]")
    monkeypatch.setattr(sharing, "check", unreadable)
    with pytest.warns(UserWarning, match="CPU sharing stopped.*expected \\[0, 1\\]"):
        nn.Linear(2, 2)(torch.zeros(1, 2))  # the forward still runs
    assert cpu_share.active_sharer() is None and torch.get_num_threads() == threads
