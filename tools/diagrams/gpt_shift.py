"""Chapter 8: the next-token shift, one window giving T (context, target) pairs (``gpt_shift.svg``)."""
from __future__ import annotations

from .ch03_positions import keep_spaces
from .svg import Figure

LM = "attnbook.tasks.language_modeling.next_token_loss"
BATCHES = "attnbook.tasks.token_stream.lm_batches"
WORDS = ["I", "n", "·the", "·be", "g", "in"]  # the chapter's BPE pieces of "In the beginning"
DESC = (
    "The next-token shift. A window of T + 1 consecutive tokens x_1 ... x_{T+1} (lm_batches) is cut "
    "twice: its first T tokens are the model's input, its last T tokens are the targets. Position t "
    "of the input reads x_1 ... x_t through the causal mask and is scored on x_{t+1}, so one forward "
    "pass gives T (context, target) pairs: x_1 predicts x_2, x_1 x_2 predict x_3, and so on "
    "(next_token_loss averages the T cross-entropies). Drawn for the first six pieces into which the "
    "chapter's 512-token BPE cuts 'In the beginning, God created' (I, n, ·the, ·be, g, in), T = 5; "
    "in this chapter T = 64."
)
X0, CW, GAP = 210, 104, 10  # left edge of the first token, cell width, gap between cells
WINDOW_Y, TARGET_Y, INPUT_Y = 72, 150, 250


def draw() -> Figure:
    fig = Figure("gpt_shift", 900, 372, "The next-token shift: one window, T training pairs", DESC)
    fig.text(30, 28, "One window of T + 1 tokens (" + fig.code("lm_batches", BATCHES)
             + ") gives T (context, target) pairs", "title", anchor="start")
    n = len(WORDS)
    xs = [X0 + i * (CW + GAP) for i in range(n)]
    mid = [x + CW / 2 for x in xs]
    fig.text(X0 - 16, WINDOW_Y + 19, "window, T + 1 = 6", "note", anchor="end")
    for i, (x, word) in enumerate(zip(xs, WORDS)):
        fig.text(mid[i], WINDOW_Y - 8, word, "code", size=12)
        fig.tensor(x, WINDOW_Y, f"x_{{{i + 1}}}", "stream", w=CW)
    fig.text(X0 - 16, TARGET_Y + 12, "targets x_{2} … x_{T+1}", "note", anchor="end")
    fig.text(X0 - 16, INPUT_Y + 12, "input x_{1} … x_{T}", "note", anchor="end")
    for i in range(n - 1):
        fig.tensor(xs[i + 1], TARGET_Y, f"x_{{{i + 2}}}", "value", w=CW)
        fig.tensor(xs[i], INPUT_Y, f"x_{{{i + 1}}}", "query", w=CW)
        # position i + 1 is scored on the token after it: one column to the right
        fig.line([(mid[i], INPUT_Y - 2), (mid[i + 1] - 8, TARGET_Y + 30)], "query")
    fig.text(mid[0] - 8, 218, "p(x_{2} | x_{1})", "note", anchor="end")
    fig.text(mid[n - 2] + 70, 218, "p(x_{6} | x_{≤5})", "note", anchor="start")
    # what the last position reads: every input token up to itself (the causal mask)
    fig.line([(xs[0], INPUT_Y + 40), (xs[n - 2] + CW, INPUT_Y + 40)], "mask", arrow=False)
    fig.text(X0, INPUT_Y + 58, "position 5 reads x_{1} … x_{5} (causal mask) and is scored on x_{6}; "
             "position t reads x_{1} … x_{t} and is scored on x_{t+1}", "note", anchor="start")
    fig.text(30, 336, fig.code("next_token_loss", LM)
             + ": the mean of −log p(x_{t+1} | x_{1} … x_{t}) over t = 1 … T, from one forward pass",
             "note", anchor="start")
    fig.legend(30, 360, ["stream", "query", "value", "mask"],
               meanings={"stream": "window token", "query": "input position t",
                         "value": "its target x_{t+1}", "mask": "what the last position reads"})
    return keep_spaces(fig)  # rsvg would otherwise run "x_{t}" and "and" together
