"""Chapter 8: the Bible GPT with a new linear head, for Section 8.7's testament task (``gpt_finetune.svg``)."""
from __future__ import annotations

from .svg import Figure

GPT = "attnbook.models.gpt.GPT"
DESC = (
    "Section 8.7's classifier. One verse, its BPE tokens x_1 ... x_n right-padded with the id 0 to "
    "T = 64 positions, goes through the chapter's GPT (token and position embeddings, n_blocks causal blocks, "
    "the final LayerNorm; no read-out): (B, T, D) states. The causal mask keeps the padding out of "
    "every real position. Their mean over the n real tokens (or, for one probe, the last real token's "
    "state) gives (B, D); a new nn.Linear(D, 2) gives two logits, OT and NT, scored by cross-entropy "
    "against the verse's testament. Frozen probe: the GPT is fixed and only the new layer trains. "
    "Fine-tuning: the GPT (pre-trained on the Bible, or from random weights for the from-scratch "
    "control) and the new layer train together. GPT-1's extract token and its auxiliary "
    "language-modelling loss are not built."
)
NEW_FILL, PAD_FILL = "#E3F2E1", "#FFFFFF"
CX = 250  # the centre of the column


def draw() -> Figure:
    fig = Figure("gpt_finetune", 900, 490,
                 "Section 8.7: the Bible GPT and a new linear head, trained on labelled verses", DESC)
    fig.text(30, 28, "Which testament? The GPT's states, pooled, read by a new linear layer",
             "title", anchor="start")
    # the verse: n real tokens, then padding
    words = ["x_{1}", "x_{2}", "…", "x_{n}", "0", "0"]
    for j, word in enumerate(words):
        x = 60 + 66 * j
        pad = j >= 4
        fig.rect(x, 400, 60, 30, "module" if not pad else "", fill=PAD_FILL if pad else None,
                 stroke="#999999" if pad else None, rx=5, extra='stroke-dasharray="4 3"' if pad else "")
        fig.text(x + 30, 420, word, "math" if not pad else "code", size=None if not pad else 11)
        fig.line([(x + 30, 398), (x + 30, 352)], "mask" if pad else "stream")
    fig.text(60, 452, "one verse: n BPE tokens, right-padded with 0 to T = 64", "note", anchor="start")
    # the GPT, without its read-out
    fig.rect(45, 262, 410, 88, "module", rx=5)
    fig.text(CX, 290, fig.code("GPT", GPT) + ": embeddings, n_blocks causal blocks, final_norm", "code", size=12)
    fig.text(CX, 312, "pre-trained on the Bible (copied), or random (from scratch)", "note")
    fig.text(CX, 334, "the causal mask: no real position reads the padding", "note")
    fig.line([(CX, 260), (CX, 224)], "stream")
    fig.shape(CX + 8, 246, "(B, T, D)")
    fig.box(120, 180, 260, 42, "mean over the n real tokens", kind="sans", size=13)
    fig.line([(CX, 178), (CX, 146)], "stream")
    fig.shape(CX + 8, 166, "(B, D)")
    fig.rect(150, 104, 200, 40, fill=NEW_FILL, stroke="#222222", rx=5)
    fig.text(CX, 129, "new nn.Linear(D, 2)", "code", size=12)
    fig.line([(CX, 102), (CX, 70)], "stream")
    fig.shape(CX + 8, 90, "(B, 2)")
    fig.text(CX, 60, "OT / NT: cross-entropy with the testament", "code", size=11)
    # what trains, in each set-up
    notes = [
        ("frozen probe", ["the GPT fixed; only the new layer trains", "(logistic regression; also on the last state)"]),
        ("fine-tuned", ["the GPT and the new layer train together", "(AdamW at 1e-3; 300 steps stored, 50 live)"]),
        ("from scratch", ["the same, from random weights:", "what the pre-training is worth"]),
        ("GPT-1, not built here", ["an extract token appended and its state read,", "plus 0.5 × the next-token loss"]),
    ]
    fig.rect(490, 60, 390, 330, "frame", rx=8)
    for k, (what, how) in enumerate(notes):
        y = 90 + 78 * k
        fig.text(505, y, what, "group", anchor="start")
        for m, line in enumerate(how):
            fig.text(515, y + 21 + 19 * m, line, "note", anchor="start")
    fig.legend(60, 476, ["stream", "mask"], meanings={"stream": "tokens, states",
                                                     "mask": "padding: fed in, read by no real token"})
    return fig
