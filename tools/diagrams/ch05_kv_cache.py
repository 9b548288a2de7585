"""Chapter 5: one greedy decoding step of a decoder block's self-attention, without and with a
key-value cache (``ch05_kv_cache.svg``)."""
from __future__ import annotations

from .svg import ROLES, Figure, softmax_rows

DEC = "attnbook.decoding"
ATT = "attnbook.layers.attention"
DESC = (
    "One decoding step of a decoder block's self-attention, after P = 3 positions (<bos>, y1, y2) "
    "are cached and y3 is fed in at position 3. Left, without a cache (greedy_decode_uncached): the "
    "whole prefix <bos> y1 y2 y3 goes through the model again, queries, keys and values of all P + 1 = 4 "
    "positions are computed and a 4 by 4 score matrix under the causal mask (masked cells hatched) is "
    "formed, of which only the last row, outlined, is new: rows 0 to 2 repeat the earlier steps' work, "
    "and the encoder runs again too. Right, with a cache (greedy_decode, which calls step): only y3's "
    "stream vector x (B, 1, D) enters; norm1 gives h (pre-norm); from h come the query q3 and, through "
    "project_kv(h, h), the key k3 and value v3 (B, H, 1, Dh); "
    "past.extend(k3, v3) appends them to the KVCache of k0 to k2 and v0 to v2 (B, H, P, Dh), giving a "
    "new cache (B, H, P + 1, Dh) and leaving past unchanged; attend compares the one query q3 with the "
    "4 cached keys, one row of scores (B, H, 1, P + 1) with no mask (the cache holds only the past), and "
    "returns the weighted sum of the 4 cached values, out (B, 1, D). The block's two other sublayers, "
    "cross-attention and the feed-forward network, each with its own LayerNorm and residual, are not "
    "drawn; the cross-attention's keys and values come from project_memory(R), computed once per source "
    "in start, not once per step."
)
W, H = 1000, 530
CELL = 30
TOKENS = ("<bos>", "y1", "y2", "y3")
SCORES = [[0.0, 1.2, 0.3, 0.8], [0.9, 0.2, 1.5, 0.1], [0.4, 1.1, 0.2, 1.4], [1.3, 0.3, 0.6, 1.9]]


def draw() -> Figure:
    fig = Figure("ch05_kv_cache", W, H, "Chapter 5: one decoding step without and with a key-value cache",
                 DESC)
    fig.text(20, 28, "One greedy step of a decoder block's self-attention: P = 3 positions cached, y3 is new",
             "title", anchor="start")
    uncached(fig, 20)
    cached(fig, 520)
    fig.rect(499, 50, 1.5, 440, fill="#BBBBBB")  # a divider between the panels
    fig.legend(20, 514, ["query", "key", "value", "stream", "weights"])
    fig.text(800, 518, "hatched: masked scores", "note", anchor="start")
    return fig


def token_row(fig: Figure, x: float, y: float, tokens: tuple[str, ...], role: str | None = None) -> list[float]:
    """Small boxes for tokens; returns their centres."""
    mids = []
    for i, token in enumerate(tokens):
        fig.box(x + i * 64, y, 56, 28, token, role=role if i == len(tokens) - 1 else None, size=12)
        mids.append(x + i * 64 + 28)
    return mids


def uncached(fig: Figure, x0: float) -> None:
    name = fig.code("greedy_decode_uncached", f"{DEC}.greedy_decode_uncached")
    fig.text(x0, 62, f"without a cache: {name}", "code", anchor="start", size=12, weight="bold")
    fig.text(x0, 84, "the whole prefix goes through the model again (the encoder too)", "note",
             anchor="start")
    token_row(fig, x0 + 10, 96, TOKENS)
    fig.shape(x0 + 272, 115, "(B, P+1, D)")
    fig.text(x0 + 10, 146, "Q, K, V of all P + 1 = 4 positions, then scores:", "note", anchor="start")
    mx, my = x0 + 70, 200
    values = softmax_rows([[v if j <= i else None for j, v in enumerate(row)] for i, row in enumerate(SCORES)])
    fig.cells(mx, my, values, CELL, "weights")
    for i, token in enumerate(TOKENS):
        fig.text(mx - 8, my + i * CELL + 20, token, "code", anchor="end", size=11)  # queries
        fig.text(mx + i * CELL + CELL / 2, my - 6, str(i), "code", size=9)  # key positions
    fig.rect(mx - 2, my + 3 * CELL - 2, 4 * CELL + 4, CELL + 4, fill="none", stroke=ROLES["query"][0],
             extra='stroke-width="2.5"')
    fig.text(mx + 2 * CELL, my - 24, "key positions", "note")
    fig.text(mx + 2 * CELL, my + 4 * CELL + 22, "(B, H, P+1, P+1), causal mask", "shape")
    nx = mx + 4 * CELL + 24
    for k, line in enumerate(("rows <bos>, y1, y2 repeat the", "three earlier steps' work; only",
                              "the outlined last row is new.", "T steps run T(T+1)/2 positions",
                              "through the decoder, not T")):
        fig.text(nx, my + 12 + 20 * k, line, "note", anchor="start")


