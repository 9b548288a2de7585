"""Fixtures shared by the library's tests: a tiny seq2seq batch and tiny models to test on.

Also the GPU switch: ``ATTNBOOK_DEVICE=cuda pytest`` (or ``mps``) runs every notebook and the
device-placement tests (``test_device_placement.py``) on that device, and stops at once, with a
clear message, on a machine that does not have it.

And pytest-xdist (``pyproject.toml`` runs two workers, each notebook whole on one of them;
``pytest -n 0`` runs everything in one process): a worker's own PyTorch uses one thread, and a
test marked ``runs_alone``, one that measures CPU load or time, runs while the other workers wait
between their tests.
"""
import fcntl
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import torch
from torch import nn

from attnbook.env import get_device, use_full_float32
from tools.nbval_device import mask_trained_digits, on_another_device, remove_sanitizer
from attnbook.layers.masks import token_mask
from attnbook.models.transformer import Transformer, TransformerConfig

SRC_V, TGT_V = 11, 13  # tiny vocabularies; ids 0-3 are the special tokens


TURNS = "ATTNBOOK_PYTEST_TURNS"  # the folder of the lock files the xdist workers take turns with
TURNS_FOLDER = pytest.StashKey[str]()


def pytest_configure(config):
    requested = os.environ.get("ATTNBOOK_DEVICE")
    if requested is not None:
        try:  # the notebooks' own check: an unknown name, or a GPU this machine does not have
            get_device(requested)
        except (ValueError, RuntimeError) as err:
            raise pytest.UsageError(
                f"ATTNBOOK_DEVICE={requested}: {err}. Refusing to run the GPU tests on the CPU; "
                "unset ATTNBOOK_DEVICE to test on the CPU.") from err
    if on_another_device():  # checked notebook cells compare with numbers masked (tools/nbval_device.py)
        mask_trained_digits(config)
    use_full_float32()  # the book's numerics policy (attnbook.env), as in every chapter
    config.addinivalue_line(
        "markers", "runs_alone: measures CPU load or time; under pytest-xdist the other workers wait "
        "between their tests while it runs")
    if hasattr(config, "workerinput"):  # an xdist worker
        # Its own PyTorch (the unit tests) gets one thread: the other worker has the other core, and
        # threads that spin beside another busy program slow both (attnbook.cpu_share). The
        # notebooks' kernels are other processes; their set-up cell shares the CPU.
        torch.set_num_threads(1)
        if os.environ.get(TURNS):  # take turns, as the controller said
            config.pluginmanager.register(TakingTurns(Path(os.environ[TURNS])), "attnbook-taking-turns")
    elif config.getoption("dist", "no") != "no":  # the xdist controller, before it starts the workers
        os.environ[TURNS] = config.stash[TURNS_FOLDER] = tempfile.mkdtemp(prefix="attnbook-pytest-")


def pytest_unconfigure(config):
    remove_sanitizer(config)
    folder = config.stash.get(TURNS_FOLDER, None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(TURNS, None)


class TakingTurns:
    """A readers-writer lock across the xdist workers, with two ``flock`` files: every test holds
    ``room`` shared while it runs, a ``runs_alone`` test holds it exclusively. A ``runs_alone`` test
    waiting for the room holds ``gate``, which the others pass on their way in, so it waits only for
    the tests already running (a notebook waits between two cells, its kernel idle)."""

    def __init__(self, folder: Path):
        self.gate = open(folder / "gate", "a")  # noqa: SIM115 (held for the worker's life)
        self.room = open(folder / "room", "a")  # noqa: SIM115

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        alone = item.get_closest_marker("runs_alone") is not None
        fcntl.flock(self.gate, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        fcntl.flock(self.room, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        if not alone:
            fcntl.flock(self.gate, fcntl.LOCK_UN)
        try:
            return (yield)
        finally:
            fcntl.flock(self.room, fcntl.LOCK_UN)
            if alone:
                fcntl.flock(self.gate, fcntl.LOCK_UN)

    def pytest_unconfigure(self):
        self.gate.close()
        self.room.close()


def perturb_layer_norms(model: nn.Module) -> nn.Module:
    """Move every LayerNorm away from (weight 1, bias 0), so that a norm copied wrongly shows."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.LayerNorm):
                module.weight.normal_(1.0, 0.2)
                module.bias.normal_(0.0, 0.2)
    return model


@pytest.fixture
def seq2seq_batch():
    """``(src (4, 7), lengths (4,), tgt_in (4, 6))`` with padding zeroed in ``src``."""
    g = torch.Generator().manual_seed(1)
    lengths = torch.tensor([7, 4, 2, 5])
    src = torch.randint(4, SRC_V, (4, 7), generator=g)
    src[~token_mask(lengths, 7)] = 0
    tgt = torch.randint(4, TGT_V, (4, 6), generator=g)
    return src, lengths, tgt


@pytest.fixture
def make_transformer():
    """Factory: a 2+2-layer Transformer (D=32, H=4) in eval mode with perturbed LayerNorms."""

    def make(norm_first=False, dropout=0.0, tie_output=True, seed=0, activation="relu"):
        torch.manual_seed(seed)
        config = TransformerConfig(SRC_V, TGT_V, d_model=32, num_heads=4, d_ff=64, num_encoder_layers=2,
                                   num_decoder_layers=2, dropout=dropout, norm_first=norm_first,
                                   tie_output=tie_output, activation=activation)
        return perturb_layer_norms(Transformer(config)).eval()

    return make


def pytest_terminal_summary(terminalreporter):
    """After a run that executed notebooks, print each notebook's total time (kernel start included),
    so a maintainer sees which chapter is near the book's 90-second budget."""
    totals: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            location = getattr(report, "location", None)
            if location and str(location[0]).endswith(".ipynb") and hasattr(report, "duration"):
                notebook = str(location[0])
                totals[notebook] = totals.get(notebook, 0.0) + report.duration
    if totals:
        terminalreporter.write_sep("-", "notebook times (budget: 90 s each on a 2-core CPU)")
        for notebook, seconds in sorted(totals.items()):
            terminalreporter.write_line(f"{seconds:7.1f} s  {notebook}")


def assert_rejected(checker, wrong, diagnosis: str, capsys) -> str:
    """An exercise checker must reject ``wrong`` and name ``diagnosis`` ("" = no named mistake).

    Shared by the exercise tests of every chapter; returns what the checker printed.
    """
    result = checker(wrong)
    out = capsys.readouterr().out
    assert not result
    assert result.diagnosis == diagnosis, out
    return out
