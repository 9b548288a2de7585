"""The book's architecture diagrams, written as plain SVG text (no drawing library).

Usage: ``python -m attnbook.tools.diagrams [OUTDIR]`` (default: ``chapters/figures``).
The output is deterministic: running it twice writes byte-identical files, and
``tests/test_diagrams.py`` checks that the committed files are exactly what this script writes.

One style for every figure:

- a box is a module; its label is the library's name for it (``EncoderBlock``, ``self_attn``...),
  in a monospace font; a dashed frame groups the modules of one library class;
- an arrow is a tensor; its label is the shape in the book's legend (``chapters/notation.md``:
  B, S, T, D, H, Dh, E, He, Hd, A, F, V);
- colours name roles, the same in every figure (``ROLES``): queries, keys, values, the stream
  (residual stream, embeddings, recurrent states), the context (what attention returns), the
  attention weights and the masks. Colours are the Okabe–Ito palette, readable with the common
  colour-vision deficiencies, and every role is also named in words.

Each figure records the library names it draws (``Figure.lib``); the test imports them, so a
rename in the library fails the test instead of leaving a stale picture. Each SVG has a
``<title>`` and a ``<desc>`` (the alt text), a viewBox, system fonts only and no links.
"""
from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

# --- Style ----------------------------------------------------------------------------------

ROLES = {  # role -> (colour, what it means); Okabe–Ito palette
    "query": ("#D55E00", "queries"),
    "key": ("#0072B2", "keys"),
    "value": ("#009E73", "values"),
    "stream": ("#4D4D4D", "residual stream, states"),
    "context": ("#E69F00", "context / attention output"),
    "weights": ("#CC79A7", "scores, weights"),
    "mask": ("#7F7F7F", "mask (True = may attend)"),
}
SANS = "DejaVu Sans, Helvetica, Arial, sans-serif"
MONO = "DejaVu Sans Mono, Menlo, Consolas, monospace"
SERIF = "DejaVu Serif, Times New Roman, serif"
MODULE_FILL = "#F3F3F3"
INK = "#222222"

STYLE = f"""
text {{ font-family: {SANS}; font-size: 15px; fill: {INK}; }}
.code {{ font-family: {MONO}; font-size: 15px; }}
.shape {{ font-family: {MONO}; font-size: 13px; fill: #333333; }}
.shape, .halo {{ paint-order: stroke; stroke: #FFFFFF; stroke-width: 4px; stroke-linejoin: round; }}
.math {{ font-family: {SERIF}; font-style: italic; font-size: 17px; }}
.note {{ font-size: 13px; fill: #555555; }}
.group {{ font-family: {MONO}; font-size: 15px; font-weight: bold; }}
.title {{ font-size: 17px; font-weight: bold; }}
.module {{ fill: {MODULE_FILL}; stroke: {INK}; stroke-width: 1.2; }}
.frame {{ fill: none; stroke: #8C8C8C; stroke-width: 1.2; stroke-dasharray: 6 4; }}
""".strip()

FONT_BUMP = 2  # added to every explicit font size: the HTML book shows a 1000-px figure at ~0.7
CHAR = {"code": 0.61, "shape": 0.61, "sans": 0.56, "math": 0.5}  # average glyph width / font size


def text_width(text: str, size: float, kind: str = "sans") -> float:
    """A generous estimate of the rendered width of ``text`` (markup for sub/superscripts removed)."""
    plain = re.sub(r"[_^]\{([^}]*)\}", r"\1", text)
    return len(plain) * size * CHAR[kind]


