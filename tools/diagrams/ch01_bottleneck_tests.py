"""Chapter 1: the bottleneck section's tests, each drawn where it acts (``ch01_bottleneck_tests.svg``)."""
from __future__ import annotations

from .svg import ROLES, Figure

RNN = "attnbook.models.rnn"
TABLE = "attnbook.tasks.count_baselines.LetterWindowG2P"
DESC = (
    "The road map of Section 1.10. Top row, the model: the word's letters x_1 .. x_S (B, S) go "
    "into the GRUEncoder, whose only output the decoder sees is the context C (B, 2He), 256 "
    "numbers; the ContextDecoder reads C and writes the phonemes y_1 .. y_T. Bottom row, the "
    "yardstick: the letter-window count table (LetterWindowG2P) maps each letter's window straight "
    "to phonemes, with no C. Four tests act on the top row, each marked where it acts: (1) the "
    "decoder is fed the right prefix instead of its own guesses (teacher-forced error by length); "
    "(2) the encoder's width is set to 64, 128 or 256 units per direction; (3) C alone is squeezed "
    "by a learned linear map to 64, 128 or 256 numbers; (4) a linear probe reads the letter at each "
    "position k back from the frozen C. Tests 1-3 are scored by word length against the count "
    "table; test 4 against the floor (the most common letter) and a random projection."
)
Y_ROW, Y_TABLE = 120, 300  # the model's row and the count table's row (box tops)
BOX_H = 52


def draw() -> Figure:
    fig = Figure("ch01_bottleneck_tests", 1000, 400, "Chapter 1: what Section 1.10 tests, and where",
                 DESC)
    fig.text(30, 28, "Section 1.10: four tests of C; (1)-(3) scored by word length against a table with no C",
             "title", anchor="start")
    model_row(fig)
    table_row(fig)
    tests(fig)
    fig.legend(30, 388, roles=["stream", "context", "weights"],
               meanings={"stream": "letters, phonemes", "context": "the context C",
                         "weights": "a test and where it acts"})
    return fig


def model_row(fig: Figure) -> None:
    mid = Y_ROW + BOX_H / 2
    fig.tensor(30, mid - 14, "x_{1} .. x_{S}", "stream", w=110)
    fig.shape(34, mid + 34, "(B, S)")
    fig.line([(140, mid), (198, mid)], "stream")
    fig.box(200, Y_ROW, 190, BOX_H, fig.code("GRUEncoder", f"{RNN}.GRUEncoder"),
            sub="bidirectional GRU")
    fig.line([(390, mid), (458, mid)], "context", width=2.4)
    fig.tensor(460, mid - 14, "C", "context", w=60)
    fig.shape(462, mid + 34, "(B, 2He): 256")
    fig.line([(520, mid), (588, mid)], "context", width=2.4)
    fig.box(590, Y_ROW, 190, BOX_H, fig.code("ContextDecoder", f"{RNN}.ContextDecoder"),
            sub="reads C at every step")
    fig.line([(780, mid), (838, mid)], "stream")
    fig.tensor(840, mid - 14, "y_{1} .. y_{T}", "stream", w=120)


def table_row(fig: Figure) -> None:
    mid = Y_TABLE + BOX_H / 2
    fig.line([(115, Y_ROW + BOX_H / 2 + 14), (115, mid), (348, mid)], "stream")
    fig.box(350, Y_TABLE, 300, BOX_H, fig.code("LetterWindowG2P", TABLE),
            sub="count table: letter windows, no C")
    fig.line([(650, mid), (900, mid), (900, Y_ROW + BOX_H / 2 + 16)], "stream")
    fig.text(775, mid - 8, "the yardstick, same test words", "note")


def tests(fig: Figure) -> None:
    colour = ROLES["weights"][0]
    top = Y_ROW - 10
    # (2) the encoder's width
    fig.line([(295, 62), (295, top)], "weights", dashed=True)
    fig.text(295, 56, "(2) width: 64, 128, 256 per direction", "note", colour=colour)
    # (4) the probe reads C
    fig.line([(490, Y_ROW + BOX_H / 2 - 15), (490, 90)], "weights", dashed=True)  # C -> probe
    fig.text(490, 82, "(4) linear probe: the letter at k?", "note", colour=colour)
    # (3) C squeezed by a linear map, on the arrow into the decoder
    below = Y_ROW + BOX_H + 52
    fig.line([(566, below - 12), (566, Y_ROW + BOX_H / 2 + 6)], "weights", dashed=True)
    fig.text(566, below + 4, "(3) C squeezed: 64, 128, 256", "note", colour=colour)
    # (1) the right prefix fed to the decoder
    fig.line([(735, 62), (735, top)], "weights", dashed=True)
    fig.text(735, 56, "(1) right prefix fed in", "note", colour=colour)
