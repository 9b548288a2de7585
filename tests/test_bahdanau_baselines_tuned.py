"""bahdanau_length.py --tuned-baselines: section 2.7's band and uniform weights at g2p_compare.py's tuned budget."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def test_tuned_baselines_smoke_run_uses_the_compare_recipe_for_each_kind_and_seed(tmp_path):
    out = tmp_path / "tuned.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bahdanau_length.py"), "--tuned-baselines", "--smoke",
                    "--jobs", "2", "--out", str(out)], check=True, capture_output=True, timeout=400)
    result = json.loads(out.read_text())
    assert {(r["model"], r["seed"]) for r in result["runs"]} == {(k, s) for k in ("band", "uniform") for s in (0, 1)}
    recipe = load_result("g2p_compare.json")["budget"]["gru_attention"]["recipe"]
    assert all(r["recipe"] == recipe and r["phase"] == "tuned_baseline" for r in result["runs"])
    # neither stand-in score has parameters: both models are exactly as large as each other
    assert len({r["parameters"] for r in result["runs"]}) == 1
    assert "--tuned-kinds band,uniform" in result["command"]


def test_committed_tuned_band_matches_the_compare_runs_it_is_set_beside():
    result = load_result("bahdanau_baselines_tuned.json")
    compare = load_result("g2p_compare.json")
    runs = [r for r in result["runs"] if r["model"] == "band"]
    assert sorted(r["seed"] for r in runs) == [0, 1, 2]
    recipe = compare["budget"]["gru_attention"]["recipe"]
    assert all(r["steps"] == compare["setup"]["budget_steps"] and r["recipe"] == recipe for r in runs)
    sizes = {r["model"]: r["parameters"] for r in compare["runs"]}
    assert all(r["parameters"] == sizes["gru"] for r in runs)  # no alignment parameters


def test_committed_band_at_the_dev_chosen_rate_has_three_seeds():
    """--tuned-rate 0.006: the band at the rate dev chose for GRU + attention, seeds 0-2, same budget."""
    result = load_result("bahdanau_baselines_tuned_0.006.json")
    assert result["setup"]["peak_lr"] == 0.006 and result["setup"]["steps"] == 1200
    runs = result["runs"]
    assert sorted(r["seed"] for r in runs) == [0, 1, 2] and {r["model"] for r in runs} == {"band"}
    assert all(r["peak_lr"] == 0.006 and 0 < r["test_wer"] < 1 for r in runs)
    assert "--tuned-rate 0.006" in result["command"]