def fmt(value: float) -> str:
    """Coordinates with at most one decimal, so the output never depends on float noise."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def rich(text: str) -> str:
    """``s_{i-1}`` and ``W^{Q}`` as tspans (sub- and superscripts), everything else escaped."""
    out, level = [], 0
    for part in re.split(r"([_^]\{[^}]*\})", text):
        if not part:
            continue
        if part[0] in "_^" and part[1:2] == "{":
            shift = 4 if part[0] == "_" else -6
            out.append(f'<tspan dy="{shift - level}" font-size="75%">{escape(part[2:-1])}</tspan>')
            level = shift
        else:
            dy = f' dy="{-level}"' if level else ""
            out.append(f"<tspan{dy}>{escape(part)}</tspan>" if dy else escape(part))
            level = 0
    return "".join(out)


@dataclass
class Figure:
    """An SVG under construction. ``lib`` collects the dotted library names drawn in it."""

    name: str
    width: int
    height: int
    title: str
    desc: str
    parts: list[str] = field(default_factory=list)
    lib: set[str] = field(default_factory=set)
    overlay: list[str] = field(default_factory=list)
    roles: set[str] = field(default_factory=set)

    # -- library names --
    def code(self, label: str, *paths: str) -> str:
        """A label that names library objects: records ``paths`` (``attnbook...``) for the test."""
        for path in paths:
            if not path.startswith("attnbook."):
                raise ValueError(f"library paths start with 'attnbook.', got {path!r}")
            self.lib.add(path)
        return label

    # -- primitives --
    def text(self, x: float, y: float, label: str, cls: str = "", anchor: str = "middle",
             size: float | None = None, colour: str | None = None, weight: str | None = None) -> None:
        attrs = f'x="{fmt(x)}" y="{fmt(y)}"'
        if anchor != "start":
            attrs += f' text-anchor="{anchor}"'
        if cls:
            attrs += f' class="{cls}"'
        if size:
            attrs += f' font-size="{fmt(size + FONT_BUMP)}"'
        if colour:
            attrs += f' fill="{colour}"'
        if weight:
            attrs += f' font-weight="{weight}"'
        self.parts.append(f"<text {attrs}>{rich(label)}</text>")

    def rect(self, x: float, y: float, w: float, h: float, cls: str = "", fill: str | None = None,
             stroke: str | None = None, rx: float = 0, extra: str = "") -> None:
        attrs = f'x="{fmt(x)}" y="{fmt(y)}" width="{fmt(w)}" height="{fmt(h)}"'
        if rx:
            attrs += f' rx="{fmt(rx)}"'
        if cls:
            attrs += f' class="{cls}"'
        if fill:
            attrs += f' fill="{fill}"'
        if stroke:
            attrs += f' stroke="{stroke}"'
        if extra:
            attrs += " " + extra
        self.parts.append(f"<rect {attrs}/>")

    def line(self, points: list[tuple[float, float]], role: str, arrow: bool = True, dashed: bool = False,
             width: float = 1.6) -> None:
        colour = ROLES[role][0]
        self.roles.add(role)
        pts = " ".join(f"{fmt(x)},{fmt(y)}" for x, y in points)
        attrs = f'points="{pts}" fill="none" stroke="{colour}" stroke-width="{fmt(width)}"'
        if dashed or role == "mask":
            attrs += ' stroke-dasharray="5 3"'
        if arrow:
            attrs += f' marker-end="url(#arrow-{role})"'
        self.parts.append(f"<polyline {attrs}/>")

    # -- composites --
    def box(self, x: float, y: float, w: float, h: float, label: str, sub: str | None = None,
            role: str | None = None, kind: str = "code", size: float = 13) -> None:
        """A module: a grey box (outlined in its role's colour, if any) with a label and a note."""
        stroke = ROLES[role][0] if role else None
        if role:
            self.roles.add(role)
        self.rect(x, y, w, h, "module", stroke=stroke, rx=5,
                  extra='stroke-width="2"' if role else "")
        for line_text, line_size, line_kind in ((label, size + FONT_BUMP, kind), (sub, 13, "sans")):
            if line_text and text_width(line_text, line_size, line_kind) > w - 6:
                raise ValueError(f"{self.name}: {line_text!r} does not fit in a box {w} wide")
        cls = {"code": "code", "math": "math", "sans": ""}[kind]
        if sub:
            self.text(x + w / 2, y + h / 2 - 2, label, cls, size=size if size != 13 else None)
            self.text(x + w / 2, y + h / 2 + 12, sub, "note")
        else:
            self.text(x + w / 2, y + h / 2 + size * 0.35, label, cls, size=size if size != 13 else None)

    def frame(self, x: float, y: float, w: float, h: float, label: str, where: str = "top-left") -> None:
        """A dashed frame around the modules of one library class, named at a corner."""
        self.rect(x, y, w, h, "frame", rx=8)
        tx = x + 8 if where.endswith("left") else x + w - 8
        ty = y + 17 if where.startswith("top") else y + h - 8
        self.text(tx, ty, label, "group halo", anchor="start" if where.endswith("left") else "end")
        self.overlay.append(self.parts.pop())  # drawn last, over any line that crosses it

    def shape(self, x: float, y: float, label: str, anchor: str = "start") -> None:
        """A tensor's shape, written next to its arrow."""
        self.text(x, y, label, "shape", anchor=anchor)

    def tensor(self, x: float, y: float, label: str, role: str, w: float | None = None, h: float = 28) -> None:
        """A named tensor (not a module): a white rounded box outlined in its role's colour."""
        w = w if w is not None else text_width(label, 15, "math") + 20
        self.roles.add(role)
        self.rect(x, y, w, h, fill="#FFFFFF", stroke=ROLES[role][0], rx=12, extra='stroke-width="2"')
        self.text(x + w / 2, y + h / 2 + 5, label, "math")

    def cells(self, x: float, y: float, values: list[list[float | None]], cell: float, role: str,
              numbers: bool = False) -> None:
        """A matrix drawn cell by cell: shade ~ value in [0, 1]; ``None`` is a masked cell (hatched).

        Cells of one shade share one path, which keeps the files small.
        """
        colour = ROLES[role][0]
        self.roles.add(role)
        groups: dict[str, list[str]] = {}
        labels = []
        for i, row in enumerate(values):
            for j, v in enumerate(row):
                cx, cy = x + j * cell, y + i * cell
                key = "masked" if v is None else fmt(min(0.08 + 0.85 * v, 0.93))
                groups.setdefault(key, []).append(f"M{fmt(cx)},{fmt(cy)}h{fmt(cell)}v{fmt(cell)}h-{fmt(cell)}z")
                if numbers and v is not None:
                    labels.append((cx + cell / 2, cy + cell / 2 + 4, f"{v:.2f}".lstrip("0") if v < 0.995 else "1",
                                   "#FFFFFF" if v > 0.55 else INK))
        for key in sorted(groups):
            d = "".join(groups[key])
            if key == "masked":
                self.parts.append(f'<path d="{d}" fill="url(#hatch)" stroke="#BBBBBB"/>')
            else:
                self.parts.append(f'<path d="{d}" fill="{colour}" fill-opacity="{key}" stroke="#FFFFFF"/>')
        for lx, ly, label, ink in labels:
            self.text(lx, ly, label, size=10, colour=ink)

    def legend(self, x: float, y: float, roles: list[str] | None = None) -> None:
        """A one-line key of the roles used in the figure."""
        used = [r for r in ROLES if r in (roles if roles is not None else self.roles)]
        for role in used:
            colour, meaning = ROLES[role]
            dash = ' stroke-dasharray="5 3"' if role == "mask" else ""
            self.parts.append(
                f'<line x1="{fmt(x)}" y1="{fmt(y)}" x2="{fmt(x + 22)}" y2="{fmt(y)}" stroke="{colour}" '
                f'stroke-width="3"{dash}/>'
            )
            self.text(x + 27, y + 4, meaning, "note", anchor="start")
            x += 27 + text_width(meaning, 11) + 18

    def render(self) -> str:
        markers = "".join(
            f'<marker id="arrow-{role}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
            f'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{colour}"/></marker>'
            for role, (colour, _) in ROLES.items() if role in self.roles
        )
        hatch = (
            '<pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
            'patternTransform="rotate(45)"><rect width="6" height="6" fill="#F2F2F2"/>'
            '<line x1="0" y1="0" x2="0" y2="6" stroke="#9A9A9A" stroke-width="2"/></pattern>'
        )
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width} {self.height}" '
            f'width="{self.width}" height="{self.height}" role="img" aria-labelledby="title desc">\n'
            f'<title id="title">{escape(self.title)}</title>\n'
            f'<desc id="desc">{escape(self.desc)}</desc>\n'
            f"<style>\n{STYLE}\n</style>\n"
            f"<defs>{markers}{hatch}</defs>\n"
            f'<rect width="{self.width}" height="{self.height}" fill="#FFFFFF"/>\n'
            + "\n".join(self.parts + self.overlay)
            + "\n</svg>\n"
        )


def softmax_rows(scores: list[list[float | None]]) -> list[list[float | None]]:
    """Row-wise softmax over the entries that are not masked (None stays None)."""
    out = []
    for row in scores:
        live = [math.exp(s) for s in row if s is not None]
        total = sum(live)
        out.append([None if s is None else math.exp(s) / total for s in row])
    return out


# --- Chapter 1 ------------------------------------------------------------------------------

