"""Each Chapter 6 checker accepts a reference solution, rejects plausible wrong answers, and names them."""
import pytest
import torch

from torch import nn

from attnbook.exercises.ch06 import (
    CLS_MISTAKES, EXERCISES, TYPE_MISTAKES, check_accuracy_by_type, check_cls_probe, check_frozen_classifier,
    check_masking, check_mean_pool, check_wordpiece,
)
from attnbook.tasks import masked_lm
from attnbook.models.bert import mean_pool
from attnbook.exercises.core import MUTATION


# ----------------------------------------------------------------------------- mean pooling
def pool_reference(hidden, token_mask):
    w = token_mask.float().unsqueeze(-1)
    return (hidden * w).sum(1) / w.sum(1)


def pool_all(hidden, token_mask):
    return hidden.mean(1)


def pool_divides_by_length(hidden, token_mask):
    return (hidden * token_mask.unsqueeze(-1)).sum(1) / hidden.shape[1]


def pool_sum(hidden, token_mask):
    return (hidden * token_mask.unsqueeze(-1)).sum(1)


def pool_cls(hidden, token_mask):
    return hidden[:, 0]


def pool_in_place(hidden, token_mask):
    hidden.mul_(token_mask.unsqueeze(-1))
    return hidden.sum(1) / token_mask.sum(1, keepdim=True)


def pool_max(hidden, token_mask):
    return hidden.masked_fill(~token_mask.unsqueeze(-1), -1e9).max(1).values


@pytest.mark.parametrize("wrong, diagnosis", [
    (pool_all, "padding averaged"), (pool_divides_by_length, "divided by S"),
    (pool_sum, "sum not mean"), (pool_cls, "[CLS] vector"), (pool_in_place, MUTATION), (pool_max, "max pooling"),
    (lambda h, m: h.max(1).values, ""),
    (mean_pool, "library function"), (lambda h, m: mean_pool(h, m), "library function"),
    (lambda h, m: mean_pool(h.clone(), m.clone()) + 0, "library function"),
])
def test_mean_pool_checker(wrong, diagnosis, capsys):
    assert check_mean_pool(pool_reference)
    capsys.readouterr()
    result = check_mean_pool(wrong)
    assert not result
    assert result.diagnosis == diagnosis, result.message


# ----------------------------------------------------------------------------- accuracy by position type
def types_reference(predicted, targets, chosen, seen, mask_id):
    is_mask = chosen & (seen == mask_id)
    unchanged = chosen & ~is_mask & (seen == targets)
    random = chosen & ~is_mask & ~unchanged
    right = predicted == targets
    return torch.tensor([float((right & w).sum() / w.sum()) for w in (is_mask, random, unchanged)])


def _groups(chosen, seen, targets, mask_id, need_chosen=True):
    is_mask = chosen & (seen == mask_id)
    unchanged = (chosen if need_chosen else torch.ones_like(chosen)) & ~is_mask & (seen == targets)
    return is_mask, chosen & ~is_mask & ~unchanged, unchanged


def types_counts(predicted, targets, chosen, seen, mask_id):
    return torch.stack([((predicted == targets) & w).sum() for w in _groups(chosen, seen, targets, mask_id)]).float()


def types_all_chosen(predicted, targets, chosen, seen, mask_id):
    groups = _groups(chosen, seen, targets, mask_id)
    return torch.stack([((predicted == targets) & w).sum() / chosen.sum() for w in groups]).float()


def types_unchosen_unchanged(predicted, targets, chosen, seen, mask_id):
    groups = _groups(chosen, seen, targets, mask_id, need_chosen=False)
    return torch.stack([((predicted == targets) & w).sum() / w.sum() for w in groups]).float()


def types_against_input(predicted, targets, chosen, seen, mask_id):
    groups = _groups(chosen, seen, targets, mask_id)
    return torch.stack([((predicted == seen) & w).sum() / w.sum() for w in groups]).float()


def types_wrong_order(predicted, targets, chosen, seen, mask_id):
    return types_reference(predicted, targets, chosen, seen, mask_id)[[0, 2, 1]]


def types_random_by_inequality(predicted, targets, chosen, seen, mask_id):  # random = chosen & seen != target,
    right = predicted == targets                                           # [MASK] counted twice
    return torch.tensor([float((right & w).sum() / w.sum()) for w in
                         (chosen & (seen == mask_id), chosen & (seen != targets), chosen & (seen == targets))])


