"""Chapter 1: one GRU step, its gates r and z and its candidate n (``ch01_gru_cell.svg``)."""
from __future__ import annotations

from .svg import ROLES, Figure

RNN = "attnbook.models.rnn"
DESC = (
    "One step of a GRU (nn.GRU, as used by GRUEncoder.gru and ContextDecoder.gru), with the "
    "symbols of the chapter's equations. The previous state h_{t-1}, (B, He) in the encoder and "
    "(B, Hd) in the decoder, enters at the left and "
    "the input x_t (B, E) at the bottom. Both feed the reset gate r = sigma(W_ir x_t + b_ir + W_hr "
    "h_{t-1} + b_hr) and the update gate z = sigma(W_iz x_t + b_iz + W_hz h_{t-1} + b_hz), each "
    "(B, He or Hd) with entries between 0 and 1. The candidate n = tanh(W_in x_t + b_in + r * (W_hn "
    "h_{t-1} + b_hn)) sees the previous state only through the reset gate r. The new state "
    "h_t = (1 - z) * n + z * h_{t-1} blends the candidate and the old state: the top line carries "
    "h_{t-1} straight to the blend, so where z is near 1 the state passes on unchanged."
)
Y_TOP, Y_GATE, Y_X = 70, 200, 350  # the state line, the row of gates, the input line
GATE_W, GATE_H = 200, 54


def draw() -> Figure:
    fig = Figure("ch01_gru_cell", 1040, 440, "Chapter 1: one GRU step and its gates", DESC)
    fig.text(30, 28, "One GRU step (nn.GRU: the " + fig.code("gru", f"{RNN}.GRUEncoder:gru", f"{RNN}.ContextDecoder:gru")
             + " of GRUEncoder and ContextDecoder)", "title", anchor="start")
    fig.tensor(30, Y_TOP - 14, "h_{t-1}", "stream", w=80)
    fig.shape(34, Y_TOP + 34, "(B, He | Hd)")
    fig.tensor(30, Y_X - 14, "x_{t}", "stream", w=80)
    fig.shape(34, Y_X + 34, "(B, E)")
    # the carry path: h_{t-1} straight to the blend
    fig.line([(110, Y_TOP), (748, Y_TOP)], "stream", width=2.4)
    fig.text(430, Y_TOP - 10, "h_{t-1}, carried unchanged to the blend", "note")
    gates(fig)
    blend(fig)
    fig.legend(30, 428, roles=["stream", "weights", "context"],
               meanings={"stream": "states and inputs", "weights": "gates (each entry in 0..1)",
                         "context": "candidate state n"})
    return fig


def gates(fig: Figure) -> None:
    """r, z and n, each fed by h_{t-1} (from above) and x_t (from below)."""
    xs = {"r": 170, "z": 430, "n": 690}
    labels = {"r": ("r = σ(·)", "reset gate", "weights"), "z": ("z = σ(·)", "update gate", "weights"),
              "n": ("n = tanh(·)", "candidate state", "context")}
    fig.line([(110, Y_X), (xs["n"] + 60, Y_X)], "stream", arrow=False)
    for name, x in xs.items():
        label, sub, role = labels[name]
        fig.box(x, Y_GATE, GATE_W, GATE_H, label, sub=sub, role=role, kind="math")
        fig.line([(x + 40, Y_TOP), (x + 40, Y_GATE - 2)], "stream")  # h_{t-1} in
        fig.line([(x + 60, Y_X), (x + 60, Y_GATE + GATE_H + 2)], "stream")  # x_t in
    fig.text(xs["r"] + 48, Y_TOP + 62, "W_{hr} h_{t-1}", "math", size=13, anchor="start")
    fig.text(xs["r"] + 68, Y_X - 22, "W_{ir} x_{t}", "math", size=13, anchor="start")
    fig.text(xs["z"] + 48, Y_TOP + 62, "W_{hz} h_{t-1}", "math", size=13, anchor="start")
    fig.text(xs["z"] + 68, Y_X - 22, "W_{iz} x_{t}", "math", size=13, anchor="start")
    # below the z line that crosses above it to the blend, and left of the n line
    fig.text(xs["n"] + 48, Y_GATE - 18, "r ⊙ (W_{hn} h_{t-1})", "math", size=13, anchor="start")
    fig.text(xs["n"] + 68, Y_X - 22, "W_{in} x_{t}", "math", size=13, anchor="start")
    # r scales the previous state's contribution inside n
    below = Y_GATE + GATE_H + 24
    fig.line([(xs["r"] + 150, Y_GATE + GATE_H), (xs["r"] + 150, below), (xs["n"] + 20, below),
              (xs["n"] + 20, Y_GATE + GATE_H + 2)], "weights", dashed=True)
    fig.text(xs["z"] + 100, below + 18, "r: how much of the old state enters n", "note",
             colour=ROLES["weights"][0])
    # z and n go up to the blend
    fig.line([(xs["z"] + 170, Y_GATE), (xs["z"] + 170, 150), (770, 150), (770, 104)], "weights")
    fig.text(xs["z"] + 178, 140, "z", "math", anchor="start")
    fig.line([(xs["n"] + 170, Y_GATE), (xs["n"] + 170, 104)], "context")
    fig.text(xs["n"] + 178, 160, "n", "math", anchor="start")


def blend(fig: Figure) -> None:
    """h_t = (1 - z) ⊙ n + z ⊙ h_{t-1}."""
    fig.box(750, 42, 200, 60, "(1 − z) ⊙ n + z ⊙ h_{t-1}", sub="the new state h_{t}", kind="math",
            size=12)
    fig.line([(950, 72), (1030, 72)], "stream", width=2.4)
    fig.text(990, 62, "h_{t}", "math")
    fig.shape(990, 94, "(B, He | Hd)", anchor="middle")
