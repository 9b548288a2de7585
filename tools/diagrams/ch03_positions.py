"""Chapter 3: a token's input is its embedding plus its position's vector (``ch03_add_positions.svg``)."""
from __future__ import annotations

from .svg import Figure

P = "attnbook.layers.positional"
DESC = (
    "Five words of the opening sentence, 'The animal didn't cross the', at positions 0 to 4. For "
    "each position p two vectors of width D are added: the token embedding e_p, a row of the "
    "token table (nn.Embedding) picked by the word, and PE(p), row p of the fixed sinusoidal "
    "table (sinusoidal_encoding, applied by SinusoidalPositionalEncoding). Their sum x_p = e_p + PE(p) "
    "is the input of self-attention, of shape (B, T, D): adding keeps the width D, where "
    "concatenating [e_p; PE(p)] would make it 2D."
)
WORDS = ["The", "animal", "didn't", "cross", "the"]
X0, CW, BW = 330, 110, 90  # first column, column pitch, box width
Y_TOK, Y_POS, Y_SUM, Y_X = 300, 215, 170, 100


def draw() -> Figure:
    fig = Figure("ch03_add_positions", 900, 425,
                 "x_p = e_p + PE(p): the position vector is added to the token embedding", DESC)
    fig.text(30, 30, "Each input vector is a token embedding plus its position's vector, "
             "x_{p} = e_{p} + PE(p)", "title", anchor="start")
    fig.text(30, Y_TOK + 21, "token table: nn.Embedding", "code", anchor="start", size=12)
    fig.text(30, Y_POS + 15, fig.code("sinusoidal_encoding", f"{P}.sinusoidal_encoding"), "code",
             anchor="start", size=12)
    fig.text(30, Y_POS + 33, fig.code("(SinusoidalPositionalEncoding)",
                                      f"{P}.SinusoidalPositionalEncoding"), "code",
             anchor="start", size=11)
    fig.text(30, Y_X + 19, "self-attention input", anchor="start", size=13)
    fig.shape(30, Y_X + 40, "(B, T, D)")
    for j, word in enumerate(WORDS):
        column(fig, j, word)
    fig.text(30, 408, "Adding keeps the width D; concatenating [e_{p}; PE(p)] would make it 2D.",
             "note", anchor="start")
    return fig


def column(fig: Figure, j: int, word: str) -> None:
    """Word j at position j: its embedding, its position's vector, and their sum."""
    x = X0 + j * CW
    mid = x + BW / 2
    fig.text(mid, 362, word, "code", size=12)
    fig.text(mid, 380, f"p = {j}", "note")
    fig.line([(mid, 348), (mid, Y_TOK + 34)], "stream")
    fig.rect(x, Y_TOK, BW, 32, "module", rx=4)
    fig.text(mid, Y_TOK + 21, f"e_{{{j}}}", "math", size=13)
    fig.rect(x, Y_POS, BW, 32, "module", rx=4)
    fig.text(mid, Y_POS + 21, f"PE({j})", "math", size=13)
    fig.line([(mid, Y_TOK), (mid, Y_POS + 32)], "stream", arrow=False)
    fig.text(mid + 14, Y_POS + 60, "+", size=16)
    fig.line([(mid, Y_POS), (mid, Y_X + 30)], "stream")
    fig.tensor(x + 10, Y_X, f"x_{{{j}}}", "stream", w=BW - 20)
