"""The RNN encoder-decoder (Cho et al., 2014; Sutskever et al., 2014) with GRU cells.

Legend: B batch, S source length, T target length, E embedding width, He encoder hidden
width per direction, Hd decoder hidden width, V target vocabulary.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence


@dataclass(frozen=True)
class RNNSeq2SeqConfig:
    src_vocab_size: int
    tgt_vocab_size: int
    emb_dim: int = 64
    enc_hidden: int = 128  # per direction; the encoder is bidirectional
    dec_hidden: int = 128
    pad_id: int = 0


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
        """tgt_in ``(B, T)``, context ``(B, C)``, hidden ``(1, B, Hd)`` -> logits ``(B, T, V)``, hidden."""
        B, T = tgt_in.shape
        inputs = torch.cat([self.embedding(tgt_in), context[:, None, :].expand(B, T, -1)], dim=-1)  # (B, T, E+C)
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
        _, context = self.encoder(src, src_lengths)  # (B, 2He)
        logits, _ = self.decoder(tgt_in, context, self.decoder.initial_hidden(context))
        return logits  # (B, T, V)

    def start(self, src: torch.Tensor, src_lengths: torch.Tensor) -> RNNDecoderState:
        """Encode the source once; return the decoder's initial state."""
        _, context = self.encoder(src, src_lengths)
        return RNNDecoderState(self.decoder.initial_hidden(context), context)

    def step(self, tokens: torch.Tensor, state: RNNDecoderState) -> tuple[torch.Tensor, RNNDecoderState]:
        """One decoding step: previous tokens ``(B,)`` -> next-token logits ``(B, V)`` and the new state."""
        logits, hidden = self.decoder(tokens[:, None], state.context, state.hidden)  # (B, 1, V)
        return logits[:, 0], RNNDecoderState(hidden, state.context)
