"""Chapter 5's two benchmark scripts run end to end (smoke settings, seconds), and their committed
results hold what the chapter reads: pre- and post-norm with the same recipe over three seeds, the
size and dropout timings, and KV-cache speed-ups with identical tokens."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
NORM = ("post-norm, linear decay, 3e-3", "pre-norm, linear decay, 3e-3")


def _check_recipes(result: dict, seeds: list[int]) -> None:
    variants = result["setup"]["variants"]
    post, pre = (variants[name] for name in NORM)
    assert (post["norm_first"], pre["norm_first"]) == (False, True)
    assert {k: v for k, v in post.items() if k != "norm_first"} == {k: v for k, v in pre.items() if k != "norm_first"}
    for name in NORM:
        cell = result["norm"][name]
        assert cell["seeds"] == seeds
        for key in ("dev_wer", "test_wer", "final_loss"):
            assert len(cell[key]["values"]) == len(seeds)
            assert cell[key]["min"] <= cell[key]["mean"] <= cell[key]["max"]
    size = result["size"]
    assert size["parameters"]["128"] > size["parameters"]["64"]
    assert size["ratio_128_over_64"] > 0 and size["ratio_dropout_over_none"] > 0


def test_recipes_smoke_run_writes_both_placements(tmp_path):
    out = tmp_path / "recipes.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "g2p_transformer_recipes.py"), "--smoke", "--jobs", "2",
                    "--seeds", "0", "1", "--out", str(out)], check=True, capture_output=True, timeout=300)
    _check_recipes(json.loads(out.read_text()), [0, 1])


def test_committed_recipes_have_three_seeds_per_placement():
    result = load_result("g2p_transformer_recipes.json")
    _check_recipes(result, [0, 1, 2])
    for name in NORM:
        assert all(0.3 < v < 0.7 for v in result["norm"][name]["dev_wer"]["values"])


def test_kv_cache_smoke_run_checks_identical_tokens(tmp_path):
    out = tmp_path / "kv.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "kv_cache_speed.py"), "--device", "cpu", "--repeats",
                    "1", "--new-tokens", "4", "--batches", "2", "--out", str(out)], check=True, capture_output=True,
                   timeout=300)
    runs = json.loads(out.read_text())["runs"]
    assert [r["batch"] for r in runs] == [2] and runs[0]["identical_tokens"] is True


def test_committed_kv_cache_speedups():
    result = load_result("kv_cache_speed.json")
    assert result["conditions"] and "command" in result
    assert {r["batch"] for r in result["runs"]} == {32, 128}
    for run in result["runs"]:
        assert run["identical_tokens"] is True and run["new_tokens"] == 64
        assert run["speedup"] > 1.0
