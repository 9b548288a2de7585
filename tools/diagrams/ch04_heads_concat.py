"""Chapter 4: the idea of multi-head attention, H heads -> concat -> W^O (``ch04_heads_concat.svg``)."""
from __future__ import annotations

from .svg import Figure

T = 4  # tokens drawn in each head's weights
MHA = "attnbook.layers.MultiHeadAttention"
HEADS = (  # (label, its own pattern of weights: key offset j - i it favours, what it stands for)
    ("1", -1, "looks one token back"),
    ("2", +1, "looks one token ahead"),
    ("H", -1, "one token back as well"),
)
ROW_Y = (78, 188, 328)  # top of each head's frame
FRAME_X, FRAME_W, FRAME_H = 150, 440, 92
DESC = (
    "Multi-head attention as an idea. The input X, of shape (B, T, D), goes to H heads side by side "
    "(head 1, head 2, ..., head H). Each head has its own projections W^Q_h, W^K_h, W^V_h of width "
    "Dh = D / H, so it computes its own attention weights softmax(q k^T / sqrt(Dh)), of shape "
    "(B, T, S), drawn as a small T by S map in which head 1 looks one token back, head 2 one token "
    "ahead and head H one token back as well (heads can share a relation); each head returns its own output head_h, of shape "
    "(B, T, Dh). The H outputs are concatenated side by side into (B, T, H Dh) = (B, T, D), and "
    "one more linear map W^O, out_proj in MultiHeadAttention, mixes them into the output (B, T, D)."
)


def pattern(offset: int) -> list[list[float]]:
    """A T x T map of weights that favours the key at ``offset`` from each query (rows sum to 1)."""
    rows = []
    for i in range(T):
        j = min(max(i + offset, 0), T - 1)
        rows.append([0.85 if k == j else 0.15 / (T - 1) for k in range(T)])
    return rows


def draw() -> Figure:
    fig = Figure("ch04_heads_concat", 1000, 470,
                 "Chapter 4: H attention heads side by side, concatenated, mixed by W^O", DESC)
    fig.text(30, 30, fig.code("MultiHeadAttention", MHA) + ": H heads, each of width Dh = D / H",
             "title", anchor="start")
    fig.tensor(20, 236, "X", "stream", w=50)
    fig.shape(20, 284, "(B, T, D)")
    concat_x, concat_y, concat_h = 615, 150, 200
    for (label, offset, note), y in zip(HEADS, ROW_Y):
        head(fig, label, offset, note, y)
        fig.line([(70, 250), (110, 250), (110, y + 46), (FRAME_X + 14, y + 46)], "stream")
        fig.line([(FRAME_X + FRAME_W - 6, y + 46), (concat_x - 4, concat_y + 20 + ROW_Y.index(y) * 80)],
                 "context")
    fig.text(FRAME_X + 90, 306, "⋮", size=20)
    fig.text(FRAME_X + FRAME_W / 2 + 40, 306, "each head its own pattern of weights", "note")
    fig.box(concat_x, concat_y, 110, concat_h, "concat", "side by side", kind="sans")
    fig.text(concat_x + 75, concat_y + concat_h + 26, "[head_{1}; …; head_{H}]", "math", size=13)
    fig.line([(concat_x + 110, 250), (850, 250)], "context")
    fig.shape(concat_x + 118, 240, "(B, T, H·Dh)")
    fig.shape(concat_x + 118, 272, "= (B, T, D)")
    # drawn by hand, not with box(sub=...): W^O's superscript would touch out_proj above it
    fig.rect(850, 216, 100, 68, "module", rx=5)
    fig.text(900, 242, fig.code("out_proj", f"{MHA}:out_proj"), "code")
    fig.text(900, 272, "W^{O}", "math", size=14)
    fig.text(900, 302, "mixes the heads", "note")
    fig.line([(950, 250), (990, 250)], "context")
    fig.shape(995, 212, "(B, T, D)", anchor="end")
    fig.legend(30, 452, meanings={"stream": "layer input, (B, T, D)"})
    return fig


def head(fig: Figure, label: str, offset: int, note: str, y: float) -> None:
    """One head: its own projections, its own weights, its own output."""
    fig.frame(FRAME_X, y, FRAME_W, FRAME_H, f"head {label}")
    fig.box(FRAME_X + 14, y + 26, 150, 44, f"W^{{Q}}_{{{label}}}, W^{{K}}_{{{label}}}, "
            f"W^{{V}}_{{{label}}}", kind="math", size=13)
    fig.line([(FRAME_X + 164, y + 48), (FRAME_X + 196, y + 48)], "weights")
    fig.cells(FRAME_X + 200, y + 28, pattern(offset), 10, "weights")
    fig.text(FRAME_X + 220, y + 84, note, "note", anchor="middle", size=10)
    fig.line([(FRAME_X + 244, y + 48), (FRAME_X + 296, y + 48)], "context")
    fig.tensor(FRAME_X + 300, y + 34, f"head_{{{label}}}", "context", w=80)
    fig.shape(FRAME_X + 300, y + 26, "(B, T, Dh)")
