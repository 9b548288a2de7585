"""BERT's pretraining data and objectives: masking rates, loss on chosen positions, NSP pairs."""
import random

import pytest
import torch

from attnbook.models.bert import BertConfig, BertForPreTraining
from attnbook.tasks.masked_lm import (
    IS_NEXT, NOT_NEXT, MaskedInputs, evaluate_pretraining, make_nsp_pairs, mask_tokens, masking_statistics,
    mlm_accuracy, mlm_loss, nsp_loss, pair_batches, pretrain, pretraining_loss, unigram_accuracy,
)

MASK, V = 3, 1000


def _ids(rows=400, cols=300, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(10, V, (rows, cols), generator=g)
    maskable = torch.rand(rows, cols, generator=g) < 0.9  # some special/padding positions
    return ids, maskable


def test_masking_rates_on_over_100k_tokens():
    ids, maskable = _ids()
    masked = mask_tokens(ids, maskable, MASK, V, torch.Generator().manual_seed(1), random_low=10)
    stats = masking_statistics(masked, maskable, MASK)
    assert stats["maskable tokens"] > 100_000
    assert abs(stats["chosen / maskable"] - 0.15) < 0.005
    assert abs(stats["[MASK] / chosen"] - 0.80) < 0.01
    assert abs(stats["random / chosen"] - 0.10) < 0.01
    assert abs(stats["unchanged / chosen"] - 0.10) < 0.01
    assert stats["changed outside chosen"] == 0


def test_masking_never_touches_unmaskable_positions_nor_its_input():
    ids, maskable = _ids(50, 40)
    before = ids.clone()
    masked = mask_tokens(ids, maskable, MASK, V, torch.Generator().manual_seed(2))
    assert torch.equal(ids, before)
    assert not (masked.chosen & ~maskable).any()
    assert torch.equal(masked.input_ids[~masked.chosen], ids[~masked.chosen])
    assert torch.equal(masked.targets, ids)


def test_masking_repeats_with_a_seed_and_respects_its_probabilities():
    ids, maskable = _ids(50, 40)
    a = mask_tokens(ids, maskable, MASK, V, torch.Generator().manual_seed(3))
    b = mask_tokens(ids, maskable, MASK, V, torch.Generator().manual_seed(3))
    assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.chosen, b.chosen)
    all_masked = mask_tokens(ids, maskable, MASK, V, torch.Generator().manual_seed(3), select_prob=1.0, mask_prob=1.0,
                             random_prob=0.0)
    assert torch.equal(all_masked.chosen, maskable) and (all_masked.input_ids[maskable] == MASK).all()
    with pytest.raises(ValueError, match="mask_prob \\+ random_prob <= 1"):
        mask_tokens(ids, maskable, MASK, V, torch.Generator(), mask_prob=0.9, random_prob=0.2)
    with pytest.raises(ValueError, match="bool tensor shaped like input_ids"):
        mask_tokens(ids, maskable.long(), MASK, V, torch.Generator())


def _masked_example():
    targets = torch.tensor([[5, 6, 7, 8], [9, 5, 0, 0]])
    chosen = torch.tensor([[False, True, False, True], [True, False, False, False]])
    return MaskedInputs(targets.masked_fill(chosen, MASK), targets, chosen)


def test_mlm_loss_and_accuracy_count_chosen_positions_only():
    masked = _masked_example()
    logits = torch.full((2, 4, 10), -5.0)
    logits[0, 1, 6] = logits[0, 3, 1] = logits[1, 0, 9] = 5.0  # right, wrong, right
    logits[0, 0, 5] = logits[0, 2, 7] = 5.0  # right at unchosen positions: must not count
    assert mlm_accuracy(logits, masked) == pytest.approx(2 / 3)
    chosen_logits = logits[masked.chosen]
    expected = torch.nn.functional.cross_entropy(chosen_logits, torch.tensor([6, 8, 9]))
    torch.testing.assert_close(mlm_loss(logits, masked), expected)
    torch.testing.assert_close(mlm_loss(chosen_logits, masked), expected)  # (N, V) logits work too
    with pytest.raises(ValueError, match=r"\(3, V\)"):
        mlm_loss(chosen_logits[:2], masked)


def test_unigram_baseline_predicts_the_most_frequent_token():
    masked = _masked_example()
    assert unigram_accuracy([[6, 6, 9], [6, 3]], masked) == pytest.approx(1 / 3)  # 6 is right once of 3
    assert unigram_accuracy([[6, 6, 9, 9, 9]], masked, exclude=[9]) == pytest.approx(1 / 3)


