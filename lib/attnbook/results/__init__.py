"""Results measured outside the notebooks (by scripts in ``benchmarks/``), shipped with the package
so that a chapter can plot them anywhere, Colab included. Each file names the script that wrote it."""
from __future__ import annotations

import json
from importlib import resources


def load_result(name: str) -> dict:
    """The JSON result file ``name`` (e.g. ``"vit_data_efficiency.json"``) as a dict."""
    path = resources.files(__name__).joinpath(name)
    if not path.is_file():
        raise FileNotFoundError(f"no result file {name!r} in attnbook.results; run the benchmark that writes it")
    return json.loads(path.read_text(encoding="utf-8"))
