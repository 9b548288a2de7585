"""Chapter 8: GPT, a decoder-only stack of pre-norm causal blocks (``gpt_stack.svg``)."""
from __future__ import annotations

from .svg import Figure

L = "attnbook.layers"
GPT = "attnbook.models.gpt.GPT"
BLOCK = f"{L}.CausalBlock"
DESC = (
    "The library's GPT, labelled with Section 8.3's symbols. Token ids x_1 ... x_T, shape (B, T) (U, the equation's (T, V) matrix, is their one-hot) go through "
    "embeddings (Embeddings: token table W_E plus LearnedPositionalEmbedding W_P), giving X^(0) = U W_E + W_P, "
    "shape (B, T, D), then n_blocks CausalBlocks (blocks), X^(l) = block(X^(l-1)) for l = 1 ... n_blocks, ending at X^(n_blocks). The residual stream "
    "runs straight up; each block adds two updates to it, pre-norm: x = x + self_attn(norm1(x)) with "
    "causal_mask (T, P+T), reading and extending a KVCache of the P positions already decoded "
    "(B, H, P, Dh), and x = x + feed_forward(norm2(x)). A final LayerNorm (final_norm) closes the stack, "
    "and the read-out (readout) scores against the token table itself (tied: "
    "logits (B, T, V) = x @ W_E transposed, W_E = embeddings.tokens.weight; their softmax is Y-hat). There is no encoder and no cross-attention."
)
SX, BX, BW = 260, 400, 210  # the residual stream; the sublayers' left edge and width
TOP = 510  # where the stream enters the block
SUBLAYERS = (("norm1", "self_attn", "MultiHeadAttention", 44), ("norm2", "feed_forward", "FeedForward: D→F→D", 44))


def draw() -> Figure:
    fig = Figure("gpt_stack", 900, 670, "GPT: a decoder-only stack of pre-norm causal blocks", DESC)
    fig.text(30, 28, fig.code("GPT", GPT) + ": pre-norm, x = x + sublayer(LayerNorm(x)); causal; tied output",
             "title", anchor="start")
    fig.text(SX, 630, "token ids x_{1} … x_{T} (B, T); U = one-hot", "code", size=12)
    fig.line([(SX, 612), (SX, 588)], "stream")
    fig.box(SX - 135, 546, 270, 40, fig.code("embeddings: Embeddings", f"{GPT}:embeddings", f"{L}.Embeddings"),
            sub="tokens + " + fig.code("LearnedPositionalEmbedding", f"{L}.LearnedPositionalEmbedding"), size=12)
    fig.text(SX - 145, 571, "U W_{E} + W_{P}", "math", anchor="end")
    fig.shape(SX + 6, 530, "X^{(0)} (B, T, D)")
    y, pluses = TOP - 10, []
    for norm, sub, sub_label, h in SUBLAYERS:
        pluses.append(residual_update(fig, y, norm, sub, sub_label, h))
        y = pluses[-1] - 9
    stream_and_frame(fig, pluses)
    output(fig, pluses[1])
    fig.legend(30, 660, ["query", "key", "value", "stream", "mask"])
    return fig


def residual_update(fig: Figure, y: float, norm: str, sub: str, sub_label: str, h: float) -> float:
    """x + sub(norm(x)), branching off the stream above y; returns the y of the + node."""
    mid = BX + BW / 2
    branch = y - 6
    fig.line([(SX, branch), (mid, branch), (mid, branch - 14)], "stream")
    nb = branch - 16
    fig.box(BX, nb - 30, BW, 30, fig.code(f"{norm}: LayerNorm", f"{BLOCK}:{norm}"), size=12)
    sb = nb - 30 - 16
    if sub == "self_attn":
        for dxq, role in ((-50, "query"), (0, "key"), (50, "value")):
            fig.line([(mid, nb - 30), (mid, nb - 38), (mid + dxq, nb - 38), (mid + dxq, sb + 2)], role)
    else:
        fig.line([(mid, nb - 30), (mid, sb + 2)], "stream")
    # the box by hand, not fig.box: the label's underscore would touch the note under it
    mid_y = sb - h / 2
    fig.rect(BX, sb - h, BW, h, "module", rx=5)
    fig.text(mid, mid_y - 4, fig.code(sub, f"{BLOCK}:{sub}"), "code", size=12)
    fig.text(mid, mid_y + 15, sub_label, "note")
    plus = sb - h - 16
    fig.line([(mid, sb - h), (mid, plus), (SX + 11, plus)], "stream")
    fig.circle(SX, plus, 9, "stream")
    fig.text(SX, plus + 5, "+", size=14, weight="bold")
    if sub == "self_attn":
        mask_and_cache(fig, sb - h / 2)
    return plus


def mask_and_cache(fig: Figure, cy: float) -> None:
    """The causal mask and the past keys and values, arriving from the right at height cy."""
    right = BX + BW
    # the labels start right of the frame (x = 710), so its dashed edge crosses no text
    fig.line([(right + 106, cy - 8), (right + 2, cy - 8)], "mask")
    fig.text(right + 110, cy - 20, fig.code("causal_mask", f"{L}.causal_mask"), "code", anchor="start", size=11)
    fig.text(right + 110, cy - 5, "(T, P+T)", "shape", anchor="start")
    fig.line([(right + 106, cy + 10), (right + 2, cy + 10)], "key")
    fig.text(right + 110, cy + 20, "past " + fig.code("KVCache", f"{L}.KVCache") + ": K, V", "code", anchor="start",
             size=11)
    fig.text(right + 110, cy + 35, "(B, H, P, Dh)", "shape", anchor="start")


def stream_and_frame(fig: Figure, pluses: list[float]) -> None:
    """The stream drawn straight through the two additions, and the CausalBlock frame around them."""
    fig.line([(SX, 546), (SX, pluses[0] + 11)], "stream")
    fig.line([(SX, pluses[0] - 9), (SX, pluses[1] + 11)], "stream")
    frame_top = pluses[1] - 40
    fig.frame(122, frame_top, 588, TOP - frame_top,
              fig.code("CausalBlock", BLOCK) + " × n_blocks: X^{(l)} = block(X^{(l-1)})", "top-left")
    fig.text(702, frame_top + 17, fig.code("blocks", f"{GPT}:blocks"), "code", anchor="end", size=11, colour="#555555")
    fig.shape(SX + 6, frame_top - 20, "X^{(n_blocks)} (B, T, D)")
    fig.text(SX - 12, 330, "residual stream", "note", anchor="end")
    fig.text(SX - 12, 344, "(B, T, D)", "shape", anchor="end")


def output(fig: Figure, last_plus: float) -> None:
    """final_norm and the tied read-out."""
    fig.line([(SX, last_plus - 9), (SX, 112)], "stream")
    fig.box(SX - 110, 80, 220, 30, fig.code("final_norm: LayerNorm", f"{GPT}:final_norm"), size=12)
    fig.line([(SX + 110, 95), (SX + 150, 95)], "stream")
    fig.text(SX + 155, 92, "readout: x @ W_{E}^{T} (embeddings.tokens.weight)", "code", anchor="start", size=12)
    fig.text(SX + 155, 108, "logits (B, T, V), tied; softmax: Ŷ", "note", anchor="start")
