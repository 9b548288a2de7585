"""Chapter 9: GPT-2's block beside today's (Llama-style) block, part for part (``modern_block.svg``)."""
from __future__ import annotations

from .svg import Figure

L = "attnbook.layers"
BLOCK = f"{L}.CausalBlock"
DESC = (
    "Two decoder-only models side by side, each drawn bottom to top. Left, GPT-2 (Chapter 8's GPT): "
    "tokens (B, T) go through Embeddings, a token table plus LearnedPositionalEmbedding, then n_blocks "
    "CausalBlocks, each x = x + self_attn(norm1(x)) and x = x + feed_forward(norm2(x)) with LayerNorm "
    "norms, MultiHeadAttention with H heads for queries, keys and values, and a FeedForward D to 4D to D "
    "with GELU; a final LayerNorm and the read-out give logits (B, T, V). Right, the Llama-style model of "
    "this chapter, the same CausalBlock with four parts changed, each marked with its section: 9.1 RMSNorm "
    "in place of every LayerNorm; 9.2 a GatedFeedForward, SwiGLU, down(silu(gate(x)) * up(x)) of width "
    "F about 8/3 D; 9.3 no position table: RotaryEmbedding turns the queries and keys (not the values) "
    "on their way into attention; "
    "9.4 grouped-query attention (GQA), H query heads but only Hkv key/value heads, so the cache of "
    "keys and values is (B, Hkv, P, Dh). No biases anywhere in the modern block."
)
W, H = 1090, 645
DY = -10  # everything below the title moves up by this much


def draw() -> Figure:
    fig = Figure("modern_block", W, H, "GPT-2's block beside a Llama-style block", DESC)
    column(fig, 10, modern=False)
    column(fig, 510, modern=True)
    fig.legend(30, 632, ["query", "key", "value", "stream"])
    return fig


def column(fig: Figure, x0: float, modern: bool) -> None:
    sx, bx, bw = x0 + 70, x0 + 110, 290  # the stream; the sublayers' left edge and width
    mid = bx + bw / 2
    if modern:
        title = fig.code("Llama", "attnbook.models.llama.Llama") + "-style (this chapter)"
    else:
        title = fig.code("GPT", "attnbook.models.gpt.GPT") + "-2 (Chapter 8)"
    fig.text(x0 + 15, 50, title, "title", anchor="start")
    fig.text(sx, 612 + DY, "tokens (B, T)", "code", size=12)
    fig.line([(sx, 598 + DY), (sx, 578 + DY)], "stream")
    if modern:
        fig.box(sx - 60, 540 + DY, 280, 36, fig.code("Embeddings", f"{L}.Embeddings"), sub="token table only", size=12)
        mark(fig, sx + 226, 558 + DY, "9.3 no position table")
    else:
        fig.box(sx - 60, 540 + DY, 280, 36, "Embeddings", size=12,
                sub="tokens + " + fig.code("LearnedPositionalEmbedding", f"{L}.LearnedPositionalEmbedding"))
    norm = fig.code("RMSNorm", f"{L}.RMSNorm") if modern else "LayerNorm"
    y = 500 + DY
    for name, sub in (("norm1", "self_attn"), ("norm2", "feed_forward")):
        fig.line([(sx, y + 4), (mid, y + 4), (mid, y - 6)], "stream")
        fig.box(bx, y - 34, bw, 28, fig.code(f"{name}: ", f"{BLOCK}:{name}") + norm, size=12)
        if modern and name == "norm1":
            mark(fig, bx + bw + 58, y - 20, "9.1 RMSNorm")
        top = y - 34 - (104 if modern and sub == "self_attn" else 74)
        if sub == "self_attn":
            for dx, role in ((-60, "query"), (0, "key"), (60, "value")):
                fig.line([(mid, y - 34), (mid, y - 44), (mid + dx, y - 44), (mid + dx, top + 50)], role)
            if modern:
                fig.box(bx, top, bw, 48, fig.code("self_attn", f"{BLOCK}:self_attn") + ": MultiHeadAttention",
                        sub="H query heads; K, V: Hkv < H heads", size=12)
                rotary = fig.code("RotaryEmbedding", f"{L}.RotaryEmbedding")
                fig.box(mid - 92, y - 80, 124, 24, rotary, size=10)  # across the query and key arrows only
                fig.text(mid + 68, y - 64, "V: not turned", "note", anchor="start", size=10)
                mark(fig, bx + bw + 58, y - 72, "9.3 rotary")
                mark(fig, bx + bw + 58, top + 24, "9.4 GQA")
            else:
                fig.box(bx, top, bw, 48, "self_attn: " + fig.code("MultiHeadAttention", f"{L}.MultiHeadAttention"),
                        sub="H heads each for Q, K, V", size=12)
        else:
            fig.line([(mid, y - 34), (mid, top + 50)], "stream")
            if modern:
                fig.box(bx, top, bw, 48, fig.code("GatedFeedForward", f"{L}.GatedFeedForward"),
                        sub="down(silu(gate(x)) · up(x)), F ≈ 8/3 D", size=12)
                mark(fig, bx + bw + 58, top + 24, "9.2 SwiGLU")
            else:
                fig.box(bx, top, bw, 48, fig.code("FeedForward", f"{L}.FeedForward"),
                        sub="D → 4D → D, GELU", size=12)
        plus = top - 16
        fig.line([(mid, top), (mid, plus), (sx + 11, plus)], "stream")
        fig.circle(sx, plus, 9, "stream")
        fig.text(sx, plus + 5, "+", size=14, weight="bold")
        fig.line([(sx, y + 40 if name == "norm1" else y + 22), (sx, plus + 11)], "stream")
        y = plus - 20
    frame_top = y - 6
    fig.frame(x0 + 20, frame_top, 430, 522 + DY - frame_top,
              fig.code("CausalBlock", BLOCK) + " × n_blocks" + (", no biases" if modern else ""), "top-right")
    fig.line([(sx, y + 11), (sx, frame_top - 18)], "stream")
    fig.box(sx - 60, frame_top - 50, 240, 30, "final_norm: " + norm, size=12)
    fig.text(sx + 60, frame_top - 68, "readout → logits (B, T, V)", "code", size=12)
    fig.line([(sx + 60, frame_top - 50), (sx + 60, frame_top - 60)], "stream", arrow=False)


def mark(fig: Figure, x: float, y: float, label: str) -> None:
    """A change from GPT-2, named by the section that teaches it."""
    fig.text(x, y + 4, label, anchor="start", size=11, colour="#D55E00", weight="bold")
