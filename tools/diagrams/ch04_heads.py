"""Chapter 4: splitting into heads and merging them back (``ch04_split_merge_heads.svg``)."""
from __future__ import annotations

from .svg import Figure

T, H, DH, C = 4, 4, 3, 13  # tokens, heads, head width; cell size
D = H * DH
GAP = 8  # between the heads' column blocks once they are cut apart
LX, RX = 40, 760  # left edge of the split (left) and of the merge (right)
MHA = "attnbook.layers.MultiHeadAttention"
DESC = (
    f"MultiHeadAttention with H = {H} heads of width Dh = {DH} (D = {D}), for one sequence of T = {T} "
    "tokens. Left, split_heads: the query projection q_proj(query) has shape (B, T, D); "
    "view(B, T, H, Dh) cuts its last dimension into H column blocks without copying; "
    "transpose(1, 2) makes the heads a batch dimension, (B, H, T, Dh). The keys and values "
    "(k_proj, v_proj) are split the same way, (B, H, S, Dh). Bottom: one batched product computes "
    "every head's weights softmax(Q K^T / sqrt(Dh)), (B, H, T, S), and outputs (B, H, T, Dh). Right, "
    "merge_heads: transpose(1, 2) back to (B, T, H, Dh), contiguous() to copy into row order, "
    "view(B, T, D) to concatenate the heads, and out_proj mixes them, (B, T, D)."
)


def draw() -> Figure:
    fig = Figure("ch04_split_merge_heads", 1000, 590,
                 "Chapter 4: splitting into heads and merging them back (view and transpose)", DESC)
    fig.text(30, 28, fig.code("MultiHeadAttention", MHA) + f": H = {H} heads of width Dh = {DH}, D = {D}",
             "title", anchor="start")
    split(fig)
    keys_and_values(fig)
    batched_attention(fig)
    merge(fig)
    fig.legend(30, 580)
    return fig


def head_grid(fig: Figure, x: float, y: float, role: str, gap: float) -> None:
    """A (T, H*Dh) matrix whose H column blocks alternate in shade; ``gap`` separates the blocks."""
    for h in range(H):
        fig.cells(x + h * (DH * C + gap), y, [[0.3 if h % 2 else 0.6] * DH for _ in range(T)], C, role)


def deck(fig: Figure, x: float, y: float, cols: int, c: float, role: str, step: float = 9) -> None:
    """H matrices of shape (T, cols), one behind the other: a batch dimension of size H."""
    for h in reversed(range(H)):
        fig.rect(x + h * step - 1, y + h * step - 1, cols * c + 2, T * c + 2, fill="#FFFFFF", stroke="#BBBBBB")
        fig.cells(x + h * step, y + h * step, [[0.3 if h % 2 else 0.6] * cols for _ in range(T)], c, role)


def split(fig: Figure) -> None:
    """split_heads, top to bottom: (B, T, D) -> view -> (B, T, H, Dh) -> transpose -> (B, H, T, Dh)."""
    fig.text(LX, 62, fig.code("split_heads", f"{MHA}.split_heads"), "group", anchor="start")
    fig.text(LX, 96, fig.code("q_proj(query)", f"{MHA}:q_proj"), "code", anchor="start", size=12)
    for h in range(H):
        fig.text(LX + (h + 0.5) * DH * C, 118 - 4, f"{h + 1}", "note")
    head_grid(fig, LX, 120, "query", 0)
    fig.shape(LX + D * C + 12, 144, "(B, T, D)")
    fig.line([(LX + 70, 175), (LX + 70, 215)], "query")
    fig.text(LX + 80, 200, "view(B, T, H, Dh)", "code", anchor="start", size=12)
    head_grid(fig, LX, 220, "query", GAP)
    fig.shape(LX + D * C + 3 * GAP + 12, 238, "(B, T, H, Dh)")
    fig.text(LX + D * C + 3 * GAP + 12, 254, "no copy", "note", anchor="start")
    fig.line([(LX + 70, 275), (LX + 70, 315)], "query")
    fig.text(LX + 80, 300, "transpose(1, 2)", "code", anchor="start", size=12)
    deck(fig, LX + 40, 320, DH, C, "query")
    fig.shape(LX + 120, 350, "(B, H, T, Dh)")
    fig.text(LX + 120, 366, "heads = a batch dimension", "note", anchor="start")


def keys_and_values(fig: Figure) -> None:
    """The keys and values, split the same way."""
    fig.text(330, 300, "k_proj(key), v_proj(value):", "note", anchor="start")
    fig.code("", f"{MHA}:k_proj", f"{MHA}:v_proj")
    fig.text(330, 314, "split_heads the same way", "note", anchor="start")
    deck(fig, 345, 330, DH, C, "key")
    deck(fig, 445, 330, DH, C, "value")
    fig.shape(345, 420, "(B, H, S, Dh)")


def batched_attention(fig: Figure) -> None:
    """Every head's attention in one batched product (bottom)."""
    fig.rect(250, 440, 500, 120, "frame", rx=8)
    fig.text(500, 552, "all heads in one batched product", "note")
    fig.line([(LX + 60, 404), (LX + 60, 500), (290, 500)], "query")
    fig.line([(385, 424), (385, 470)], "key")
    fig.line([(485, 424), (485, 470)], "value")
    fig.text(395, 500, "softmax(Q K^{T} / √Dh) V", "math", size=13)
    deck(fig, 520, 470, T, 11, "weights", step=7)
    fig.shape(610, 480, "(B, H, T, S)")
    fig.line([(660, 520), (720, 520)], "context", arrow=False)


def merge(fig: Figure) -> None:
    """merge_heads, bottom to top: transpose back, contiguous().view(B, T, D), then out_proj."""
    fig.text(RX, 62, fig.code("merge_heads", f"{MHA}.merge_heads"), "group", anchor="start")
    fig.line([(720, 520), (800, 520), (800, 412)], "context")
    deck(fig, RX + 40, 320, DH, C, "context")
    fig.shape(RX + 120, 350, "(B, H, T, Dh)")
    fig.line([(RX + 70, 315), (RX + 70, 275)], "context")
    fig.text(RX + 80, 300, "transpose(1, 2)", "code", anchor="start", size=12)
    head_grid(fig, RX, 220, "context", GAP)
    fig.shape(RX + 62, 300, "(B, T, H, Dh)", anchor="end")
    fig.line([(RX + 70, 215), (RX + 70, 175)], "context")
    fig.text(RX + 80, 192, "contiguous()", "code", anchor="start", size=12)
    fig.text(RX + 80, 207, ".view(B, T, D)", "code", anchor="start", size=12)
    head_grid(fig, RX, 120, "context", 0)
    fig.text(RX + D * C / 2, 114, "[head 1; …; head H]", "note")
    fig.line([(RX + D * C, 146), (RX + D * C + 40, 146), (RX + D * C + 40, 104)], "context")
    fig.box(RX + 110, 66, 110, 36, fig.code("out_proj", f"{MHA}:out_proj"), size=12)
    fig.shape(RX + 220, 58, "(B, T, D)", anchor="end")
    fig.shape(RX + 62, 196, "(B, T, D)", anchor="end")
