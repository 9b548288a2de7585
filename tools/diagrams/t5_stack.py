"""Chapter 10: T5's encoder-decoder with the relative position bias and the sentinels (``t5_stack.svg``)."""
from __future__ import annotations

from .svg import Figure

L = "attnbook.layers"
T5 = "attnbook.models.t5.T5"
RPB = "attnbook.layers.relative_position.RelativePositionBias"
DESC = (
    "The library's T5, pretrained by span corruption. Bottom left, the corrupted input text "
    "'Thank you <X> me to your party <Y> week. </s>', ids (B, S), goes through the shared token "
    "table (one nn.Embedding (V, D): no scale by sqrt(D), no position table) to (B, S, D), then L "
    "pre-norm EncoderBlocks: RMSNorm then self_attn (MultiHeadAttention with scale 1 and no "
    "biases), added back to the stream; RMSNorm then the gated-GELU feed-forward, added back. A "
    "RelativePositionBias (bidirectional buckets of the offset key minus query, one learned scalar "
    "per bucket and head) gives a (1, H, S, S) bias, computed once and added to the scores of every "
    "encoder block. A final RMSNorm gives the memory R (B, S, D). Right, the decoder reads the "
    "target shifted behind the start token '<pad> <X> for inviting <Y> last', (B, T), through the "
    "same table, then L pre-norm DecoderBlocks: self_attn with a causal RelativePositionBias "
    "(1, H, T, T) and the causal mask; cross_attn whose keys and values come from R (no position "
    "bias); the gated feed-forward. A final RMSNorm, then the read-out: the output scaled by D to "
    "the -1/2 times the shared table transposed, logits (B, T, V), trained to predict '<X> for "
    "inviting <Y> last </s>'."
)
W, RES = 200, 115  # box width; how far left of the stream the residual branch runs
EX, DX, ENTRY = 240, 690, 690  # encoder and decoder streams; where the stream enters a block
UNIT = 136  # height of one pre-norm sublayer: norm, sublayer, sum
Box = tuple[float, float, float, float]


def draw() -> Figure:
    fig = Figure("t5_stack", 1000, 820, "Chapter 10: T5, an encoder-decoder with relative position bias",
                 DESC)
    fig.text(30, 28, fig.code("T5", T5) + ": pre-norm, RMSNorm, no 1/√Dh, relative position bias, one shared table",
             "title", anchor="start")
    enc_attn, top = stack(fig, EX, ("self_attn", "feed_forward"), f"{L}.EncoderBlock", "EncoderBlock")
    embed(fig, EX, "Thank you <X> me to your party <Y> week. </s>", "(B, S)", "(B, S, D)")
    bias(fig, enc_attn, "bidirectional", "(1, H, S, S)")
    memory_y = final_norm(fig, EX, top)
    fig.tensor(EX - 25, memory_y - 58, "R", "stream", w=50)
    fig.line([(EX, memory_y), (EX, memory_y - 28)], "stream")
    fig.shape(EX - 32, memory_y - 36, "memory (B, S, D)", anchor="end")
    dec_attn, top = stack(fig, DX, ("self_attn", "cross_attn", "feed_forward"), f"{L}.DecoderBlock", "DecoderBlock")
    embed(fig, DX, "<pad> <X> for inviting <Y> last", "(B, T)", "(B, T, D)")
    bias(fig, dec_attn["self_attn"], "causal + causal_mask", "(1, H, T, T)")
    memory_to_cross(fig, memory_y - 44, dec_attn["cross_attn"])
    readout(fig, final_norm(fig, DX, top))
    fig.legend(30, 808, ["query", "key", "value", "stream", "weights"])
    return fig


def stack(fig: Figure, cx: float, sublayers: tuple[str, ...], owner: str, name: str):
    """Pre-norm sublayers bottom to top: ``x + sublayer(RMSNorm(x))`` each; returns the boxes and the top."""
    y, boxes = ENTRY, {}
    for i, key in enumerate(sublayers, start=1):
        boxes[key] = unit(fig, cx, y, key, fig.code(f"norm{i}: RMSNorm", f"{owner}:norm{i}", f"{L}.RMSNorm"))
        y -= UNIT
    fig.frame(cx - RES - 12, y - 30, W / 2 + RES + 24, ENTRY - y + 34,
              fig.code(name, f"{L}.{name}") + " × L", "top-left")
    return (boxes if len(sublayers) > 2 else boxes["self_attn"]), y