def types_by_library(predicted, targets, chosen, seen, mask_id):
    table = masked_lm.accuracy_by_position_type(predicted, masked_lm.MaskedInputs(seen, targets, chosen), mask_id)
    return torch.tensor([r / n for r, n in list(table.values())[:3]])


def types_naive(predicted, targets, chosen, seen, mask_id):  # one naive accuracy for all three
    share = float((predicted == targets)[chosen].float().mean())
    return torch.tensor([share] * 3)


TYPES_WRONG = [
    (types_counts, "count instead of share"), (types_all_chosen, "all-chosen denominator"),
    (types_unchosen_unchanged, "unchosen counted as unchanged"), (types_against_input, "scored against the input"),
    (types_wrong_order, "order"), (types_random_by_inequality, ""), (types_naive, ""),
    (types_by_library, "library function"),
]


@pytest.mark.parametrize("wrong, diagnosis", TYPES_WRONG)
def test_accuracy_by_type_checker(wrong, diagnosis, capsys):
    assert check_accuracy_by_type(types_reference)
    capsys.readouterr()
    result = check_accuracy_by_type(wrong)
    assert not result
    assert result.diagnosis == diagnosis, result.message


def test_every_type_mistake_is_triggered():
    assert {m.name for m in TYPE_MISTAKES} == {d for _, d in TYPES_WRONG} - {"", "library function"}


# ----------------------------------------------------------------------------- WordPiece
def wordpiece_reference(word, vocab, max_chars):
    if len(word) > max_chars:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                pieces.append(piece)
                start = end
                break
        else:
            return ["[UNK]"]
    return pieces


def wordpiece_shortest(word, vocab, max_chars):
    if len(word) > max_chars:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        for end in range(start + 1, len(word) + 1):
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                pieces.append(piece)
                start = end
                break
        else:
            return ["[UNK]"]
    return pieces


def wordpiece_no_hashes(word, vocab, max_chars):
    return [p.removeprefix("##") for p in wordpiece_reference(word, vocab, max_chars)]


def wordpiece_partial_unk(word, vocab, max_chars):
    if len(word) > max_chars:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                pieces.append(piece)
                start = end
                break
        else:
            return pieces + ["[UNK]"]
    return pieces


def wordpiece_no_max(word, vocab, max_chars):
    return wordpiece_reference(word, vocab, 10**9)


def wordpiece_off_by_one_max(word, vocab, max_chars):
    return wordpiece_reference(word, vocab, max_chars - 1)


def wordpiece_mutates_vocab(word, vocab, max_chars):  # the checker passes a frozenset: this raises
    vocab.add("[UNK]")
    return wordpiece_reference(word, vocab, max_chars)


@pytest.mark.parametrize("wrong, diagnosis", [
    (wordpiece_shortest, "shortest first"), (wordpiece_no_hashes, "no ## prefix"),
    (wordpiece_partial_unk, "partial [UNK]"), (wordpiece_no_max, "max_chars ignored"),
    (wordpiece_off_by_one_max, ""), (wordpiece_mutates_vocab, ""),
])
def test_wordpiece_checker(wrong, diagnosis, capsys):
    assert check_wordpiece(wordpiece_reference)
    capsys.readouterr()
    result = check_wordpiece(wrong)
    assert not result
    assert result.diagnosis == diagnosis, result.message


# ----------------------------------------------------------------------------- masking
def masking_reference(input_ids, maskable, mask_id, vocab_size, generator):
    chosen = (torch.rand(input_ids.shape, generator=generator) < 0.15) & maskable
    u = torch.rand(input_ids.shape, generator=generator)
    random_ids = torch.randint(0, vocab_size, input_ids.shape, generator=generator)
    out = torch.where(chosen & (u < 0.8), mask_id, input_ids)
    out = torch.where(chosen & (u >= 0.8) & (u < 0.9), random_ids, out)
    return out, chosen


def masking_ignores_maskable(input_ids, maskable, mask_id, vocab_size, generator):
    return masking_reference(input_ids, torch.ones_like(maskable), mask_id, vocab_size, generator)


def masking_all_mask(input_ids, maskable, mask_id, vocab_size, generator):
    chosen = (torch.rand(input_ids.shape, generator=generator) < 0.15) & maskable
    return torch.where(chosen, mask_id, input_ids), chosen


