"""Chapter 1: the RNN encoder-decoder, unrolled over 'phone' -> F OW N (``ch01_encoder_decoder.svg``)."""
from __future__ import annotations

from .svg import Figure

RNN = "attnbook.models.rnn"
DESC = (
    "The word 'phone' (letters x_1 to x_5, shape (B, S)) is embedded (B, S, E) and read by a "
    "bidirectional GRU (GRUEncoder): one GRU left to right, one right to left. Their last states "
    "are joined into the context C = [forward h_S; backward h_1], shape (B, 2He). The per-letter "
    "outputs h_j (B, S, 2He) are not used by this decoder. The ContextDecoder starts from "
    "s_0 = tanh(W_s C + b_s) (init_state), and at every step t reads [emb(y_{t-1}); C], shape (B, T, E+2He): "
    "the embedding of the previous phoneme (<bos>, F, OW, N under teacher forcing) joined with the "
    "same C. Its GRU states s_t (B, T, Hd) go through the output layer to logits (B, T, V) for the "
    "next phoneme: F, OW, N, <eos>. The whole input reaches the decoder only through C."
)
Y_TOK, Y_EMB = 465, 390  # rows of the input tokens and of the embeddings, both sides
# encoder: one bidirectional cell per letter (forward half on top, backward below)
LETTERS = ["p", "h", "o", "n", "e"]
ENC_X = [70 + 72 * j for j in range(5)]
ENC_W, HALF = 52, 24
Y_CELL, Y_OUT = 290, 140  # Y_CELL: the line between the two halves
C_X, C_Y = 450, 150  # the context C
# decoder: one GRU step per phoneme
PREV, NEXT = ["<bos>", "F", "OW", "N"], ["F", "OW", "N", "<eos>"]
DEC_X = [665 + 72 * i for i in range(4)]
DEC_W, DEC_H = 50, 30
Y_STATE, Y_LOGIT, Y_BUS = 255, 165, 330


def draw() -> Figure:
    fig = Figure("ch01_encoder_decoder", 1030, 500, "Chapter 1: the RNN encoder-decoder, unrolled", DESC)
    fig.frame(22, 215, 452, 215, fig.code("GRUEncoder", f"{RNN}.GRUEncoder"), "bottom-right")
    fig.box(45, Y_EMB - 14, 350, 28, fig.code("embedding: nn.Embedding", f"{RNN}.GRUEncoder:embedding"))
    for j, (x, letter) in enumerate(zip(ENC_X, LETTERS)):
        encoder_cell(fig, j, x, letter)
    fig.shape(ENC_X[0] + 6, Y_TOK - 19, "(B, S)")
    fig.shape(ENC_X[0] + 6, Y_EMB - 24, "(B, S, E)")
    fig.text(24, Y_OUT - 10, "h_{j}: outputs (B, S, 2He), unused until Chapter 2", "note", anchor="start")
    context(fig)
    decoder_start(fig)
    for i, x in enumerate(DEC_X):
        decoder_step(fig, i, x)
    labels(fig)
    return fig


def encoder_cell(fig: Figure, j: int, x: float, letter: str) -> None:
    """Letter j: its embedding, both GRU halves, the recurrent arrows, and its unused output h_j."""
    fig.text(x, Y_TOK, f"x_{{{j + 1}}} = {letter}", "math")
    fig.line([(x, Y_TOK - 16), (x, Y_EMB + 16)], "stream")
    fig.line([(x, Y_EMB - 14), (x, Y_CELL + HALF + 2)], "stream")
    fig.box(x - ENC_W / 2, Y_CELL - HALF, ENC_W, 2 * HALF, "")
    fig.line([(x - ENC_W / 2, Y_CELL), (x + ENC_W / 2, Y_CELL)], "stream", arrow=False, width=1)  # the two halves
    fig.text(x, Y_CELL - 7, "GRU→", "code", size=11)
    fig.text(x, Y_CELL + 16, "←GRU", "code", size=11)
    if j:
        before = ENC_X[j - 1]
        fig.line([(before + ENC_W / 2, Y_CELL - 12), (x - ENC_W / 2 - 2, Y_CELL - 12)], "stream")
        fig.line([(x - ENC_W / 2, Y_CELL + 12), (before + ENC_W / 2 + 2, Y_CELL + 12)], "stream")
    # the per-letter outputs h_j: drawn faint, not used in Chapter 1
    fig.line([(x, Y_CELL - HALF), (x, Y_OUT + 22)], "stream", dashed=True, width=1)
    fig.text(x, Y_OUT + 14, f"h_{{{j + 1}}}", "math", colour="#8C8C8C")


