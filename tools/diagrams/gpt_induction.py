"""Chapter 8: the induction circuit of Section 8.6, a previous-token head feeding an induction head
(``gpt_induction.svg``)."""
from __future__ import annotations

from .svg import Figure

MODEL = "attnbook.models.attention_only.AttentionOnly"
SCORE = "attnbook.tasks.induction.induction_scores"
DESC = (
    "The induction circuit on Section 8.6's task. A sequence holds a random segment of r tokens at "
    "positions 0 to r - 1 and the same segment again at positions r to 2r - 1 (positions count from "
    "0). At a position i of the second copy the current token A also sits at position i - r of the "
    "first copy, and the token after it, B, at position i - r + 1. Layer 1: a previous-token head at "
    "every position attends to the one before it, so position i - r + 1 carries 'the token before me was A'. "
    "Layer 2: the induction head's query at i (token A) matches that key at i - r + 1 and copies its "
    "token B, the prediction for position i + 1. The prefix-matching score is a head's mean "
    "attention weight from i to i - r + 1 over the second copy."
)
X0, CW, GAP = 130, 74, 8  # left edge of the cells, cell width, gap
TOKENS_Y, LAYER1_Y, LAYER2_Y = 100, 210, 330
CELLS = [  # (position label, token label)
    ("0", "x_{0}"), ("", "…"), ("i − r", "A"), ("i − r + 1", "B"), ("", "…"), ("r − 1", "x_{r−1}"),
    ("r", "x_{0}"), ("", "…"), ("i", "A"), ("i + 1", "?"),
]


def draw() -> Figure:
    fig = Figure("gpt_induction", 1000, 470, "Section 8.6: a previous-token head feeds an induction head",
                 DESC)
    fig.text(30, 28, "The induction circuit (" + fig.code("AttentionOnly", MODEL)
             + ", two layers): at i, attend to i − r + 1 and copy its token", "title", anchor="start")
    xs = [X0 + k * (CW + GAP) + (24 if k >= 6 else 0) for k in range(len(CELLS))]
    mid = [x + CW / 2 for x in xs]
    for label, y in (("tokens", TOKENS_Y), ("layer 1", LAYER1_Y), ("layer 2", LAYER2_Y)):
        fig.text(30, y + 19, label, "group", anchor="start")
    for k, (pos, tok) in enumerate(CELLS):
        fig.text(mid[k], TOKENS_Y - 10, pos, "note")
        if tok == "…":
            fig.text(mid[k], TOKENS_Y + 19, "…", "math")
        else:
            fig.tensor(xs[k], TOKENS_Y, tok, "stream", w=CW)
    # the two copies
    fig.text(xs[0], 56, "first copy: positions 0 … r − 1 (r: segment length, 6 to 16)",
             "note", anchor="start")
    fig.line([(xs[0], 64), (xs[5] + CW, 64)], "mask", arrow=False)
    fig.text(xs[6], 56, "second copy: r … 2r − 1", "note", anchor="start")
    fig.line([(xs[6], 64), (xs[9] + CW, 64)], "mask", arrow=False)
    # layer 1: the previous-token head writes "the token before me was A" at i - r + 1
    fig.line([(mid[2], TOKENS_Y + 30), (mid[3] - 20, LAYER1_Y - 2)], "weights")
    fig.line([(mid[3] + 6, TOKENS_Y + 30), (mid[3] + 6, LAYER1_Y - 2)], "stream")
    fig.tensor(xs[3] - 40, LAYER1_Y, "B; before me: A", "key", w=CW + 80)
    fig.text(xs[3] + CW + 60, LAYER1_Y + 42, "previous-token head: each position attends to the one before,",
             "note", anchor="start")
    fig.text(xs[3] + CW + 60, LAYER1_Y + 60, "so the key at i − r + 1 carries A", "note",
             anchor="start")
    # layer 2: the query at i matches that key and copies B
    fig.line([(mid[8], TOKENS_Y + 30), (mid[8], LAYER2_Y - 2)], "stream")
    fig.tensor(xs[8], LAYER2_Y, "query: A", "query", w=CW)
    fig.line([(xs[8] - 2, LAYER2_Y + 14), (mid[3], LAYER2_Y + 14), (mid[3], LAYER1_Y + 30)], "query")
    fig.text((mid[3] + xs[8]) / 2, LAYER2_Y + 34, "induction head: query A matches that key; "
             "weight a_{i, i−r+1}", "note")
    fig.line([(xs[3] + CW + 40, LAYER1_Y + 14), (mid[9], LAYER1_Y + 14), (mid[9], LAYER2_Y - 2)],
             "value")
    fig.tensor(xs[9], LAYER2_Y, "B", "value", w=CW)
    fig.text(mid[9], LAYER2_Y + 52, "predicts x_{i+1} = B", "note", anchor="end")
    fig.text(30, 420, fig.code("induction_scores", SCORE) + ": a head's mean weight from i to "
             "i − r + 1 over the second copy (the prefix-matching score)", "note", anchor="start")
    fig.legend(30, 448, ["stream", "weights", "key", "query", "value"],
               meanings={"stream": "tokens", "weights": "attends to the position before", "key": "layer 1's output",
                         "query": "query at i, attends", "value": "copied token"})
    return fig
