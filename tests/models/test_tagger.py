"""The taggers of Chapters 3 and 4."""
import pytest
import torch


def test_block_tagger_is_the_block_of_chapter_4_built_in_order():
    """The library's BlockTagger equals the hand-built stack of section 4.6 (same seed, same
    parameters, same logits), so the benchmarks' committed runs are its runs."""
    from torch import nn

    from attnbook.layers import SinusoidalPositionalEncoding
    from attnbook.layers.blocks import EncoderBlock
    from attnbook.models.tagger import BlockTagger

    torch.manual_seed(0)
    model = BlockTagger(16, 64, 2, max_len=12).eval()
    torch.manual_seed(0)
    embedding, position = nn.Embedding(16, 64), SinusoidalPositionalEncoding(64, 12)
    block = EncoderBlock(64, 2, 256, norm_first=True).eval()
    norm, readout = nn.LayerNorm(64), nn.Linear(64, 32)
    tokens = torch.randint(16, (3, 12))
    by_hand = readout(norm(block(position(embedding(tokens))).hidden)).view(3, 12, 2, 16)
    torch.testing.assert_close(model(tokens), by_hand)
    logits, weights = model(tokens, need_weights=True)
    assert logits.shape == (3, 12, 2, 16) and weights.shape == (3, 2, 12, 12)
    with pytest.raises(ValueError, match="tokens"):
        model(torch.full((1, 12), 16))
