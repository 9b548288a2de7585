"""The style of the book's architecture diagrams and the SVG primitives every figure draws with.

One style for every figure:

- a box is a module; its label is the library's name for it (``EncoderBlock``, ``self_attn``...),
  in a monospace font; a dashed frame groups the modules of one library class;
- an arrow is a tensor; its label is the shape in the book's legend (``chapters/notation.md``:
  B, S, T, D, H, Dh, E, He, Hd, A, F, V);
- colours name roles, the same in every figure (``ROLES``): queries, keys, values, the stream
  (residual stream, embeddings, recurrent states), the context (what attention returns), the
  attention weights and the masks. Colours are the Okabe–Ito palette, readable with the common
  colour-vision deficiencies, and every role is also named in words.

A ``Figure`` records the library names it draws (``Figure.lib``; see ``Figure.code``) and renders
to SVG text with a ``<title>``, a ``<desc>`` (the alt text), a viewBox, system fonts only and no
links. Coordinates are written with at most one decimal (``fmt``), so the output is deterministic.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
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


def attributes(*pairs: tuple[str, str | None]) -> str:
    """``name="value"`` for every pair that has a value, in the order given."""
    return " ".join(f'{name}="{value}"' for name, value in pairs if value)


def rich(text: str) -> str:
    """``s_{i-1}`` and ``W^{Q}`` as tspans (sub- and superscripts), everything else escaped."""
    out, level, sub, stacked = [], 0, "", False
    for part in re.split(r"([_^]\{[^}]*\})", text):
        if not part:
            continue
        if part[0] in "_^" and part[1:2] == "{":
            shift = 4 if part[0] == "_" else -6
            # a superscript right after a subscript (x_{p}^{i}) stacks above it, as in LaTeX:
            # step back by about the subscript's width (0.55 em a character)
            dx = f' dx="-{0.55 * len(sub):.2f}em"' if part[0] == "^" and sub else ""
            out.append(f'<tspan{dx} dy="{shift - level}" font-size="75%">{escape(part[2:-1])}</tspan>')
            level, sub, stacked = shift, part[2:-1] if part[0] == "_" else "", bool(dx)
        else:
            dy = f' dy="{-level}"' if level else ""
            dy = ' dx="0.3em"' + dy if stacked else dy  # clear of the wider of the two scripts
            out.append(f"<tspan{dy}>{escape(part)}</tspan>" if dy else escape(part))
            level, sub, stacked = 0, "", False
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
        attrs = attributes(("x", fmt(x)), ("y", fmt(y)), ("text-anchor", anchor if anchor != "start" else None),
                           ("class", cls), ("font-size", fmt(size + FONT_BUMP) if size else None), ("fill", colour),
                           ("font-weight", weight))
        self.parts.append(f"<text {attrs}>{rich(label)}</text>")

    def rect(self, x: float, y: float, w: float, h: float, cls: str = "", fill: str | None = None,
             stroke: str | None = None, rx: float = 0, extra: str = "") -> None:
        attrs = attributes(("x", fmt(x)), ("y", fmt(y)), ("width", fmt(w)), ("height", fmt(h)),
                           ("rx", fmt(rx) if rx else None), ("class", cls), ("fill", fill), ("stroke", stroke))
        self.parts.append(f"<rect {attrs} {extra}/>" if extra else f"<rect {attrs}/>")

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

    def circle(self, x: float, y: float, r: float, role: str) -> None:
        """A white disc outlined in the role's colour (a node on a line, such as a residual sum)."""
        self.roles.add(role)
        self.parts.append(f'<circle cx="{fmt(x)}" cy="{fmt(y)}" r="{fmt(r)}" fill="#FFFFFF" '
                          f'stroke="{ROLES[role][0]}" stroke-width="1.6"/>')

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

    def legend(self, x: float, y: float, roles: list[str] | None = None,
               meanings: dict[str, str] | None = None) -> None:
        """A one-line key of the roles used in the figure; ``meanings`` renames a role for this figure
        (an RNN has recurrent states, no residual stream)."""
        used = [r for r in ROLES if r in (roles if roles is not None else self.roles)]
        for role in used:
            colour, meaning = ROLES[role]
            meaning = (meanings or {}).get(role, meaning)
            dash = ' stroke-dasharray="5 3"' if role == "mask" else ""
            self.parts.append(
                f'<line x1="{fmt(x)}" y1="{fmt(y)}" x2="{fmt(x + 22)}" y2="{fmt(y)}" stroke="{colour}" '
                f'stroke-width="3"{dash}/>'
            )
            self.text(x + 27, y + 4, meaning, "note", anchor="start")
            # a renamed role is measured at the size it is drawn (13 + FONT_BUMP); the others keep
            # the older estimate so that existing figures do not move
            x += 27 + text_width(meaning, 13 + FONT_BUMP if role in (meanings or {}) else 11) + 18

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