def masking_seed003(input_ids, maskable, mask_id, vocab_size, generator):
    out, chosen = input_ids.clone(), torch.zeros_like(maskable)
    B, S = input_ids.shape
    for b in range(B):
        n = round(S * 0.15)
        for i in torch.randint(0, S, (n,), generator=generator).tolist():  # with replacement, ignores maskable
            if torch.rand(1, generator=generator).item() < 0.8:
                out[b, i] = mask_id
            else:
                out[b, i] = torch.randint(0, vocab_size, (1,), generator=generator).item()
            chosen[b, i] = True
    return out, chosen


def masking_with_replacement(input_ids, maskable, mask_id, vocab_size, generator):
    # seed 003's selection, kept to maskable positions: round(15% of n) draws *with*
    # replacement from each row's n maskable positions pick fewer than 15% (some twice)
    chosen = torch.zeros_like(maskable)
    for b in range(input_ids.shape[0]):
        where = maskable[b].nonzero()[:, 0]
        k = round(0.15 * len(where))
        draws = torch.randint(0, len(where), (k,), generator=generator)
        chosen[b, where[draws]] = True
    u = torch.rand(input_ids.shape, generator=generator)
    random_ids = torch.randint(0, vocab_size, input_ids.shape, generator=generator)
    out = torch.where(chosen & (u < 0.8), mask_id, input_ids)
    return torch.where(chosen & (u >= 0.8) & (u < 0.9), random_ids, out), chosen


def masking_exact_count(input_ids, maskable, mask_id, vocab_size, generator):
    # a right variant: exactly round(15% of n) distinct positions per row (no replacement)
    chosen = torch.zeros_like(maskable)
    for b in range(input_ids.shape[0]):
        where = maskable[b].nonzero()[:, 0]
        picks = torch.randperm(len(where), generator=generator)[:round(0.15 * len(where))]
        chosen[b, where[picks]] = True
    u = torch.rand(input_ids.shape, generator=generator)
    random_ids = torch.randint(0, vocab_size, input_ids.shape, generator=generator)
    out = torch.where(chosen & (u < 0.8), mask_id, input_ids)
    return torch.where(chosen & (u >= 0.8) & (u < 0.9), random_ids, out), chosen


def masking_fifteen_percent_of_all(input_ids, maskable, mask_id, vocab_size, generator):
    # 15% of *all* positions chosen, then restricted to maskable ones: too few chosen
    chosen = (torch.rand(input_ids.shape, generator=generator) < 0.15 * maskable.float().mean()) & maskable
    u = torch.rand(input_ids.shape, generator=generator)
    random_ids = torch.randint(0, vocab_size, input_ids.shape, generator=generator)
    out = torch.where(chosen & (u < 0.8), mask_id, input_ids)
    return torch.where(chosen & (u >= 0.8) & (u < 0.9), random_ids, out), chosen


def masking_never_unchanged(input_ids, maskable, mask_id, vocab_size, generator):
    # 80% [MASK], 20% random: forgets the 10% that stay as they are
    chosen = (torch.rand(input_ids.shape, generator=generator) < 0.15) & maskable
    u = torch.rand(input_ids.shape, generator=generator)
    random_ids = torch.randint(0, vocab_size, input_ids.shape, generator=generator)
    out = torch.where(chosen & (u < 0.8), mask_id, input_ids)
    return torch.where(chosen & (u >= 0.8), random_ids, out), chosen


def masking_no_random(input_ids, maskable, mask_id, vocab_size, generator):
    # 90% [MASK], 10% unchanged: no random tokens
    chosen = (torch.rand(input_ids.shape, generator=generator) < 0.15) & maskable
    u = torch.rand(input_ids.shape, generator=generator)
    return torch.where(chosen & (u < 0.9), mask_id, input_ids), chosen


def masking_few_random(input_ids, maskable, mask_id, vocab_size, generator):
    # 80% [MASK], 5% random, 15% unchanged
    chosen = (torch.rand(input_ids.shape, generator=generator) < 0.15) & maskable
    u = torch.rand(input_ids.shape, generator=generator)
    random_ids = torch.randint(0, vocab_size, input_ids.shape, generator=generator)
    out = torch.where(chosen & (u < 0.8), mask_id, input_ids)
    return torch.where(chosen & (u >= 0.8) & (u < 0.85), random_ids, out), chosen


