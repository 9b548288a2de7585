"""Chapter 9: which key/value head each query head reads, with H = 4 query heads and 4, 2 or 1
key/value heads (multi-head, grouped-query, multi-query attention) (``gqa_heads.svg``)."""
from __future__ import annotations

from .svg import Figure

MHA = "attnbook.layers.MultiHeadAttention"
DESC = (
    "Three panels, each with 4 query heads q0 to q3 on top and the key/value heads that are cached "
    "below, an orange arrow from every query head to the key/value head it reads. Left, multi-head attention "
    "(num_kv_heads=4): q_h reads head h, 4 heads cached. Middle, grouped-query attention (num_kv_heads=2, "
    "group size g = 2): q0 and q1 read head 0, q2 and q3 read head 1, 2 heads cached. Right, multi-query "
    "attention (num_kv_heads=1): all four read head 0, 1 head cached. Query head h reads key/value head "
    "floor(h / g), g = H / Hkv, so a group is consecutive query heads; the cache shrinks by H / Hkv."
)
W, H = 1000, 300
PANEL, QW, GAP = 320, 58, 16


def draw() -> Figure:
    fig = Figure("gqa_heads", W, H, "Query heads and the key/value heads they read", DESC)
    name = fig.code("MultiHeadAttention", MHA)
    fig.text(20, 28, f"{name}(D, H=4, num_kv_heads=Hkv): query head h reads key/value head ⌊h / g⌋, "
             "g = H / Hkv", "code", anchor="start", size=12)
    for i, (kv_heads, title) in enumerate(((4, "multi-head (Hkv = H = 4)"), (2, "grouped-query (Hkv = 2, g = 2)"),
                                           (1, "multi-query (Hkv = 1, g = 4)"))):
        panel(fig, 20 + i * (PANEL + 15), kv_heads, title)
    fig.legend(20, 290, ["query"])  # the arrows: no key or value arrows are drawn, so no such entry
    fig.text(150, 294, "(arrow: the key/value head a query head reads)", "note", anchor="start")
    return fig


def panel(fig: Figure, x0: float, kv_heads: int, title: str) -> None:
    group = 4 // kv_heads
    fig.text(x0 + PANEL / 2, 62, title, anchor="middle", size=12, weight="bold")
    left = x0 + (PANEL - (4 * QW + 3 * GAP)) / 2
    q_mid = [left + h * (QW + GAP) + QW / 2 for h in range(4)]
    for h in range(4):
        fig.box(q_mid[h] - QW / 2, 78, QW, 30, f"q{h}", role="query", size=12)
    span = 4 * QW + 3 * GAP
    kw = (span - (kv_heads - 1) * GAP) / kv_heads
    for j in range(kv_heads):
        kx = left + j * (kw + GAP)
        fig.box(kx, 178, kw, 36, f"k{j},v{j}", role="key", size=11)
        for h in range(j * group, (j + 1) * group):
            fig.line([(q_mid[h], 108), (q_mid[h], 140), (kx + kw / 2, 160), (kx + kw / 2, 176)], "query",
                     width=1.4)
    fig.text(x0 + PANEL / 2, 240, f"cached: {kv_heads} key + {kv_heads} value heads", "note", size=11)
    fig.text(x0 + PANEL / 2, 258, f"({kv_heads}/4 of multi-head's cache)", "note", size=11)
