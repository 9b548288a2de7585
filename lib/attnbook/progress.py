"""A tqdm progress bar whose stored notebook output is one clean final line.

In a notebook the bar is a display that is updated in place (``update_display_data``), so a
saved notebook keeps only its last state, not hundreds of carriage-return frames. Elsewhere
(a script, pytest) it is an ordinary tqdm bar on stderr.
"""
from __future__ import annotations

import sys

from tqdm import tqdm


class _DisplayWriter:
    """File-like object that shows the latest line tqdm wrote in one updatable display."""

    def __init__(self) -> None:
        from IPython.display import display

        self._handle = display({"text/plain": ""}, raw=True, display_id=True)
        self._last = ""

    def write(self, text: str) -> None:
        line = text.replace("\r", "").strip()
        if line and line != self._last:
            self._last = line
            self._handle.update({"text/plain": line}, raw=True)

    def flush(self) -> None:
        pass


def _in_notebook() -> bool:
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    ip = shell.get_ipython()
    return ip is not None and "IPKernelApp" in getattr(ip, "config", {})


def progress_bar(total: int, desc: str, enabled: bool = True) -> tqdm:
    """A tqdm bar of ``total`` steps (disabled when ``enabled`` is False)."""
    if not enabled:
        return tqdm(total=total, disable=True)
    if _in_notebook():
        return tqdm(total=total, desc=desc, file=_DisplayWriter(), mininterval=0.5, ascii=False,
                    dynamic_ncols=False, ncols=100)
    return tqdm(total=total, desc=desc, file=sys.stderr, mininterval=1.0)
