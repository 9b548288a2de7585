"""BERT's two pretraining tasks: masked language modelling (MLM) and next-sentence prediction (NSP).

- :func:`mask_tokens`: choose 15% of the maskable tokens; of those, 80% become ``[MASK]``, 10% a
  random token, 10% stay as they are. The loss and the accuracy count the *chosen* positions
  only (:func:`mlm_loss`, :func:`mlm_accuracy`), never the whole sequence.
- :func:`make_nsp_pairs`: sentence pairs, 50% the real next sentence (label 0, ``IsNext``) and
  50% a random sentence from another document (label 1, ``NotNext``), classified by a two-class
  softmax on ``[CLS]`` (:func:`nsp_loss`).
- :func:`pretrain`: a small recipe that trains a ``BertForPreTraining`` on both tasks for a fixed
  number of steps, and :func:`unigram_accuracy`, the baseline it must beat.
"""
from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch
import torch.nn.functional as F

from attnbook.data.wordpiece import BertInputs, build_inputs, pad_encodings
from attnbook.models.bert import BertForPreTraining
from attnbook.schedules import warmup_linear_scheduler
from attnbook.train import History, evaluating, fit

T = TypeVar("T")
IS_NEXT, NOT_NEXT = 0, 1


# ----------------------------------------------------------------------------- masked LM
@dataclass(frozen=True)
class MaskedInputs:
    """The corrupted ids the model sees, the original ids, and which positions were chosen."""

    input_ids: torch.Tensor  # (B, S) after [MASK] / random / unchanged
    targets: torch.Tensor    # (B, S) the original ids
    chosen: torch.Tensor     # (B, S) bool: the positions the loss and the accuracy count

    def to(self, device: torch.device | str) -> MaskedInputs:
        return MaskedInputs(self.input_ids.to(device), self.targets.to(device), self.chosen.to(device))


def mask_tokens(
    input_ids: torch.Tensor,
    maskable: torch.Tensor,
    mask_id: int,
    vocab_size: int,
    generator: torch.Generator,
    select_prob: float = 0.15,
    mask_prob: float = 0.8,
    random_prob: float = 0.1,
    random_low: int = 0,
) -> MaskedInputs:
    """BERT's corruption: each maskable token is chosen with probability ``select_prob``; a
    chosen token becomes ``mask_id`` with probability ``mask_prob``, a uniformly random id in
    ``[random_low, vocab_size)`` with probability ``random_prob``, and stays unchanged otherwise.

    ``maskable`` (B, S) bool is False on special tokens and padding. The input is not modified.
    Random draws come from ``generator`` (on any device; made there, then moved to the ids'
    device), so a seed repeats the corruption.
    """
    if input_ids.shape != maskable.shape or maskable.dtype != torch.bool:
        raise ValueError(f"maskable must be a bool tensor shaped like input_ids {tuple(input_ids.shape)}; "
                         f"got {maskable.dtype} {tuple(maskable.shape)}")
    if not (0 <= select_prob <= 1 and mask_prob >= 0 and random_prob >= 0 and mask_prob + random_prob <= 1):
        raise ValueError(f"need 0 <= select_prob <= 1 and mask_prob + random_prob <= 1; got "
                         f"{select_prob}, {mask_prob}, {random_prob}")
    if not 0 <= random_low < vocab_size:
        raise ValueError(f"random ids are drawn from [random_low, vocab_size); got [{random_low}, {vocab_size})")
    shape, device = input_ids.shape, input_ids.device
    draw = dict(generator=generator, device=generator.device)  # drawn where the generator lives
    chosen = (torch.rand(shape, **draw) < select_prob).to(device) & maskable  # (B, S)
    u = torch.rand(shape, **draw).to(device)  # (B, S)
    random_ids = torch.randint(random_low, vocab_size, shape, **draw).to(device)  # (B, S)
    to_mask = chosen & (u < mask_prob)
    to_random = chosen & (u >= mask_prob) & (u < mask_prob + random_prob)
    corrupted = torch.where(to_mask, torch.full_like(input_ids, mask_id), input_ids)
    corrupted = torch.where(to_random, random_ids, corrupted)
    return MaskedInputs(corrupted, input_ids.clone(), chosen)


