"""Sphinx extension: the HTML book's Colab button opens a chapter's Colab edition.

sphinx-book-theme builds the button from the page's path (``.../blob/main/chapters/NN.ipynb``);
this handler, run after the theme's, points it at ``colab/NN.ipynb`` when that edition exists.
Loaded by ``_config.yml`` (``sphinx.local_extensions``).
"""
from __future__ import annotations

from pathlib import PurePosixPath

from tools.colab.edition import CHAPTERS_DIR, EDITIONS_DIR, edition_path

THEME_PRIORITY = 501  # sphinx-book-theme adds the launch buttons at this priority


def colab_edition_url(url: str) -> str:
    """``url`` of a chapter in Colab, turned into the URL of its edition (others unchanged)."""
    marker = f"/{CHAPTERS_DIR.name}/"
    head, sep, name = url.rpartition(marker)
    if not sep or "/" in name or not edition_path(CHAPTERS_DIR / name).is_file():
        return url
    return f"{head}/{EDITIONS_DIR.name}/{PurePosixPath(name).name}"


def point_colab_at_editions(app, pagename, templatename, context, doctree) -> None:
    for group in context.get("header_buttons", []):
        if group.get("label") != "launch-buttons":
            continue
        for button in group.get("buttons", []):
            if button.get("text") == "Colab" and "url" in button:
                button["url"] = colab_edition_url(button["url"])


def setup(app):
    app.connect("html-page-context", point_colab_at_editions, priority=THEME_PRIORITY + 1)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
