"""Chapter 3, section 3.8: the notebook's ``ItTagger``, learned positions (or none) and two attention
layers with a residual connection between them (``ch03_two_layer_tagger.svg``)."""
from __future__ import annotations

from .ch03_positions import keep_spaces
from .svg import Figure

MHA = "attnbook.layers.MultiHeadAttention"
POS = "attnbook.layers.positional.LearnedPositionalEmbedding"
DESC = (
    "Section 3.8's ItTagger, bottom to top. Token ids (B, T) go through the embedding "
    "(nn.Embedding); a learned position table (position, a LearnedPositionalEmbedding; in the "
    "control without positions an nn.Identity) adds one row per position, giving x_j, shape "
    "(B, T, D). The first attention layer (a MultiHeadAttention with one head) takes its queries, "
    "keys and values from x and returns z_j; a residual connection adds it to the input, "
    "x'_j = x_j + z_j, each token's vector plus what it fetched. The second attention layer (one "
    "head) takes its queries, keys and values from x' and returns z'_j, with no residual "
    "connection after it, and the read-out (readout, nn.Linear) turns z' at the position of 'it' "
    "into logits of shape (B, V), one answer per sentence. The one-layer model stops after the "
    "first layer and reads out z_j at 'it'."
)
SX = 250  # the stream's column
BX, BW = 410, 280  # the attention layers' left edge and width
MID = BX + BW / 2


def draw() -> Figure:
    fig = Figure("ch03_two_layer_tagger", 1000, 640,
                 "ItTagger: positions, then two attention layers with a residual connection",
                 DESC)
    fig.text(30, 30, "ItTagger (section 3.8): x_{j} = embedding + position; x'_{j} = x_{j} + z_{j} "
             "feeds a second attention layer", "title", anchor="start")
    fig.text(SX, 600, "token ids (B, T)", "code", size=12)
    fig.line([(SX, 585), (SX, 548)], "stream")
    fig.box(SX - 110, 508, 220, 38, "embedding: nn.Embedding", size=12)
    fig.line([(SX, 508), (SX, 481)], "stream")
    fig.circle(SX, 470, 9, "stream")
    fig.text(SX, 475, "+", size=14, weight="bold")
    fig.box(BX, 452, BW + 60, 36, fig.code("LearnedPositionalEmbedding", POS),
            sub="position; nn.Identity: no positions", size=12)
    fig.line([(BX, 470), (SX + 11, 470)], "context")
    fig.shape(SX + 8, 448, "(B, T, D)")
    fig.text(SX - 12, 448, "x_{j}", "math", anchor="end")
    fig.line([(SX, 461), (SX, 311)], "stream")
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
    fig.text(MID + 150, 150, "no residual after the last layer", "note", anchor="start")
    fig.box(SX - 110, 110, 220, 34, "readout: nn.Linear", size=12)
    fig.line([(SX, 110), (SX, 80)], "stream")
    fig.text(SX, 68, "logits (B, V): z' at the position of 'it', one answer per sentence", "note")
    fig.legend(30, 628, ["query", "key", "value", "stream", "context"])
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
