"""Chapter 6's transfer helpers: Naive Bayes on token counts, and features at every depth."""
import torch

from attnbook.data.wordpiece import SPECIAL_TOKENS, WordPieceTokenizer
from attnbook.models.bert import Bert, BertConfig
from attnbook.tasks import text_classification as tc


def _counts():
    # class 0 uses tokens 0-1, class 1 tokens 2-3, class 2 token 4; 4 examples per class
    g = torch.Generator().manual_seed(0)
    rows, labels = [], []
    for c, cols in enumerate([(0, 1), (2, 3), (4,)]):
        for _ in range(4):
            x = torch.zeros(6)
            for col in cols:
                x[col] = float(torch.randint(1, 4, (1,), generator=g))
            x[5] = 1.0  # a token every class shares
            rows.append(x)
            labels.append(c)
    return torch.stack(rows), torch.tensor(labels)


def test_naive_bayes_separates_disjoint_vocabularies():
    counts, labels = _counts()
    assert tc.naive_bayes_accuracies(counts, labels, train_per_class=2, seeds=range(3)) == [1.0] * 3


def test_naive_bayes_matches_a_hand_computation():
    g = torch.Generator().manual_seed(1)
    counts = torch.randint(0, 3, (30, 7), generator=g).float()  # overlapping vocabularies
    labels = torch.arange(3).repeat_interleave(10)
    alpha = 0.5
    for seed in range(4):
        train, test = tc.stratified_split(labels, 4, seed)
        log_p = torch.stack([((counts[train][labels[train] == c].sum(0) + alpha)
                              / (counts[train][labels[train] == c].sum() + alpha * 7)).log()
                             for c in range(3)])  # (C, V): smoothed token probabilities
        expected = float(((counts[test] @ log_p.T).argmax(-1) == labels[test]).float().mean())
        assert tc.naive_bayes_accuracies(counts, labels, 4, [seed], alpha=alpha) == [expected]


def test_features_by_depth_end_with_the_sentence_embeddings():
    config = BertConfig(vocab_size=9, num_layers=2, num_heads=2, d_model=16, d_ff=32, max_len=16)
    torch.manual_seed(0)
    model = Bert(config)
    tokenizer = WordPieceTokenizer(list(SPECIAL_TOKENS) + ["in", "the", "light", "##s"])
    texts = ["in the light", "the lights", "light in the light", "in"]
    by_depth = tc.encode_texts_by_layer(model, tokenizer, texts, batch_size=2)
    assert by_depth.shape == (3, 4, 16)
    assert torch.equal(by_depth[-1], tc.encode_texts(model, tokenizer, texts, batch_size=2))
    assert not torch.allclose(by_depth[0], by_depth[-1])
    torch.testing.assert_close(by_depth.norm(dim=-1), torch.ones(3, 4))