def cached(fig: Figure, x0: float) -> None:
    step = fig.code("step", "attnbook.models.encoder_decoder.EncoderDecoder.step")
    greedy = fig.code("greedy_decode", f"{DEC}.greedy_decode")
    fig.text(x0, 62, f"with a cache: {greedy}, one {step} per token", "code", anchor="start", size=12,
             weight="bold")
    fig.text(x0, 84, "only the new position is computed (the encoder ran once, in start)", "note",
             anchor="start")
    # the new position's stream x -> norm1 -> h (pre-norm)
    fig.box(x0 + 10, 96, 70, 28, "x (y3)", size=12)
    fig.line([(x0 + 80, 110), (x0 + 104, 110)], "stream")
    fig.box(x0 + 106, 96, 62, 28, "norm1", size=12)
    fig.line([(x0 + 168, 110), (x0 + 192, 110)], "stream")
    fig.box(x0 + 194, 96, 36, 28, "h", size=12)
    fig.shape(x0 + 238, 115, "x, h: (B, 1, D)")
    # from h: the query q3, and the new key and value k3, v3
    fig.line([(x0 + 205, 124), (x0 + 205, 136), (x0 + 45, 136), (x0 + 45, 146)], "query")
    fig.box(x0 + 10, 148, 70, 28, "q3", role="query", size=12)
    fig.line([(x0 + 218, 124), (x0 + 218, 146)], "stream")
    pkv = fig.code("project_kv(h, h)", f"{ATT}.MultiHeadAttention.project_kv")
    fig.box(x0 + 143, 148, 150, 28, pkv, size=12)
    fig.text(x0 + 300, 166, "k3, v3: (B, H, 1, Dh)", "shape", anchor="start")
    # the cache: three past keys and values, then the new ones appended
    cx, ky, vy = x0 + 110, 214, 252
    tx = cx + 4 * CELL + 14  # where the notes on the right start
    for row_y, role, prefix in ((ky, "key", "k"), (vy, "value", "v")):
        fig.cells(cx, row_y, [[0.35, 0.35, 0.35, 0.7]], CELL, role)
        for j in range(4):
            fig.text(cx + j * CELL + CELL / 2, row_y + 20, f"{prefix}{j}", size=10,
                     colour="#FFFFFF" if j == 3 else None)
        fig.text(cx - 8, row_y + 20, "K" if role == "key" else "V", "math", anchor="end")
    fig.rect(cx + 3 * CELL - 2, ky - 2, CELL + 4, 2 * CELL + 12, fill="none", stroke=ROLES["query"][0],
             extra='stroke-width="2.5" stroke-dasharray="4 2"')
    fig.line([(x0 + 218, 176), (x0 + 218, 196), (cx + 3.5 * CELL, 196), (cx + 3.5 * CELL, ky - 3)], "key")
    cache = fig.code("KVCache", f"{ATT}.KVCache")
    fig.text(cx - 40, vy + CELL + 20, f"past = k0-k2, v0-v2: a {cache}", "code", anchor="start", size=11)
    fig.shape(cx - 40, vy + CELL + 38, "(B, H, P, Dh)")
    ext = fig.code("extend", f"{ATT}.KVCache.extend")
    fig.text(tx, ky + 12, f"past.{ext}(k3, v3):", "code", anchor="start", size=11)
    fig.text(tx, ky + 31, "a new cache (B, H, P+1, Dh);", "note", anchor="start")
    fig.text(tx, ky + 49, "past itself is unchanged", "note", anchor="start")
    # the one query against the cache
    qy = 356
    att = fig.code("attend(q3, cache)", f"{ATT}.MultiHeadAttention.attend")
    fig.text(x0 + 56, qy - 10, att, "code", anchor="start", size=11)
    fig.line([(x0 + 45, 176), (x0 + 45, qy + 14), (cx - 4, qy + 14)], "query")
    fig.cells(cx, qy, softmax_rows([SCORES[3]]), CELL, "weights")
    fig.text(tx, qy + 2, "one row of scores (B, H, 1, P+1),", "note", anchor="start")
    fig.text(tx, qy + 20, "no mask (the cache holds only", "note", anchor="start")
    fig.text(tx, qy + 38, "the past); out: (B, 1, D)", "note", anchor="start")
    # the residual around self-attention, then the block's two other sublayers
    fig.line([(x0 + 10, 110), (x0 + 2, 110), (x0 + 2, 420), (x0 + 8, 420)], "stream")
    memory = fig.code("project_memory(R)", "attnbook.layers.DecoderBlock.project_memory")
    fig.text(x0 + 10, 424, "then the residual, cross-attention and the", "note", anchor="start")
    fig.text(x0 + 10, 442, "feed-forward network (not drawn)", "note", anchor="start")
    fig.text(x0 + 10, 460, f"memory K, V: {memory}, once per source", "code", anchor="start",
             size=11)
