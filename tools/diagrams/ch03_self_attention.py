"""Chapter 3: queries, keys and values and the attention matrix, without a mask for section 3.1
(``ch03_self_attention.svg``, ``draw``) and under a causal mask for section 3.5
(``ch03_masked_attention.svg``, ``draw_masked``)."""
from __future__ import annotations

import math

from .ch03_positions import keep_spaces
from .svg import Figure, softmax_rows

DESC_PLAIN = (
    "Self-attention on a sequence X of T tokens, shape (T, D). Three linear maps give the queries "
    "Q = X W^Q (T, d_k), the keys K = X W^K (T, d_k) and the values V = X W^V (T, d_v). The scores "
    "Q K^T / sqrt(d_k) form a (T, T) matrix: row i is query i, column j is key j. A softmax over each "
    "row turns it into weights A that sum to 1 along the row (the numbers shown are the softmax of "
    "made-up scores), and the output is Z = A V, shape (T, d_v). scaled_dot_product_attention "
    "computes all of this; MultiHeadAttention holds W^Q, W^K, W^V as q_proj, k_proj, v_proj."
)
DESC = (
    "Self-attention on a sequence X of T tokens, shape (B, T, D). Three linear maps give the queries "
    "Q = X W^Q (B, T, d_k), the keys K = X W^K (B, S, d_k) and the values V = X W^V (B, S, d_v); in "
    "self-attention S = T. The scores Q K^T / sqrt(d_k) form a (B, T, S) matrix: row i is query i, "
    "column j is key j. The mask (causal_mask(T), True on and below the diagonal; key_mask for "
    "padding) sends the disallowed scores to minus infinity, and masked_softmax turns each row into "
    "weights that sum to 1, exactly zero above the diagonal (the numbers shown are the softmax of made-up "
    "scores). The output Z = A V has shape (B, T, d_v). "
    "scaled_dot_product_attention computes all of this; MultiHeadAttention holds W^Q, W^K, W^V as "
    "q_proj, k_proj, v_proj."
)
T, C = 5, 16  # tokens; cell size of X, Q, K, V
PROJECTIONS = (  # role, tensor, weight, MultiHeadAttention attribute, y, shape (masked, plain)
    ("key", "K", "W^{K}", "k_proj", 80, "(B, S, d_{k})", "(T, d_{k})"),
    ("query", "Q", "W^{Q}", "q_proj", 230, "(B, T, d_{k})", "(T, d_{k})"),
    ("value", "V", "W^{V}", "v_proj", 380, "(B, S, d_{v})", "(T, d_{v})"),
)
SCORES = [[round(1.4 * math.sin(1.7 * i + 2.3 * j + 0.5), 2) for j in range(T)] for i in range(T)]  # made up
GX, GY, GC = 460, 165, 26  # the score matrix (and the weight matrix, at x = AX)
MX, MY, MC = 615, 60, 20  # the causal mask
AX = 760


def draw() -> Figure:
    """Section 3.1's figure: no mask, no batch, S = T."""
    fig = Figure("ch03_self_attention", 1000, 480,
                 "Chapter 3: queries, keys and values, and the attention matrix", DESC_PLAIN)
    fig.text(30, 28, fig.code("scaled_dot_product_attention", "attnbook.layers.scaled_dot_product_attention")
             + ": softmax(Q K^{T} / √d_{k}) V, one sequence of T tokens", "title", anchor="start")
    projections(fig, masked=False)
    scores(fig, masked=False)
    softmax(fig, masked=False)
    output(fig, masked=False)
    fig.legend(30, 466, [r for r in fig.roles if r != "stream"])  # X: the input
    return keep_spaces(fig)


def draw_masked() -> Figure:
    """Section 3.5's figure: a batch, a key length S and the causal mask."""
    fig = Figure("ch03_masked_attention", 1000, 480,
                 "Chapter 3: queries, keys and values, and the masked attention matrix", DESC)
    fig.text(30, 28, fig.code("scaled_dot_product_attention", "attnbook.layers.scaled_dot_product_attention")
             + ": softmax(Q K^{T} / √d_{k}) V under a mask (self-attention: S = T)", "title", anchor="start")
    projections(fig, masked=True)
    scores(fig, masked=True)
    causal_mask(fig)
    softmax(fig, masked=True)
    output(fig, masked=True)
    fig.legend(30, 466, [r for r in fig.roles if r != "stream"])  # X: the input
    return keep_spaces(fig)


