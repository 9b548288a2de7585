"""Chapter 7: ViT's input, an image cut into patches that become tokens (``vit_patches.svg``)."""
from __future__ import annotations

from .svg import ROLES, Figure, fmt

L = "attnbook.layers"
PATCHES = "attnbook.layers.patches"
DESC = (
    "An image of shape (B, C, H, W) is cut into N = 9 non-overlapping P x P patches, read row by row. "
    "patchify flattens each patch x_p^i to C*P*P numbers, (B, N, C*P*P), and one shared matrix E (the "
    "PatchEmbedding's projection, the same as a Conv2d with kernel = stride = P) maps each to width D, "
    "x_p^i E, (B, N, D). PatchTokens puts the learned class token x_class in front, (B, 1+N, D), and "
    "the rows of the learned position table E_pos, one per token, are added: z_0, inside the library's "
    "Embeddings. A stack of pre-norm EncoderBlocks follows; the read-out reads the class token's "
    "output, (B, classes)."
)
IX, IY, P = 40, 70, 44  # the image: 3 x 3 patches of P pixels
SX = 240  # the flattened patches
TX, TY, TW = 262, 250, 44  # the tokens


def draw() -> Figure:
    fig = Figure("vit_patches", 1000, 420,
                 "ViT's input: an image cut into patches, each flattened and projected to a token", DESC)
    fig.text(30, 28, "ViT: image → " + fig.code("patchify", f"{PATCHES}.patchify") + " → "
             + fig.code("PatchEmbedding", f"{PATCHES}.PatchEmbedding") + " → tokens",
             "title", anchor="start")
    fig.code("", "attnbook.models.vit.ViT")
    image(fig)
    flattened(fig)
    tokens(fig)
    return fig


def shade(n: int) -> str:
    """Patch n's opacity, the same in the image and once flattened."""
    return fmt(0.15 + 0.07 * n)


def image(fig: Figure) -> None:
    """3 x 3 patches, numbered in reading order from 0, as the chapter's code counts them."""
    for r in range(3):
        for c in range(3):
            n = 3 * r + c
            fig.rect(IX + c * P, IY + r * P, P, P, fill=ROLES["stream"][0], stroke="#FFFFFF",
                     extra=f'fill-opacity="{shade(n)}" stroke-width="2"')
            fig.text(IX + c * P + P / 2, IY + r * P + P / 2 + 5, str(n), "code", size=12)
    fig.shape(IX, IY + 3 * P + 18, "(B, C, H, W)")
    fig.text(IX, IY + 3 * P + 34, "P × P patches, N = 9", "note", anchor="start")


def flattened(fig: Figure) -> None:
    """patchify's flat patches, then PatchEmbedding's projection to width D."""
    fig.line([(IX + 3 * P + 6, IY + 66), (236, IY + 66)], "stream")
    fig.text(205, IY + 54, "patchify", "code", size=11)
    for n in range(9):
        x = SX + n * 22
        fig.rect(x, IY + 30, 16, 72, fill=ROLES["stream"][0], stroke="#FFFFFF", extra=f'fill-opacity="{shade(n)}"')
        fig.text(x + 8, IY + 24, str(n), "code", size=10)
    fig.shape(SX, IY + 120, "(B, N, C·P·P)")
    end = SX + 9 * 22
    fig.line([(end, IY + 66), (end + 30, IY + 66)], "stream")
    # drawn by hand rather than with fig.box: the note sits lower, clear of x_p's subscript
    fig.rect(end + 32, IY + 36, 252, 60, "module", rx=5)
    fig.text(end + 158, IY + 60, "x_{p}^{i} E", "math", size=14)
    fig.text(end + 158, IY + 86, "E: C·P·P → D (Conv2d, stride P)", "note")
    fig.line([(end + 284, IY + 66), (end + 304, IY + 66)], "stream")
    fig.shape(end + 308, IY + 70, "(B, N, D)")
    fig.line([(end + 334, IY + 80), (end + 334, 220), (TX + 1.5 * TW, 220), (TX + 1.5 * TW, TY - 2)], "stream")


def upright(fig: Figure, subscript: str) -> None:
    """Set the last text's subscript `subscript` upright, as the text's $E_\\text{pos}$."""
    tag = f'font-size="75%">{subscript}<'
    fig.parts[-1] = fig.parts[-1].replace(tag, tag.replace('">', '" font-style="normal">'))


def tokens(fig: Figure) -> None:
    """The class token and the patches, plus their positions, into the encoder."""
    for k in range(10):
        x = TX + k * (TW + 5)
        fig.rect(x, TY, TW, 30, "module", rx=4)
        fig.text(x + TW / 2, TY + 20, "x_{class}" if k == 0 else f"x_{{p}}^{{{k - 1}}} E", "math", size=12)
        upright(fig, "class")
        fig.text(x + TW / 2, TY + 48, "+", size=14)
        fig.rect(x, TY + 56, TW, 30, "module", rx=4)
        fig.text(x + TW / 2, TY + 76, f"row {k}", "note", size=11)
    fig.text(TX - 8, TY + 20, fig.code("PatchTokens", f"{PATCHES}.PatchTokens"), "code", anchor="end", size=11)
    fig.text(TX - 8, TY + 76, "+ rows of E_{pos}", "math",
             anchor="end", size=13)
    upright(fig, "pos")
    fig.text(TX - 8, TY + 112, "(1 + N, D)", "shape", anchor="end")
    fig.text(TX + TW / 2, TY + 104, "learned class token in front; the sum is z_{0}", "note", anchor="start")
    end = TX + 10 * (TW + 5)
    fig.line([(end, TY + 43), (end + 24, TY + 43)], "stream")
    fig.text(end + 28, TY + 32, fig.code("Embeddings", f"{L}.Embeddings") + " → (B, 1+N, D)", "code",
             anchor="start", size=11)
    fig.text(end + 28, TY + 50, fig.code("EncoderBlock", f"{L}.EncoderBlock") + " × L", "code", anchor="start",
             size=11)
    fig.text(end + 28, TY + 66, "(pre-norm) → class", "note", anchor="start")
    fig.text(end + 28, TY + 80, "token → readout (B, classes)", "note", anchor="start")