def ch01_encoder_decoder() -> Figure:
    fig = Figure(
        "ch01_encoder_decoder", 1030, 500,
        "Chapter 1: the RNN encoder-decoder, unrolled",
        "The word 'phone' (letters x_1 to x_5, shape (B, S)) is embedded (B, S, E) and read by a "
        "bidirectional GRU (GRUEncoder): one GRU left to right, one right to left. Their last states "
        "are joined into the context C = [forward h_S; backward h_1], shape (B, 2He). The per-letter "
        "outputs h_j (B, S, 2He) are not used by this decoder. The ContextDecoder starts from "
        "s_0 = tanh(W_s C) (init_state), and at every step i reads [e(y_{i-1}); C], shape (B, T, E+2He): "
        "the embedding of the previous phoneme (<bos>, F, OW, N under teacher forcing) joined with the "
        "same C. Its GRU states s_i (B, T, Hd) go through the output layer to logits (B, T, V) for the "
        "next phoneme: F, OW, N, <eos>. The whole input reaches the decoder only through C.",
    )
    # ---- encoder: one bidirectional cell per letter (forward half on top, backward below) ----
    letters = ["p", "h", "o", "n", "e"]
    xs = [70 + 72 * j for j in range(5)]
    cw, half = 52, 24
    y_tok, y_emb, y_cell, y_out = 465, 390, 290, 140  # y_cell: the line between the two halves
    fig.frame(22, 215, 390, 215, fig.code("GRUEncoder", "attnbook.models.rnn.GRUEncoder"), "bottom-right")
    fig.box(45, y_emb - 14, 350, 28, fig.code("embedding: nn.Embedding", "attnbook.models.rnn.GRUEncoder:embedding"))
    for j, (x, letter) in enumerate(zip(xs, letters)):
        fig.text(x, y_tok, f"x_{{{j + 1}}} = {letter}", "math")
        fig.line([(x, y_tok - 16), (x, y_emb + 16)], "stream")
        fig.line([(x, y_emb - 14), (x, y_cell + half + 2)], "stream")
        fig.box(x - cw / 2, y_cell - half, cw, 2 * half, "")
        fig.line([(x - cw / 2, y_cell), (x + cw / 2, y_cell)], "stream", arrow=False, width=1)  # the two halves
        fig.text(x, y_cell - 7, "GRU→", "code", size=11)
        fig.text(x, y_cell + 16, "←GRU", "code", size=11)
        if j:
            fig.line([(xs[j - 1] + cw / 2, y_cell - 12), (x - cw / 2 - 2, y_cell - 12)], "stream")
            fig.line([(x - cw / 2, y_cell + 12), (xs[j - 1] + cw / 2 + 2, y_cell + 12)], "stream")
        # the per-letter outputs h_j: drawn faint, not used in Chapter 1
        fig.line([(x, y_cell - half), (x, y_out + 22)], "stream", dashed=True, width=1)
        fig.text(x, y_out + 14, f"h_{{{j + 1}}}", "math", colour="#8C8C8C")
    fig.shape(xs[0] + 6, y_tok - 26, "(B, S)")
    fig.shape(xs[0] + 6, y_emb - 24, "(B, S, E)")
    fig.text(214, y_out - 10, "outputs h_{j} (B, S, 2He): unused here, attended to in Chapter 2", "note")
    # context C = [fwd h_S ; bwd h_1]
    cx, cy = 450, 150
    fig.tensor(cx, cy, "C", "context", w=56)
    fig.text(cx + 28, cy - 19, "[h→_{S} ; h←_{1}]", "note")
    fig.line([(xs[-1] + cw / 2, y_cell - 12), (428, y_cell - 12), (428, cy + 14), (cx - 2, cy + 14)], "context")
    fig.line([(xs[0] - cw / 2, y_cell + 12), (32, y_cell + 12), (32, 196), (428, 196)], "context", arrow=False)
    fig.shape(cx + 62, cy + 6, "(B, 2He)")
    # ---- decoder ----
    fig.frame(505, 105, 400, 325, fig.code("ContextDecoder", "attnbook.models.rnn.ContextDecoder"), "top-left")
    prev = ["<bos>", "F", "OW", "N"]
    nxt = ["F", "OW", "N", "<eos>"]
    dx = [665 + 72 * i for i in range(4)]
    cw, chh = 50, 30
    y_dstate, y_logit, y_bus = 255, 165, 330
    fig.box(514, y_dstate - 30, 94, 60, fig.code("init_state", "attnbook.models.rnn.ContextDecoder:init_state"),
            sub="tanh(W_s C)", size=12)
    fig.line([(cx + 56, cy + 14), (620, cy + 14), (620, y_bus), (dx[-1] + 8, y_bus)], "context", arrow=False)
    fig.line([(561, cy + 14), (561, y_dstate - 32)], "context")
    fig.line([(608, y_dstate + 6), (dx[0] - cw / 2 - 2, y_dstate + 6)], "stream")
    fig.text(624, y_dstate - 4, "s_{0}", "math", size=13)
    fig.box(dx[0] - 30, y_emb - 14, 3 * 72 + 60, 28,
            fig.code("embedding: nn.Embedding", "attnbook.models.rnn.ContextDecoder:embedding"))
    for i, x in enumerate(dx):
        fig.text(x, y_tok, prev[i], "code", size=12)
        fig.line([(x, y_tok - 16), (x, y_emb + 16)], "stream")
        fig.line([(x - 8, y_emb - 14), (x - 8, y_dstate + chh / 2 + 2)], "stream")
        fig.line([(x + 8, y_bus), (x + 8, y_dstate + chh / 2 + 2)], "context")
        fig.box(x - cw / 2, y_dstate - chh / 2, cw, chh, "GRU", size=12)
        fig.text(x + 36, y_dstate - 4, f"s_{{{i + 1}}}", "math", size=13)  # above the arrow to the next cell
        if i:
            fig.line([(dx[i - 1] + cw / 2, y_dstate + 6), (x - cw / 2 - 2, y_dstate + 6)], "stream")
        fig.line([(x, y_dstate - chh / 2), (x, y_logit + 14 + 2)], "stream")
        fig.box(x - cw / 2, y_logit - 14, cw, 28, fig.code("out", "attnbook.models.rnn.ContextDecoder:out"), size=12)
        fig.line([(x, y_logit - 14), (x, 96)], "stream")
        fig.text(x, 86, nxt[i], "code", size=12)
    fig.text(dx[0] - 40, y_tok, "y_{i-1}", "math", anchor="end")
    fig.text(dx[0] - 40, 86, "y_{i}", "math", anchor="end")
    right = dx[-1] + 34
    fig.shape(right, y_logit + 4, "(B, T, V)")
    fig.shape(right, y_dstate + 26, "(B, T, Hd)")
    fig.shape(right, y_bus - 4, "(B, T, E+2He)")
    fig.text(right, y_bus + 12, "[e(y_{i-1}); C]", "note", anchor="start")
    fig.shape(right, y_emb + 4, "(B, T, E)")
    fig.text(30, 30, fig.code("RNNSeq2Seq", "attnbook.models.rnn.RNNSeq2Seq")
             + ": the input reaches the decoder only through C", "title", anchor="start")
    fig.legend(30, 492, ["stream", "context"])
    return fig


# --- Chapter 2 ------------------------------------------------------------------------------

def ch02_additive_step() -> Figure:
    fig = Figure(
        "ch02_additive_attention_step", 1000, 560,
        "Chapter 2: one decoder step of additive (Bahdanau) attention",
        "One step i of AttentionDecoder.step. The encoder states h_1 to h_S (the memory, shape "
        "(B, S, 2He), from GRUEncoder; the last position is padding) serve as keys and as values. "
        "AdditiveScore computes U h_j once per word (prepare, shape (B, S, A)) and W s_{i-1} from the "
        "previous decoder state s_{i-1} (the query, (B, Hd)), adds them, applies tanh and v to get the "
        "scores e_ij, shape (B, 1, S). attend turns the scores into weights a_ij with masked_softmax "
        "under key_mask, shape (B, 1, S): the padding gets exactly zero. The context C_i = sum_j a_ij h_j "
        "(B, 2He) and the embedding e(y_{i-1}) (B, E) enter the GRUCell with s_{i-1}; it returns s_i "
        "(B, Hd), which the output layer turns into logits (B, V) and which is the query of step i+1.",
    )
    fig.text(30, 28, fig.code("AttentionDecoder.step", "attnbook.models.rnn.AttentionDecoder.step")
             + ": the context C_{i} is recomputed at every step i", "title", anchor="start")
    # memory h_j
    x0, y0, bw, bh = 40, 110, 80, 32
    fig.text(x0 + bw / 2, 84, fig.code("GRUEncoder", "attnbook.models.rnn.GRUEncoder") + " outputs", "note")
    for j in range(6):
        y = y0 + j * (bh + 8)
        if j < 5:
            fig.rect(x0, y, bw, bh, "module", rx=4)
            fig.text(x0 + bw / 2, y + 21, f"h_{{{j + 1}}}", "math")
        else:
            fig.rect(x0, y, bw, bh, fill="url(#hatch)", stroke="#9A9A9A", rx=4)
            fig.text(x0 + bw / 2, y + 21, "pad", "code", size=12)
    fig.shape(x0 + bw / 2, 98, "(B, S, 2He)", anchor="middle")
    # the query s_{i-1}
    fig.tensor(170, 68, "s_{i-1}", "query", w=80)
    fig.shape(172, 112, "(B, Hd)")
    # AdditiveScore
    fig.frame(270, 45, 455, 245, fig.code("AdditiveScore", "attnbook.layers.scores.AdditiveScore"), "bottom-left")
    fig.box(300, 60, 150, 44, fig.code("W", "attnbook.layers.scores.AdditiveScore:W"), sub="W s_{i-1}", role="query")
    fig.box(300, 196, 150, 44, fig.code("U", "attnbook.layers.scores.AdditiveScore:U"),
            sub=fig.code("prepare(): per word", "attnbook.layers.scores.Score.prepare"),
            role="key")
    fig.line([(250, 82), (298, 82)], "query")
    fig.line([(x0 + bw, 218), (298, 218)], "key")
    fig.text(180, 212, "keys", "note", colour=ROLES["key"][0])
    fig.line([(450, 82), (540, 82), (540, 126)], "query")
    fig.line([(450, 218), (540, 218), (540, 174)], "key")
    fig.shape(458, 76, "(B, 1, A)")
    fig.shape(458, 212, "(B, S, A)")
    fig.box(490, 128, 100, 44, "tanh(+)", sub="(B, 1, S, A)")
    fig.box(615, 128, 85, 44, fig.code("v", "attnbook.layers.scores.AdditiveScore:v"), sub="v^{T} ·")
    fig.line([(590, 150), (613, 150)], "stream")
    fig.line([(700, 150), (773, 150)], "weights")
    fig.text(736, 142, "e_{ij}", "math", size=14)
    fig.shape(736, 168, "(B, 1, S)", anchor="middle")
    # attend
    fig.frame(745, 45, 245, 405, fig.code("attend", "attnbook.layers.scores.attend"), "bottom-right")
    fig.box(775, 60, 150, 40, fig.code("key_mask", "attnbook.layers.key_mask"), sub="(B, 1, S)", role="mask")
    fig.line([(850, 100), (850, 126)], "mask")
    fig.box(775, 128, 150, 44, fig.code("masked_softmax", "attnbook.layers.masked_softmax"), role="weights")
    scores = [[1.6, 0.3, -0.4, 0.9, -1.0, None]]
    weights = softmax_rows(scores)[0]
    bx, base = 790, 300
    for j, a in enumerate(weights):
        x = bx + j * 21
        if a is None:
            fig.rect(x, base - 4, 15, 4, fill="url(#hatch)", stroke="#9A9A9A")
            continue
        fig.rect(x, base - 90 * a, 15, 90 * a, fill=ROLES["weights"][0])
    fig.line([(785, base), (917, base)], "stream", arrow=False, width=1)
    fig.line([(850, 172), (850, 196)], "weights")
    fig.text(922, 250, "a_{ij}", "math", anchor="start")
    fig.shape(922, 268, "(B, 1, S)")
    fig.text(922, 292, "pad: 0", "note", anchor="start")
    fig.line([(850, 306), (850, 388)], "weights")
    fig.box(775, 390, 150, 44, "Σ_{j} a_{ij} h_{j}", kind="math")
    fig.line([(x0 + bw / 2, y0 + 6 * (bh + 8) - 8), (x0 + bw / 2, 520), (870, 520), (870, 436)], "value")
    fig.text(300, 514, "values: the same h_{j}", "note", colour=ROLES["value"][0])
    # the GRU cell and the output
    fig.line([(775, 412), (672, 412)], "context")
    fig.text(718, 404, "C_{i}", "math", size=14)
    fig.shape(718, 428, "(B, 2He)", anchor="middle")
    fig.box(510, 390, 160, 44, fig.code("cell: nn.GRUCell", "attnbook.models.rnn.AttentionDecoder:cell"))
    fig.tensor(525, 318, "e(y_{i-1})", "stream", w=130)
    fig.line([(590, 346), (590, 388)], "stream")
    fig.shape(598, 372, "(B, E)")
    fig.line([(235, 96), (235, 412), (508, 412)], "stream")
    fig.text(243, 404, "s_{i-1}: previous state", "note", anchor="start")
    fig.line([(590, 434), (590, 458)], "stream")
    fig.text(598, 452, "s_{i}", "math", size=13, anchor="start")
    fig.box(525, 460, 130, 30, fig.code("out: nn.Linear", "attnbook.models.rnn.AttentionDecoder:out"), size=12)
    fig.line([(525, 475), (445, 475)], "stream")
    fig.text(438, 480, "logits (B, V)", "code", anchor="end", size=12)
    fig.text(640, 513, "s_{i} is the query of step i+1", "note", anchor="start")
    fig.legend(30, 548)
    return fig


