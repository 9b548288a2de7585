"""The transfer task's pieces: sampling, splits, bag of tokens, the linear probe."""
import pytest
import torch

from attnbook.checkpoints import minilm_dir
from attnbook.data.bible import genre_names, load_bible
from attnbook.data.wordpiece import WordPieceTokenizer
from attnbook.models.bert import Bert, BertConfig
from attnbook.tasks.text_classification import (
    bag_of_tokens, cached_states, encode_texts, encode_texts_and_states, encode_texts_by_layer, genre_sample, probe_accuracies, stratified_split, train_linear_probe,
)


@pytest.fixture(scope="module")
def tokenizer():
    return WordPieceTokenizer.from_file(minilm_dir() / "vocab.txt")


def test_genre_sample_is_balanced_short_and_repeatable(tokenizer):
    verses = load_bible()
    counts = [len(v.text.split()) for v in verses]  # any per-verse length works for the filter
    a = genre_sample(verses, counts, per_genre=5, max_tokens=12, seed=3, genres=genre_names())
    b = genre_sample(verses, counts, per_genre=5, max_tokens=12, seed=3, genres=genre_names())
    assert a.texts == b.texts and torch.equal(a.labels, b.labels)
    assert torch.equal(a.labels.bincount(), torch.full((8,), 5))
    assert all(len(t.split()) <= 12 for t in a.texts)
    with pytest.raises(ValueError, match="one token count per verse"):
        genre_sample(verses, counts[:-1], 5, 12, 0, genre_names())


def test_stratified_split():
    labels = torch.tensor([0] * 5 + [1] * 7)
    train, test = stratified_split(labels, 2, seed=0)
    assert labels[train].bincount().tolist() == [2, 2]
    assert sorted(torch.cat([train, test]).tolist()) == list(range(12))
    with pytest.raises(ValueError, match="leaves none to test"):
        stratified_split(labels, 5, seed=0)


def test_bag_of_tokens(tokenizer):
    counts = bag_of_tokens(tokenizer, ["the lamb and the lion", "the lion"])
    assert counts.shape[0] == 2 and counts.sum(1).tolist() == [5.0, 2.0]


def test_probe_learns_separable_features_and_ignores_constant_ones():
    g = torch.Generator().manual_seed(0)
    labels = torch.arange(3).repeat_interleave(20)
    x = torch.randn(60, 4, generator=g) * 0.1 + torch.nn.functional.one_hot(labels, 4).float()
    x[:, 3] = 0.0  # constant on the training set ...
    probe = train_linear_probe(x[::2], labels[::2], 3)
    test = x[1::2].clone()
    test[:, 3] = 100.0  # ... and wild on the test set: it must not matter
    assert (probe(test).argmax(-1) == labels[1::2]).float().mean() == 1.0


def test_probe_accuracies_compare_feature_sets_on_the_same_splits():
    g = torch.Generator().manual_seed(1)
    labels = torch.arange(2).repeat_interleave(10)
    good = torch.nn.functional.one_hot(labels, 2).float() + 0.1 * torch.randn(20, 2, generator=g)
    noise = torch.randn(20, 2, generator=g)
    results = probe_accuracies({"good": good, "noise": noise}, labels, 5, seeds=range(3))
    assert len(results["good"]) == 3 and min(results["good"]) == 1.0
    assert sum(results["noise"]) < sum(results["good"])


def test_encode_texts_keeps_the_order(tokenizer):
    torch.manual_seed(0)
    model = Bert(BertConfig(d_model=16, num_layers=1, num_heads=2, d_ff=32)).eval()
    texts = ["a much longer verse than the others here", "short", "medium length verse"]
    together = encode_texts(model, tokenizer, texts, batch_size=2)
    for i, t in enumerate(texts):
        torch.testing.assert_close(together[i], encode_texts(model, tokenizer, [t])[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(together.norm(dim=-1), torch.ones(3))


def test_encode_texts_and_states_is_both_functions_in_one_pass(tokenizer):
    torch.manual_seed(0)
    model = Bert(BertConfig(d_model=16, num_layers=2, num_heads=2, d_ff=32)).eval()
    texts = ["a much longer verse than the others here", "short", "medium length verse"]
    pooled, states, mask = encode_texts_and_states(model, tokenizer, texts, keep_depth=1, batch_size=2)
    torch.testing.assert_close(pooled, encode_texts_by_layer(model, tokenizer, texts, batch_size=2))
    want, want_mask = cached_states(model, tokenizer, texts, depth=1)
    assert torch.equal(mask, want_mask) and states.shape == want.shape
    torch.testing.assert_close(states[mask], want[want_mask], atol=1e-5, rtol=1e-5)
    assert not states[~mask].any()  # padding rows zero
    assert not pooled.requires_grad and not states.requires_grad  # features, not a graph
    with pytest.raises(ValueError, match="keep_depth"):
        encode_texts_and_states(model, tokenizer, texts, keep_depth=3)


def test_sequence_classifier_poolings_and_fine_tuning_changes_the_encoder(tokenizer):
    from attnbook.models.bert import BertForSequenceClassification, mean_pool
    from attnbook.tasks.text_classification import fine_tune
    torch.manual_seed(0)
    encoder = Bert(BertConfig(d_model=16, num_layers=1, num_heads=2, d_ff=32, max_len=64))
    inputs = tokenizer.encode_batch(["Jesus wept.", "In the beginning God created the heavens."])
    hidden = encoder.eval()(inputs.input_ids, inputs.segment_ids, inputs.token_mask)
    for pooling, pooled in (("cls", hidden[:, 0]), ("pooler", encoder.pool(hidden)),
                            ("mean", mean_pool(hidden, inputs.token_mask))):
        model = BertForSequenceClassification(encoder, 3, pooling).eval()
        got = model(inputs.input_ids, inputs.segment_ids, inputs.token_mask)
        torch.testing.assert_close(got, model.head(pooled))
    with pytest.raises(ValueError, match="pooling"):
        BertForSequenceClassification(encoder, 3, "max")
    texts = ["Jesus wept.", "Rejoice always.", "Pray without ceasing.", "God is love."] * 3
    labels = torch.tensor([0, 1, 0, 1] * 3)
    model = BertForSequenceClassification(encoder, 2, "mean")
    before = encoder.blocks[0].self_attn.q_proj.weight.clone()
    result = fine_tune(model, tokenizer, texts, labels, torch.arange(8), torch.arange(8, 12), epochs=3, lr=1e-3,
                       batch_size=4)
    assert not torch.equal(before, encoder.blocks[0].self_attn.q_proj.weight)  # every weight trains
    assert len(result.epoch_losses) == 3 and 0.0 <= result.accuracy <= 1.0
    assert not model.training