def unit(fig: Figure, cx: float, y: float, key: str, norm_label: str) -> Box:
    """One pre-norm sublayer above ``y``: RMSNorm, the sublayer, then the residual sum ⊕."""
    x = cx - W / 2
    fig.line([(cx, y), (cx, y - 6)], "stream", arrow=False)
    fig.line([(cx, y - 6), (cx - RES, y - 6), (cx - RES, y - UNIT + 8), (cx - 9, y - UNIT + 8)], "stream")
    fig.line([(cx, y - 6), (cx, y - 14)], "stream")
    fig.box(x + 30, y - 42, W - 60, 28, norm_label, size=11)
    fig.line([(cx, y - 42), (cx, y - 50)], "stream", arrow=False)
    top = y - 112
    if key == "self_attn":
        for dxq, role in ((-50, "query"), (0, "key"), (50, "value")):
            fig.line([(cx, y - 50), (cx + dxq, y - 50), (cx + dxq, top + 42)], role)
    else:
        fig.line([(cx, y - 50), (cx, top + 42)], "query" if key == "cross_attn" else "stream")
    if key == "feed_forward":
        sub = fig.code("GatedFeedForward", f"{L}.GatedFeedForward")
    else:
        sub = fig.code("MultiHeadAttention", f"{L}.MultiHeadAttention")
    label = "feed_forward (GeGLU)" if key == "feed_forward" else f"{key} (scale 1)"
    fig.box(x, top, W, 40, label, sub=sub, size=12)
    fig.line([(cx, top), (cx, y - UNIT + 17)], "stream")
    fig.circle(cx, y - UNIT + 8, 8, "stream")
    fig.text(cx, y - UNIT + 13, "+", size=12)
    return x, top, W, 40


def embed(fig: Figure, cx: float, text: str, ids: str, shape: str) -> None:
    """Text ids into the shared table, then up into the first block."""
    fig.text(cx, 790, text, "code", size=11)
    fig.shape(cx + 110, 772, ids)
    fig.line([(cx, 778), (cx, 752)], "stream")
    fig.box(cx - 110, 712, 220, 38, fig.code("shared: nn.Embedding", T5),
            sub="no √D, no position table", size=11)
    fig.line([(cx, 712), (cx, ENTRY + 2)], "stream", arrow=False)
    fig.shape(cx + 118, 706, shape)


def bias(fig: Figure, attn: Box, kind: str, shape: str) -> None:
    """A stack's RelativePositionBias, added to the scores of its self-attention in every block."""
    x, top, w, h = attn
    bx = x + w + 15
    fig.box(bx, top - 4, 185, 48, fig.code("RelativePositionBias", RPB), sub=kind, role="weights", size=11)
    fig.line([(bx, top + h / 2 + 6), (x + w + 2, top + h / 2 + 6)], "weights")
    fig.text(bx + 92, top + 60, "β[h, b(j − i)]: one scalar", "note")
    fig.text(bx + 92, top + 75, "per head, in every block", "note")
    fig.shape(bx + 92, top - 12, shape, anchor="middle")


def final_norm(fig: Figure, cx: float, top: float) -> float:
    """The stack's final RMSNorm above ``top``; returns the y where the stream leaves it."""
    fig.line([(cx, top), (cx, top - 42)], "stream")
    fig.box(cx - 95, top - 72, 190, 28, "final_norm: RMSNorm", size=11)
    return top - 72


def memory_to_cross(fig: Figure, y: float, cross: Box) -> None:
    """R becomes the keys and values of every decoder block's cross-attention (no position bias)."""
    x, top, _, h = cross
    cy = top + h / 2
    fig.line([(EX + 25, y - 6), (548, y - 6), (548, cy - 7), (x - 2, cy - 7)], "key")
    fig.line([(EX + 25, y + 6), (556, y + 6), (556, cy + 7), (x - 2, cy + 7)], "value")
    fig.text(400, y - 22, "the same R in every block; no position bias", "note")


def readout(fig: Figure, y: float) -> None:
    """The read-out: the shared table applied to the scaled decoder output."""
    fig.line([(DX, y), (DX, 132)], "stream")
    fig.box(DX - 130, 90, 260, 40, fig.code("readout: T5Readout", "attnbook.models.t5.T5Readout"),
            sub="(x · D^{-1/2}) W_{emb}ᵀ (shared table)", size=12)
    fig.line([(DX, 90), (DX, 66)], "stream")
    fig.text(DX, 58, "logits (B, T, V) → <X> for inviting <Y> last </s>", "code", size=11)
