"""Chapter 5: the Transformer encoder-decoder, post-norm (``ch05_transformer.svg``)."""
from __future__ import annotations

from .svg import Figure

L = "attnbook.layers"
TR = "attnbook.models.transformer.Transformer"
DESC = (
    "The library's Transformer. Left, the encoder: source tokens (B, S) go through src_embeddings "
    "(Embeddings: token embedding times sqrt(D) plus SinusoidalPositionalEncoding), shape (B, S, D), "
    "then L EncoderBlocks (encoder_blocks). Each block is self_attn (MultiHeadAttention; queries, keys "
    "and values all from the stream; key_mask (B, 1, S) for padding), then norm1 = LayerNorm(x + "
    "sublayer), then feed_forward (FeedForward, D to F to D), then norm2. Its output is the memory R, "
    "(B, S, D). Right, the decoder: target tokens (B, T) through tgt_embeddings, shape (B, T, D), then L "
    "DecoderBlocks (decoder_blocks): self_attn under causal_mask (T, T), norm1; cross_attn with "
    "queries from the decoder stream and keys and values from R (project_memory gives a KVCache "
    "(B, H, S, Dh); the same R goes to every block) under key_mask (B, 1, S), weights (B, H, T, S), "
    "norm2; feed_forward, norm3. The read-out (readout), whose weight is tied to the target embedding, "
    "gives logits (B, T, V). Grey lines are the residual stream: each sublayer's input is added to "
    "its output inside the LayerNorm that follows. Inset, top left: the pre-norm block (norm_first=True) "
    "that the chapter trains: the stream passes straight through, each sublayer reads LayerNorm(x) and its "
    "output is added to x, x + sublayer(LayerNorm(x)), and each stack ends with one more LayerNorm "
    "(encoder_final_norm, decoder_final_norm)."
)
W, GAP, ENTRY = 210, 30, 580  # sublayer box width, gap between boxes, where the stream enters a block
EX, DX = 250, 700  # the encoder's and the decoder's stream
NORM = "LayerNorm(x + ·)"
ENCODER = (("self_attn", "self_attn"), ("norm1", f"norm1: {NORM}"), ("feed_forward", "feed_forward"),
           ("norm2", f"norm2: {NORM}"))
DECODER = (("self_attn", "self_attn"), ("norm1", f"norm1: {NORM}"), ("cross_attn", "cross_attn"),
           ("norm2", f"norm2: {NORM}"), ("feed_forward", "feed_forward"), ("norm3", f"norm3: {NORM}"))
Box = tuple[float, float, float, float]  # x, top, width, height


def draw() -> Figure:
    fig = Figure("ch05_transformer", 1000, 745,
                 "Chapter 5: the Transformer encoder-decoder (post-norm, as in the paper)", DESC)
    fig.text(30, 28, fig.code("Transformer", TR) + ": post-norm, x = LayerNorm(x + sublayer(x))",
             "title", anchor="start")
    encoder(fig)
    cross, top = decoder(fig)
    memory_to_cross_attention(fig, cross)
    output(fig, top)
    pre_norm_inset(fig)
    fig.legend(30, 734)
    return fig


def stack(fig: Figure, cx: float, sublayers: tuple, owner: str, label: str, attr: str) -> tuple[dict, float]:
    """Sublayers bottom to top along the stream at x = cx, framed; returns each box and the top."""
    y, boxes, branch = ENTRY, {}, ENTRY
    for key, text in sublayers:
        if key.startswith("norm"):
            boxes[key] = norm(fig, cx, y, branch, fig.code(text, f"{owner}:{key}"))
        else:
            branch = y - 6
            boxes[key] = sublayer(fig, cx, y, key, fig.code(text, f"{owner}:{key}"))
        y = boxes[key][1]
    fig.frame(cx - 135, y - 30, 270, ENTRY - y + 30, label, "top-left")
    fig.text(cx + 139, ENTRY - 4, fig.code(attr, f"{TR}:{attr}"), "code", anchor="start", size=11, colour="#555555")
    return boxes, y