def context(fig: Figure) -> None:
    """C = [forward h_S ; backward h_1], fed by the last state of each direction."""
    fig.tensor(C_X, C_Y, "C", "context", w=56)
    fig.text(C_X - 8, C_Y - 19, "C = [h→_{S} ; h←_{1}]", "note", anchor="end")
    fig.line([(ENC_X[-1] + ENC_W / 2, Y_CELL - 12), (428, Y_CELL - 12), (428, C_Y + 14), (C_X - 2, C_Y + 14)],
             "context")
    fig.line([(ENC_X[0] - ENC_W / 2, Y_CELL + 12), (32, Y_CELL + 12), (32, 196), (428, 196)], "context", arrow=False)
    fig.shape(C_X + 62, C_Y + 6, "(B, 2He)")


def decoder_start(fig: Figure) -> None:
    """The decoder's frame, s_0 = init_state(C), the bus that carries C to every step, the embedding."""
    fig.frame(505, 105, 400, 325, fig.code("ContextDecoder", f"{RNN}.ContextDecoder"), "top-left")
    fig.box(514, Y_STATE - 30, 94, 60, fig.code("init_state", f"{RNN}.ContextDecoder:init_state"),
            sub="tanh(W_{s}C+b_{s})", size=11)
    fig.line([(C_X + 56, C_Y + 14), (620, C_Y + 14), (620, Y_BUS), (DEC_X[-1] + 8, Y_BUS)], "context", arrow=False)
    fig.line([(561, C_Y + 14), (561, Y_STATE - 32)], "context")
    fig.line([(608, Y_STATE + 6), (DEC_X[0] - DEC_W / 2 - 2, Y_STATE + 6)], "stream")
    fig.text(624, Y_STATE - 4, "s_{0}", "math", size=13)
    fig.box(DEC_X[0] - 30, Y_EMB - 14, 3 * 72 + 60, 28,
            fig.code("embedding: nn.Embedding", f"{RNN}.ContextDecoder:embedding"))


def decoder_step(fig: Figure, i: int, x: float) -> None:
    """Step t: [emb(y_{t-1}); C] into the GRU, s_t to the next step and through ``out`` to y_t."""
    fig.text(x, Y_TOK, PREV[i], "code", size=12)
    fig.line([(x, Y_TOK - 16), (x, Y_EMB + 16)], "stream")
    fig.line([(x - 8, Y_EMB - 14), (x - 8, Y_STATE + DEC_H / 2 + 2)], "stream")
    fig.line([(x + 8, Y_BUS), (x + 8, Y_STATE + DEC_H / 2 + 2)], "context")
    fig.box(x - DEC_W / 2, Y_STATE - DEC_H / 2, DEC_W, DEC_H, "GRU", size=12)
    fig.text(x + 36, Y_STATE - 4, f"s_{{{i + 1}}}", "math", size=13)  # above the arrow to the next cell
    if i:
        fig.line([(DEC_X[i - 1] + DEC_W / 2, Y_STATE + 6), (x - DEC_W / 2 - 2, Y_STATE + 6)], "stream")
    fig.line([(x, Y_STATE - DEC_H / 2), (x, Y_LOGIT + 14 + 2)], "stream")
    fig.box(x - DEC_W / 2, Y_LOGIT - 14, DEC_W, 28, fig.code("out", f"{RNN}.ContextDecoder:out"), size=12)
    fig.line([(x, Y_LOGIT - 14), (x, 96)], "stream")
    fig.text(x, 86, NEXT[i], "code", size=12)


def labels(fig: Figure) -> None:
    """The decoder's shapes on the right, the title and the legend."""
    fig.text(DEC_X[0] - 40, Y_TOK, "y_{t-1}", "math", anchor="end")
    fig.text(DEC_X[0] - 40, 86, "y_{t}", "math", anchor="end")
    right = DEC_X[-1] + 34
    fig.shape(right, Y_LOGIT + 4, "(B, T, V)")
    fig.shape(right, Y_STATE + 26, "(B, T, Hd)")
    fig.shape(right, Y_BUS - 4, "(B, T, E+2He)")
    fig.text(right, Y_BUS + 12, "[emb(y_{t-1}); C]", "note", anchor="start")
    fig.shape(right, Y_EMB + 4, "(B, T, E)")
    fig.text(30, 30, fig.code("RNNSeq2Seq", f"{RNN}.RNNSeq2Seq")
             + ": the input reaches the decoder only through C", "title", anchor="start")
    fig.legend(30, 492, ["stream", "context"], {"stream": "states, embeddings", "context": "context C"})
