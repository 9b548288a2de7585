"""Image classification: loss, accuracy, and a recipe that gives every model the same batches."""
import pytest
import torch
from torch import nn

from attnbook.data.digits import ImageSet, load_digits_splits, subset
from attnbook.models.cnn import CNNConfig, SmallCNN
from attnbook.tasks.image_classification import (
    ImageRecipe, accuracy, classification_loss, predict, shifted_accuracy, train_classifier,
)


class PixelVote(nn.Module):
    """A fixed stand-in: the class is the index of the brightest of the first 3 pixels."""

    def __init__(self):
        super().__init__()
        self.unused = nn.Parameter(torch.zeros(1))

    def forward(self, images):
        return images.flatten(1)[:, :3] + 0 * self.unused


def test_accuracy_and_predict_by_hand():
    images = torch.tensor([[1.0, 0, 0, 9], [0, 2, 0, 9], [0, 0, 3, 9], [5, 0, 0, 9]]).view(4, 1, 2, 2)
    data = ImageSet(images, torch.tensor([0, 1, 2, 2]))
    model = PixelVote()
    assert predict(model, images, batch_size=3).tolist() == [0, 1, 2, 0]
    assert accuracy(model, data) == pytest.approx(0.75)
    with pytest.raises(ValueError, match="empty"):
        accuracy(model, ImageSet(torch.zeros(0, 1, 2, 2), torch.zeros(0, dtype=torch.long)))


def test_classification_loss_is_cross_entropy_with_smoothing():
    images = torch.randn(6, 1, 2, 2)
    labels = torch.tensor([0, 1, 2, 0, 1, 2])
    logits = images.flatten(1)[:, :3]
    for smoothing in (0.0, 0.2):
        expected = nn.functional.cross_entropy(logits, labels, label_smoothing=smoothing)
        torch.testing.assert_close(classification_loss(PixelVote(), (images, labels), smoothing), expected)


def test_recipe_validates():
    with pytest.raises(ValueError, match="warmup_steps"):
        ImageRecipe(steps=10, warmup_steps=10)
    with pytest.raises(ValueError, match="lr"):
        ImageRecipe(lr=0.0)


def test_same_recipe_same_model_same_result_and_training_helps():
    digits = load_digits_splits()
    train = subset(digits.train, 0.2, seed=0)
    recipe = ImageRecipe(steps=40, batch_size=32, lr=1e-2, warmup_steps=5, seed=0)
    results = []
    for _ in range(2):
        torch.manual_seed(0)
        model = SmallCNN(CNNConfig(channels=8))
        history = train_classifier(model, train, recipe, fill=digits.background, progress=False)
        results.append((history.losses, accuracy(model, digits.dev)))
    assert results[0] == results[1]  # same batches, same shifts, same weights
    assert len(results[0][0]) == 40
    assert results[0][1] > 0.4  # 40 steps lift a CNN well above chance (10%)


def test_shifted_accuracy_averages_four_directions():
    # the stand-in reads the first 3 pixels of a 1x4 image: moving right by one blanks pixel 0
    images = torch.tensor([[5.0, 0, 0, 0]]).view(1, 1, 1, 4)
    data = ImageSet(images.repeat(1, 1, 4, 1), torch.tensor([0]))
    # right: [0, 5, 0, 0] -> class 1 (wrong); left: [0, 0, 0, 0] -> class 0 (argmax of ties is 0, right);
    # down / up: rows move, each row still [5, 0, 0, 0] except the blank one at the top or bottom -> right
    assert shifted_accuracy(PixelVote(), data, 1, fill=0.0) == pytest.approx(0.75)
    with pytest.raises(ValueError, match="pixels"):
        shifted_accuracy(PixelVote(), data, 0, fill=0.0)
