"""Each Chapter 4 checker accepts a reference solution and rejects plausible wrong answers."""
import torch

from attnbook.exercises.ch04 import check_decoder_mask, check_merge_heads, check_split_heads


def split_reference(x, num_heads):
    B, T, D = x.shape
    return x.view(B, T, num_heads, D // num_heads).transpose(1, 2)


def split_no_transpose(x, num_heads):  # right shape, wrong content
    B, T, D = x.shape
    return x.reshape(B, num_heads, T, D // num_heads)


def merge_reference(x):
    B, H, T, Dh = x.shape
    return x.transpose(1, 2).contiguous().view(B, T, H * Dh)


def merge_wrong_order(x):  # heads merged without moving them next to Dh
    B, H, T, Dh = x.shape
    return x.reshape(B, T, H * Dh)


def merge_dh_major(x):  # interleaves the heads' features instead of concatenating them
    B, H, T, Dh = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, T, H * Dh)


def mask_reference(lengths, size):
    keys = torch.arange(size)[None, :] < lengths[:, None]  # (B, S)
    return keys[:, None, :] & torch.tril(torch.ones(size, size, dtype=torch.bool))


def mask_padding_on_queries(lengths, size):
    rows = torch.arange(size)[None, :] < lengths[:, None]
    return rows[:, :, None] & torch.tril(torch.ones(size, size, dtype=torch.bool))


def mask_strictly_causal(lengths, size):
    keys = torch.arange(size)[None, :] < lengths[:, None]
    return keys[:, None, :] & torch.tril(torch.ones(size, size, dtype=torch.bool), diagonal=-1)


def test_split_heads_checker():
    assert check_split_heads(split_reference)
    assert not check_split_heads(split_no_transpose)


def test_merge_heads_checker():
    assert check_merge_heads(merge_reference)
    assert not check_merge_heads(merge_wrong_order)
    assert not check_merge_heads(merge_dh_major)


def test_decoder_mask_checker():
    assert check_decoder_mask(mask_reference)
    assert not check_decoder_mask(mask_padding_on_queries)
    assert not check_decoder_mask(mask_strictly_causal)
