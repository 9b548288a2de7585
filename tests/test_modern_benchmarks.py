"""Chapter 9's two benchmarks run (smoke mode), and their committed results are complete: the
ablation has every variant with 8 seeds at one budget and matched sizes; the roofline has every
implementation at every length and head width."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ["gpt", "+rmsnorm", "+swiglu", "+rotary", "+gqa", "modern"]


def _run(script, *args, timeout=300):
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], check=True,
                          capture_output=True, text=True, timeout=timeout)


def test_ablation_smoke_run_and_resume(tmp_path):
    first = _run("modern_ablation.py", "--smoke", "--seeds", "0", "--variants", "gpt", "modern")
    rows = [json.loads(line) for line in first.stdout.splitlines() if line.startswith("{")]
    assert [r["variant"] for r in rows] == ["gpt", "modern"]
    assert "loss_by_position_256" in rows[1] and "loss_by_position_256" not in rows[0]
    assert len(rows[0]["loss_by_position_64"]) == 64  # a learned table: its own 64 positions
    log = tmp_path / "first.log"
    log.write_text(first.stdout)
    out = tmp_path / "result.json"
    again = _run("modern_ablation.py", "--smoke", "--seeds", "0", "--variants", "gpt", "modern",
                 "--resume", str(log), "--out", str(out))
    assert not [line for line in again.stdout.splitlines() if line.startswith("{")]  # nothing re-run
    assert json.loads(out.read_text())["runs"] == rows


def test_committed_ablation_is_complete_and_fair():
    result = load_result("modern_ablation.json")
    runs = result["runs"]
    assert {(r["variant"], r["seed"]) for r in runs} == {(v, s) for v in VARIANTS for s in range(8)}
    gpt = next(r["parameters"] for r in runs if r["variant"] == "gpt")
    for r in runs:
        assert abs(r["parameters"] - gpt) / gpt < 0.002, r  # same size to within 0.2%
        assert 1 < r["held_out_perplexity"] < 2 * result["bigram"]["held_out_perplexity"]
        if r["variant"] in ("+rotary", "modern"):
            assert len(r["loss_by_position_256"]) == 256
    for v in VARIANTS:  # every model's mean beats the bigram (one seed may not)
        mean = sum(r["held_out_perplexity"] for r in runs if r["variant"] == v) / 8
        assert mean < result["bigram"]["held_out_perplexity"], v
    assert result["recipe"]["steps"] == 600 and result["held_out_targets"] > 80_000
    counts = [result[k]["held_out_perplexity"] for k in ("unigram", "bigram", "trigram")]
    counts += [result["kneser_ney"][n]["held_out_perplexity"] for n in ("3", "4", "5")]
    assert counts == sorted(counts, reverse=True)  # each counting baseline beats the one before


def test_roofline_smoke_and_committed_grid(tmp_path):
    out = tmp_path / "roof.json"
    _run("attention_roofline.py", "--smoke", "--repeats", "1", "--out", str(out), timeout=120)
    smoke = json.loads(out.read_text())
    assert {r["impl"] for r in smoke["rows"]} == {"explicit", "sdpa", "tiled"}
    result = load_result("attention_roofline.json")
    grid = {(r["impl"], r["T"], r["Dh"]) for r in result["rows"]}
    assert grid == {(i, T, d) for i in ("explicit", "sdpa", "tiled") for T in (128, 256, 512, 1024, 2048)
                    for d in (16, 64, 128)}
    assert all(0 < r["fraction_of_peak"] < 1.5 for r in result["rows"])
    assert result["matmul_peak_gflops"] > 0 and result["copy_bandwidth_gbs"] > 0


def test_committed_longer_budget_runs():
    result = load_result("modern_ablation_steps2400.json")
    assert result["recipe"]["steps"] == 2400
    assert {(r["variant"], r["seed"], r["steps"]) for r in result["runs"]} == {
        (v, 0, 2400) for v in ("gpt", "+rotary", "modern")}


def test_committed_position_controls():
    result = load_result("modern_ablation_positions.json")
    runs = result["runs"]
    assert {r["variant"] for r in runs} == {"sinusoidal", "nope", "sinusoidal-rms1"}
    seeds = {v: {r["seed"] for r in runs if r["variant"] == v} for v in ("sinusoidal", "nope", "sinusoidal-rms1")}
    assert seeds["nope"] == seeds["sinusoidal"] == seeds["sinusoidal-rms1"]
    assert all(r["d_ff"] == 272 and r["steps"] == 600 for r in runs)  # rotary's width: no table either


def test_committed_interpolation_runs_match_the_ablation():
    """The position-interpolation file holds rotary runs of the ablation's recipe: the plain curve
    of each is the ablation's own run of that seed (same training), the interpolated one differs."""
    runs = load_result("modern_ablation_interpolation.json")["runs"]
    ablation = {(r["variant"], r["seed"]): r for r in load_result("modern_ablation.json")["runs"]}
    assert len(runs) >= 3 and {r["variant"] for r in runs} == {"+rotary"}
    for r in runs:
        assert len(r["loss_by_position_256"]) == len(r["loss_by_position_256_interpolated"]) == 256
        assert r["loss_by_position_256"] != r["loss_by_position_256_interpolated"]
        same = ablation[(r["variant"], r["seed"])]
        assert abs(r["held_out_perplexity"] - same["held_out_perplexity"]) < 0.05 * same["held_out_perplexity"]
