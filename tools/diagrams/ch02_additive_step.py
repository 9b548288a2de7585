"""Chapter 2: one decoder step of additive (Bahdanau) attention (``ch02_additive_attention_step.svg``)."""
from __future__ import annotations

from .svg import ROLES, Figure, softmax_rows

RNN, SCORES = "attnbook.models.rnn", "attnbook.layers.scores"
DESC = (
    "One step i of AttentionDecoder.step. The encoder states h_1 to h_S (the memory, shape "
    "(B, S, 2He), from GRUEncoder; the last position is padding) serve as keys and as values. "
    "AdditiveScore computes U h_j once per word (prepare, shape (B, S, A)) and W s_{i-1} from the "
    "previous decoder state s_{i-1} (the query, (B, Hd)), adds them, applies tanh and v to get the "
    "scores e_ij, shape (B, 1, S). context_from_scores turns the scores into weights a_ij with masked_softmax "
    "under key_mask, shape (B, 1, S): the padding gets exactly zero. The context C_i = sum_j a_ij h_j "
    "(B, 2He) and the embedding emb(y_{i-1}) (B, E) enter the GRUCell with s_{i-1}; it returns s_i "
    "(B, Hd), which the output layer turns into logits (B, V) and which goes back to W as the query of step i+1."
)
X0, Y0, BW, BH = 40, 110, 80, 32  # the memory h_j: one box per position
SCORES_SHOWN = [[1.6, 0.3, -0.4, 0.9, -1.0, None]]  # made-up scores; the last position is padding
BARS_X, BARS_BASE = 790, 300


def draw() -> Figure:
    fig = Figure("ch02_additive_attention_step", 1000, 560,
                 "Chapter 2: one decoder step of additive (Bahdanau) attention", DESC)
    fig.text(30, 28, fig.code("AttentionDecoder.step", f"{RNN}.AttentionDecoder.step")
             + ": the context C_{i}, recomputed at every step i", "title", anchor="start")
    memory_and_query(fig)
    additive_score(fig)
    context_from_scores(fig)
    gru_step(fig)
    fig.legend(20, 548, meanings={"stream": "states, embeddings"})
    return fig


def memory_and_query(fig: Figure) -> None:
    """The encoder states h_1..h_5 and a padded position, and the previous decoder state."""
    fig.text(X0 + BW / 2, 84, fig.code("GRUEncoder", f"{RNN}.GRUEncoder") + " outputs", "note")
    for j in range(6):
        y = Y0 + j * (BH + 8)
        if j < 5:
            fig.rect(X0, y, BW, BH, "module", rx=4)
            fig.text(X0 + BW / 2, y + 21, f"h_{{{j + 1}}}", "math")
        else:
            fig.rect(X0, y, BW, BH, fill="url(#hatch)", stroke="#9A9A9A", rx=4)
            fig.text(X0 + BW / 2, y + 21, "pad", "code", size=12)
    fig.shape(X0 + BW / 2, 98, "(B, S, 2He)", anchor="middle")
    fig.tensor(170, 68, "s_{i-1}", "query", w=80)
    fig.shape(172, 112, "(B, Hd)")


def additive_score(fig: Figure) -> None:
    """AdditiveScore: W s_{i-1} + U h_j, tanh, v: the scores e_ij."""
    fig.frame(270, 45, 455, 245, fig.code("AdditiveScore", f"{SCORES}.AdditiveScore"), "bottom-left")
    fig.box(300, 60, 150, 44, fig.code("W", f"{SCORES}.AdditiveScore:W"), sub="W s_{i-1}", role="query")
    fig.box(300, 196, 150, 44, fig.code("U", f"{SCORES}.AdditiveScore:U"),
            sub=fig.code("prepare(): per word", f"{SCORES}.Score.prepare"), role="key")
    fig.line([(250, 82), (298, 82)], "query")
    bus = X0 + BW + 16  # every h_j (the padded one too: the mask removes it later) is a key
    for j in range(6):
        fig.line([(X0 + BW, Y0 + j * (BH + 8) + BH / 2), (bus, Y0 + j * (BH + 8) + BH / 2)], "key",
                 arrow=False)
    fig.line([(bus, Y0 + BH / 2), (bus, Y0 + 5 * (BH + 8) + BH / 2)], "key", arrow=False)
    fig.line([(bus, 218), (298, 218)], "key")
    fig.text(180, 212, "keys", "note", colour=ROLES["key"][0])
    fig.line([(450, 82), (540, 82), (540, 126)], "query")
    fig.line([(450, 218), (540, 218), (540, 174)], "key")
    fig.shape(458, 76, "(B, 1, A)")
    fig.shape(458, 212, "(B, S, A)")
    fig.box(490, 128, 100, 44, "tanh(+)", sub="(B, 1, S, A)")
    fig.box(615, 128, 85, 44, fig.code("v", f"{SCORES}.AdditiveScore:v"), sub="vᵀ(·)")
    fig.line([(590, 150), (613, 150)], "stream")
    fig.line([(700, 150), (773, 150)], "weights")
    fig.text(722, 140, "e_{ij}", "math", size=14)
    fig.shape(657, 190, "(B, 1, S)", anchor="middle")  # under v, clear of the e_ij label


