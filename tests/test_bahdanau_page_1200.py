"""Chapter 2: benchmarks/bahdanau_page_1200.py runs the page's own recipe at 1,200 steps."""
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result
from attnbook.tasks.g2p import G2PRecipe

ROOT = Path(__file__).resolve().parents[1]


def test_committed_results_are_the_page_recipe_for_three_seeds():
    result = load_result("bahdanau_page_1200.json")
    assert "bahdanau_page_1200.py" in result["command"]
    runs = sorted(result["runs"], key=lambda r: r["seed"])
    assert [r["seed"] for r in runs] == [0, 1, 2]
    for r in runs:
        # the page's recipe, only the steps (and the seed) changed
        assert r["recipe"] == dataclasses.asdict(G2PRecipe(steps=1200, seed=r["seed"]))
        assert r["test_words"] == 5825 and 0.2 < r["test_wer"] < 0.7


def test_smoke_run_writes_every_seed(tmp_path):
    out = tmp_path / "page_1200.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bahdanau_page_1200.py"), "--smoke",
                    "--out", str(out)], check=True, capture_output=True, timeout=600)
    result = json.loads(out.read_text())
    assert [r["seed"] for r in result["runs"]] == [0, 1, 2]
    assert all(r["recipe"]["steps"] == 3 for r in result["runs"])