# --- Chapter 3 ------------------------------------------------------------------------------

def ch03_self_attention() -> Figure:
    fig = Figure(
        "ch03_self_attention", 1000, 480,
        "Chapter 3: queries, keys and values, and the masked attention matrix",
        "Self-attention on a sequence X of T tokens, shape (B, T, D). Three linear maps give the queries "
        "Q = X W^Q (B, T, Dk), the keys K = X W^K (B, S, Dk) and the values V = X W^V (B, S, Dv); in "
        "self-attention S = T. The scores Q K^T / sqrt(Dk) form a (B, T, S) matrix: row i is query i, "
        "column j is key j. The mask (causal_mask(T), True on and below the diagonal; key_mask for "
        "padding) sends the disallowed scores to minus infinity, and masked_softmax turns each row into "
        "weights that sum to 1, exactly zero above the diagonal (the numbers shown are the softmax of made-up "
        "scores). The output Z = A V has shape (B, T, Dv). "
        "scaled_dot_product_attention computes all of this; MultiHeadAttention holds W^Q, W^K, W^V as "
        "q_proj, k_proj, v_proj.",
    )
    fig.text(30, 28, fig.code("scaled_dot_product_attention", "attnbook.layers.scaled_dot_product_attention")
             + ": softmax(Q K^{T} / √Dk) V under a mask (self-attention: S = T)", "title", anchor="start")
    T, c = 5, 16
    grey = [[0.3] * 6 for _ in range(T)]
    fig.cells(40, 190, grey, c, "stream")
    fig.text(88, 180, "X", "math")
    fig.shape(88, 288, "(B, T, D)", anchor="middle")
    rows = (("key", "K", "W^{K}", "k_proj", 80, "(B, S, Dk)"), ("query", "Q", "W^{Q}", "q_proj", 230, "(B, T, Dk)"),
            ("value", "V", "W^{V}", "v_proj", 380, "(B, S, Dv)"))
    for role, name, weight, attr, yc, shp in rows:
        fig.line([(136, 230), (155, 230), (155, yc), (173, yc)], role)
        fig.box(175, yc - 22, 80, 44, weight, sub=fig.code(attr, f"attnbook.layers.MultiHeadAttention:{attr}"),
                role=role, kind="math")
        fig.line([(255, yc), (288, yc)], role)
        fig.cells(290, yc - 40, [[0.55] * 4 for _ in range(T)], c, role)
        fig.text(370, yc - 4, name, "math", anchor="start")
        fig.shape(370, yc + 14, shp)
    # scores
    scores = [[round(1.4 * math.sin(1.7 * i + 2.3 * j + 0.5), 2) for j in range(T)] for i in range(T)]
    lo, hi = min(map(min, scores)), max(map(max, scores))
    gx, gy, gc = 460, 165, 26
    fig.cells(gx, gy, [[(v - lo) / (hi - lo) * 0.8 for v in row] for row in scores], gc, "weights")
    fig.line([(354, 230), (458, 230)], "query")
    fig.line([(354, 80), (525, 80), (525, 163)], "key")
    fig.text(gx - 6, gy + 10, "query i", "note", anchor="end")
    fig.text(gx, gy - 8, "key j", "note", anchor="start")
    fig.text(gx + 2.5 * gc, gy + 5 * gc + 20, "Q K^{T} / √Dk", "math", size=14)
    fig.shape(gx + 2.5 * gc, gy + 5 * gc + 36, "(B, T, S)", anchor="middle")
    # the mask
    allowed = [[1.0 if j <= i else None for j in range(T)] for i in range(T)]
    mx, my, mc = 615, 60, 20
    for i, row in enumerate(allowed):
        for j, v in enumerate(row):
            if v is None:
                fig.rect(mx + j * mc, my + i * mc, mc, mc, fill="url(#hatch)", stroke="#BBBBBB")
            else:
                fig.rect(mx + j * mc, my + i * mc, mc, mc, fill="#FFFFFF", stroke="#7F7F7F")
                fig.text(mx + j * mc + mc / 2, my + i * mc + 14, "T", "code", size=10, colour="#7F7F7F")
    fig.roles.add("mask")
    fig.text(mx + 2.5 * mc, my - 10, fig.code("causal_mask(T)", "attnbook.layers.causal_mask"), "code", size=12)
    fig.text(mx + 5 * mc + 8, my + 30, "(T, S)", "shape", anchor="start")
    fig.text(mx + 5 * mc + 8, my + 48, "T = may attend", "note", anchor="start")
    fig.text(mx + 5 * mc + 8, my + 64, "hatched: −∞", "note", anchor="start")
    fig.line([(mx + 2.5 * mc, my + 5 * mc), (mx + 2.5 * mc, 206)], "mask")
    fig.line([(gx + 5 * gc, 230), (593, 230)], "weights")
    fig.box(595, 208, 140, 44, fig.code("masked_softmax", "attnbook.layers.masked_softmax"), role="weights")
    fig.text(665, 270, "padding:", "note")
    fig.text(665, 284, fig.code("key_mask", "attnbook.layers.key_mask") + " (B, 1, S)", "note")
    fig.line([(735, 230), (758, 230)], "weights")
    weights = softmax_rows([[s if j <= i else None for j, s in enumerate(row)] for i, row in enumerate(scores)])
    ax = 760
    fig.cells(ax, gy, weights, gc, "weights", numbers=True)
    fig.text(ax + 5 * gc + 8, gy + 14, "A", "math", anchor="start")
    fig.shape(ax + 5 * gc + 8, gy + 32, "(B, T, S)")
    fig.text(ax + 5 * gc + 8, gy + 50, "rows sum to 1", "note", anchor="start")
    # output
    fig.line([(ax + 2.5 * gc, gy + 5 * gc), (ax + 2.5 * gc, 358)], "weights")
    fig.line([(354, 380), (758, 380)], "value")
    fig.box(760, 360, 130, 40, "A V", kind="math")
    fig.line([(890, 380), (918, 380)], "context")
    fig.tensor(920, 366, "Z", "context", w=44)
    fig.shape(942, 416, "(B, T, Dv)", anchor="middle")
    fig.legend(30, 466)
    return fig


