"""Where the book's code runs: device choice, seeding, and the Colab set-up check."""
from __future__ import annotations

import os
import random
import sys

import numpy as np
import torch

from attnbook.cpu_share import active_sharer


def get_device(prefer: str | None = None) -> torch.device:
    """Return the best available device: cuda, then mps, then cpu.

    ``prefer`` forces one (``"cpu"``, ``"cuda"``, ``"mps"``); the environment variable
    ``ATTNBOOK_DEVICE`` does the same without editing a notebook.
    """
    choice = prefer or os.environ.get("ATTNBOOK_DEVICE")
    if choice is not None:
        if choice not in {"cpu", "cuda", "mps"}:
            raise ValueError(f"device must be one of 'cpu', 'cuda', 'mps'; got {choice!r}")
        if choice == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("device 'cuda' was asked for, but torch.cuda.is_available() is False")
        if choice == "mps" and not _mps_available():
            raise RuntimeError("device 'mps' was asked for, but this machine has no MPS backend")
        return torch.device(choice)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if _mps_available():
        return torch.device("mps")
    return torch.device("cpu")


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy and PyTorch; return a CPU ``torch.Generator`` seeded the same way.

    Runs are repeatable on one machine with a fixed number of training steps; across
    machines (another CPU, a GPU) the last digits of a trained model's results may differ.
    """
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int; got {seed!r}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def in_colab() -> bool:
    """True when running inside Google Colab."""
    return "google.colab" in sys.modules


def describe_runtime() -> str:
    """One line naming the device, the PyTorch version and the CPU threads in use."""
    device = get_device()
    threads = f"{torch.get_num_threads()} CPU threads"
    if active_sharer() is not None:
        threads += " (fewer while other programs keep the CPU busy)"
    return f"device: {device.type}, torch {torch.__version__}, {threads}"