def masking_statistics(masked: MaskedInputs, maskable: torch.Tensor, mask_id: int) -> dict[str, float | int]:
    """Measured rates: the share of maskable tokens chosen, and among the chosen the share turned
    into [MASK], into another token, or left as they were (a random draw that hits the original
    token counts as unchanged: about 1/V of the random 10%)."""
    chosen = masked.chosen
    n_chosen = int(chosen.sum())
    if n_chosen == 0:
        raise ValueError("no position was chosen: statistics need at least one")
    seen, original = masked.input_ids[chosen], masked.targets[chosen]
    return {
        "maskable tokens": int(maskable.sum()),
        "chosen": n_chosen,
        "chosen / maskable": n_chosen / int(maskable.sum()),
        "[MASK] / chosen": float((seen == mask_id).float().mean()),
        "random / chosen": float(((seen != mask_id) & (seen != original)).float().mean()),
        "unchanged / chosen": float((seen == original).float().mean()),
        "changed outside chosen": int((masked.input_ids[~chosen] != masked.targets[~chosen]).sum()),
    }


def _chosen_logits(logits: torch.Tensor, masked: MaskedInputs) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits and targets at the chosen positions. ``logits`` is (B, S, V), or already (N, V)
    for the N chosen positions in row-major order (what the model returns with ``predict_at``)."""
    n = int(masked.chosen.sum())
    if n == 0:
        raise ValueError("no position was chosen: the MLM loss is undefined on zero tokens")
    targets = masked.targets[masked.chosen]  # (N,)
    if logits.dim() == 3:
        if logits.shape[:2] != masked.chosen.shape:
            raise ValueError(f"logits (B, S, V) {tuple(logits.shape)} do not match the batch {tuple(masked.chosen.shape)}")
        logits = logits[masked.chosen]        # (N, V)
    elif logits.dim() != 2 or logits.shape[0] != n:
        raise ValueError(f"expected logits (B, S, V) or ({n}, V) for the {n} chosen positions; got {tuple(logits.shape)}")
    return logits, targets


def mlm_loss(logits: torch.Tensor, masked: MaskedInputs) -> torch.Tensor:
    """Mean cross-entropy over the chosen positions only."""
    logits, targets = _chosen_logits(logits, masked)
    return F.cross_entropy(logits, targets)


@torch.no_grad()
def mlm_accuracy(logits: torch.Tensor, masked: MaskedInputs) -> float:
    """Share of chosen positions whose most likely token is the original one.

    (Dividing by every position of the batch, as seed 003 does, shrinks the figure by the
    masking rate and by the padding: a model right on every chosen token would score ~15%.)
    """
    logits, targets = _chosen_logits(logits, masked)
    return float((logits.argmax(-1) == targets).float().mean())


def most_frequent_token(train_ids: Sequence[Sequence[int]], exclude: Sequence[int] = ()) -> int:
    """The id that occurs most often in ``train_ids`` (ids in ``exclude`` skipped)."""
    counts = Counter(i for ids in train_ids for i in ids)
    for special in exclude:
        counts.pop(special, None)
    if not counts:
        raise ValueError("train_ids hold no countable token")
    return counts.most_common(1)[0][0]


def unigram_accuracy(train_ids: Sequence[Sequence[int]], masked: MaskedInputs, exclude: Sequence[int] = ()) -> float:
    """The baseline: always predict the most frequent training token (ids in ``exclude`` skipped)."""
    guess = most_frequent_token(train_ids, exclude)
    return float((masked.targets[masked.chosen] == guess).float().mean())


POSITION_TYPES = ("[MASK]", "random", "unchanged")
"""What the model sees at a chosen position: ``[MASK]``, another (random) token, or the original."""


def position_types(masked: MaskedInputs, mask_id: int) -> dict[str, torch.Tensor]:
    """The chosen positions split by what the model sees there: ``{type: (B, S) bool}`` for each
    of :data:`POSITION_TYPES` (a random draw that hits the original token counts as unchanged)."""
    seen, chosen = masked.input_ids, masked.chosen
    is_mask = chosen & (seen == mask_id)
    unchanged = chosen & (seen == masked.targets) & ~is_mask
    return {"[MASK]": is_mask, "random": chosen & ~is_mask & ~unchanged, "unchanged": unchanged}


def accuracy_by_position_type(predicted: torch.Tensor, masked: MaskedInputs, mask_id: int) -> dict[str, tuple[int, int]]:
    """``{type: (right, count)}`` of ``predicted`` ids ``(B, S)`` against the original tokens, for
    each position type and for ``"all chosen"``: the naive metric that mixes the three."""
    if predicted.shape != masked.targets.shape:
        raise ValueError(f"predicted ids {tuple(predicted.shape)} must match the batch {tuple(masked.targets.shape)}")
    correct = predicted == masked.targets
    groups = {**position_types(masked, mask_id), "all chosen": masked.chosen}
    return {name: (int((correct & where).sum()), int(where.sum())) for name, where in groups.items()}


def bigram_table(train_ids: Sequence[Sequence[int]], vocab_size: int, start_id: int, end_id: int) -> torch.Tensor:
    """``(V, V)`` counts of (token, next token) in the training sentences, each read as
    ``start_id, ids..., end_id`` (the [CLS] and [SEP] a model sees around them)."""
    counts = torch.zeros(vocab_size * vocab_size)
    pairs = [a * vocab_size + b for ids in train_ids for a, b in zip([start_id, *ids], [*ids, end_id])]
    counts.index_add_(0, torch.tensor(pairs), torch.ones(len(pairs)))
    return counts.view(vocab_size, vocab_size)


def baseline_predictions(seen: torch.Tensor, mask_id: int, unigram_id: int, bigrams: torch.Tensor | None = None,
                         exclude: Sequence[int] = ()) -> torch.Tensor:
    """The cheap rivals of a masked LM, ``(B, S)`` predicted ids from the corrupted input ``seen``:

    - ``bigrams`` None (**copy-or-unigram**): where the model sees a real token, predict that token
      (copying is right at every unchanged position); where it sees ``[MASK]``, the most frequent
      training token ``unigram_id``;
    - ``bigrams`` given (**copy-or-bigram**): the same copy, but at ``[MASK]`` the token that most
      often follows the visible token on its left in the training text (the unigram guess where
      the left neighbour is itself ``[MASK]``). Ids in ``exclude`` are never predicted."""
    predicted = torch.where(seen == mask_id, torch.full_like(seen, unigram_id), seen)
    if bigrams is None:
        return predicted
    table = bigrams.clone()
    table[:, list(exclude)] = -1
    after = table.argmax(-1)  # (V,): the most frequent next token of each token
    left = F.pad(seen[:, :-1], (1, 0), value=mask_id)  # (B, S): the visible token on the left
    use = (seen == mask_id) & (left != mask_id)
    return torch.where(use, after[left.clamp(max=len(after) - 1)], predicted)


# ----------------------------------------------------------------------------- next-sentence prediction
def make_nsp_pairs(documents: Sequence[Sequence[T]], num_pairs: int, rng: random.Random) -> list[tuple[T, T, int]]:
    """``num_pairs`` of ``(a, b, label)``: a sentence and the one after it in its document
    (label 0, ``IsNext``) with probability 1/2, otherwise a random sentence of another document
    (label 1, ``NotNext``), as in BERT's pretraining data."""
    starts = [(d, i) for d, doc in enumerate(documents) for i in range(len(doc) - 1)]
    if not starts:
        raise ValueError("need at least one document with two or more sentences")
    if sum(1 for doc in documents if len(doc)) < 2:
        raise ValueError("need at least two non-empty documents to draw random (NotNext) sentences from")
    pairs = []
    for _ in range(num_pairs):
        d, i = starts[rng.randrange(len(starts))]
        if rng.random() < 0.5:
            pairs.append((documents[d][i], documents[d][i + 1], IS_NEXT))
        else:
            other = d
            while other == d or not documents[other]:
                other = rng.randrange(len(documents))
            pairs.append((documents[d][i], documents[other][rng.randrange(len(documents[other]))], NOT_NEXT))
    return pairs


