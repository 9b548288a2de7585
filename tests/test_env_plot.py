import matplotlib

matplotlib.use("Agg")

import warnings

import pytest
import torch

from attnbook import env
from attnbook.env import get_device, seed_everything
from attnbook.plot import attention_heatmap, plot_by_bucket, plot_histories
from attnbook.train import History


def test_device_choice(monkeypatch):
    monkeypatch.delenv("ATTNBOOK_DEVICE", raising=False)
    assert get_device().type in {"cpu", "cuda", "mps"}
    assert get_device("cpu").type == "cpu"
    monkeypatch.setenv("ATTNBOOK_DEVICE", "cpu")
    assert get_device().type == "cpu"
    with pytest.raises(ValueError, match="one of"):
        get_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="cuda"):
            get_device("cuda")


def test_seeding_repeats():
    g = seed_everything(7)
    a = torch.rand(3), torch.rand(3, generator=g)
    g = seed_everything(7)
    assert torch.equal(a[0], torch.rand(3)) and torch.equal(a[1], torch.rand(3, generator=g))
    with pytest.raises(ValueError):
        seed_everything(-1)


def test_heatmap_checks_labels():
    w = torch.softmax(torch.randn(2, 3), -1)
    ax = attention_heatmap(w, keys=list("abc"), queries=["x", "y"])
    assert [t.get_text() for t in ax.get_xticklabels()] == list("abc")
    with pytest.raises(ValueError, match="need 2 query labels and 3 key labels"):
        attention_heatmap(w, keys=list("ab"), queries=["x", "y"])
    with pytest.raises(ValueError, match="2-D"):
        attention_heatmap(w[None], keys=list("abc"), queries=["x", "y"])


def test_bucket_bars_and_curves():
    ax = plot_by_bucket({"a": {"1-4": 0.1, "5-6": 0.2}, "b": {"1-4": 0.15, "5-6": 0.3}})
    assert len(ax.patches) == 4
    with pytest.raises(ValueError, match="buckets"):
        plot_by_bucket({"a": {"1-4": 0.1}, "b": {"5-6": 0.2}})
    ax = plot_histories({"run": History(steps=[1, 2, 3], losses=[3.0, 2.0, 1.0])}, window=2)
    assert len(ax.lines) == 1


def test_heatmap_has_a_labelled_colour_bar_unless_switched_off():
    import matplotlib.pyplot as plt

    from attnbook.plot import attention_heatmap

    fig, (a, b) = plt.subplots(1, 2)
    attention_heatmap(torch.full((2, 3), 1 / 3), list("xyz"), list("pq"), ax=a)
    attention_heatmap(torch.full((2, 3), 1 / 3), list("xyz"), list("pq"), ax=b, colorbar=False)
    bars = [ax for ax in fig.axes if ax not in (a, b)]
    assert len(bars) == 1 and bars[0].get_ylabel() == "attention weight"
    plt.close(fig)


def test_only_the_benign_cuda_warning_is_silenced():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env.quiet_benign_cuda_warnings()
        warnings.warn(env.CUBLAS_CONTEXT_WARNING + "! Attempting to set the primary context...",
                      UserWarning)
        warnings.warn("Attempting to run cuBLAS on a tensor of the wrong device", UserWarning)
    assert [str(w.message) for w in caught] == [
        "Attempting to run cuBLAS on a tensor of the wrong device"]