def projections(fig: Figure, masked: bool) -> None:
    """X and its three projections Q, K, V."""
    fig.cells(40, 190, [[0.3] * 6 for _ in range(T)], C, "stream")
    fig.text(88, 180, "X", "math")
    fig.shape(88, 288, "(B, T, D)" if masked else "(T, D)", anchor="middle")
    for role, name, weight, attr, yc, batched, plain in PROJECTIONS:
        shape = batched if masked else plain
        fig.line([(136, 230), (155, 230), (155, yc), (173, yc)], role)
        fig.box(175, yc - 22, 80, 44, weight, sub=fig.code(attr, f"attnbook.layers.MultiHeadAttention:{attr}"),
                role=role, kind="math")
        fig.line([(255, yc), (288, yc)], role)
        fig.cells(290, yc - 40, [[0.55] * 4 for _ in range(T)], C, role)
        fig.text(370, yc - 4, name, "math", anchor="start")
        fig.shape(370, yc + 14, shape)


def scores(fig: Figure, masked: bool) -> None:
    """The (T, S) score matrix Q K^T / sqrt(d_k), shaded by value."""
    lo, hi = min(map(min, SCORES)), max(map(max, SCORES))
    fig.cells(GX, GY, [[(v - lo) / (hi - lo) * 0.8 for v in row] for row in SCORES], GC, "weights")
    fig.line([(354, 230), (GX - 2, 230)], "query")
    fig.line([(354, 80), (525, 80), (525, GY - 2)], "key")
    fig.text(GX - 6, GY + 10, "query i", "note", anchor="end")
    fig.text(GX, GY - 8, "key j", "note", anchor="start")
    fig.text(GX + 2.5 * GC, GY + 5 * GC + 20, "Q K^{T} / √d_{k}", "math", size=14)
    fig.shape(GX + 2.5 * GC, GY + 5 * GC + 36, "(B, T, S)" if masked else "(T, T)", anchor="middle")


def causal_mask(fig: Figure) -> None:
    """causal_mask(T): 'T' where a query may attend, hatched (minus infinity) above the diagonal."""
    for i in range(T):
        for j in range(T):
            if j > i:
                fig.rect(MX + j * MC, MY + i * MC, MC, MC, fill="url(#hatch)", stroke="#BBBBBB")
            else:
                fig.rect(MX + j * MC, MY + i * MC, MC, MC, fill="#FFFFFF", stroke="#7F7F7F")
                fig.text(MX + j * MC + MC / 2, MY + i * MC + 14, "✓", "code", size=10, colour="#7F7F7F")
    fig.roles.add("mask")
    fig.text(MX + 2.5 * MC, MY - 10, fig.code("causal_mask(T)", "attnbook.layers.causal_mask"), "code", size=12)
    fig.text(MX + 5 * MC + 8, MY + 30, "(T, S)", "shape", anchor="start")
    fig.text(MX + 5 * MC + 8, MY + 48, "✓ = may attend", "note", anchor="start")
    fig.text(MX + 5 * MC + 8, MY + 64, "hatched: −∞", "note", anchor="start")
    fig.line([(MX + 2.5 * MC, MY + 5 * MC), (MX + 2.5 * MC, 206)], "mask")


def softmax(fig: Figure, masked: bool) -> None:
    """The softmax over each row (masked_softmax under a mask), and the weights A it gives (the
    numbers are the softmax of the made-up scores)."""
    fig.line([(GX + 5 * GC, 230), (593, 230)], "weights")
    if masked:
        fig.box(595, 208, 140, 44, fig.code("masked_softmax", "attnbook.layers.masked_softmax"), role="weights")
        fig.text(665, 270, "padding:", "note")
        fig.text(665, 284, fig.code("key_mask", "attnbook.layers.key_mask") + " (B, 1, S)", "note")
    else:
        fig.box(595, 208, 140, 44, "softmax", sub="over each row", role="weights")
    fig.line([(735, 230), (AX - 2, 230)], "weights")
    rows = [[s if j <= i or not masked else None for j, s in enumerate(row)] for i, row in enumerate(SCORES)]
    fig.cells(AX, GY, softmax_rows(rows), GC, "weights", numbers=True)
    fig.text(AX + 5 * GC + 8, GY + 14, "A", "math", anchor="start")
    fig.shape(AX + 5 * GC + 8, GY + 32, "(B, T, S)" if masked else "(T, T)")
    fig.text(AX + 5 * GC + 8, GY + 50, "rows sum to 1", "note", anchor="start")


def output(fig: Figure, masked: bool) -> None:
    """Z = A V."""
    fig.line([(AX + 2.5 * GC, GY + 5 * GC), (AX + 2.5 * GC, 358)], "weights")
    fig.line([(354, 380), (AX - 2, 380)], "value")
    fig.box(AX, 360, 130, 40, "A V", kind="math")
    fig.line([(890, 380), (918, 380)], "context")
    fig.tensor(920, 366, "Z", "context", w=44)
    fig.shape(942, 416, "(B, T, d_{v})" if masked else "(T, d_{v})", anchor="middle")
