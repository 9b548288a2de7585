"""RMSNorm against PyTorch's ``nn.RMSNorm``, and the ``Norm`` spec that blocks build their norms from."""
import pytest
import torch
from torch import nn

from attnbook.layers import Norm, RMSNorm, rms_norm


@pytest.mark.parametrize("eps", [1e-6, 1e-5, 0.5])
def test_rms_norm_equals_torch(eps):
    torch.manual_seed(0)
    ours, theirs = RMSNorm(12, eps=eps), nn.RMSNorm(12, eps=eps)
    with torch.no_grad():
        ours.weight.normal_(1.0, 0.3)
        theirs.weight.copy_(ours.weight)
    x = torch.randn(3, 5, 12) * 4 + 1  # a non-zero mean: LayerNorm would remove it, RMSNorm does not
    torch.testing.assert_close(ours(x), theirs(x))
    assert not torch.allclose(ours(x), nn.functional.layer_norm(x, (12,), ours.weight, None, eps), atol=1e-3)


def test_rms_norm_keeps_half_precision_and_rejects_wrong_width():
    norm = RMSNorm(8)
    x = torch.randn(2, 8, dtype=torch.bfloat16) * 100
    out = norm(x)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), norm(x.float()), atol=1e-2, rtol=1e-2)
    with pytest.raises(ValueError, match="width 8"):
        norm(torch.randn(2, 7))
    with pytest.raises(ValueError, match="eps"):
        RMSNorm(8, eps=0.0)


def test_norm_spec_builds_each_kind():
    layer = Norm()(16)
    assert isinstance(layer, nn.LayerNorm) and layer.eps == 1e-5 and layer.bias is not None
    no_bias = Norm("layernorm", 1e-6, bias=False)(16)
    assert isinstance(no_bias, nn.LayerNorm) and no_bias.bias is None and no_bias.eps == 1e-6
    rms = rms_norm()(16)
    assert isinstance(rms, RMSNorm) and rms.eps == 1e-6
    assert Norm()(16) is not Norm()(16)  # a recipe: every call builds a new module


def test_norm_spec_rejects_bad_options():
    with pytest.raises(ValueError, match="unknown norm 'batchnorm'"):
        Norm("batchnorm")
    with pytest.raises(ValueError, match="RMSNorm has no bias"):
        Norm("rmsnorm")
    with pytest.raises(ValueError, match="eps"):
        Norm(eps=-1.0)