# --- Chapter 4 ------------------------------------------------------------------------------

def _head_grid(fig: Figure, x: float, y: float, T: int, H: int, Dh: int, c: float, role: str, gap: float) -> None:
    """A (T, H*Dh) matrix whose H column blocks alternate in shade; ``gap`` separates the blocks."""
    for h in range(H):
        fig.cells(x + h * (Dh * c + gap), y, [[0.3 if h % 2 else 0.6] * Dh for _ in range(T)], c, role)


def _deck(fig: Figure, x: float, y: float, T: int, cols: int, H: int, c: float, role: str, step: float = 9) -> None:
    """H matrices of shape (T, cols), one behind the other: a batch dimension of size H."""
    for h in reversed(range(H)):
        fig.rect(x + h * step - 1, y + h * step - 1, cols * c + 2, T * c + 2, fill="#FFFFFF", stroke="#BBBBBB")
        fig.cells(x + h * step, y + h * step, [[0.3 if h % 2 else 0.6] * cols for _ in range(T)], c, role)


def ch04_heads() -> Figure:
    T, H, Dh, c = 4, 4, 3, 13
    D = H * Dh
    fig = Figure(
        "ch04_split_merge_heads", 1000, 590,
        "Chapter 4: splitting into heads and merging them back (view and transpose)",
        f"MultiHeadAttention with H = {H} heads of width Dh = {Dh} (D = {D}), for one sequence of T = {T} "
        "tokens. Left, split_heads: the query projection q_proj(query) has shape (B, T, D); "
        "view(B, T, H, Dh) cuts its last dimension into H column blocks without copying; "
        "transpose(1, 2) makes the heads a batch dimension, (B, H, T, Dh). The keys and values "
        "(k_proj, v_proj) are split the same way, (B, H, S, Dh). Bottom: one batched product computes "
        "every head's weights softmax(q k^T / sqrt(Dh)), (B, H, T, S), and outputs (B, H, T, Dh). Right, "
        "merge_heads: transpose(1, 2) back to (B, T, H, Dh), contiguous() to copy into row order, "
        "view(B, T, D) to concatenate the heads, and out_proj mixes them, (B, T, D).",
    )
    mha = "attnbook.layers.MultiHeadAttention"
    fig.text(30, 28, fig.code("MultiHeadAttention", mha) + f": H = {H} heads of width Dh = {Dh}, D = {D}",
             "title", anchor="start")
    gap = 8
    # --- split (left), top to bottom ---
    lx = 40
    fig.text(lx, 62, fig.code("split_heads", f"{mha}.split_heads"), "group", anchor="start")
    fig.text(lx, 96, fig.code("q_proj(query)", f"{mha}:q_proj"), "code", anchor="start", size=12)
    for h in range(H):
        fig.text(lx + (h + 0.5) * Dh * c, 118 - 4, f"{h + 1}", "note")
    _head_grid(fig, lx, 120, T, H, Dh, c, "query", 0)
    fig.shape(lx + D * c + 12, 144, "(B, T, D)")
    fig.line([(lx + 70, 175), (lx + 70, 215)], "query")
    fig.text(lx + 80, 200, "view(B, T, H, Dh)", "code", anchor="start", size=12)
    _head_grid(fig, lx, 220, T, H, Dh, c, "query", gap)
    fig.shape(lx + D * c + 3 * gap + 12, 238, "(B, T, H, Dh)")
    fig.text(lx + D * c + 3 * gap + 12, 254, "no copy", "note", anchor="start")
    fig.line([(lx + 70, 275), (lx + 70, 315)], "query")
    fig.text(lx + 80, 300, "transpose(1, 2)", "code", anchor="start", size=12)
    _deck(fig, lx + 40, 320, T, Dh, H, c, "query")
    fig.shape(lx + 120, 350, "(B, H, T, Dh)")
    fig.text(lx + 120, 366, "heads = a batch dimension", "note", anchor="start")
    # keys and values, split the same way
    fig.text(330, 300, "k_proj(key), v_proj(value):", "note", anchor="start")
    fig.code("", f"{mha}:k_proj", f"{mha}:v_proj")
    fig.text(330, 314, "split_heads the same way", "note", anchor="start")
    _deck(fig, 345, 330, T, Dh, H, c, "key")
    _deck(fig, 445, 330, T, Dh, H, c, "value")
    fig.shape(345, 420, "(B, H, S, Dh)")
    # --- the batched attention (bottom) ---
    fig.rect(250, 440, 500, 120, "frame", rx=8)
    fig.text(500, 552, "all heads in one batched product", "note")
    fig.line([(lx + 60, 404), (lx + 60, 500), (290, 500)], "query")
    fig.line([(385, 424), (385, 470)], "key")
    fig.line([(485, 424), (485, 470)], "value")
    fig.text(395, 500, "softmax(q k^{T} / √Dh) v", "math", size=13)
    _deck(fig, 520, 470, T, T, H, 11, "weights", step=7)
    fig.shape(610, 480, "(B, H, T, S)")
    fig.line([(660, 520), (720, 520)], "context", arrow=False)
    # --- merge (right), bottom to top ---
    rx = 760
    fig.text(rx, 62, fig.code("merge_heads", f"{mha}.merge_heads"), "group", anchor="start")
    fig.line([(720, 520), (800, 520), (800, 412)], "context")
    _deck(fig, rx + 40, 320, T, Dh, H, c, "context")
    fig.shape(rx + 120, 350, "(B, H, T, Dh)")
    fig.line([(rx + 70, 315), (rx + 70, 275)], "context")
    fig.text(rx + 80, 300, "transpose(1, 2)", "code", anchor="start", size=12)
    _head_grid(fig, rx, 220, T, H, Dh, c, "context", gap)
    fig.shape(rx + 62, 300, "(B, T, H, Dh)", anchor="end")
    fig.line([(rx + 70, 215), (rx + 70, 175)], "context")
    fig.text(rx + 80, 192, "contiguous()", "code", anchor="start", size=12)
    fig.text(rx + 80, 207, ".view(B, T, D)", "code", anchor="start", size=12)
    _head_grid(fig, rx, 120, T, H, Dh, c, "context", 0)
    fig.text(rx + D * c / 2, 114, "[head 1; …; head H]", "note")
    fig.line([(rx + D * c, 146), (rx + D * c + 40, 146), (rx + D * c + 40, 104)], "context")
    fig.box(rx + 110, 66, 110, 36, fig.code("out_proj", f"{mha}:out_proj"), size=12)
    fig.shape(rx + 220, 58, "(B, T, D)", anchor="end")
    fig.shape(rx + 62, 196, "(B, T, D)", anchor="end")
    fig.legend(30, 580)
    return fig


