"""Chapter 6: pretraining with the MLM and NSP heads, then transfer (``bert_pretrain_transfer.svg``)."""
from __future__ import annotations

from .svg import Figure

M = "attnbook.models.bert"
T = "attnbook.tasks.text_classification"
DESC = (
    "Left, pretraining on unlabelled verse pairs: the input [CLS] A1 A2 [SEP] B1 [MASK] B3 [SEP] goes "
    "through Bert, embeddings and a stack of L post-norm EncoderBlocks (BertForPreTraining). The NSP head "
    "(the pooler, tanh(W_p h + b_p) of the [CLS] vector h, then a two-class softmax) predicts IsNext or "
    "NotNext; the MLM head (MaskedLMHead: dense, GELU, LayerNorm, then scores against the tied token "
    "table) reads the vector at each chosen position (here the [MASK] hiding B2) and predicts its original token. Right, transfer "
    "as this page does it: the same weights, copied, read one verse [CLS] w1 w2 ... [SEP]; a "
    "pooling (mean of the real tokens, the [CLS] vector, or the pooler) feeds a new linear layer with 8 "
    "outputs, one per genre. The probe is a logistic regression (train_linear_probe) on features computed "
    "once by the frozen encoder and cached; the fine-tuning (TopBlocksClassifier) trains a copy of the last "
    "encoder block with the new layer, on the cached states below that block."
)
MASK_X = 30 + 54 + 50 + 50 + 54 + 50 + (70 - 5) / 2  # the centre of the [MASK] box
BERT_FILL, HEAD_FILL, NEW_FILL, INK = "#E4ECF7", "#FBEFD9", "#E3F2E1", "#222222"


def draw() -> Figure:
    fig = Figure("bert_pretrain_transfer", 960, 470,
                 "BERT: pretraining with the MLM and NSP heads, then transfer to a labelled task", DESC)
    fig.rect(12, 12, 462, 446, "frame", rx=8)
    fig.rect(486, 12, 462, 446, "frame", rx=8)
    fig.text(243, 38, "1. Pretraining: unlabelled verse pairs", "title")
    fig.text(717, 38, "2. Transfer: a few labelled verses", "title")
    left = ["[CLS]", "A_{1}", "A_{2}", "[SEP]", "B_{1}", "[MASK]", "B_{3}", "[SEP]"]
    x = 30
    for word in left:  # [MASK] gets a wider box: its label must fit inside
        w = 70 if word == "[MASK]" else 54 if word.startswith("[") else 50
        token(fig, x, w, word)
        x += w
    fig.rect(30, 250, 435, 100, fill=BERT_FILL, stroke=INK, rx=5)
    fig.text(247, 280, fig.code("Bert", f"{M}.Bert") + ": embeddings + L post-norm "
             + fig.code("EncoderBlock", "attnbook.layers.EncoderBlock") + "s", size=13)
    fig.text(247, 302, "(B, S, D) hidden states, one vector per token", "note")
    fig.text(247, 326, "inside " + fig.code("BertForPreTraining", f"{M}.BertForPreTraining"), "code", size=11)
    fig.line([(55, 248), (55, 200)], "stream")
    fig.text(61, 230, "[CLS] vector", "note", anchor="start")
    head(fig, 30, 164, "NSP head", ["pooler tanh(W_{p} h + b_{p}),", "2-class softmax"])
    fig.line([(55, 123), (55, 90)], "stream")
    fig.text(35, 80, "IsNext / NotNext", "code", anchor="start", size=11)
    fig.line([(MASK_X, 248), (MASK_X, 200)], "stream")
    fig.text(MASK_X + 6, 222, "vector at each", "note", anchor="start")
    fig.text(MASK_X + 6, 237, "chosen position", "note", anchor="start")
    head(fig, 235, 190, fig.code("MaskedLMHead", f"{M}.MaskedLMHead"),
         ["dense, GELU, LayerNorm,", "scores vs token table"])
    fig.line([(MASK_X, 123), (MASK_X, 90)], "stream")
    fig.text(MASK_X, 80, "the hidden token, B_{2}", "code", size=11)
    fig.text(243, 62, "loss = MLM (chosen positions only) + NSP", "note")
    fig.text(243, 447, "MLM: 15% chosen; 80% [MASK], 10% random, 10% kept", "note")
    for j, word in enumerate(["[CLS]", "w_{1}", "w_{2}", "…", "[SEP]"]):
        token(fig, 520 + 80 * j, 60, word)
    fig.rect(505, 250, 435, 100, fill=BERT_FILL, stroke=INK, rx=5)
    fig.text(722, 280, "the same Bert, weights copied", size=13)
    fig.text(722, 300, "probe: logistic regression on features cached once", "note")
    fig.text(722, 321, "probe: " + fig.code("train_linear_probe", f"{T}.train_linear_probe"),
             "code", size=10)
    fig.text(722, 339, "fine-tune: " + fig.code("TopBlocksClassifier", f"{T}.TopBlocksClassifier")
             + " (last block)", "code", size=10)
    fig.line([(467, 300), (503, 300)], "stream", dashed=True)
    fig.line([(722, 248), (722, 214)], "stream")
    fig.rect(592, 160, 260, 52, "module", rx=5)
    fig.text(722, 182, "pool: mean of real tokens,", size=12)
    fig.text(722, 201, "[CLS] vector, or pooler", size=12)
    fig.line([(722, 158), (722, 132)], "stream")
    fig.rect(622, 92, 200, 38, fill=NEW_FILL, stroke=INK, rx=5)
    fig.text(722, 116, "new nn.Linear(D, 8)", "code", size=11)
    fig.line([(722, 90), (722, 68)], "stream")
    fig.text(722, 62, "genre (8 classes)", "code", size=11)
    fig.text(717, 447, "probe: only the new layer trains; fine-tuning: last block + new layer", "note")
    return fig


def token(fig: Figure, x: float, w: float, word: str) -> None:
    """One input token in a box, with its arrow up into the encoder."""
    fig.rect(x, 400, w - 5, 30, "module", rx=5)
    fig.text(x + (w - 5) / 2, 420, word, "code", size=10 if word.startswith("[") else 11)
    fig.line([(x + (w - 5) / 2, 398), (x + (w - 5) / 2, 352)], "stream")


def head(fig: Figure, x: float, w: float, name: str, notes: list[str]) -> None:
    """A pretraining head: a shaded box with its name and two lines of notes."""
    fig.rect(x, 125, w, 73, fill=HEAD_FILL, stroke=INK, rx=5)
    fig.text(x + w / 2, 147, name, size=12)
    for k, note in enumerate(notes):
        fig.text(x + w / 2, 166 + 17 * k, note, "note")
