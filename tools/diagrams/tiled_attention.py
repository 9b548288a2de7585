"""Chapter 9: tiled attention with an online softmax, one query block at a time
(``tiled_attention.svg``)."""
from __future__ import annotations

from .svg import Figure

TILED = "attnbook.layers.tiled.tiled_attention"
DESC = (
    "Left, the (T, T) grid of causal scores cut into 4 by 4 tiles: query blocks are rows, key/value "
    "tiles are columns. Tiles above the diagonal are skipped (masked). Query block 2 is outlined in "
    "orange; the key/value tiles 0, 1 and 2 it visits are outlined in blue, visited left to right; "
    "only one tile of scores exists at a time. Right, the loop for one query block: keep per query "
    "row a running maximum m, a running sum l and an unnormalised output u; for each key/value tile "
    "j, compute the tile of scores E = Q_i K_j^T / sqrt(Dh), raise m to the tile's row maximum, "
    "rescale l and u by exp(m_old - m), add the tile's exp(E - m) sums to l and exp(E - m) V_j to u. "
    "After the last tile the output is u / l and the log-sum-exp lse = m + log l is what the backward "
    "pass keeps. Memory: a few tiles plus m and l (T numbers each) and u (T by Dh), never the whole "
    "(T, T) matrix."
)
W, H = 1000, 345
N, TILE, X0, Y0 = 4, 52, 130, 70


def draw() -> Figure:
    fig = Figure("tiled_attention", W, H, "Tiled attention: query blocks, key/value tiles, running m, l, u", DESC)
    name = fig.code("tiled_attention", TILED)
    fig.text(20, 28, f"{name}(q, k, v, causal=True, block_size=128): one query block, one key/value tile at a time",
             "code", anchor="start", size=12)
    for i in range(N):  # query blocks (rows) x key/value tiles (columns)
        for j in range(N):
            x, y = X0 + j * TILE, Y0 + i * TILE
            fig.rect(x, y, TILE, TILE, fill="url(#hatch)" if j > i else "#FFFFFF", stroke="#9A9A9A")
    row = 2
    for j in range(row + 1):
        fig.rect(X0 + j * TILE + 3, Y0 + row * TILE + 3, TILE - 6, TILE - 6, fill="none", stroke="#0072B2",
                 extra='stroke-width="2.5"')
        fig.text(X0 + j * TILE + TILE / 2, Y0 + row * TILE + TILE / 2 + 5, f"E_{{2{j}}}", "math", size=12)
    fig.rect(X0 - 4, Y0 + row * TILE - 4, N * TILE + 8, TILE + 8, fill="none", stroke="#D55E00",
             extra='stroke-width="2"')
    fig.line([(X0 + 10, Y0 + row * TILE + TILE + 14), (X0 + 3 * TILE - 10, Y0 + row * TILE + TILE + 14)], "key")
    fig.text(X0 + N * TILE / 2, Y0 - 10, "key/value tiles j →", "note", size=11)
    fig.text(X0 - 12, Y0 + N * TILE / 2, "query blocks i", "note", size=11, anchor="end")
    fig.text(X0 + N * TILE / 2, Y0 + N * TILE + 20, "hatched: above the diagonal, skipped", "note", size=11)
    x = 420
    steps = [
        (0, "per query row of block i:  m = −∞,  ℓ = 0,  u = 0  (kept across tiles)", "note"),
        (0, "for each key/value tile j ≤ i:", "note"),
        (24, "E = Q_{i} K_{j}ᵀ / √D_{h}", "math"),
        (24, "m′ = max(m, rowmax E)", "math"),
        (24, "ℓ = ℓ · e^{m − m′} + rowsum e^{E − m′}", "math"),
        (24, "u = u · e^{m − m′} + e^{E − m′} V_{j},   then m = m′", "math"),
        (0, "output O_{i} = u / ℓ;   kept for the backward pass: lse_{i} = m + log ℓ", "note"),
    ]
    for k, (indent, label, cls) in enumerate(steps):
        fig.text(x + indent, 92 + 30 * k, label, cls, anchor="start", size=13)
    fig.text(x + 300, 92 + 30 * 2, "(one tile of scores)", "note", anchor="start", size=11)
    fig.text(x, 92 + 30 * len(steps) + 14, "held at once: a few tiles, m and ℓ (T numbers each), "
             "u (T, D_{h}); never the (T, T) matrix", "note", anchor="start", size=11)
    fig.text(20, 332, "orange outline: the query block i;  blue: the key/value tiles it visits, left to right",
             "note", anchor="start", size=11)
    return fig
