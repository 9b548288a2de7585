"""Where the book's code runs: device choice, seeding, and the Colab set-up check."""
from __future__ import annotations

import os
import random
import sys
import warnings

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
        if choice == "cuda":
            quiet_benign_cuda_warnings()
        return torch.device(choice)
    if torch.cuda.is_available():
        quiet_benign_cuda_warnings()
        return torch.device("cuda")
    if _mps_available():
        return torch.device("mps")
    return torch.device("cpu")


# PyTorch warns when autograd's backward thread first calls cuBLAS before that thread has a CUDA
# context, then sets the primary context itself: noise about PyTorch's threads, not the reader's
# code (seen on an H100 with torch 2.11; it landed in a chapter's checked output).
CUBLAS_CONTEXT_WARNING = "Attempting to run cuBLAS, but there was no current CUDA context"


def quiet_benign_cuda_warnings() -> None:
    """Silence :data:`CUBLAS_CONTEXT_WARNING`, and nothing else."""
    warnings.filterwarnings("ignore", message=CUBLAS_CONTEXT_WARNING, category=UserWarning)


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def seed_everything(seed: int) -> torch.Generator:
    """Seed Python, NumPy and PyTorch, apply the book's numerics policy (:func:`use_full_float32`),
    and return a CPU ``torch.Generator`` seeded the same way.

    Runs are repeatable on one machine with a fixed number of training steps; across
    machines (another CPU, a GPU) the last digits of a trained model's results may differ.
    The CPU generator also drives sampling on a GPU (``choose_next`` draws on the generator's
    device), so a seed gives the same draws from the same probabilities everywhere.
    """
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int; got {seed!r}")
    use_full_float32()
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def use_full_float32() -> None:
    """The book's numerics policy, set in this one place: float32 matrix products and cuDNN
    convolutions and RNNs in full float32, never TensorFloat-32.

    On Ampere and later NVIDIA GPUs cuDNN uses TF32 (10 mantissa bits) by default, which moves
    results by about 1e-3 relative: enough to fail the chapters' comparisons with reference
    implementations (tolerances of 1e-5 to 1e-4). Off, a GPU agrees with the CPU to float32
    rounding. Costs speed on a GPU, nothing on a CPU; called by :func:`seed_everything`, which
    every chapter's set-up cell runs.
    """
    # The flags every PyTorch since 1.7 reads. (PyTorch 2.9's per-operation ``fp32_precision``
    # settings say the same; mixing the two APIs makes the old getters raise, so the book uses
    # only these.)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def full_float32_in_use() -> bool:
    """True when no float32 product may use TF32 (the policy of :func:`use_full_float32`)."""
    return not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32


def describe_runtime() -> str:
    """One line naming the device (and the GPU's name), the PyTorch version and, on the CPU, the
    threads in use; on a GPU, whether float32 is kept full (the TF32 policy)."""
    device = get_device()
    if device.type == "cuda":
        policy = "full float32" if full_float32_in_use() else "TF32 allowed"
        return (f"device: cuda ({torch.cuda.get_device_name(device)}), torch {torch.__version__}, "
                f"{policy}")
    if device.type == "mps":
        return f"device: mps (Apple GPU), torch {torch.__version__}"
    threads = f"{torch.get_num_threads()} CPU threads"
    if active_sharer() is not None:
        threads += " (fewer while other programs keep the CPU busy)"
    return f"device: {device.type}, torch {torch.__version__}, {threads}"
