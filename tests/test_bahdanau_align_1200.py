"""Chapter 2: benchmarks/bahdanau_align_1200.py scores the 1,200-step model's alignment."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
KEYS = ("learned", "global_band", "per_word_band")


def test_committed_result_is_seed_0_at_1200_steps_of_the_page_recipe():
    result = load_result("bahdanau_align_1200.json")
    assert "bahdanau_align_1200.py" in result["command"]
    (run,) = result["runs"]
    assert run["seed"] == 0 and run["steps"] == 1200 and run["test_words"] == 5825
    # the same training as bahdanau_page_1200.py's seed 0
    page = {r["seed"]: r for r in load_result("bahdanau_page_1200.json")["runs"]}
    assert abs(run["test_wer"] - page[0]["test_wer"]) < 0.01
    a = run["alignment"]
    assert a["test_words"] == 486 and a["aligned_phonemes"] == 3072
    for key in KEYS:
        assert 0.0 <= a[key]["exact"] <= a[key]["within_one"] <= 1.0


def test_smoke_run_writes_the_scores(tmp_path):
    out = tmp_path / "align.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bahdanau_align_1200.py"),
                    "--smoke", "--out", str(out)], check=True, capture_output=True, timeout=600)
    (run,) = json.loads(out.read_text())["runs"]
    assert run["steps"] == 3
    # the bands do not depend on the model: the values the chapter prints for them
    assert abs(run["alignment"]["per_word_band"]["exact"] - 0.757) < 0.001
    assert abs(run["alignment"]["global_band"]["exact"] - 0.603) < 0.001