# --- Chapter 5 ------------------------------------------------------------------------------

def ch05_transformer() -> Figure:
    L = "attnbook.layers"
    tr = "attnbook.models.transformer.Transformer"
    fig = Figure(
        "ch05_transformer", 1000, 745,
        "Chapter 5: the Transformer encoder-decoder (post-norm, as in the paper)",
        "The library's Transformer. Left, the encoder: source tokens (B, S) go through src_embed "
        "(Embeddings: token embedding times sqrt(D) plus SinusoidalPositionalEncoding), shape (B, S, D), "
        "then N EncoderBlocks (encoder_layers). Each block is self_attn (MultiHeadAttention; queries, keys "
        "and values all from the stream; key_mask (B, 1, S) for padding), then norm1 = LayerNorm(x + "
        "sublayer), then feed_forward (FeedForward, D to F to D), then norm2. Its output is the memory R, "
        "(B, S, D). Right, the decoder: target tokens (B, T) through tgt_embed, shape (B, T, D), then N "
        "DecoderBlocks (decoder_layers): self_attn under causal_mask (T, T), norm1; cross_attn with "
        "queries from the decoder stream and keys and values from R (project_memory gives a KVCache "
        "(B, H, S, Dh); the same R goes to every block) under key_mask (B, 1, S), weights (B, H, T, S), "
        "norm2; feed_forward, norm3. The output layer, whose weight is tied to the target embedding, "
        "gives logits (B, T, V). Grey lines are the residual stream: each sublayer's input is added to "
        "its output inside the LayerNorm that follows.",
    )
    fig.text(30, 28, fig.code("Transformer", tr) + ": post-norm, x = LayerNorm(x + sublayer(x))",
             "title", anchor="start")
    attn_sub = fig.code("MultiHeadAttention", f"{L}.MultiHeadAttention")
    ff_sub = fig.code("FeedForward: D→F→D", f"{L}.FeedForward")
    w, gap, entry = 210, 30, 580

    def stack(cx: float, kinds: list[tuple[str, str]], owner: str, label: str, attr: str) -> tuple[dict, float]:
        """Sublayers bottom to top along the stream at x = cx; returns each box and the top."""
        rxl, y, boxes, branch = cx - 120, entry, {}, entry
        for key, text in kinds:
            h = 32 if key.startswith("norm") else 40
            bottom = y - gap
            top = bottom - h
            x = cx - w / 2
            if key.startswith("norm"):
                fig.line([(cx, y), (cx, bottom + 2)], "stream")
                fig.line([(rxl, branch), (rxl, top + h / 2), (x - 2, top + h / 2)], "stream")
                fig.box(x, top, w, h, fig.code(text, f"{owner}:{key}"), size=12)
            else:
                branch = y - 6
                fig.line([(cx, y), (cx, y - 14)], "stream", arrow=False)
                fig.line([(cx, branch), (rxl, branch)], "stream", arrow=False)
                if key == "self_attn":
                    for dxq, role in ((-50, "query"), (0, "key"), (50, "value")):
                        fig.line([(cx, y - 14), (cx + dxq, y - 14), (cx + dxq, bottom + 2)], role)
                elif key == "cross_attn":
                    fig.line([(cx, y - 14), (cx, bottom + 2)], "query")
                else:
                    fig.line([(cx, y - 14), (cx, bottom + 2)], "stream")
                fig.box(x, top, w, h, fig.code(text, f"{owner}:{key}"),
                        sub=ff_sub if key == "feed_forward" else attn_sub, size=12)
            boxes[key] = (x, top, w, h)
            y = top
        fig.frame(cx - 135, y - 30, 270, entry - y + 30, label, "top-left")
        fig.text(cx + 139, entry - 4, fig.code(attr, f"{tr}:{attr}"), "code", anchor="start", size=11, colour="#555555")
        return boxes, y

    def mask(cx: float, box: tuple, name: str, shape: str) -> None:
        x, top, bw, h = box
        fig.line([(cx + 150, top + h / 2), (x + bw + 2, top + h / 2)], "mask")
        fig.text(cx + 152, top + h / 2 - 20, name, "code", anchor="start", size=11)
        fig.text(cx + 152, top + h / 2 - 6, shape, "shape", anchor="start")

    def embed(cx: float, tokens: str, name: str, shape: str) -> None:
        fig.text(cx, 705, tokens, "code", size=12)
        fig.line([(cx, 691), (cx, 662)], "stream")
        fig.box(cx - 135, 620, 270, 40, name, sub="× √D + " + fig.code(
            "SinusoidalPositionalEncoding", f"{L}.SinusoidalPositionalEncoding"), size=12)
        fig.line([(cx, 620), (cx, entry + 2)], "stream", arrow=False)
        fig.shape(cx + 6, 604, shape)

    ex, dx = 250, 700
    # ---- encoder ----
    embed(ex, "src (B, S)", fig.code("src_embed: Embeddings", f"{L}.Embeddings", f"{tr}:src_embed"), "(B, S, D)")
    enc_label = fig.code("EncoderBlock", f"{L}.EncoderBlock") + " × N"
    boxes, top = stack(ex, [("self_attn", "self_attn"), ("norm1", "norm1: LayerNorm(x + ·)"),
                            ("feed_forward", "feed_forward"), ("norm2", "norm2: LayerNorm(x + ·)")],
                       f"{L}.EncoderBlock", enc_label, "encoder_layers")
    mask(ex, boxes["self_attn"], fig.code("key_mask", f"{L}.key_mask"), "(B, 1, S)")
    fig.line([(ex, top), (ex, 245)], "stream")
    fig.tensor(ex - 25, 215, "R", "stream", w=50)
    fig.text(ex - 32, 234, "memory", "note", anchor="end")
    fig.shape(ex + 6, 272, "(B, S, D)")
    # ---- decoder ----
    embed(dx, "tgt_in (B, T)", fig.code("tgt_embed: Embeddings", f"{tr}:tgt_embed"), "(B, T, D)")
    dec_label = fig.code("DecoderBlock", f"{L}.DecoderBlock") + " × N"
    boxes, top = stack(dx, [("self_attn", "self_attn"), ("norm1", "norm1: LayerNorm(x + ·)"),
                            ("cross_attn", "cross_attn"), ("norm2", "norm2: LayerNorm(x + ·)"),
                            ("feed_forward", "feed_forward"), ("norm3", "norm3: LayerNorm(x + ·)")],
                       f"{L}.DecoderBlock", dec_label, "decoder_layers")
    mask(dx, boxes["self_attn"], fig.code("causal_mask", f"{L}.causal_mask"), "(T, T)")
    mask(dx, boxes["cross_attn"], "key_mask", "(B, 1, S)")
    x, ctop, bw, h = boxes["cross_attn"]
    fig.text(dx + 152, ctop + h / 2 + 18, "weights", "note", anchor="start")
    fig.text(dx + 152, ctop + h / 2 + 32, "(B, H, T, S)", "shape", anchor="start")
    # memory R -> the keys and values of every decoder block's cross-attention
    cy = ctop + h / 2
    fig.line([(ex + 25, 223), (490, 223), (490, cy - 7), (x - 2, cy - 7)], "key")
    fig.line([(ex + 25, 235), (502, 235), (502, cy + 7), (x - 2, cy + 7)], "value")
    fig.text(385, 190, "the same R in every block", "note")
    fig.text(385, 212, fig.code("project_memory", f"{L}.DecoderBlock.project_memory") + "(R)", "code", size=11)
    fig.text(385, 253, fig.code("KVCache", f"{L}.KVCache") + " (B, H, S, Dh)", "shape")
    # the output layer
    fig.line([(dx, top), (dx, 112)], "stream")
    fig.shape(dx + 6, 134, "(B, T, D)")
    fig.box(dx - 110, 70, 220, 40, fig.code("output: nn.Linear", f"{tr}:output"), sub="weight tied to tgt_embed",
            size=12)
    fig.line([(dx + 110, 90), (dx + 150, 90)], "stream")
    fig.text(dx + 155, 94, "logits (B, T, V)", "code", anchor="start", size=12)
    fig.legend(30, 734)
    return fig