def context_from_scores(fig: Figure) -> None:
    """context_from_scores: masked_softmax under key_mask gives the weights a_ij; their sum over the values h_j."""
    fig.frame(745, 45, 245, 422, fig.code("context_from_scores", f"{SCORES}.context_from_scores"), "bottom-right")
    fig.box(775, 60, 150, 36, fig.code("key_mask", "attnbook.layers.key_mask"), role="mask")
    fig.line([(850, 96), (850, 126)], "mask")
    fig.shape(858, 116, "(B, 1, S)")  # beside the arrow, clear of the box's label
    fig.box(775, 128, 150, 44, fig.code("masked_softmax", "attnbook.layers.masked_softmax"), role="weights")
    weight_bars(fig)
    fig.line([(850, 172), (850, 196)], "weights")
    fig.text(922, 250, "a_{ij}", "math", anchor="start")
    fig.shape(922, 268, "(B, 1, S)")
    fig.text(922, 292, "pad: 0", "note", anchor="start")
    fig.line([(850, 306), (850, 388)], "weights")
    fig.box(775, 390, 150, 44, "Σ_{j} a_{ij} h_{j}", kind="math")
    left = X0 - 14  # and every h_j is a value
    for j in range(6):
        fig.line([(X0, Y0 + j * (BH + 8) + BH / 2), (left, Y0 + j * (BH + 8) + BH / 2)], "value", arrow=False)
    fig.line([(left, Y0 + BH / 2), (left, 520), (792, 520), (792, 436)], "value")  # clear of the frame label
    fig.text(300, 514, "values: the same h_{j}", "note", colour=ROLES["value"][0])


def weight_bars(fig: Figure) -> None:
    """The weights of the made-up scores as bars; the padded position is a hatched stub."""
    for j, a in enumerate(softmax_rows(SCORES_SHOWN)[0]):
        x = BARS_X + j * 21
        if a is None:
            fig.rect(x, BARS_BASE - 4, 15, 4, fill="url(#hatch)", stroke="#9A9A9A")
            continue
        fig.rect(x, BARS_BASE - 90 * a, 15, 90 * a, fill=ROLES["weights"][0])
    fig.line([(785, BARS_BASE), (917, BARS_BASE)], "stream", arrow=False, width=1)


def gru_step(fig: Figure) -> None:
    """C_i, emb(y_{i-1}) and s_{i-1} into the GRUCell; s_i through ``out`` to the logits."""
    fig.line([(775, 412), (672, 412)], "context")
    fig.text(718, 404, "C_{i}", "math", size=14)
    fig.shape(700, 428, "(B, 2He)", anchor="middle")  # clear of the s_i line back to W
    fig.box(510, 390, 160, 44, fig.code("cell: nn.GRUCell", f"{RNN}.AttentionDecoder:cell"))
    fig.tensor(525, 318, "emb(y_{i-1})", "stream", w=130)
    fig.line([(590, 346), (590, 388)], "stream")
    fig.shape(598, 372, "(B, E)")
    fig.line([(235, 96), (235, 412), (508, 412)], "stream")
    fig.text(243, 404, "s_{i-1}: previous state", "note", anchor="start")
    fig.line([(590, 434), (590, 458)], "stream")
    fig.text(582, 452, "s_{i}", "math", size=13, anchor="end")
    # s_i goes back to W as the query of step i+1: up between the two frames, over the top, into W
    fig.line([(590, 446), (737, 446), (737, 38), (375, 38), (375, 58)], "query", dashed=True)
    fig.text(664, 482, "s_{i}: back to W, the query of step i+1", "note", anchor="start")
    fig.box(525, 460, 130, 30, fig.code("out: nn.Linear", f"{RNN}.AttentionDecoder:out"), size=12)
    fig.line([(525, 475), (445, 475)], "stream")
    fig.text(438, 480, "logits (B, V)", "code", anchor="end", size=12)
