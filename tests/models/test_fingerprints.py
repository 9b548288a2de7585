"""Library v3 changed how every model is put together (parts as arguments, one block interface,
one stack runner, new names), not what any computes: a seed must still draw the same weights and
every output must be bit-identical to the one recorded before the change (``fingerprints.py``).

Bit-identical holds on the CPU kind the fixture was recorded on; elsewhere kernels may round
differently, so there the test allows float32 rounding (and says so).
"""
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
import fingerprints  # noqa: E402

RECORDED = torch.load(fingerprints.FIXTURE, weights_only=True)
BUILDERS = {
    "transformer_post": lambda: fingerprints.transformer_outputs(False),
    "transformer_pre": lambda: fingerprints.transformer_outputs(True),
    "gpt": fingerprints.gpt_outputs, "bert": fingerprints.bert_outputs, "vit": fingerprints.vit_outputs,
    "attention_only": fingerprints.attention_only_outputs,
}


@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # as recorded
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("model", sorted(BUILDERS))
def test_outputs_equal_the_recorded_ones(model, one_thread):
    now, before = BUILDERS[model](), RECORDED["outputs"][model]
    assert sorted(now) == sorted(before)
    same_cpu = torch.backends.cpu.get_cpu_capability() == RECORDED["cpu_capability"]
    for name in before:
        if same_cpu:
            assert torch.equal(now[name], before[name]), (
                f"{model}.{name} differs from the recorded output by up to "
                f"{(now[name].double() - before[name].double()).abs().max():.3g}"
            )
        else:
            torch.testing.assert_close(now[name], before[name], rtol=1e-5, atol=1e-6)


def test_a_changed_initialisation_is_caught(one_thread, monkeypatch):
    """The check can fail: one extra draw from the generator changes the recorded GPT outputs."""
    import attnbook.models.gpt as gpt

    original = gpt.GPT.__init__

    def drifted(self, config):
        torch.rand(1)
        original(self, config)

    monkeypatch.setattr(gpt.GPT, "__init__", drifted)
    now = fingerprints.gpt_outputs()
    assert not torch.equal(now["logits"], RECORDED["outputs"]["gpt"]["logits"])