def test_nsp_pairs_are_half_real_half_random():
    documents = [[(d, i) for i in range(random.Random(d).randrange(1, 9))] for d in range(60)]
    pairs = make_nsp_pairs(documents, 20_000, random.Random(0))
    real = [p for p in pairs if p[2] == IS_NEXT]
    assert abs(len(real) / len(pairs) - 0.5) < 0.015
    for (da, ia), (db, ib), label in pairs:
        if label == IS_NEXT:
            assert db == da and ib == ia + 1
        else:
            assert label == NOT_NEXT and db != da
    with pytest.raises(ValueError, match="two or more sentences"):
        make_nsp_pairs([[1], [2]], 3, random.Random(0))


def test_nsp_loss_is_a_two_class_softmax():
    logits = torch.tensor([[2.0, -1.0], [0.5, 0.5]])
    labels = torch.tensor([0, 1])
    torch.testing.assert_close(nsp_loss(logits, labels), torch.nn.functional.cross_entropy(logits, labels))
    with pytest.raises(ValueError, match=r"\(B, 2\)"):
        nsp_loss(logits[:, :1], labels)


def test_pretraining_learns_a_tiny_repeating_corpus():
    # each sentence is three consecutive numbers (mod 20): a masked one follows from its neighbours
    docs = [[[10 + (d * 3 + i) % 20, 10 + (d * 3 + i + 1) % 20, 10 + (d * 3 + i + 2) % 20] for i in range(6)]
            for d in range(20)]
    common = dict(special_ids=[0, 1, 2, 3], cls_id=1, sep_id=2, pad_id=0, mask_id=3, vocab_size=30, max_len=12,
                  random_low=10)
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig(vocab_size=30, d_model=32, num_layers=1, num_heads=2,
                                          d_ff=64, max_len=12, dropout=0.0))
    batches = pair_batches(docs, 32, seed=0, **common)
    before = pretraining_loss(model, next(pair_batches(docs, 32, seed=9, **common))).item()
    history = pretrain(model, batches, steps=300, lr=1e-2, warmup=10, progress=False)
    after = evaluate_pretraining(model, [next(pair_batches(docs, 256, seed=9, **common))])
    assert sum(history.losses[-10:]) / 10 < before - 0.5
    # chance is 1/20; the figure reached depends on the CPU (0.248 on one machine, above 0.25 on
    # another), so the bar is three times chance
    assert after["mlm accuracy"] > 0.15


# ----------------------------------------------------------------------------- position types and baselines
def test_position_types_partition_the_chosen_positions():
    from attnbook.tasks.masked_lm import POSITION_TYPES, position_types
    ids, maskable = _ids(rows=50, cols=40)
    masked = mask_tokens(ids, maskable, MASK, V, torch.Generator().manual_seed(2), random_low=10)
    types = position_types(masked, MASK)
    assert set(types) == set(POSITION_TYPES)
    total = sum(t.int() for t in types.values())
    assert torch.equal(total.bool(), masked.chosen) and int(total.max()) == 1  # disjoint, cover chosen
    assert bool((masked.input_ids[types["unchanged"]] == masked.targets[types["unchanged"]]).all())
    assert bool((masked.input_ids[types["random"]] != masked.targets[types["random"]]).all())


def test_copy_baseline_is_right_exactly_at_unchanged_positions():
    from attnbook.tasks.masked_lm import accuracy_by_position_type, baseline_predictions
    ids, maskable = _ids(rows=60, cols=50)
    masked = mask_tokens(ids, maskable, MASK, V, torch.Generator().manual_seed(3), random_low=10)
    predicted = baseline_predictions(masked.input_ids, MASK, unigram_id=11)
    table = accuracy_by_position_type(predicted, masked, MASK)
    right, n = table["unchanged"]
    assert n > 0 and right == n
    assert table["random"][0] == 0
    mask_right, mask_n = table["[MASK]"]
    assert mask_right == int((masked.targets[masked.input_ids == MASK] == 11).sum())
    all_right, all_n = table["all chosen"]
    assert all_n == int(masked.chosen.sum()) and all_right == sum(table[k][0] for k in ("[MASK]", "random", "unchanged"))


def test_bigram_baseline_predicts_the_most_frequent_follower():
    from attnbook.tasks.masked_lm import baseline_predictions, bigram_table
    CLS, SEP = 1, 2
    train = [[5, 6, 7], [5, 6, 8], [5, 9], [7, 8]]  # after 5: 6 twice, 9 once; after CLS: 5 three times
    table = bigram_table(train, 10, CLS, SEP)
    assert table[5, 6] == 2 and table[5, 9] == 1 and table[CLS, 5] == 3 and table[7, SEP] == 1
    seen = torch.tensor([[CLS, 5, MASK, MASK, 7]])  # the second [MASK] has a [MASK] on its left
    predicted = baseline_predictions(seen, MASK, unigram_id=8, bigrams=table, exclude=[0, 1, 2, 3])
    assert predicted.tolist() == [[CLS, 5, 6, 8, 7]]
    first = baseline_predictions(torch.tensor([[CLS, MASK]]), MASK, 8, table, exclude=[0, 1, 2, 3])
    assert first.tolist() == [[CLS, 5]]
