"""The book's figures: attention heatmaps, training curves, metric-by-bucket bars."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import seaborn as sns
import torch

from attnbook.train import History


def attention_heatmap(
    weights: torch.Tensor,
    keys: Sequence[str],
    queries: Sequence[str],
    ax: plt.Axes | None = None,
    title: str | None = None,
    xlabel: str = "attended to (keys)",
    ylabel: str = "attending (queries)",
    colorbar: bool = True,
) -> plt.Axes:
    """Heatmap of ``(T, S)`` weights: one row per query token, one column per key token.

    The colour scale is fixed to [0, 1] (weights are probabilities), so panels compare, and a
    colour bar shows it unless ``colorbar=False`` (e.g. for all but the last panel of a row).
    """
    weights = torch.as_tensor(weights).detach().float().cpu()
    if weights.dim() != 2:
        raise ValueError(f"weights must be 2-D (T, S), got shape {tuple(weights.shape)}")
    if weights.shape != (len(queries), len(keys)):
        raise ValueError(
            f"weights of shape {tuple(weights.shape)} need {weights.shape[0]} query labels and "
            f"{weights.shape[1]} key labels; got {len(queries)} and {len(keys)}"
        )
    if ax is None:
        _, ax = plt.subplots(figsize=(0.35 * len(keys) + 1.5, 0.35 * len(queries) + 1.2))
    sns.heatmap(weights.numpy(), ax=ax, cmap="viridis", vmin=0.0, vmax=1.0, cbar=colorbar,
                cbar_kws={"label": "attention weight", "shrink": 0.8} if colorbar else None,
                xticklabels=list(keys), yticklabels=list(queries), square=True, linewidths=0)
    ax.tick_params(axis="x", labelrotation=0)
    ax.tick_params(axis="y", labelrotation=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    return ax


def plot_histories(histories: Mapping[str, History], window: int = 50, ax: plt.Axes | None = None) -> plt.Axes:
    """Training loss (running mean over ``window`` steps) of one or more runs."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    for name, history in histories.items():
        ax.plot(history.steps, history.smoothed_losses(window), label=name)
    ax.set_xlabel("training step")
    ax.set_ylabel(f"training loss (mean of {window} steps)")
    ax.legend()
    ax.grid(alpha=0.3)
    return ax


def plot_by_bucket(
    results: Mapping[str, Mapping[str, float]], ylabel: str = "WER", ax: plt.Axes | None = None,
    percent: bool = True,
) -> plt.Axes:
    """Grouped bars: one group per bucket (e.g. word length), one bar per model."""
    if not results:
        raise ValueError("no results to plot")
    buckets = list(next(iter(results.values())).keys())
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 3.5))
    width = 0.8 / len(results)
    for k, (name, values) in enumerate(results.items()):
        if list(values.keys()) != buckets:
            raise ValueError(f"model {name!r} has buckets {list(values)}, expected {buckets}")
        heights = [100 * values[b] if percent else values[b] for b in buckets]
        ax.bar([i + k * width - 0.4 + width / 2 for i in range(len(buckets))], heights, width, label=name)
    ax.set_xticks(range(len(buckets)), buckets)
    ax.set_ylabel(f"{ylabel} (%)" if percent else ylabel)
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    return ax