def norm(fig: Figure, cx: float, y: float, branch: float, label: str) -> Box:
    """A LayerNorm box above y, where the residual branch (left, from ``branch``) rejoins the stream."""
    h, x = 32, cx - W / 2
    top = y - GAP - h
    fig.line([(cx, y), (cx, y - GAP + 2)], "stream")
    fig.line([(cx - 120, branch), (cx - 120, top + h / 2), (x - 2, top + h / 2)], "stream")
    fig.box(x, top, W, h, label, size=12)
    return x, top, W, h


def sublayer(fig: Figure, cx: float, y: float, key: str, label: str) -> Box:
    """An attention or feed-forward box above y; the residual branch leaves the stream to the left."""
    h, x = 40, cx - W / 2
    bottom = y - GAP
    fig.line([(cx, y), (cx, y - 14)], "stream", arrow=False)
    fig.line([(cx, y - 6), (cx - 120, y - 6)], "stream", arrow=False)
    if key == "self_attn":
        for dxq, role in ((-50, "query"), (0, "key"), (50, "value")):
            fig.line([(cx, y - 14), (cx + dxq, y - 14), (cx + dxq, bottom + 2)], role)
    else:
        fig.line([(cx, y - 14), (cx, bottom + 2)], "query" if key == "cross_attn" else "stream")
    sub = (fig.code("FeedForward: D→F→D", f"{L}.FeedForward") if key == "feed_forward"
           else fig.code("MultiHeadAttention", f"{L}.MultiHeadAttention"))
    fig.box(x, bottom - h, W, h, label, sub=sub, size=12)
    return x, bottom - h, W, h


def mask(fig: Figure, cx: float, box: Box, name: str, shape: str) -> None:
    """A mask arriving from the right into an attention box."""
    x, top, bw, h = box
    fig.line([(cx + 150, top + h / 2), (x + bw + 2, top + h / 2)], "mask")
    # the name's underscore must clear the shape below it (it sat on the "1" of "(B, 1, S)")
    fig.text(cx + 152, top + h / 2 - 25, name, "code", anchor="start", size=11)
    fig.text(cx + 152, top + h / 2 - 6, shape, "shape", anchor="start")


def embed(fig: Figure, cx: float, tokens: str, name: str, shape: str) -> None:
    """Tokens into an Embeddings box (× √D + sinusoids), then up to the first block."""
    fig.text(cx, 705, tokens, "code", size=12)
    fig.line([(cx, 691), (cx, 662)], "stream")
    fig.box(cx - 135, 620, 270, 40, name, sub="× √D + " + fig.code(
        "SinusoidalPositionalEncoding", f"{L}.SinusoidalPositionalEncoding"), size=12)
    fig.line([(cx, 620), (cx, ENTRY + 2)], "stream", arrow=False)
    fig.shape(cx + 6, 604, shape)


def encoder(fig: Figure) -> None:
    """src -> src_embeddings -> EncoderBlock x N -> the memory R."""
    embed(fig, EX, "src (B, S)", fig.code("src_embeddings: Embeddings", f"{L}.Embeddings", f"{TR}:src_embeddings"), "(B, S, D)")
    label = fig.code("EncoderBlock", f"{L}.EncoderBlock") + " × L"
    boxes, top = stack(fig, EX, ENCODER, f"{L}.EncoderBlock", label, "encoder_blocks")
    mask(fig, EX, boxes["self_attn"], fig.code("key_mask", f"{L}.key_mask"), "(B, 1, S)")
    fig.line([(EX, top), (EX, 245)], "stream")
    fig.tensor(EX - 25, 215, "R", "stream", w=50)
    fig.text(EX - 32, 234, "memory", "note", anchor="end")
    fig.shape(EX + 6, 272, "(B, S, D)")


