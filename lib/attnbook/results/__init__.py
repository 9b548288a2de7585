"""Results measured outside the notebooks, by the scripts in ``benchmarks/``: their one home.

The rule: every benchmark script writes its result file here (``lib/attnbook/results/NAME.json``,
through ``benchmarks/common.py``), and the log of the run that made a committed result is kept
beside it (``NAME.log``). The JSON files ship with the package (``package-data`` in
``pyproject.toml``), so a chapter reads them anywhere, Colab included, with
``load_result("NAME.json")``; the logs stay in the repository. Each result file names the script
that wrote it, and where the script records them, the command and the machine.
"""
from __future__ import annotations

import json
from importlib import resources


def load_result(name: str) -> dict:
    """The JSON result file ``name`` (e.g. ``"vit_data_efficiency.json"``) as a dict."""
    path = resources.files(__name__).joinpath(name)
    if not path.is_file():
        raise FileNotFoundError(f"no result file {name!r} in attnbook.results; run the benchmark that writes it")
    return json.loads(path.read_text(encoding="utf-8"))
