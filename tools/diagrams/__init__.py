"""The book's architecture diagrams, written as plain SVG text (no drawing library).

Usage, from the repository root: ``python -m tools.diagrams [OUTDIR]`` (default: ``chapters/figures``).
The output is deterministic: running it twice writes byte-identical files, and
``tests/test_diagrams.py`` checks that the committed files are exactly what this script writes.

``svg`` holds the one style and the drawing primitives (``Figure``); every other module draws one
figure: its ``draw()`` returns a ``Figure`` named after the SVG file. Add a figure as a new module
and list it in ``FIGURES``. Each figure records the library names it draws (``Figure.lib``); the
test imports them, so a rename in the library fails the test instead of leaving a stale picture.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import (bert_embeddings, bert_pretrain_transfer, ch01_bottleneck_tests, ch01_encoder_decoder, ch01_gru_cell, ch02_additive_step, ch03_one_query, ch03_positions, ch03_self_attention, ch03_two_layer, ch04_heads,
               ch04_heads_concat,
               ch05_kv_cache, ch05_transformer, gpt_finetune, gpt_induction, gpt_shift, gpt_stack, gqa_heads, modern_block, t5_span_corruption,
               t5_stack, tiled_attention, vit_model, vit_patches)
from .svg import Figure

FIGURES = (ch01_encoder_decoder.draw, ch01_gru_cell.draw, ch01_bottleneck_tests.draw, ch02_additive_step.draw, ch03_one_query.draw, ch03_self_attention.draw, ch03_self_attention.draw_masked,
           ch03_positions.draw, ch03_two_layer.draw,
           ch04_heads_concat.draw, ch04_heads.draw,
           ch05_transformer.draw, ch05_kv_cache.draw, bert_embeddings.draw, bert_pretrain_transfer.draw, vit_patches.draw, vit_model.draw, gpt_shift.draw,
           gpt_stack.draw, gpt_finetune.draw, gpt_induction.draw,
           modern_block.draw, gqa_heads.draw, tiled_attention.draw, t5_stack.draw, t5_span_corruption.draw)


def build() -> dict[str, Figure]:
    """Every figure, by file name (without ``.svg``)."""
    figures = {}
    for draw in FIGURES:
        fig = draw()
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
    parser = argparse.ArgumentParser(prog="python -m tools.diagrams", description=__doc__.splitlines()[0])
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
