"""Chapter 3, section 3.8: the notebook's ``TwoLayerTagger``, two attention layers and no positions
(``ch03_two_layer_tagger.svg``)."""
from __future__ import annotations

from .ch03_positions import keep_spaces
from .svg import Figure

MHA = "attnbook.layers.MultiHeadAttention"
DESC = (
    "Section 3.8's TwoLayerTagger, bottom to top. Token ids (B, T), with no position information, "
    "go through the embedding (nn.Embedding) to x_j, shape (B, T, D). The first attention layer "
    "(first, a MultiHeadAttention with one head) takes its queries, keys and values from x and "
    "returns z_j; a residual connection adds it to the input, x'_j = x_j + z_j, each token's vector "
    "plus what it fetched. The second attention layer (second, one head) takes its queries, keys "
    "and values from x' and returns z'_j, and the read-out (readout, nn.Linear) turns z'_j into "
    "logits of shape (B, T, 1, V), one answer per position. The two controls change the second "
    "layer only: second='itself' gives it a mask that lets each position attend to itself alone; "
    "second='query from x' takes its queries from x_j instead of x'_j."
)
SX = 250  # the stream's column
BX, BW = 410, 280  # the attention layers' left edge and width
MID = BX + BW / 2


def draw() -> Figure:
    fig = Figure("ch03_two_layer_tagger", 1000, 600,
                 "TwoLayerTagger: two attention layers with a residual connection, no positions",
                 DESC)
    fig.text(30, 30, "TwoLayerTagger (section 3.8): x'_{j} = x_{j} + z_{j} feeds a second "
             "attention layer", "title", anchor="start")
    fig.text(SX, 560, "token ids (B, T), no positions", "code", size=12)
    fig.line([(SX, 545), (SX, 506)], "stream")
    fig.box(SX - 110, 466, 220, 38, "embedding: nn.Embedding", size=12)
    fig.shape(SX + 8, 452, "(B, T, D)")
    fig.text(SX - 12, 452, "x_{j}", "math", anchor="end")
    fig.line([(SX, 466), (SX, 311)], "stream")
    attention_layer(fig, branch=430, top=350, name="first", note="queries, keys, values: x")
    fig.line([(MID, 350), (MID, 300), (SX + 11, 300)], "context")
    fig.shape(MID + 8, 322, "(B, T, D)")
    fig.text(MID - 8, 322, "z_{j}", "math", anchor="end")
    fig.circle(SX, 300, 9, "stream")
    fig.text(SX, 305, "+", size=14, weight="bold")
    fig.text(SX - 16, 296, "x'_{j} = x_{j} + z_{j}", "math", anchor="end")
    fig.text(SX - 16, 314, "residual connection", "note", anchor="end")
    fig.line([(SX, 291), (SX, 270)], "stream", arrow=False)
    attention_layer(fig, branch=270, top=190, name="second", note="queries, keys, values: x'")
    fig.shape(SX + 8, 262, "(B, T, D)")
    fig.line([(MID, 190), (MID, 127), (SX + 112, 127)], "context")
    fig.shape(MID + 8, 162, "(B, T, D)")
    fig.text(MID - 8, 162, "z'_{j}", "math", anchor="end")
    fig.box(SX - 110, 110, 220, 34, "readout: nn.Linear", size=12)
    fig.line([(SX, 110), (SX, 80)], "stream")
    fig.text(SX, 68, "logits (B, T, 1, V): one answer per position", "note")
    controls(fig)
    fig.legend(30, 588, ["query", "key", "value", "stream", "context", "mask"])
    return keep_spaces(fig)


def attention_layer(fig: Figure, branch: float, top: float, name: str, note: str) -> None:
    """A one-head attention layer whose queries, keys and values branch off the stream at
    ``branch``; the box spans ``top`` to ``top + 40``."""
    bottom = top + 40
    fig.line([(SX, branch), (MID - 60, branch)], "stream", arrow=False)
    for dx, role in ((-60, "query"), (0, "key"), (60, "value")):
        fig.line([(MID - 60, branch), (MID + dx, branch), (MID + dx, bottom + 2)], role)
    fig.box(BX, top, BW, 40, f"{name}: " + fig.code("MultiHeadAttention", MHA),
            sub=f"one head; {note}", size=12)


def controls(fig: Figure) -> None:
    """The two controls of section 3.8, which change the second layer only."""
    x = BX + BW + 14
    fig.line([(x + 40, 210), (BX + BW + 2, 210)], "mask")
    fig.text(x + 44, 206, "control \"itself\": a mask,", "note", anchor="start")
    fig.text(x + 44, 222, "identity (T, T): each", "note", anchor="start")
    fig.text(x + 44, 238, "position sees itself only", "note", anchor="start")
    fig.text(x, 282, "control \"query from x\": the", "note", anchor="start")
    fig.text(x, 298, "second layer's queries come", "note", anchor="start")
    fig.text(x, 314, "from x_{j}, not x'_{j}", "note", anchor="start")