# --- Later chapters: BERT's input embeddings, ViT's patches, GPT's stack -------------------------

def bert_embeddings() -> Figure:
    L = "attnbook.layers"
    fig = Figure(
        "bert_input_embeddings", 960, 420,
        "BERT's input: token + segment + position embeddings, then LayerNorm",
        "A sentence pair '[CLS] my dog is cute [SEP] he likes [SEP]' (ids of shape (B, S)) enters "
        "BERT through the library's Embeddings. For every position three vectors of width D are added: "
        "the token embedding (tokens: nn.Embedding over the vocabulary), the segment embedding "
        "(segments: nn.Embedding; segment A for the first sentence and its [SEP], B for the second), "
        "and the learned position embedding E_0 ... E_8 (positions: LearnedPositionalEmbedding). The sum, "
        "(B, S, D), goes through norm (nn.LayerNorm) and dropout, then into the stack of post-norm "
        "EncoderBlocks with GELU.",
    )
    fig.text(30, 28, fig.code("Bert.embeddings", "attnbook.models.bert.Bert:embeddings") + " = "
             + fig.code("Embeddings", f"{L}.Embeddings") + " with three tables and a LayerNorm",
             "title", anchor="start")
    words = ["[CLS]", "my", "dog", "is", "cute", "[SEP]", "he", "likes", "[SEP]"]
    x0, cw, bw = 280, 72, 62
    rows = ((300, "tokens: nn.Embedding", f"{L}.Embeddings:tokens", lambda j, w: f"E_{{{w}}}", "(B, S)"),
            (235, "segments: nn.Embedding", f"{L}.Embeddings:segments", lambda j, w: "E_{A}" if j < 6 else "E_{B}",
             "segment_ids (B, S)"),
            (170, "positions:", f"{L}.Embeddings:positions", lambda j, w: f"E_{{{j}}}", None))
    for j, word in enumerate(words):
        x = x0 + j * cw
        fig.text(x + bw / 2, 375, word, "code", size=12)
        fig.line([(x + bw / 2, 362), (x + bw / 2, 334)], "stream")
        for y, *_rest in rows:
            fig.rect(x, y, bw, 32, "module", rx=4)
        for y, _label, _path, name, _shape in rows:
            fig.text(x + bw / 2, y + 21, name(j, word), "math", size=12)
        fig.text(x + bw / 2, 292, "+", size=14)
        fig.text(x + bw / 2, 227, "+", size=14)
        fig.line([(x + bw / 2, 170), (x + bw / 2, 132)], "stream")
    for y, label, path, _name, shape in rows:
        fig.text(30, y + 14, fig.code(label, path), "code", anchor="start", size=12)
    fig.text(30, 184 + 16, fig.code("LearnedPositionalEmbedding", f"{L}.LearnedPositionalEmbedding"), "code",
             anchor="start", size=11)
    fig.shape(30, 335, "(B, S, D) each")
    fig.box(x0, 90, 9 * cw - 10, 40, fig.code("norm: nn.LayerNorm", f"{L}.Embeddings:norm") + ", then dropout",
            sub="(B, S, D)", size=12)
    fig.line([(x0 + 4.5 * cw - 5, 90), (x0 + 4.5 * cw - 5, 56)], "stream")
    fig.text(x0 + 4.5 * cw + 5, 62, fig.code("EncoderBlock", f"{L}.EncoderBlock")
             + " × L (post-norm, GELU)", "code", anchor="start", size=12)
    fig.legend(30, 408, ["stream"])
    return fig


def vit_patches() -> Figure:
    L = "attnbook.layers"
    fig = Figure(
        "vit_patches", 1000, 420,
        "ViT's input: an image cut into patches, each flattened and projected to a token",
        "An image of shape (B, C, H, W) is cut into N = 9 non-overlapping P x P patches, read row by row. "
        "patchify flattens each patch to C*P*P numbers, (B, N, C*P*P), and the PatchEmbedding's "
        "projection (nn.Linear, the same as a Conv2d with kernel = stride = P) maps each to width D, "
        "(B, N, D). PatchTokens puts a learned class token in front, (B, 1+N, D), and learned positions "
        "E_0 ... E_9 (LearnedPositionalEmbedding) are added, all inside the library's Embeddings. A stack "
        "of pre-norm EncoderBlocks follows; the head reads the class token's output, (B, classes).",
    )
    fig.text(30, 28, "ViT: image → " + fig.code("patchify", "attnbook.layers.patches.patchify") + " → "
             + fig.code("PatchEmbedding", "attnbook.layers.patches.PatchEmbedding") + " → tokens",
             "title", anchor="start")
    fig.code("", "attnbook.models.vit.ViT")
    # the image: 3 x 3 patches, numbered in reading order
    ix, iy, p = 40, 70, 44
    for r in range(3):
        for c in range(3):
            n = 3 * r + c
            fig.rect(ix + c * p, iy + r * p, p, p, fill=ROLES["stream"][0], stroke="#FFFFFF",
                     extra=f'fill-opacity="{fmt(0.15 + 0.07 * n)}" stroke-width="2"')
            fig.text(ix + c * p + p / 2, iy + r * p + p / 2 + 5, str(n + 1), "code", size=12)
    fig.shape(ix, iy + 3 * p + 18, "(B, C, H, W)")
    fig.text(ix, iy + 3 * p + 34, "P × P patches, N = 9", "note", anchor="start")
    # flattened patches
    fig.line([(ix + 3 * p + 6, iy + 66), (236, iy + 66)], "stream")
    fig.text(205, iy + 54, "patchify", "code", size=11)
    sx = 240
    for n in range(9):
        x = sx + n * 22
        fig.rect(x, iy + 30, 16, 72, fill=ROLES["stream"][0], stroke="#FFFFFF",
                 extra=f'fill-opacity="{fmt(0.15 + 0.07 * n)}"')
        fig.text(x + 8, iy + 24, str(n + 1), "code", size=10)
    fig.shape(sx, iy + 120, "(B, N, C·P·P)")
    fig.line([(sx + 9 * 22, iy + 66), (sx + 9 * 22 + 30, iy + 66)], "stream")
    fig.box(sx + 9 * 22 + 32, iy + 44, 228, 44,
            fig.code("projection: nn.Linear", "attnbook.layers.patches.PatchEmbedding:projection"),
            sub="C·P·P → D (a Conv2d, stride P)", size=12)
    fig.line([(sx + 9 * 22 + 260, iy + 66), (sx + 9 * 22 + 280, iy + 66)], "stream")
    fig.shape(sx + 9 * 22 + 284, iy + 70, "(B, N, D)")
    # tokens: class token + patches, plus positions
    tx, ty, tw = 262, 250, 44
    fig.line([(sx + 9 * 22 + 310, iy + 80), (sx + 9 * 22 + 310, 220), (tx + 1.5 * tw, 220), (tx + 1.5 * tw, ty - 2)],
             "stream")
    for k in range(10):
        x = tx + k * (tw + 5)
        fig.rect(x, ty, tw, 30, "module", rx=4)
        fig.text(x + tw / 2, ty + 20, "cls" if k == 0 else f"p_{{{k}}}", "code" if k == 0 else "math",
                 size=11 if k == 0 else 13)
        fig.text(x + tw / 2, ty + 48, "+", size=14)
        fig.rect(x, ty + 56, tw, 30, "module", rx=4)
        fig.text(x + tw / 2, ty + 76, f"E_{{{k}}}", "math", size=13)
    fig.text(tx - 8, ty + 20, fig.code("PatchTokens", "attnbook.layers.patches.PatchTokens"), "code", anchor="end",
             size=11)
    fig.text(tx - 8, ty + 76, fig.code("LearnedPositionalEmbedding", f"{L}.LearnedPositionalEmbedding"), "code",
             anchor="end", size=11)
    fig.text(tx - 8, ty + 92, "(1 + N, D)", "shape", anchor="end")
    fig.text(tx + tw / 2, ty + 104, "a learned class token in front", "note", anchor="start")
    end = tx + 10 * (tw + 5)
    fig.line([(end, ty + 43), (end + 24, ty + 43)], "stream")
    fig.text(end + 28, ty + 32, fig.code("Embeddings", f"{L}.Embeddings") + " → (B, 1+N, D)", "code", anchor="start",
             size=11)
    fig.text(end + 28, ty + 50, fig.code("EncoderBlock", f"{L}.EncoderBlock") + " × L", "code", anchor="start",
             size=11)
    fig.text(end + 28, ty + 66, "(pre-norm) → class", "note", anchor="start")
    fig.text(end + 28, ty + 80, "token → head (B, classes)", "note", anchor="start")
    fig.legend(30, 408, ["stream"])
    return fig


