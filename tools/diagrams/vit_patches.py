"""Chapter 7: ViT's input, an image cut into patches that become tokens (``vit_patches.svg``)."""
from __future__ import annotations

from .svg import ROLES, Figure, fmt

L = "attnbook.layers"
PATCHES = "attnbook.layers.patches"
DESC = (
    "An image of shape (B, C, H, W) is cut into N = 9 non-overlapping P x P patches, read row by row. "
    "patchify flattens each patch to C*P*P numbers, (B, N, C*P*P), and the PatchEmbedding's "
    "projection (nn.Linear, the same as a Conv2d with kernel = stride = P) maps each to width D, "
    "(B, N, D). PatchTokens puts a learned class token in front, (B, 1+N, D), and learned positions "
    "E_0 ... E_9 (LearnedPositionalEmbedding) are added, all inside the library's Embeddings. A stack "
    "of pre-norm EncoderBlocks follows; the read-out reads the class token's output, (B, classes)."
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
    fig.legend(30, 408, ["stream"])
    return fig


def shade(n: int) -> str:
    """Patch n's opacity, the same in the image and once flattened."""
    return fmt(0.15 + 0.07 * n)


def image(fig: Figure) -> None:
    """3 x 3 patches, numbered in reading order."""
    for r in range(3):
        for c in range(3):
            n = 3 * r + c
            fig.rect(IX + c * P, IY + r * P, P, P, fill=ROLES["stream"][0], stroke="#FFFFFF",
                     extra=f'fill-opacity="{shade(n)}" stroke-width="2"')
            fig.text(IX + c * P + P / 2, IY + r * P + P / 2 + 5, str(n + 1), "code", size=12)
    fig.shape(IX, IY + 3 * P + 18, "(B, C, H, W)")
    fig.text(IX, IY + 3 * P + 34, "P × P patches, N = 9", "note", anchor="start")


def flattened(fig: Figure) -> None:
    """patchify's flat patches, then PatchEmbedding's projection to width D."""
    fig.line([(IX + 3 * P + 6, IY + 66), (236, IY + 66)], "stream")
    fig.text(205, IY + 54, "patchify", "code", size=11)
    for n in range(9):
        x = SX + n * 22
        fig.rect(x, IY + 30, 16, 72, fill=ROLES["stream"][0], stroke="#FFFFFF", extra=f'fill-opacity="{shade(n)}"')
        fig.text(x + 8, IY + 24, str(n + 1), "code", size=10)
    fig.shape(SX, IY + 120, "(B, N, C·P·P)")
    end = SX + 9 * 22
    fig.line([(end, IY + 66), (end + 30, IY + 66)], "stream")
    fig.box(end + 32, IY + 44, 228, 44, fig.code("projection: nn.Linear", f"{PATCHES}.PatchEmbedding:projection"),
            sub="C·P·P → D (a Conv2d, stride P)", size=12)
    fig.line([(end + 260, IY + 66), (end + 280, IY + 66)], "stream")
    fig.shape(end + 284, IY + 70, "(B, N, D)")
    fig.line([(end + 310, IY + 80), (end + 310, 220), (TX + 1.5 * TW, 220), (TX + 1.5 * TW, TY - 2)], "stream")


def tokens(fig: Figure) -> None:
    """The class token and the patches, plus their positions, into the encoder."""
    for k in range(10):
        x = TX + k * (TW + 5)
        fig.rect(x, TY, TW, 30, "module", rx=4)
        fig.text(x + TW / 2, TY + 20, "cls" if k == 0 else f"p_{{{k}}}", "code" if k == 0 else "math",
                 size=11 if k == 0 else 13)
        fig.text(x + TW / 2, TY + 48, "+", size=14)
        fig.rect(x, TY + 56, TW, 30, "module", rx=4)
        fig.text(x + TW / 2, TY + 76, f"E_{{{k}}}", "math", size=13)
    fig.text(TX - 8, TY + 20, fig.code("PatchTokens", f"{PATCHES}.PatchTokens"), "code", anchor="end", size=11)
    fig.text(TX - 8, TY + 76, fig.code("LearnedPositionalEmbedding", f"{L}.LearnedPositionalEmbedding"), "code",
             anchor="end", size=11)
    fig.text(TX - 8, TY + 92, "(1 + N, D)", "shape", anchor="end")
    fig.text(TX + TW / 2, TY + 104, "a learned class token in front", "note", anchor="start")
    end = TX + 10 * (TW + 5)
    fig.line([(end, TY + 43), (end + 24, TY + 43)], "stream")
    fig.text(end + 28, TY + 32, fig.code("Embeddings", f"{L}.Embeddings") + " → (B, 1+N, D)", "code",
             anchor="start", size=11)
    fig.text(end + 28, TY + 50, fig.code("EncoderBlock", f"{L}.EncoderBlock") + " × L", "code", anchor="start",
             size=11)
    fig.text(end + 28, TY + 66, "(pre-norm) → class", "note", anchor="start")
    fig.text(end + 28, TY + 80, "token → readout (B, classes)", "note", anchor="start")