def decoder(fig: Figure) -> tuple[Box, float]:
    """tgt_in -> tgt_embeddings -> DecoderBlock x N; returns the cross-attention box and the stack's top."""
    embed(fig, DX, "tgt_in (B, T)", fig.code("tgt_embeddings: Embeddings", f"{TR}:tgt_embeddings"), "(B, T, D)")
    label = fig.code("DecoderBlock", f"{L}.DecoderBlock") + " × L"
    boxes, top = stack(fig, DX, DECODER, f"{L}.DecoderBlock", label, "decoder_blocks")
    mask(fig, DX, boxes["self_attn"], fig.code("causal_mask", f"{L}.causal_mask"), "(T, T)")
    mask(fig, DX, boxes["cross_attn"], "key_mask", "(B, 1, S)")
    _, ctop, _, h = boxes["cross_attn"]
    fig.text(DX + 152, ctop + h / 2 + 18, "weights", "note", anchor="start")
    fig.text(DX + 152, ctop + h / 2 + 32, "(B, H, T, S)", "shape", anchor="start")
    return boxes["cross_attn"], top


def memory_to_cross_attention(fig: Figure, cross: Box) -> None:
    """The memory R becomes the keys and values of every decoder block's cross-attention."""
    x, ctop, _, h = cross
    cy = ctop + h / 2
    fig.line([(EX + 25, 223), (490, 223), (490, cy - 7), (x - 2, cy - 7)], "key")
    fig.line([(EX + 25, 235), (502, 235), (502, cy + 7), (x - 2, cy + 7)], "value")
    fig.text(385, 190, "the same R in every block", "note")
    fig.text(385, 212, fig.code("project_memory", f"{L}.DecoderBlock.project_memory") + "(R)", "code", size=11)
    fig.text(385, 253, fig.code("KVCache", f"{L}.KVCache") + " (B, H, S, Dh)", "shape")


def output(fig: Figure, top: float) -> None:
    """The read-out (tied to the target embedding) and the logits."""
    fig.line([(DX, top), (DX, 112)], "stream")
    fig.shape(DX + 6, 134, "(B, T, D)")
    fig.box(DX - 110, 70, 220, 40, fig.code("readout: nn.Linear", f"{TR}:readout"), sub="weight tied to tgt_embeddings",
            size=12)
    fig.line([(DX + 110, 90), (DX + 150, 90)], "stream")
    fig.text(DX + 155, 94, "logits (B, T, V)", "code", anchor="start", size=12)


def pre_norm_inset(fig: Figure) -> None:
    """Top left: one pre-norm sublayer, x + sublayer(LayerNorm(x)), the placement the chapter trains."""
    fig.frame(30, 42, 260, 156, "pre-norm (norm_first=True)")
    fig.text(40, 80, "the model this chapter trains:", "note", anchor="start")
    stream_y, box_y, h, plus_x = 145, 92, 28, 262
    fig.line([(40, stream_y), (plus_x - 11, stream_y)], "stream")
    fig.line([(48, stream_y), (48, box_y + h / 2), (56, box_y + h / 2)], "stream")
    fig.box(58, box_y, 100, h, fig.code("LayerNorm", f"{L}.Norm"), size=12)
    fig.line([(158, box_y + h / 2), (170, box_y + h / 2)], "stream")
    fig.box(172, box_y, 80, h, "sublayer", size=12)
    fig.line([(252, box_y + h / 2), (plus_x, box_y + h / 2), (plus_x, stream_y - 11)], "stream")
    fig.circle(plus_x, stream_y, 9, "stream")
    fig.text(plus_x, stream_y + 5, "+", size=14, weight="bold")
    fig.line([(plus_x + 9, stream_y), (284, stream_y)], "stream")
    fig.text(40, 172, "x + sublayer(LayerNorm(x)),", "note", anchor="start")
    fig.text(40, 188, "then one final LayerNorm per stack", "note", anchor="start")