def masking_independent_draws(input_ids, maskable, mask_id, vocab_size, generator):
    # [MASK] with one draw, random with another: the random draw overwrites some [MASK]s
    chosen = (torch.rand(input_ids.shape, generator=generator) < 0.15) & maskable
    u = torch.rand(input_ids.shape, generator=generator)
    v = torch.rand(input_ids.shape, generator=generator)
    random_ids = torch.randint(0, vocab_size, input_ids.shape, generator=generator)
    out = torch.where(chosen & (u < 0.8), mask_id, input_ids)
    return torch.where(chosen & (v < 0.1), random_ids, out), chosen


def masking_independent_draws_after(input_ids, maskable, mask_id, vocab_size, generator):
    # [MASK] with one draw; random with p = 0.1 among the rest: too few random tokens
    chosen = (torch.rand(input_ids.shape, generator=generator) < 0.15) & maskable
    u = torch.rand(input_ids.shape, generator=generator)
    v = torch.rand(input_ids.shape, generator=generator)
    random_ids = torch.randint(0, vocab_size, input_ids.shape, generator=generator)
    out = torch.where(chosen & (u < 0.8), mask_id, input_ids)
    return torch.where(chosen & (u >= 0.8) & (v < 0.1), random_ids, out), chosen


def masking_global_rng(input_ids, maskable, mask_id, vocab_size, generator):
    return masking_reference(input_ids, maskable, mask_id, vocab_size, None)


def masking_reseeds(input_ids, maskable, mask_id, vocab_size, generator):
    torch.manual_seed(0)  # reproducible, but the same mask for every generator
    return masking_reference(input_ids, maskable, mask_id, vocab_size, None)


def masking_reseeds_from_generator(input_ids, maskable, mask_id, vocab_size, generator):
    # varies with the seed, but resets the caller's random state
    torch.manual_seed(generator.initial_seed())
    return masking_reference(input_ids, maskable, mask_id, vocab_size, None)


def masking_in_place(input_ids, maskable, mask_id, vocab_size, generator):
    out, chosen = masking_reference(input_ids, maskable, mask_id, vocab_size, generator)
    input_ids.copy_(out)
    return input_ids, chosen


def masking_bad_random_ids(input_ids, maskable, mask_id, vocab_size, generator):
    out, chosen = masking_reference(input_ids, maskable, mask_id, vocab_size, generator)
    return torch.where(chosen & (out != mask_id) & (out != input_ids), out + vocab_size, out), chosen


MASKING_WRONG = [
    (masking_ignores_maskable, "unmaskable chosen"), (masking_all_mask, "mask share"),
    (masking_seed003, "unmaskable chosen"), (masking_fifteen_percent_of_all, "selection rate"),
    (masking_global_rng, "generator unused"), (masking_in_place, MUTATION),
    (masking_never_unchanged, "no unchanged tokens"), (masking_no_random, "mask share"),
    (masking_bad_random_ids, ""), (masking_with_replacement, "drawn with replacement"),
    (masking_few_random, "random share"),
    (masking_independent_draws, "independent draws"),
    (masking_independent_draws_after, "independent draws"),
    (masking_reseeds, "global RNG reseeded"),
    (masking_reseeds_from_generator, "global RNG reseeded"),
]


@pytest.mark.parametrize("wrong, diagnosis", MASKING_WRONG)
def test_masking_checker(wrong, diagnosis, capsys):
    assert check_masking(masking_reference)
    capsys.readouterr()
    result = check_masking(wrong)
    assert not result
    assert result.diagnosis == diagnosis, result.message


def test_every_masking_diagnosis_is_triggered_by_a_wrong_answer():
    from attnbook.exercises import ch06
    names = {name for name, _ in ch06._MASKING_DIAGNOSES.values()}
    names |= {p[0] for patterns in ch06._MASKING_PATTERNS.values() for p in patterns}
    # "unchanged share" fails first only when [MASK] and random both sit near their limits
    names -= {MUTATION, "unchanged share"}
    assert names == {d for _, d in MASKING_WRONG} - {"", MUTATION}


def test_masking_accepts_an_exact_count_per_row(capsys):
    assert check_masking(masking_exact_count), capsys.readouterr().out


def test_stubs_are_reported_as_not_done(capsys):
    def stub(*args):
        raise NotImplementedError
    for checker in (check_mean_pool, check_accuracy_by_type, check_wordpiece, check_masking, check_frozen_classifier,
                    check_cls_probe):
        assert not checker(stub)
        assert "not done yet" in capsys.readouterr().out


