"""Colab editions of the chapters: the same notebooks with MyST-only syntax turned into plain
Markdown that Colab (and any CommonMark renderer) shows as the HTML book does.

- ``python -m tools.colab``: regenerate every edition in ``colab/`` (run it after changing a
  chapter; ``tests/test_colab.py`` fails when a committed edition differs from what it writes,
  or when an edition still holds a MyST directive, role, option line or target). ``edition.py``.
- ``python -m tools.colab --fix-chapters``: first set the kernelspec that JupyterLab writes and
  the one solution placeholder wording in the chapters (``chapter_fixes.py``).
- ``python -m tools.colab.browser_check``: every chapter in JupyterLab (with jupyterlab-myst) and
  every Colab edition rendered, checked in headless Chromium (``browser_check.py``).
- ``launch_button.py``: the Sphinx handler that points the HTML book's Colab button at the edition.
"""
