"""Chapter 7: the whole ViT, equations (1)-(4): embeddings, pre-norm encoder blocks, class-token read-out
(``vit_model.svg``)."""
from __future__ import annotations

from .svg import Figure

L = "attnbook.layers"
VIT = "attnbook.models.vit.ViT"
BLOCK = f"{L}.EncoderBlock"
DESC = (
    "The library's ViT, labelled with the symbols of Section 7.3's equations (1) to (4). Images (B, C, H, W) "
    "go through embeddings (Embeddings: PatchTokens, the class token x_class in front of the projected "
    "patches x_p^i E, plus LearnedPositionalEmbedding E_pos), giving z_0, shape (B, 1 + N, D), equation (1). "
    "Then L EncoderBlocks (blocks), pre-norm, no mask: the residual stream runs straight up and each block "
    "adds two updates, z'_l = MSA(LN(z_(l-1))) + z_(l-1) with norm1 and self_attn (MultiHeadAttention, every "
    "token attends to every token), equation (2), and z_l = MLP(LN(z'_l)) + z'_l with norm2 and feed_forward "
    "(GELU), equation (3). After the last block only the class token's row z_L^0, shape (B, D), is kept; "
    "final_norm (LayerNorm) gives y, equation (4), and the read-out (a linear layer) gives logits "
    "(B, classes). The patch tokens' outputs are not read."
)
SX, BX, BW = 260, 400, 230  # the residual stream; the sublayers' left edge and width
TOP = 510  # where the stream enters the block
SUBLAYERS = (("norm1", "self_attn", "MultiHeadAttention: MSA", "(2)"),
             ("norm2", "feed_forward", "FeedForward: MLP, GELU", "(3)"))


def draw() -> Figure:
    fig = Figure("vit_model", 900, 670, "The whole ViT: patch tokens, pre-norm encoder blocks, class-token read-out",
                 DESC)
    fig.text(30, 28, fig.code("ViT", VIT) + ": equations (1)–(4); pre-norm, no mask, the class token is read",
             "title", anchor="start")
    fig.text(SX, 630, "images (B, C, H, W), cut into N patches", "code", size=12)
    fig.line([(SX, 612), (SX, 588)], "stream")
    fig.box(SX - 175, 546, 350, 40, fig.code("embeddings: Embeddings", f"{L}.Embeddings"),
            sub=fig.code("PatchTokens", f"{L}.patches.PatchTokens") + " + "
            + fig.code("LearnedPositionalEmbedding", f"{L}.LearnedPositionalEmbedding"), size=12)
    fig.text(SX - 185, 566, "(1)", "math", anchor="end")
    fig.shape(SX + 6, 530, "z_{0} (B, 1 + N, D)")
    y, pluses = TOP - 10, []
    for norm, sub, sub_label, eq in SUBLAYERS:
        pluses.append(residual_update(fig, y, norm, sub, sub_label, eq))
        y = pluses[-1] - 9
    stream_and_frame(fig, pluses)
    output(fig, pluses[1])
    fig.legend(30, 660, ["query", "key", "value", "stream"])
    return fig


def residual_update(fig: Figure, y: float, norm: str, sub: str, sub_label: str, eq: str) -> float:
    """z + sub(norm(z)), branching off the stream above y; returns the y of the + node."""
    mid, h = BX + BW / 2, 44
    branch = y - 6
    fig.line([(SX, branch), (mid, branch), (mid, branch - 14)], "stream")
    nb = branch - 16
    fig.box(BX, nb - 30, BW, 30, fig.code(f"{norm}: LayerNorm", f"{BLOCK}:{norm}"), size=12)
    sb = nb - 30 - 16
    if sub == "self_attn":
        for dxq, role in ((-50, "query"), (0, "key"), (50, "value")):
            fig.line([(mid, nb - 30), (mid, nb - 38), (mid + dxq, nb - 38), (mid + dxq, sb + 2)], role)
    else:
        fig.line([(mid, nb - 30), (mid, sb + 2)], "stream")
    fig.rect(BX, sb - h, BW, h, "module", rx=5)
    fig.text(mid, sb - h / 2 - 4, fig.code(sub, f"{BLOCK}:{sub}"), "code", size=12)
    fig.text(mid, sb - h / 2 + 15, sub_label, "note")
    fig.text(BX + BW + 12, sb - h / 2 + 5, eq, "math", anchor="start")
    plus = sb - h - 16
    fig.line([(mid, sb - h), (mid, plus), (SX + 11, plus)], "stream")
    fig.circle(SX, plus, 9, "stream")
    fig.text(SX, plus + 5, "+", size=14, weight="bold")
    fig.shape(SX - 14, plus + 4, "z'_{ℓ}" if sub == "self_attn" else "z_{ℓ}", anchor="end")
    return plus


def stream_and_frame(fig: Figure, pluses: list[float]) -> None:
    """The stream drawn straight through the two additions, and the EncoderBlock frame around them."""
    fig.line([(SX, 546), (SX, pluses[0] + 11)], "stream")
    fig.line([(SX, pluses[0] - 9), (SX, pluses[1] + 11)], "stream")
    frame_top = pluses[1] - 40
    fig.frame(122, frame_top, 588, TOP - frame_top,
              fig.code("EncoderBlock", BLOCK) + " × L (norm_first): z_{ℓ} = block(z_{ℓ-1})", "top-left")
    fig.text(702, frame_top + 17, "blocks", "code", anchor="end", size=11, colour="#555555")
    fig.shape(SX + 6, frame_top - 6, "z_{L} (B, 1 + N, D)")
    fig.text(SX - 12, 330, "residual stream", "note", anchor="end")
    fig.text(SX - 12, 344, "(B, 1 + N, D)", "shape", anchor="end")


def output(fig: Figure, last_plus: float) -> None:
    """Keep the class token's row, final_norm (equation 4), and the linear read-out."""
    fig.line([(SX, last_plus - 9), (SX, 158)], "stream")
    fig.text(SX + 8, 170, "keep row 0 only: z_{L}^{0} (B, D)", "note", anchor="start")
    fig.box(SX - 110, 126, 220, 30, "final_norm: LayerNorm", size=12)
    fig.text(SX - 120, 146, "(4)", "math", anchor="end")
    fig.line([(SX, 126), (SX, 102)], "stream")
    fig.shape(SX + 6, 116, "y (B, D)")
    fig.box(SX - 110, 70, 220, 30, "readout: Linear", size=12)
    fig.line([(SX + 110, 85), (SX + 150, 85)], "stream")
    fig.text(SX + 155, 82, "logits (B, classes)", "code", anchor="start", size=12)
    fig.text(SX + 155, 98, "the patch tokens' outputs are not read", "note", anchor="start")
