"""Transfer, the point of BERT: classify a verse of the World English Bible by its book's genre
(Law, History, Wisdom, Prophets, Gospels, Acts, Epistles, Apocalyptic) from a small labelled set.

The recipe compares *features*, each read out by the same linear probe (a logistic regression on
standardised features, trained full-batch for a fixed number of steps):

- the mean-pooled, normalised sentence embedding of a pretrained encoder (all-MiniLM-L6-v2), frozen;
- the same embedding from the same architecture with random initial weights, frozen;
- a bag of WordPiece tokens (counts), the classic baseline with no encoder at all.

Every comparison uses the same verses, the same splits and the same probe; several splits (seeds)
show how much of a difference is noise. Legend: N examples, D feature width, C classes.

:func:`fine_tune` trains the whole encoder with a head (``BertForSequenceClassification``) on the
same splits: the other way to use a pretrained encoder, at a much higher cost per example.
:func:`fine_tune_top` is its affordable form: the last blocks and a head trained on hidden states
cached below them (:func:`cached_states`).
"""
from __future__ import annotations

import copy
import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from attnbook.data.bible import Verse
from attnbook.data.wordpiece import WordPieceTokenizer
from attnbook.layers import key_mask
from attnbook.models.bert import Bert, BertForSequenceClassification, mean_pool, sentence_embeddings
from attnbook.schedules import warmup_linear_scheduler
from attnbook.train import evaluating, fit


@dataclass(frozen=True)
class LabelledTexts:
    """Texts with integer labels (indices into ``label_names``)."""

    texts: tuple[str, ...]
    labels: torch.Tensor  # (N,) long
    label_names: tuple[str, ...]


def genre_sample(verses: Sequence[Verse], token_counts: Sequence[int], per_genre: int, max_tokens: int,
                 seed: int, genres: Sequence[str]) -> LabelledTexts:
    """``per_genre`` verses of each genre (in ``genres``' order), drawn at random among those of at
    most ``max_tokens`` WordPiece tokens (``token_counts[i]`` is verse i's; short verses keep a CPU
    run short). Same seed, same sample."""
    if len(token_counts) != len(verses):
        raise ValueError(f"need one token count per verse: {len(verses)} verses, {len(token_counts)} counts")
    rng = random.Random(seed)
    texts, labels = [], []
    for label, genre in enumerate(genres):
        pool = [v.text for v, n in zip(verses, token_counts) if v.genre == genre and n <= max_tokens]
        if len(pool) < per_genre:
            raise ValueError(f"genre {genre!r} has {len(pool)} verses of <= {max_tokens} tokens, {per_genre} asked")
        texts += rng.sample(pool, per_genre)
        labels += [label] * per_genre
    return LabelledTexts(tuple(texts), torch.tensor(labels), tuple(genres))


@torch.no_grad()
def encode_texts(model: Bert, tokenizer: WordPieceTokenizer, texts: Sequence[str], batch_size: int = 64,
                 device: torch.device | str = "cpu") -> torch.Tensor:
    """Sentence embeddings ``(N, D)`` (mean-pooled, normalised), computed in batches of similar
    length (less padding), returned on the CPU (for the probes) in the order of ``texts``. The
    model runs on ``device`` in eval mode; each submodule's mode is restored after."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = torch.empty(len(texts), model.config.d_model, device="cpu")
    with evaluating(model):
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            inputs = tokenizer.encode_batch([texts[i] for i in rows]).to(device)
            out[rows] = sentence_embeddings(model, inputs.input_ids, inputs.segment_ids, inputs.token_mask).cpu()
    return out


@torch.no_grad()
def encode_texts_by_layer(model: Bert, tokenizer: WordPieceTokenizer, texts: Sequence[str], batch_size: int = 64,
                          device: torch.device | str = "cpu") -> torch.Tensor:
    """Like :func:`encode_texts`, at every depth: ``(L + 1, N, D)``, the mean-pooled, normalised
    output of the embeddings (index 0) and of each of the ``L`` layers, in the same batches, so
    that index ``L`` is :func:`encode_texts`' result. On the CPU, in the order of ``texts``."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = torch.empty(model.config.num_layers + 1, len(texts), model.config.d_model, device="cpu")
    with evaluating(model):
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            inputs = tokenizer.encode_batch([texts[i] for i in rows]).to(device)
            states = model(inputs.input_ids, inputs.segment_ids, inputs.token_mask, all_layers=True).hidden_states
            for depth, hidden in enumerate(states):
                out[depth, rows] = F.normalize(mean_pool(hidden, inputs.token_mask), dim=-1).cpu()
    return out