def test_exercises_map_the_notebook_names():
    assert set(EXERCISES) == {"mean_pool", "accuracy_by_type", "wordpiece", "mask_tokens", "frozen_classifier",
                              "cls_vectors"}


# ----------------------------------------------------------------------------- a head on a frozen encoder
class Classifier(nn.Module):
    """The reference, with switches that make each plausible mistake."""

    def __init__(self, encoder, num_classes, pool="mean", freeze=True, eval_encoder=True, mask_encoder=True,
                 width=None, deep_head=False, nudge=False):
        super().__init__()
        self.encoder = encoder.requires_grad_(False) if freeze else encoder
        D = encoder.config.d_model
        self.head = (nn.Sequential(nn.Linear(D, 4), nn.Linear(4, num_classes)) if deep_head
                     else nn.Linear(D, width or num_classes))
        self.pool, self.eval_encoder, self.mask_encoder = pool, eval_encoder, mask_encoder
        if nudge:
            with torch.no_grad():
                encoder.embeddings.tokens.weight.add_(1.0)

    def train(self, mode=True):
        super().train(mode)
        if self.eval_encoder:
            self.encoder.eval()
        return self

    def forward(self, input_ids, token_mask):
        hidden = self.encoder(input_ids, None, token_mask if self.mask_encoder else None)
        features = {"mean": lambda: mean_pool(hidden, token_mask), "all": lambda: hidden.mean(1),
                    "cls": lambda: hidden[:, 0], "pooler": lambda: self.encoder.pool(hidden),
                    "max": lambda: hidden.max(1).values}[self.pool]()
        return self.head(features)


FROZEN_WRONG = [
    (dict(pool="all"), "padding averaged"), (dict(pool="cls"), "[CLS] vector"), (dict(pool="pooler"), "pooler"),
    (dict(freeze=False), "encoder not frozen"), (dict(eval_encoder=False), "dropout in the features"),
    (dict(mask_encoder=False), "no token mask"), (dict(width=7), "wrong shape"), (dict(deep_head=True), "wrong head"),
    (dict(nudge=True), MUTATION), (dict(pool="max"), ""),
]


@pytest.mark.parametrize("switches, diagnosis", FROZEN_WRONG)
def test_frozen_classifier_checker(switches, diagnosis, capsys):
    assert check_frozen_classifier(lambda encoder, c: Classifier(encoder, c))
    capsys.readouterr()
    result = check_frozen_classifier(lambda encoder, c: Classifier(encoder, c, **switches))
    assert not result
    assert result.diagnosis == diagnosis, result.message


# ----------------------------------------------------------------------------- [CLS] vectors (predict, then measure)
CLS_WRONG = [
    (lambda m, i, s, t: mean_pool(m(i, s, t), t), "mean pooling"),
    (lambda m, i, s, t: torch.nn.functional.normalize(mean_pool(m(i, s, t), t), dim=-1), "mean pooling"),
    (lambda m, i, s, t: m.pool(m(i, s, t)), "pooler"),
    (lambda m, i, s, t: torch.nn.functional.normalize(m(i, s, t)[:, 0], dim=-1), "normalised"),
    (lambda m, i, s, t: m(i, s, t)[:, -1], "last position"),
    (lambda m, i, s, t: m.embeddings(i, s)[:, 0], "embedding layer"),
    (lambda m, i, s, t: m(i, s, None)[:, 0], ""),
]


@pytest.mark.parametrize("wrong, diagnosis", CLS_WRONG)
def test_cls_vectors_checker(wrong, diagnosis, capsys):
    assert check_cls_probe(lambda m, i, s, t: m(i, s, t)[:, 0])  # no model given: the function is checked only
    capsys.readouterr()
    result = check_cls_probe(wrong, 40.0)
    assert not result
    assert result.diagnosis == diagnosis, result.message


def test_cls_probe_asks_for_a_prediction_before_measuring(capsys):
    right = lambda m, i, s, t: m(i, s, t)[:, 0]
    # the prediction is judged before the model, tokenizer or texts are touched
    for prediction, diagnosis in ((None, "no prediction"), (0.35, "prediction not a percentage"),
                                  (140, "prediction not a percentage"),
                                  ("35", "prediction not a percentage")):
        result = check_cls_probe(right, prediction, model=object())
        assert not result
        assert result.diagnosis == diagnosis, result.message


def test_every_cls_mistake_is_triggered():
    assert {m.name for m in CLS_MISTAKES} == {d for _, d in CLS_WRONG} - {""}
