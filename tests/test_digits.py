"""The digits data: a fixed split, standardisation, subsets, shifts and batches."""
import numpy as np
import pytest
import torch

from attnbook.data.digits import (
    ImageSet, affine, image_batches, load_digits_splits, random_affine, shift_images, split_of, subset,
)


@pytest.fixture(scope="module")
def digits():
    return load_digits_splits()


def test_split_sizes_are_fixed_and_disjoint(digits):
    assert (len(digits.train), len(digits.dev), len(digits.test)) == (1251, 174, 372)
    assert digits.train.images.shape[1:] == (1, 8, 8)
    flat = [{tuple(x.flatten().tolist()) for x in part.images} for part in (digits.train, digits.dev, digits.test)]
    assert not (flat[0] & flat[1]) and not (flat[0] & flat[2]) and not (flat[1] & flat[2])


def test_split_depends_only_on_the_pixels():
    image = np.arange(64).reshape(8, 8) % 17
    assert split_of(image) == split_of(image.copy().astype(np.float64))
    assert {split_of(np.full((8, 8), v)) for v in range(17)} <= {"train", "dev", "test"}


def test_training_pixels_are_standardised(digits):
    x = digits.train.images
    assert abs(x.mean().item()) < 1e-4 and abs(x.std(unbiased=False).item() - 1) < 1e-4
    assert digits.to_pixels(x).min().item() == pytest.approx(0.0, abs=1e-5)
    assert digits.to_pixels(x).max().item() == pytest.approx(1.0, abs=1e-5)


def test_subset_keeps_every_class_in_proportion(digits):
    part = subset(digits.train, 0.25, seed=3)
    full_counts = torch.bincount(digits.train.labels)
    counts = torch.bincount(part.labels, minlength=10)
    assert torch.all((counts - 0.25 * full_counts).abs() <= 1)
    assert not torch.equal(part.images, subset(digits.train, 0.25, seed=4).images)  # the seed picks
    assert torch.equal(part.images, subset(digits.train, 0.25, seed=3).images)
    assert len(subset(digits.train, 1.0, seed=0)) == len(digits.train)
    with pytest.raises(ValueError, match="fraction"):
        subset(digits.train, 0.0, seed=0)


def test_shift_images_by_hand():
    x = torch.arange(9.0).view(1, 1, 3, 3)
    right_down = shift_images(x, dx=1, dy=1, fill=-1.0)
    torch.testing.assert_close(right_down[0, 0], torch.tensor([[-1.0, -1, -1], [-1, 0, 1], [-1, 3, 4]]))
    left = shift_images(x, dx=-1, dy=0, fill=0.0)
    torch.testing.assert_close(left[0, 0], torch.tensor([[1.0, 2, 0], [4, 5, 0], [7, 8, 0]]))
    torch.testing.assert_close(shift_images(x, 0, 0, fill=5.0), x)
    with pytest.raises(ValueError, match="out of the frame"):
        shift_images(x, 3, 0, fill=0.0)


def test_affine_rotates_and_shifts_like_the_exact_operations():
    x = torch.arange(32.0).view(2, 1, 4, 4)
    quarter = affine(x, torch.tensor([90.0, 90.0]), torch.ones(2), torch.zeros(2, 2), fill=0.0)
    torch.testing.assert_close(quarter, torch.rot90(x, 1, dims=(-2, -1)), atol=1e-4, rtol=0)
    moved = affine(x, torch.zeros(2), torch.ones(2), torch.tensor([[1.0, -1.0], [0.0, 2.0]]), fill=-9.0)
    torch.testing.assert_close(moved[:1], shift_images(x[:1], 1, -1, -9.0), atol=1e-4, rtol=0)
    torch.testing.assert_close(moved[1:], shift_images(x[1:], 0, 2, -9.0), atol=1e-4, rtol=0)
    twice = affine(x, torch.zeros(2), torch.full((2,), 2.0), torch.zeros(2, 2), fill=0.0)
    assert twice[0, 0, 1:3, 1:3].std() < x[0, 0, 1:3, 1:3].std()  # zoomed in: the centre spreads out
    with pytest.raises(ValueError, match="angles"):
        affine(x, torch.zeros(3), torch.ones(2), torch.zeros(2, 2), fill=0.0)


def test_random_affine_is_seeded_and_off_when_all_zero():
    torch.manual_seed(0)
    x = torch.randn(5, 1, 8, 8)
    a = random_affine(x, 15, 0.1, 1, -1.0, torch.Generator().manual_seed(3))
    b = random_affine(x, 15, 0.1, 1, -1.0, torch.Generator().manual_seed(3))
    assert torch.equal(a, b) and not torch.allclose(a, x)
    assert random_affine(x, 0, 0, 0, -1.0, torch.Generator()) is x
    with pytest.raises(ValueError, match="scale"):
        random_affine(x, 15, 1.5, 1, 0.0, torch.Generator())


def test_batches_repeat_with_the_seed_and_cover_an_epoch():
    data = ImageSet(torch.arange(10.0).view(10, 1, 1, 1), torch.arange(10))
    first = image_batches(data, 4, torch.Generator().manual_seed(0))
    again = image_batches(data, 4, torch.Generator().manual_seed(0))
    a, b = [next(first)[1] for _ in range(3)], [next(again)[1] for _ in range(3)]
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert len(set(torch.cat(a[:2]).tolist())) == 8  # two full batches, no repeats within an epoch
    small = image_batches(data, 64, torch.Generator().manual_seed(0))
    assert sorted(next(small)[1].tolist()) == list(range(10))  # a set smaller than a batch is one batch
