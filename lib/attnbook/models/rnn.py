"""The RNN encoder-decoder (Cho et al., 2014; Sutskever et al., 2014) with GRU cells, and the
same encoder with an attention decoder (Bahdanau et al., 2015).

Legend: B batch, S source length, T target length, E embedding width, He encoder hidden
width per direction, Hd decoder hidden width, V target vocabulary.
Masks are boolean, ``True`` = may attend (see ``attnbook.layers.masks``).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnbook.layers.masks import key_mask, token_mask
from attnbook.layers.scores import WEIGHTINGS, Score, context_from_scores, make_score
from attnbook.layers.validation import check_positive, check_token_ids


def _check_sizes(config) -> None:
    """Every size of an RNN config must be a positive integer; ``pad_id`` a token of both vocabularies."""
    check_positive(**{name: value for name, value in vars(config).items()
                      if isinstance(value, int) and name != "pad_id"})
    if not 0 <= config.pad_id < min(config.src_vocab_size, config.tgt_vocab_size):
        raise ValueError(f"pad_id {config.pad_id} is outside the vocabularies")


def _check_batch(config, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor | None = None) -> None:
    check_token_ids("src", src, config.src_vocab_size)
    if src_lengths.shape != (src.shape[0],):
        raise ValueError(f"src_lengths must have shape ({src.shape[0]},), got {tuple(src_lengths.shape)}")
    if tgt_in is not None:
        check_token_ids("tgt_in", tgt_in, config.tgt_vocab_size)
        if src.shape[0] != tgt_in.shape[0]:
            raise ValueError(
                f"src (B, S) and tgt_in (B, T) need the same batch size, got {tuple(src.shape)} and {tuple(tgt_in.shape)}"
            )


def _check_tokens(config, tokens: torch.Tensor, batch_size: int) -> None:
    if tokens.shape != (batch_size,):
        raise ValueError(f"tokens must have shape ({batch_size},), got {tuple(tokens.shape)}")
    check_token_ids("tokens", tokens[:, None], config.tgt_vocab_size)


@dataclass(frozen=True)
class RNNSeq2SeqConfig:
    src_vocab_size: int
    tgt_vocab_size: int
    emb_dim: int = 64
    enc_hidden: int = 128  # per direction; the encoder is bidirectional
    dec_hidden: int = 128
    pad_id: int = 0

    def __post_init__(self) -> None:
        _check_sizes(self)


class GRUEncoder(nn.Module):
    """Bidirectional GRU over the source; padding is skipped with packed sequences."""

    def __init__(self, vocab_size: int, emb_dim: int, hidden: int, pad_id: int = 0) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)
        self.gru = nn.GRU(emb_dim, hidden, batch_first=True, bidirectional=True)

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src ``(B, S)``, lengths ``(B,)`` -> outputs ``(B, S, 2He)`` and context ``(B, 2He)``.

        The context is the last forward state joined with the last backward state: the
        fixed-length summary of the whole input that a plain decoder must work from.
        """
        B, S = src.shape
        if src_lengths.shape != (B,):
            raise ValueError(f"src_lengths must have shape ({B},), got {tuple(src_lengths.shape)}")
        packed = pack_padded_sequence(self.embedding(src), src_lengths.cpu(), batch_first=True, enforce_sorted=False)
        outputs, h_n = self.gru(packed)  # h_n: (2, B, He)
        outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=S)  # (B, S, 2He)
        return outputs, torch.cat([h_n[0], h_n[1]], dim=-1)  # (B, S, 2He), (B, 2He)


