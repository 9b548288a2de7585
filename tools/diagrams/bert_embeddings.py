"""Chapter 6: BERT's input, token + segment + position embeddings (``bert_input_embeddings.svg``)."""
from __future__ import annotations

from .svg import Figure

L = "attnbook.layers"
DESC = (
    "A sentence pair '[CLS] my dog is cute [SEP] he likes [SEP]' (ids of shape (B, S)) enters "
    "BERT through the library's Embeddings. At position i, holding token x_i, three vectors of width D "
    "are added: the token's row E_tok[x_i] (tokens: nn.Embedding over the vocabulary), its segment's "
    "row E_seg[0] or E_seg[1] (segments: nn.Embedding; segment 0 for [CLS], the first sentence and "
    "its [SEP], 1 for the second) and the position's row E_pos[0] ... E_pos[8] (positions: "
    "LearnedPositionalEmbedding). The sum, "
    "(B, S, D), goes through norm (nn.LayerNorm) and dropout, then into the stack of post-norm "
    "EncoderBlocks with GELU."
)
WORDS = ["[CLS]", "my", "dog", "is", "cute", "[SEP]", "he", "likes", "[SEP]"]
X0, CW, BW = 280, 72, 62  # first column, column pitch, box width
ROWS = (  # y, label, library path, the embedding drawn in column j for word w
    (300, "tokens: nn.Embedding", f"{L}.Embeddings:tokens", lambda j, w: f"E_{{tok}}[x_{{{j}}}]"),
    (235, "segments: nn.Embedding", f"{L}.Embeddings:segments", lambda j, w: "E_{seg}[0]" if j < 6 else "E_{seg}[1]"),
    (170, "positions:", f"{L}.Embeddings:positions", lambda j, w: f"E_{{pos}}[{j}]"),
)


def draw() -> Figure:
    fig = Figure("bert_input_embeddings", 960, 420,
                 "BERT's input: token + segment + position embeddings, then LayerNorm", DESC)
    fig.text(30, 28, fig.code("Bert.embeddings", "attnbook.models.bert.Bert:embeddings") + " = "
             + fig.code("Embeddings", f"{L}.Embeddings") + " with three tables and a LayerNorm",
             "title", anchor="start")
    for j, word in enumerate(WORDS):
        column(fig, j, word)
    for y, label, path, _name in ROWS:
        fig.text(30, y + 14, fig.code(label, path), "code", anchor="start", size=12)
    fig.text(30, 184 + 16, fig.code("LearnedPositionalEmbedding", f"{L}.LearnedPositionalEmbedding"), "code",
             anchor="start", size=11)
    fig.shape(30, 335, "(B, S, D) each")
    fig.box(X0, 90, 9 * CW - 10, 40, fig.code("norm: nn.LayerNorm", f"{L}.Embeddings:norm") + ", then dropout",
            sub="(B, S, D)", size=12)
    fig.line([(X0 + 4.5 * CW - 5, 90), (X0 + 4.5 * CW - 5, 56)], "stream")
    fig.text(X0 + 4.5 * CW + 5, 62, fig.code("EncoderBlock", f"{L}.EncoderBlock")
             + " × L (post-norm, GELU)", "code", anchor="start", size=12)
    fig.text(30, 379, "at position i, token x_{i}:", "note", anchor="start")
    return fig


def column(fig: Figure, j: int, word: str) -> None:
    """Word j and the three embeddings added for it."""
    x = X0 + j * CW
    fig.text(x + BW / 2, 375, word, "code", size=12)
    fig.line([(x + BW / 2, 362), (x + BW / 2, 334)], "stream")
    for y, *_rest in ROWS:
        fig.rect(x, y, BW, 32, "module", rx=4)
    for y, _label, _path, name in ROWS:
        fig.text(x + BW / 2, y + 21, name(j, word), "math", size=11)
    fig.text(x + BW / 2, 292, "+", size=14)
    fig.text(x + BW / 2, 227, "+", size=14)
    fig.line([(x + BW / 2, 170), (x + BW / 2, 132)], "stream")
