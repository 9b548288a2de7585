"""Chapter 3: a token's input is its embedding plus its position's vector (``ch03_add_positions.svg``)."""
from __future__ import annotations

from .svg import Figure


def keep_spaces(fig: Figure) -> Figure:
    """Mark every text with sub- or superscripts xml:space="preserve": renderers such as rsvg
    otherwise drop the space that starts the <tspan> after a subscript ("x_j= e_j+")."""
    fig.parts = [part.replace("<text ", '<text xml:space="preserve" ', 1) if "<tspan" in part
                 else part for part in fig.parts]
    return fig

P = "attnbook.layers.positional"
DESC = (
    "Five words of the opening sentence, 'The animal didn't cross the', at positions 0 to 4. For "
    "each position p two vectors of width D go into a + node: the token embedding e_p, a row of the "
    "token table (nn.Embedding) picked by the word, and PE(p), row p of the fixed sinusoidal "
    "table (sinusoidal_encoding, applied by SinusoidalPositionalEncoding). Its output x_p = e_p + PE(p) "
    "is the input of self-attention, of shape (B, T, D): adding keeps the width D, where "
    "concatenating [e_p; PE(p)] would make it 2D."
)
WORDS = ["The", "animal", "didn't", "cross", "the"]
X0, CW, BW = 330, 110, 90  # first column, column pitch, box width
Y_TOK, Y_POS, Y_SUM, Y_X = 300, 235, 180, 100
EW, PW = 44, 50  # widths of the e_p and PE(p) boxes, side by side in a column


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
    return keep_spaces(fig)


def column(fig: Figure, j: int, word: str) -> None:
    """Word j at position j: its embedding, its position's vector, and their sum."""
    x = X0 + j * CW
    mid = x + BW / 2
    ex, px = x + EW / 2, x + BW - PW / 2  # centres of the e_p and PE(p) boxes
    fig.text(ex, 362, word, "code", size=12)
    fig.text(ex, 380, f"p = {j}", "note")
    fig.line([(ex, 348), (ex, Y_TOK + 34)], "stream")
    fig.rect(x, Y_TOK, EW, 32, "module", rx=4)
    fig.text(ex, Y_TOK + 21, f"e_{{{j}}}", "math", size=13)
    fig.rect(x + BW - PW, Y_POS, PW, 32, "module", rx=4)
    fig.text(px, Y_POS + 21, f"PE({j})", "math", size=13)
    # the sum node: e_p from the left, PE(p) from the right, x_p out of the top
    fig.line([(ex, Y_TOK), (ex, Y_SUM), (mid - 11, Y_SUM)], "stream")
    fig.line([(px, Y_POS), (px, Y_SUM), (mid + 11, Y_SUM)], "stream")
    fig.circle(mid, Y_SUM, 9, "stream")
    fig.text(mid, Y_SUM + 5, "+", size=14, weight="bold")
    fig.line([(mid, Y_SUM - 9), (mid, Y_X + 32)], "stream")
    fig.tensor(x + 10, Y_X, f"x_{{{j}}}", "stream", w=BW - 20)