class ContextDecoder(nn.Module):
    """GRU decoder that sees the same context C at every step: s_t = GRU([emb(y_{t-1}); C], s_{t-1})."""

    def __init__(self, vocab_size: int, emb_dim: int, context_dim: int, hidden: int, pad_id: int = 0) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)
        self.init_state = nn.Linear(context_dim, hidden)
        self.gru = nn.GRU(emb_dim + context_dim, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab_size)

    def initial_hidden(self, context: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.init_state(context))[None]  # (1, B, Hd)

    def forward(self, tgt_in: torch.Tensor, context: torch.Tensor, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """tgt_in ``(B, T)``, context ``(B, 2He)``, hidden ``(1, B, Hd)`` -> logits ``(B, T, V)``, hidden."""
        B, T = tgt_in.shape
        inputs = torch.cat([self.embedding(tgt_in), context[:, None, :].expand(B, T, -1)], dim=-1)  # (B, T, E+2He)
        states, hidden = self.gru(inputs, hidden)  # (B, T, Hd), (1, B, Hd)
        return self.out(states), hidden  # (B, T, V)


@dataclass(frozen=True)
class RNNDecoderState:
    """What the plain decoder carries from one step to the next."""

    hidden: torch.Tensor  # (1, B, Hd)
    context: torch.Tensor  # (B, 2He)


class RNNSeq2Seq(nn.Module):
    """Encoder-decoder without attention: the decoder sees the input only through C."""

    def __init__(self, config: RNNSeq2SeqConfig) -> None:
        super().__init__()
        self.config = config
        self.encoder = GRUEncoder(config.src_vocab_size, config.emb_dim, config.enc_hidden, config.pad_id)
        self.decoder = ContextDecoder(
            config.tgt_vocab_size, config.emb_dim, 2 * config.enc_hidden, config.dec_hidden, config.pad_id
        )

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: logits ``(B, T, V)`` for every target position at once."""
        _check_batch(self.config, src, src_lengths, tgt_in)
        _, context = self.encoder(src, src_lengths)  # (B, 2He)
        logits, _ = self.decoder(tgt_in, context, self.decoder.initial_hidden(context))
        return logits  # (B, T, V)

    def start(self, src: torch.Tensor, src_lengths: torch.Tensor) -> RNNDecoderState:
        """Encode the source once; return the decoder's initial state."""
        _check_batch(self.config, src, src_lengths)
        _, context = self.encoder(src, src_lengths)
        return RNNDecoderState(self.decoder.initial_hidden(context), context)

    def step(self, tokens: torch.Tensor, state: RNNDecoderState) -> tuple[torch.Tensor, RNNDecoderState]:
        """One decoding step: previous tokens ``(B,)`` -> next-token logits ``(B, V)`` and the new state."""
        _check_tokens(self.config, tokens, state.context.shape[0])
        logits, hidden = self.decoder(tokens[:, None], state.context, state.hidden)  # (B, 1, V)
        return logits[:, 0], RNNDecoderState(hidden, state.context)

    def reorder_state(self, state: RNNDecoderState, index: torch.Tensor) -> RNNDecoderState:
        """Keep the batch rows ``index`` ``(B',)`` of ``state``, in that order (beam search)."""
        return RNNDecoderState(state.hidden[:, index], state.context[index])


# --- Attention (Bahdanau et al., 2015) -------------------------------------------------------
# The decoder no longer sees one fixed C: at step i it scores every encoder state h_j against its
# previous state s_{i-1}, turns the scores into weights a_ij (softmax over the real letters) and
# reads the context C_i = Σ_j a_ij h_j. The GRU's input is [C_i; emb(y_{i-1})].


@dataclass(frozen=True)
class RNNAttentionSeq2SeqConfig:
    src_vocab_size: int
    tgt_vocab_size: int
    emb_dim: int = 64
    enc_hidden: int = 128  # per direction; the encoder is bidirectional
    dec_hidden: int = 128
    attn_hidden: int = 128  # width A of the additive score (other scores ignore it)
    score: str = "additive"  # "additive", "dot", "scaled_dot" or "bilinear" (see attnbook.layers.scores)
    weighting: str = "soft"  # "soft"; or hard attention: "argmax" or "sample"
    pad_id: int = 0

    def __post_init__(self) -> None:
        _check_sizes(self)


@dataclass(frozen=True)
class AttentionDecoderState:
    """What the attention decoder carries from one step to the next (returned, never stored)."""

    hidden: torch.Tensor  # (B, Hd): s_{i-1}
    memory: torch.Tensor  # (B, S, 2He): the encoder states h_j, used as values
    keys: torch.Tensor  # (B, S, *): the keys, already through the score's ``prepare``
    src_tokens: torch.Tensor  # (B, S) token mask: True on real letters
    weights: torch.Tensor | None = None  # (B, S): the weights used at the last step


class AttentionDecoder(nn.Module):
    """GRU decoder with attention: s_i = GRU([C_i; emb(y_{i-1})], s_{i-1}), logits = out(s_i)."""

    def __init__(
        self, vocab_size: int, emb_dim: int, context_dim: int, hidden: int, score: Score,
        weighting: str = "soft", pad_id: int = 0,
    ) -> None:
        super().__init__()
        if weighting not in WEIGHTINGS:
            raise ValueError(f"unknown weighting {weighting!r}; expected one of {WEIGHTINGS}")
        self.weighting = weighting
        self.embedding = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)
        self.init_state = nn.Linear(context_dim, hidden)
        self.score = score
        self.cell = nn.GRUCell(context_dim + emb_dim, hidden)
        self.out = nn.Linear(hidden, vocab_size)

    def start(self, memory: torch.Tensor, summary: torch.Tensor, src_tokens: torch.Tensor) -> AttentionDecoderState:
        """memory ``(B, S, 2He)``, summary ``(B, 2He)`` (sets s_0), src_tokens ``(B, S)`` token mask."""
        keys = self.score.prepare(memory)  # (B, S, *)
        return AttentionDecoderState(torch.tanh(self.init_state(summary)), memory, keys, src_tokens)

    def step(self, tokens: torch.Tensor, state: AttentionDecoderState) -> tuple[torch.Tensor, AttentionDecoderState]:
        """tokens ``(B,)`` = y_{i-1} -> s_i ``(B, Hd)`` and the new state (with this step's weights)."""
        scores = self.score.score(state.hidden[:, None, :], state.keys)  # (B, 1, S): e_ij from s_{i-1}
        context, weights = context_from_scores(scores, state.memory, key_mask(state.src_tokens), self.weighting)  # (B, 1, 2He)
        inputs = torch.cat([context[:, 0], self.embedding(tokens)], dim=-1)  # (B, 2He + E): [C_i; emb]
        hidden = self.cell(inputs, state.hidden)  # (B, Hd): s_i
        return hidden, AttentionDecoderState(hidden, state.memory, state.keys, state.src_tokens, weights[:, 0])


