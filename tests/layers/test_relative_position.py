"""T5's relative position bias: the bucket function equals transformers' T5 on many offsets, both
directions, beyond max_distance; the module's bias agrees between a whole pass and a decoding step."""
import pytest
import torch

from attnbook.layers.relative_position import RelativePositionBias, relative_position_bucket

transformers = pytest.importorskip("transformers")
from transformers.models.t5.modeling_t5 import T5Attention  # noqa: E402

OFFSETS = torch.arange(-1000, 1001)  # far beyond every max_distance below


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets, max_distance", [(32, 128), (8, 20), (16, 64), (6, 7), (64, 300), (4, 3)])
def test_bucket_equals_transformers(bidirectional, num_buckets, max_distance):
    if bidirectional and num_buckets % 2:
        pytest.skip("bidirectional needs an even count")
    ours = relative_position_bucket(OFFSETS, bidirectional, num_buckets, max_distance)
    theirs = T5Attention._relative_position_bucket(OFFSETS, bidirectional, num_buckets, max_distance)
    assert torch.equal(ours, theirs)
    assert ours.min() >= 0 and ours.max() < num_buckets


def test_bucket_shape_and_known_values():
    offsets = torch.tensor([[0, -1, 1], [-7, 7, -8]])
    assert relative_position_bucket(offsets).shape == (2, 3)
    # bidirectional 32: keys before or at the query in 0..15, after it in 16..31; 0..7 exact
    assert relative_position_bucket(torch.tensor([0, -1, 1, -7, 7])).tolist() == [0, 1, 17, 7, 23]
    # beyond max_distance everything shares the side's last bucket
    assert relative_position_bucket(torch.tensor([-128, -5000, 128, 5000])).tolist() == [15, 15, 31, 31]
    # causal: the future is bucket 0 (masked anyway); the past uses all 32 buckets
    assert relative_position_bucket(torch.tensor([3, 0, -1, -15, -5000]), bidirectional=False).tolist() == [
        0, 0, 1, 15, 31]


def test_bias_module_matches_transformers_compute_bias():
    config = transformers.T5Config(d_model=32, d_kv=8, num_heads=4, relative_attention_num_buckets=16,
                                   relative_attention_max_distance=40)
    for is_decoder in (False, True):
        torch.manual_seed(0)
        ref = T5Attention(config, has_relative_attention_bias=True)
        ref.is_decoder = is_decoder
        ours = RelativePositionBias(4, 16, 40, bidirectional=not is_decoder)
        ours.relative_attention_bias.weight.data.copy_(ref.relative_attention_bias.weight)
        torch.testing.assert_close(ours(50, 60), ref.compute_bias(50, 60), rtol=0, atol=0)
        torch.testing.assert_close(ours(1, 31, offset=30), ref.compute_bias(1, 31, past_seen_tokens=30),
                                   rtol=0, atol=0)


def test_step_bias_is_the_last_row_of_the_whole_bias():
    bias = RelativePositionBias(2, 8, 20, bidirectional=False)
    whole = bias(12, 12)  # (1, H, T, S)
    for p in range(12):
        torch.testing.assert_close(bias(1, p + 1, offset=p), whole[:, :, p : p + 1, : p + 1])


@pytest.mark.parametrize("kwargs, match", [
    (dict(num_buckets=7, bidirectional=True), "even"),
    (dict(num_buckets=2, bidirectional=True), "no exact bucket"),
    (dict(num_buckets=32, max_distance=8), "max_distance"),
    (dict(num_buckets=0), "sizes must be >= 1"),
])
def test_bad_bucket_sizes_are_rejected(kwargs, match):
    with pytest.raises(ValueError, match=match):
        relative_position_bucket(torch.arange(5), **kwargs)
    with pytest.raises(ValueError, match=match):
        RelativePositionBias(4, kwargs.get("num_buckets", 32), kwargs.get("max_distance", 128),
                             kwargs.get("bidirectional", True))


def test_bad_inputs_are_rejected():
    with pytest.raises(TypeError, match="integer tensor"):
        relative_position_bucket(torch.arange(5).float())
    bias = RelativePositionBias(2)
    with pytest.raises(ValueError, match="offset must be >= 0"):
        bias(1, 4, offset=-1)
    with pytest.raises(ValueError, match="num_queries"):
        bias(0, 4)
