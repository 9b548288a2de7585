"""Colab editions of the chapters: the same notebooks with MyST-only syntax turned into plain
Markdown that Colab (and any CommonMark renderer) shows as the HTML book does.

Regenerate every edition (run this after changing a chapter)::

    python -m tools.colab

``tests/test_colab.py`` fails when a committed edition differs from what this writes, or when
an edition still holds a MyST directive, role or option line. See ``edition.py``.
"""