class RNNAttentionSeq2Seq(nn.Module):
    """Bidirectional GRU encoder + attention decoder (RNNsearch, Bahdanau et al., 2015)."""

    def __init__(self, config: RNNAttentionSeq2SeqConfig) -> None:
        super().__init__()
        self.config = config
        context_dim = 2 * config.enc_hidden
        self.encoder = GRUEncoder(config.src_vocab_size, config.emb_dim, config.enc_hidden, config.pad_id)
        score = make_score(config.score, config.dec_hidden, context_dim, config.attn_hidden)
        self.decoder = AttentionDecoder(
            config.tgt_vocab_size, config.emb_dim, context_dim, config.dec_hidden, score,
            config.weighting, config.pad_id,
        )

    def start(self, src: torch.Tensor, src_lengths: torch.Tensor) -> AttentionDecoderState:
        """Encode the source once; return the decoder's initial state."""
        _check_batch(self.config, src, src_lengths)
        memory, summary = self.encoder(src, src_lengths)  # (B, S, 2He), (B, 2He)
        return self.decoder.start(memory, summary, token_mask(src_lengths, src.shape[1]).to(src.device))

    def step(self, tokens: torch.Tensor, state: AttentionDecoderState) -> tuple[torch.Tensor, AttentionDecoderState]:
        """One decoding step: previous tokens ``(B,)`` -> next-token logits ``(B, V)`` and the new state.

        ``state.weights`` ``(B, S)`` holds the attention weights this step used.
        """
        _check_tokens(self.config, tokens, state.memory.shape[0])
        hidden, state = self.decoder.step(tokens, state)
        return self.decoder.out(hidden), state  # (B, V)

    def forward(self, src: torch.Tensor, src_lengths: torch.Tensor, tgt_in: torch.Tensor, need_weights: bool = False):
        """Teacher forcing: logits ``(B, T, V)``, and the weights ``(B, T, S)`` if ``need_weights``.

        The decoder runs step by step (s_{i-1} is needed to score step i); the output layer
        runs once on all the states.
        """
        _check_batch(self.config, src, src_lengths, tgt_in)
        B, T = tgt_in.shape
        state = self.start(src, src_lengths)
        hiddens, weights = [], []
        for t in range(T):
            hidden, state = self.decoder.step(tgt_in[:, t], state)  # (B, Hd)
            hiddens.append(hidden)
            weights.append(state.weights)
        logits = self.decoder.out(torch.stack(hiddens, dim=1))  # (B, T, V)
        return (logits, torch.stack(weights, dim=1)) if need_weights else logits  # (B, T, S)