@torch.no_grad()
def encode_texts_and_states(model: Bert, tokenizer: WordPieceTokenizer, texts: Sequence[str], keep_depth: int,
                            batch_size: int = 64, device: torch.device | str = "cpu",
                            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`encode_texts_by_layer`'s ``(L + 1, N, D)`` and, from the same pass, what
    :func:`cached_states` gives for ``keep_depth``: the hidden states after that many blocks
    ``(N, S, D)`` and the token mask ``(N, S)``, every text padded to the longest (padding rows
    zero). On the CPU, in the order of ``texts``."""
    if not 0 <= keep_depth <= model.config.num_layers:
        raise ValueError(f"keep_depth must be in [0, {model.config.num_layers}], got {keep_depth}")
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    mask = tokenizer.encode_batch(list(texts)).token_mask  # (N, S)
    out = torch.empty(model.config.num_layers + 1, len(texts), model.config.d_model, device="cpu")
    kept = torch.zeros(len(texts), mask.shape[1], model.config.d_model)
    with evaluating(model):
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            inputs = tokenizer.encode_batch([texts[i] for i in rows]).to(device)
            states = model(inputs.input_ids, inputs.segment_ids, inputs.token_mask, all_layers=True).hidden_states
            for depth, hidden in enumerate(states):
                out[depth, rows] = F.normalize(mean_pool(hidden, inputs.token_mask), dim=-1).cpu()
            hidden = states[keep_depth] * inputs.token_mask.unsqueeze(-1)  # (B, S', D), padding zeroed
            kept[rows, :hidden.shape[1]] = hidden.cpu()
    return out, kept, mask


def bag_of_tokens(tokenizer: WordPieceTokenizer, texts: Sequence[str]) -> torch.Tensor:
    """``(N, V')`` token counts over the V' vocabulary entries that occur in ``texts``."""
    ids = [tokenizer.convert_tokens_to_ids(tokenizer.tokenize(t)) for t in texts]
    used = sorted({i for row in ids for i in row})
    column = {token: j for j, token in enumerate(used)}
    counts = torch.zeros(len(texts), len(used))
    for n, row in enumerate(ids):
        for token in row:
            counts[n, column[token]] += 1
    return counts


def stratified_split(labels: torch.Tensor, train_per_class: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Indices ``(train, test)``: ``train_per_class`` random examples of each class for training,
    the rest for testing."""
    g = torch.Generator().manual_seed(seed)
    train, test = [], []
    for c in labels.unique().tolist():
        rows = (labels == c).nonzero().squeeze(1)
        if len(rows) <= train_per_class:
            raise ValueError(f"class {c} has {len(rows)} examples; {train_per_class} for training leaves none to test")
        rows = rows[torch.randperm(len(rows), generator=g)]
        train.append(rows[:train_per_class])
        test.append(rows[train_per_class:])
    return torch.cat(train), torch.cat(test)


def train_linear_probe(features: torch.Tensor, labels: torch.Tensor, num_classes: int, steps: int = 100,
                       lr: float = 0.05, weight_decay: float = 1e-3, seed: int = 0) -> nn.Module:
    """A logistic regression on standardised features (mean and scale of the training set),
    trained full-batch with Adam for ``steps`` steps. Returns ``Sequential(standardise, linear)``."""
    if features.dim() != 2 or features.shape[0] != labels.shape[0]:
        raise ValueError(f"expected features (N, D) and labels (N,), got {tuple(features.shape)} and {tuple(labels.shape)}")
    torch.manual_seed(seed)
    mean, std = features.mean(0), features.std(0)
    # A feature constant on the training set (a token no training verse contains) carries no
    # information: scale it to zero rather than divide by ~0 and blow up on the test set.
    std = torch.where(std > 1e-6, std, torch.full_like(std, float("inf")))
    linear = nn.Linear(features.shape[1], num_classes, device=features.device)
    optimizer = torch.optim.Adam(linear.parameters(), lr=lr, weight_decay=weight_decay)
    x = (features - mean) / std  # (N, D)
    for _ in range(steps):
        loss = F.cross_entropy(linear(x), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return nn.Sequential(Standardise(mean, std), linear).eval()


class Standardise(nn.Module):
    """``(x - mean) / std`` with fixed statistics."""

    def __init__(self, mean: torch.Tensor, std: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("mean", mean.detach().clone())
        self.register_buffer("std", std.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std


@torch.no_grad()
def accuracy(probe: nn.Module, features: torch.Tensor, labels: torch.Tensor) -> float:
    """Share of ``features`` (N, D) that ``probe`` puts in their ``labels`` (N,) class, in eval mode."""
    with evaluating(probe):
        return float((probe(features).argmax(-1) == labels).float().mean())


def probe_accuracies(features: dict[str, torch.Tensor], labels: torch.Tensor, train_per_class: int,
                     seeds: Sequence[int], steps: int = 100) -> dict[str, list[float]]:
    """Test accuracy of the same linear probe on each feature set, one figure per split seed
    (every feature set sees the same splits)."""
    num_classes = int(labels.max()) + 1
    results: dict[str, list[float]] = {name: [] for name in features}
    for seed in seeds:
        train, test = stratified_split(labels, train_per_class, seed)
        for name, x in features.items():
            probe = train_linear_probe(x[train], labels[train], num_classes, steps=steps, seed=seed)
            results[name].append(accuracy(probe, x[test], labels[test]))
    return results


@dataclass(frozen=True)
class FineTuneResult:
    """Test accuracy after fine-tuning, and the training loss of each epoch (mean over its batches)."""

    accuracy: float
    epoch_losses: tuple[float, ...]


def fine_tune(model: BertForSequenceClassification, tokenizer: WordPieceTokenizer, texts: Sequence[str],
              labels: torch.Tensor, train: torch.Tensor, test: torch.Tensor, epochs: int, lr: float,
              batch_size: int = 16, seed: int = 0, device: torch.device | str = "cpu") -> FineTuneResult:
    """Fine-tune every weight of ``model`` on ``texts[train]`` (cross-entropy, AdamW with weight
    decay 0.01, 10% linear warm-up then linear decay, gradients clipped to 1) for ``epochs`` passes
    in a seeded random order, then return the accuracy on ``texts[test]`` (eval mode)."""
    if epochs < 1 or batch_size < 1:
        raise ValueError(f"need epochs >= 1 and batch_size >= 1, got {epochs} and {batch_size}")
    model.to(device)
    g = torch.Generator().manual_seed(seed)
    steps_per_epoch = -(-len(train) // batch_size)
    total = epochs * steps_per_epoch
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    scheduler = warmup_linear_scheduler(optimizer, max(1, total // 10), total)

    def batches():
        for _ in range(epochs):
            order = train[torch.randperm(len(train), generator=g)]
            for start in range(0, len(order), batch_size):
                rows = order[start:start + batch_size].tolist()
                yield tokenizer.encode_batch([texts[i] for i in rows]).to(device), labels[rows].to(device)

    def loss_fn(model, batch):
        inputs, targets = batch
        logits = model(inputs.input_ids, inputs.segment_ids, inputs.token_mask)  # (B, C)
        return F.cross_entropy(logits, targets)

    # fit: train mode, clipping at 1, then the model handed back in eval mode
    history = fit(model, batches(), loss_fn, optimizer, total, clip_norm=1.0, scheduler=scheduler,
                  progress=False)
    losses = [sum(history.losses[e * steps_per_epoch:(e + 1) * steps_per_epoch]) / steps_per_epoch
              for e in range(epochs)]
    right = 0
    with torch.no_grad(), evaluating(model):
        for start in range(0, len(test), 64):
            rows = test[start:start + 64].tolist()
            inputs = tokenizer.encode_batch([texts[i] for i in rows]).to(device)
            predicted = model(inputs.input_ids, inputs.segment_ids, inputs.token_mask).argmax(-1).cpu()
            right += int((predicted == labels[rows]).sum())
    return FineTuneResult(right / len(test), tuple(losses))


def naive_bayes_accuracies(counts: torch.Tensor, labels: torch.Tensor, train_per_class: int,
                           seeds: Sequence[int], alpha: float = 0.1) -> list[float]:
    """Test accuracy of multinomial Naive Bayes on token ``counts`` (N, V) (add-``alpha``
    smoothing, uniform class prior: every class has ``train_per_class`` examples), one figure per
    split seed, on the same splits as :func:`probe_accuracies`."""
    if counts.dim() != 2 or counts.shape[0] != labels.shape[0]:
        raise ValueError(f"expected counts (N, V) and labels (N,), got {tuple(counts.shape)} and {tuple(labels.shape)}")
    num_classes = int(labels.max()) + 1
    results = []
    for seed in seeds:
        train, test = stratified_split(labels, train_per_class, seed)
        totals = torch.zeros(num_classes, counts.shape[1]).index_add_(0, labels[train], counts[train])
        log_p = (totals + alpha).log() - (totals + alpha).sum(1, keepdim=True).log()  # (C, V)
        predicted = (counts[test] @ log_p.T).argmax(-1)
        results.append(float((predicted == labels[test]).float().mean()))
    return results


# --- fine-tuning the top of the encoder on cached states ------------------------------------------
@torch.no_grad()
def cached_states(model: Bert, tokenizer: WordPieceTokenizer, texts: Sequence[str], depth: int,
                  batch_size: int = 64, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """The hidden states after the first ``depth`` blocks, ``(N, S, D)``, and the token mask
    ``(N, S)``, every text padded to the longest: computed once, so that training the blocks above
    ``depth`` never runs the frozen ones again."""
    if not 0 <= depth <= len(model.blocks):
        raise ValueError(f"depth must be in [0, {len(model.blocks)}], got {depth}")
    inputs = tokenizer.encode_batch(list(texts))
    states = []
    with evaluating(model):
        for start in range(0, len(texts), batch_size):
            ids = inputs.input_ids[start:start + batch_size].to(device)
            mask = inputs.token_mask[start:start + batch_size].to(device)
            x = model.embeddings(ids, inputs.segment_ids[start:start + batch_size].to(device))  # (B, S, D)
            for block in model.blocks[:depth]:
                x = block(x, key_mask(mask)).hidden
            states.append(x.cpu())
    return torch.cat(states), inputs.token_mask


class TopBlocksClassifier(nn.Module):
    """Copies of an encoder's last blocks, then dropout and a linear head on the mean of the real
    tokens: ``forward(states (B, S, D), token_mask (B, S)) -> (B, C)`` logits, reading the states
    :func:`cached_states` computed below those blocks. Padding columns that no row of the batch
    uses are dropped first (they change nothing, and cost time)."""

    def __init__(self, blocks: Sequence[nn.Module], d_model: int, num_classes: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(copy.deepcopy(list(blocks)))
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, states: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
        used = int(token_mask.sum(1).max())
        x, token_mask = states[:, :used], token_mask[:, :used]  # (B, S', D), (B, S')
        for block in self.blocks:
            x = block(x, key_mask(token_mask)).hidden
        return self.head(self.dropout(mean_pool(x, token_mask)))  # (B, C)


@dataclass(frozen=True)
class TopFineTuneResult:
    """Accuracy on the evaluated rows, the training loss of each epoch (mean over its batches, in
    train mode) and the final training loss in eval mode (no dropout) on every training row."""

    accuracy: float
    epoch_losses: tuple[float, ...]
    final_train_loss: float


def fine_tune_top(model: Bert, states: torch.Tensor, token_mask: torch.Tensor, labels: torch.Tensor,
                  train: torch.Tensor, evaluate: torch.Tensor, num_blocks: int, lr: float, epochs: int,
                  batch_size: int = 16, seed: int = 0) -> TopFineTuneResult:
    """Train copies of ``model``'s last ``num_blocks`` blocks and a new head (every one of their
    weights; the blocks below stay frozen, their output cached in ``states``) on the ``train`` rows:
    cross-entropy, AdamW (weight decay 0.01), 10% linear warm-up then linear decay, gradients
    clipped to 1, ``epochs`` passes in a seeded order; then the accuracy on the ``evaluate`` rows."""
    if epochs < 1 or batch_size < 1 or not 1 <= num_blocks <= len(model.blocks):
        raise ValueError(f"need epochs >= 1, batch_size >= 1 and 1 <= num_blocks <= {len(model.blocks)}; got "
                         f"{epochs}, {batch_size}, {num_blocks}")
    torch.manual_seed(seed)
    net = TopBlocksClassifier(model.blocks[len(model.blocks) - num_blocks:], model.config.d_model,
                              int(labels.max()) + 1).to(states.device).train()
    g = torch.Generator().manual_seed(seed)
    steps_per_epoch = -(-len(train) // batch_size)
    optimizer = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=0.01)
    scheduler = warmup_linear_scheduler(optimizer, max(1, epochs * steps_per_epoch // 10), epochs * steps_per_epoch)
    losses = []
    for _ in range(epochs):
        order, total = train[torch.randperm(len(train), generator=g)], 0.0
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            loss = F.cross_entropy(net(states[rows], token_mask[rows]), labels[rows])
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            total += float(loss.detach()) * len(rows)
        losses.append(total / len(train))
    net.eval()
    with torch.no_grad():
        right = (net(states[evaluate], token_mask[evaluate]).argmax(-1) == labels[evaluate]).float().mean()
        train_loss = F.cross_entropy(net(states[train], token_mask[train]), labels[train])
    return TopFineTuneResult(float(right), tuple(losses), float(train_loss))