def nsp_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of a two-class softmax: ``logits`` (B, 2), ``labels`` (B,) in {0, 1}."""
    if logits.dim() != 2 or logits.shape[1] != 2 or labels.shape != logits.shape[:1]:
        raise ValueError(f"expected logits (B, 2) and labels (B,); got {tuple(logits.shape)} and {tuple(labels.shape)}")
    return F.cross_entropy(logits, labels)


# ----------------------------------------------------------------------------- pretraining recipe
@dataclass(frozen=True)
class PretrainBatch:
    """Sentence pairs, corrupted for MLM, with their NSP labels."""

    inputs: BertInputs                # segment ids and token mask; inputs.input_ids are the *clean* ids
    masked: MaskedInputs              # masked.input_ids is what the model sees
    nsp_labels: torch.Tensor | None   # (B,) 0 = IsNext, 1 = NotNext; None for single sentences (MLM only)

    def to(self, device: torch.device | str) -> PretrainBatch:
        labels = self.nsp_labels.to(device) if self.nsp_labels is not None else None
        return PretrainBatch(self.inputs.to(device), self.masked.to(device), labels)


def pretrain_batch(pairs: Sequence[tuple[Sequence[int], Sequence[int], int]], special_ids: Sequence[int],
                   cls_id: int, sep_id: int, pad_id: int, mask_id: int, vocab_size: int, max_len: int,
                   generator: torch.Generator, random_low: int = 0) -> PretrainBatch:
    """Encode id pairs as ``[CLS] a [SEP] b [SEP]`` (truncated to ``max_len``), pad, and mask."""
    encodings = [build_inputs(a, b, cls_id, sep_id, max_len) for a, b, _ in pairs]
    labels = torch.tensor([label for _, _, label in pairs])
    return _pad_and_mask(encodings, labels, special_ids, pad_id, mask_id, vocab_size, generator, random_low)


def pretraining_loss(model: BertForPreTraining, batch: PretrainBatch) -> torch.Tensor:
    """MLM loss on the chosen positions, plus NSP loss on [CLS] when the batch holds pairs."""
    mlm_logits, nsp_logits = model(batch.masked.input_ids, batch.inputs.segment_ids, batch.inputs.token_mask,
                                   predict_at=batch.masked.chosen)
    loss = mlm_loss(mlm_logits, batch.masked)
    if batch.nsp_labels is not None:
        loss = loss + nsp_loss(nsp_logits, batch.nsp_labels)
    return loss


@torch.no_grad()
def evaluate_pretraining(model: BertForPreTraining, batches: Sequence[PretrainBatch]) -> dict[str, float]:
    """MLM accuracy over all chosen positions and NSP accuracy over all pairs of ``batches``,
    in eval mode (each submodule's mode restored after)."""
    right = total = nsp_right = nsp_total = 0
    with evaluating(model):
        for batch in batches:
            mlm_logits, nsp_logits = model(batch.masked.input_ids, batch.inputs.segment_ids,
                                           batch.inputs.token_mask, predict_at=batch.masked.chosen)
            targets = batch.masked.targets[batch.masked.chosen]
            right += int((mlm_logits.argmax(-1) == targets).sum())
            total += targets.numel()
            if batch.nsp_labels is not None:
                nsp_right += int((nsp_logits.argmax(-1) == batch.nsp_labels).sum())
                nsp_total += batch.nsp_labels.numel()
    results = {"mlm accuracy": right / total}
    if nsp_total:
        results["nsp accuracy"] = nsp_right / nsp_total
    return results


def sentence_batch(sentences: Sequence[Sequence[int]], special_ids: Sequence[int], cls_id: int, sep_id: int,
                   pad_id: int, mask_id: int, vocab_size: int, max_len: int, generator: torch.Generator,
                   random_low: int = 0) -> PretrainBatch:
    """Single sentences as ``[CLS] a [SEP]`` (truncated to ``max_len``), padded and masked: MLM only."""
    encodings = [build_inputs(a, None, cls_id, sep_id, max_len) for a in sentences]
    return _pad_and_mask(encodings, None, special_ids, pad_id, mask_id, vocab_size, generator, random_low)


def _pad_and_mask(encodings: Sequence[tuple[list[int], list[int]]], nsp_labels: torch.Tensor | None,
                  special_ids: Sequence[int], pad_id: int, mask_id: int, vocab_size: int,
                  generator: torch.Generator, random_low: int) -> PretrainBatch:
    """Pad the encoded sequences and mask them; special tokens and padding are never chosen."""
    inputs = pad_encodings(encodings, pad_id)
    maskable = inputs.token_mask & ~torch.isin(inputs.input_ids, torch.tensor(list(special_ids)))
    masked = mask_tokens(inputs.input_ids, maskable, mask_id, vocab_size, generator, random_low=random_low)
    return PretrainBatch(inputs, masked, nsp_labels)


def sentence_batches(sentences: Sequence[Sequence[int]], batch_size: int, special_ids: Sequence[int],
                     cls_id: int, sep_id: int, pad_id: int, mask_id: int, vocab_size: int, max_len: int,
                     seed: int, random_low: int = 0, device: torch.device | str = "cpu") -> Iterator[PretrainBatch]:
    """An endless stream of MLM batches on ``device``: random sentences, freshly masked each time
    (the random draws happen on the CPU, so a seed gives the same batches on every device)."""
    rng, generator = random.Random(seed), torch.Generator().manual_seed(seed)
    while True:
        chosen = [sentences[rng.randrange(len(sentences))] for _ in range(batch_size)]
        yield sentence_batch(chosen, special_ids, cls_id, sep_id, pad_id, mask_id, vocab_size, max_len,
                             generator, random_low).to(device)


def compact_vocabulary(sentences: Sequence[Sequence[int]], keep: int, special_ids: Sequence[int],
                       unk_id: int) -> tuple[list[list[int]], list[int]]:
    """Renumber ids so that a small model need not carry a 30,522-row table: the special tokens
    first (in the order given), then the ``keep`` most frequent other ids; every other id becomes
    ``unk_id``'s new number. Returns the renumbered sentences and ``old_ids`` (new id -> old id)."""
    if unk_id not in special_ids:
        raise ValueError(f"unk_id {unk_id} must be one of the special ids {list(special_ids)}")
    counts = Counter(i for s in sentences for i in s if i not in set(special_ids))
    old_ids = list(special_ids) + [i for i, _ in counts.most_common(keep)]
    new = {old: n for n, old in enumerate(old_ids)}
    unk = new[unk_id]
    return [[new.get(i, unk) for i in s] for s in sentences], old_ids


def pair_batches(documents: Sequence[Sequence[Sequence[int]]], batch_size: int, special_ids: Sequence[int],
                 cls_id: int, sep_id: int, pad_id: int, mask_id: int, vocab_size: int, max_len: int,
                 seed: int, random_low: int = 0, device: torch.device | str = "cpu") -> Iterator[PretrainBatch]:
    """An endless stream of freshly drawn and freshly masked sentence-pair batches on ``device``."""
    rng, generator = random.Random(seed), torch.Generator().manual_seed(seed)
    while True:
        pairs = make_nsp_pairs(documents, batch_size, rng)
        yield pretrain_batch(pairs, special_ids, cls_id, sep_id, pad_id, mask_id, vocab_size, max_len,
                             generator, random_low).to(device)


def pretrain(model: BertForPreTraining, batches: Iterator[PretrainBatch], steps: int, lr: float,
             warmup: int, progress: bool = True) -> History:
    """AdamW (weight decay 0.01) with linear warm-up then linear decay, for ``steps`` steps."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    scheduler = warmup_linear_scheduler(optimizer, warmup, steps)
    return fit(model, batches, pretraining_loss, optimizer, steps, clip_norm=1.0, scheduler=scheduler,
               progress=progress)
