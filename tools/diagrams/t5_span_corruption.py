"""Chapter 10: span corruption, one text cut into an input with sentinels and a short target
(``t5_span_corruption.svg``)."""
from __future__ import annotations

from .svg import Figure

MASK = "attnbook.tasks.span_corruption.noise_mask"
CORRUPT = "attnbook.tasks.span_corruption.corrupt"
WORDS = ["Thank", "you", "for", "inviting", "me", "to", "your", "party", "last", "week."]
HIDDEN = {2, 3, 8}  # two spans: "for inviting" and "last"
DESC = (
    "Span corruption, on the example of T5's paper (its Figure 2): the text 'Thank you for inviting "
    "me to your party last week.' with a mask from noise_mask hiding two spans, 'for inviting' and "
    "'last'. corrupt writes the encoder's input with one sentinel in place of each span: 'Thank you "
    "<X> me to your party <Y> week. </s>'. The decoder's target holds only the hidden words, each "
    "span after its sentinel, then the end token: '<X> for inviting <Y> last </s>'. Arrows lead from "
    "each span to its sentinel in the input and to its words in the target. The target is 6 tokens "
    "where rebuilding the text would take 11; the library writes no closing sentinel (the paper "
    "writes one, <Z>)."
)
X0, CW, GAP, H = 176, 82, 6, 30  # left edge of the first cell, cell width, gap, cell height
TEXT_Y, INPUT_Y, TARGET_Y = 70, 178, 286


def cell(fig: Figure, x: float, y: float, label: str, role: str, hidden: bool = False) -> None:
    """One token: a white box outlined in ``role``'s colour (hidden tokens: dashed and shaded)."""
    fig.roles.add(role)
    colour = {"stream": "#4D4D4D", "query": "#D55E00", "context": "#E69F00", "value": "#009E73"}[role]
    extra = 'stroke-width="2" stroke-dasharray="5 3"' if hidden else 'stroke-width="2"'
    fig.rect(x, y, CW, H, fill="#FBE3D6" if hidden else "#FFFFFF", stroke=colour, rx=8, extra=extra)
    fig.text(x + CW / 2, y + H / 2 + 5, label, "code", size=12)


def draw() -> Figure:
    fig = Figure("t5_span_corruption", 1080, 410, "Span corruption: an input with sentinels, a short target",
                 DESC)
    fig.text(30, 28, "Span corruption (" + fig.code("noise_mask", MASK) + ", then "
             + fig.code("corrupt", CORRUPT) + "): one sentinel per hidden span", "title", anchor="start")
    xs = [X0 + i * (CW + GAP) for i in range(len(WORDS))]
    fig.text(X0 - 16, TEXT_Y + 20, "text, 10 words", "note", anchor="end")
    for i, (x, word) in enumerate(zip(xs, WORDS)):
        cell(fig, x, TEXT_Y, word, "query" if i in HIDDEN else "stream", hidden=i in HIDDEN)
    fig.text(X0, TEXT_Y - 10, "2 spans hidden (15% of a long text; here 3 of 10 words, to show two)", "note",
             anchor="start")
    # the input: kept words in place, one sentinel per span
    inputs = [("Thank", "stream"), ("you", "stream"), ("<X>", "context"), ("me", "stream"), ("to", "stream"),
              ("your", "stream"), ("party", "stream"), ("<Y>", "context"), ("week.", "stream"), ("</s>", "stream")]
    fig.text(X0 - 16, INPUT_Y + 20, "encoder input", "note", anchor="end")
    for x, (label, role) in zip(xs, inputs):
        cell(fig, x, INPUT_Y, label, role)
    # kept words fall straight down; each span collapses to its sentinel
    for i in (0, 1, 4, 5, 6, 7):
        j = i if i < 2 else (i - 1 if i < 8 else i - 1)
        fig.line([(xs[i] + CW / 2, TEXT_Y + H + 2), (xs[j] + CW / 2, INPUT_Y - 3)], "stream", width=1.2)
    fig.line([(xs[9] + CW / 2, TEXT_Y + H + 2), (xs[8] + CW / 2, INPUT_Y - 3)], "stream", width=1.2)
    fig.line([((xs[2] + xs[3] + CW) / 2, TEXT_Y + H + 2), (xs[2] + CW / 2, INPUT_Y - 3)], "context")
    fig.line([(xs[8] + CW / 2, TEXT_Y + H + 2), (xs[7] + CW / 2, INPUT_Y - 3)], "context")
    # the target: each sentinel, then its span's words, then </s>
    target = [("<X>", "context"), ("for", "value"), ("inviting", "value"), ("<Y>", "context"), ("last", "value"),
              ("</s>", "stream")]
    fig.text(X0 - 16, TARGET_Y + 20, "decoder target", "note", anchor="end")
    for x, (label, role) in zip(xs, target):
        cell(fig, x, TARGET_Y, label, role)
    for i, j in ((2, 1), (3, 2), (8, 4)):  # hidden word i of the text -> target position j
        fig.line([(xs[i] + CW / 2 - 14, TEXT_Y + H + 2), (xs[j] + CW / 2 + 8, TARGET_Y - 3)], "value",
                 dashed=True, width=1.2)
    fig.text(xs[6], TARGET_Y + 20, "6 tokens, where rebuilding", "note", anchor="start")
    fig.text(xs[6], TARGET_Y + 38, "the text would take 11", "note", anchor="start")
    fig.text(30, 350, "The encoder never sees a hidden word; the decoder's cross-entropy covers the target only.",
             "note", anchor="start")
    fig.text(30, 370, "The paper closes the target with one more sentinel (<Z>); the library writes </s>.",
             "note", anchor="start")
    fig.legend(30, 396, ["stream", "query", "context", "value"],
               meanings={"stream": "kept token", "query": "hidden token", "context": "sentinel",
                         "value": "target token"})
    return fig
