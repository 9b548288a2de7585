import pytest
import torch

from attnbook.env import describe_runtime, full_float32_in_use, seed_everything, use_full_float32
from attnbook.timing import seconds, synchronize, timed


def test_timed_returns_the_result_and_a_positive_time():
    elapsed, out = timed(lambda: torch.ones(3).sum(), "cpu")
    assert out == 3 and elapsed > 0


def test_seconds_warms_up_then_times_each_repeat():
    calls = []
    assert seconds(lambda: calls.append(1), torch.device("cpu"), repeats=4, warmup=2) >= 0
    assert len(calls) == 6


def test_seconds_min_is_never_above_the_median():
    durations = iter([0.0] + [0.003, 0.001, 0.002])  # one warm-up, then three timed

    def sleep():
        import time
        time.sleep(next(durations))

    fastest = seconds(sleep, "cpu", repeats=3, summary="min")
    assert 0.0009 < fastest < 0.0025


@pytest.mark.parametrize("kwargs, message", [(dict(repeats=0), "repeats"), (dict(warmup=-1), "warmup"),
                                             (dict(summary="mean"), "summary")])
def test_seconds_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        seconds(lambda: None, "cpu", **kwargs)


def test_synchronize_is_a_no_op_on_the_cpu_and_rejects_unknown_devices():
    synchronize("cpu")
    with pytest.raises(RuntimeError):
        synchronize("not-a-device")


def test_the_numerics_policy_turns_tf32_off_and_seeding_applies_it(monkeypatch):
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    try:
        assert not full_float32_in_use()
        seed_everything(0)
        assert full_float32_in_use()
        torch.backends.cudnn.allow_tf32 = True  # cuDNN alone (convolutions, RNNs) counts too
        assert not full_float32_in_use()
    finally:
        use_full_float32()
    assert full_float32_in_use()


def test_describe_runtime_names_the_cpu_threads_on_the_cpu(monkeypatch):
    monkeypatch.setenv("ATTNBOOK_DEVICE", "cpu")
    assert describe_runtime().startswith(f"device: cpu, torch {torch.__version__}, ")
    assert "CPU threads" in describe_runtime()