def gpt_stack() -> Figure:
    L = "attnbook.layers"
    gpt = "attnbook.models.gpt.GPT"
    blk = f"{L}.CausalBlock"
    fig = Figure(
        "gpt_stack", 900, 670,
        "GPT: a decoder-only stack of pre-norm causal blocks",
        "The library's GPT. Tokens (B, T) go through embed (Embeddings: token table plus "
        "LearnedPositionalEmbedding), shape (B, T, D), then L CausalBlocks (blocks). The residual stream "
        "runs straight up; each block adds two updates to it, pre-norm: x = x + self_attn(norm1(x)) with "
        "causal_mask (T, P+T), reading and extending a KVCache of the P positions already decoded "
        "(B, H, P, Dh), and x = x + feed_forward(norm2(x)). A final LayerNorm (final_norm) closes the stack, "
        "and the logits (B, T, V) are scores against the token table itself (tied output: "
        "x @ embed.tokens.weight transposed). There is no encoder and no cross-attention.",
    )
    fig.text(30, 28, fig.code("GPT", gpt) + ": pre-norm, x = x + sublayer(LayerNorm(x)); causal; tied output",
             "title", anchor="start")
    sx, bx, bw = 260, 400, 210
    fig.text(sx, 630, "tokens (B, T)", "code", size=12)
    fig.line([(sx, 612), (sx, 588)], "stream")
    fig.box(sx - 135, 546, 270, 40, fig.code("embed: Embeddings", f"{gpt}:embed", f"{L}.Embeddings"),
            sub="tokens + " + fig.code("LearnedPositionalEmbedding", f"{L}.LearnedPositionalEmbedding"), size=12)
    fig.shape(sx + 6, 530, "(B, T, D)")
    top = 510
    y, pluses = top - 10, []
    for norm, sub, sub_label, h in (("norm1", "self_attn", "MultiHeadAttention", 40),
                                    ("norm2", "feed_forward", "FeedForward: D→F→D", 40)):
        branch = y - 6
        fig.line([(sx, branch), (bx + bw / 2, branch), (bx + bw / 2, branch - 14)], "stream")
        nb = branch - 16
        fig.box(bx, nb - 30, bw, 30, fig.code(f"{norm}: LayerNorm", f"{blk}:{norm}"), size=12)
        sb = nb - 30 - 16
        if sub == "self_attn":
            for dxq, role in ((-50, "query"), (0, "key"), (50, "value")):
                fig.line([(bx + bw / 2, nb - 30), (bx + bw / 2, nb - 38), (bx + bw / 2 + dxq, nb - 38),
                          (bx + bw / 2 + dxq, sb + 2)], role)
        else:
            fig.line([(bx + bw / 2, nb - 30), (bx + bw / 2, sb + 2)], "stream")
        fig.box(bx, sb - h, bw, h, fig.code(sub, f"{blk}:{sub}"), sub=sub_label, size=12)
        plus = sb - h - 16
        fig.line([(bx + bw / 2, sb - h), (bx + bw / 2, plus), (sx + 11, plus)], "stream")
        fig.parts.append(f'<circle cx="{sx}" cy="{fmt(plus)}" r="9" fill="#FFFFFF" stroke="{ROLES["stream"][0]}" '
                         'stroke-width="1.6"/>')
        fig.text(sx, plus + 5, "+", size=14, weight="bold")
        pluses.append(plus)
        if sub == "self_attn":
            fig.line([(bx + bw + 70, sb - h / 2 - 8), (bx + bw + 2, sb - h / 2 - 8)], "mask")
            fig.text(bx + bw + 74, sb - h / 2 - 20, fig.code("causal_mask", f"{L}.causal_mask"), "code",
                     anchor="start", size=11)
            fig.text(bx + bw + 74, sb - h / 2 - 5, "(T, P+T)", "shape", anchor="start")
            fig.line([(bx + bw + 70, sb - h / 2 + 10), (bx + bw + 2, sb - h / 2 + 10)], "key")
            fig.text(bx + bw + 74, sb - h / 2 + 20, "past " + fig.code("KVCache", f"{L}.KVCache") + ": K, V",
                     "code", anchor="start", size=11)
            fig.text(bx + bw + 74, sb - h / 2 + 35, "(B, H, P, Dh)", "shape", anchor="start")
        y = plus - 9
    # the stream itself, drawn straight through the two additions
    fig.line([(sx, 546), (sx, pluses[0] + 11)], "stream")
    fig.line([(sx, pluses[0] - 9), (sx, pluses[1] + 11)], "stream")
    frame_top = pluses[1] - 40
    fig.frame(122, frame_top, 588, top - frame_top, fig.code("CausalBlock", blk) + " × L", "top-left")
    fig.text(702, frame_top + 17, fig.code("blocks", f"{gpt}:blocks"), "code", anchor="end", size=11, colour="#555555")
    fig.shape(sx + 6, frame_top - 20, "(B, T, D)")
    fig.text(sx - 12, 330, "residual stream", "note", anchor="end")
    fig.text(sx - 12, 344, "(B, T, D)", "shape", anchor="end")
    fig.line([(sx, pluses[1] - 9), (sx, 112)], "stream")
    fig.box(sx - 110, 80, 220, 30, fig.code("final_norm: LayerNorm", f"{gpt}:final_norm"), size=12)
    fig.line([(sx + 110, 95), (sx + 150, 95)], "stream")
    fig.text(sx + 155, 92, "logits = x @ embed.tokens.weight^{T}", "code", anchor="start", size=12)
    fig.text(sx + 155, 108, "(B, T, V), tied to the token table", "note", anchor="start")
    fig.legend(30, 660, ["query", "key", "value", "stream", "mask"])
    return fig


# --- Registry and command line ----------------------------------------------------------------

FIGURES = (ch01_encoder_decoder, ch02_additive_step, ch03_self_attention, ch04_heads, ch05_transformer,
           bert_embeddings, vit_patches, gpt_stack)


def build() -> dict[str, Figure]:
    """Every figure, by file name (without ``.svg``)."""
    figures = {}
    for make in FIGURES:
        fig = make()
        figures[fig.name] = fig
    return figures


def write(outdir: Path) -> list[Path]:
    """Write every figure into ``outdir``; return the paths written."""
    outdir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, fig in build().items():
        path = outdir / f"{name}.svg"
        path.write_text(fig.render(), encoding="utf-8", newline="\n")
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", nargs="?", type=Path, default=None,
                        help="where to write the SVG files (default: chapters/figures, from the repository root)")
    args = parser.parse_args(argv)
    if args.outdir is None:
        if not Path("chapters").is_dir():
            print("no chapters/ folder here: run from the repository root or name the output folder", file=sys.stderr)
            return 2
        args.outdir = Path("chapters/figures")
    for path in write(args.outdir):
        print(f"{path} ({path.stat().st_size / 1024:.1f} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
