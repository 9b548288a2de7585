"""The G2P experiment scripts run end to end (smoke mode, seconds), and their committed results are complete.

The chapters print these files' numbers in cells that nbval re-runs, and ``test_book`` checks that
every percentage in the prose appears in a stored output: so a figure quoted in a chapter from a
results file equals the file.
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("gru", "gru_attention", "transformer")


def _run(script: str, out: Path, *extra: str) -> dict:
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--smoke", "--jobs", "2", "--out", str(out), *extra],
                   check=True, capture_output=True, timeout=300)
    return json.loads(out.read_text())


def _check_compare(result: dict, seeds: int) -> None:
    recipes = result["setup"]["recipes"]
    tune = [r for r in result["runs"] if r["phase"] == "tune"]
    assert {(r["model"], r["recipe"]) for r in tune} == {(m, k) for m in MODELS for k in recipes}
    for m in MODELS:
        best = min((r for r in tune if r["model"] == m), key=lambda r: r["dev_wer"])
        assert result["best_recipe"][m] == best["recipe"]
        cell = result["budget"][m]
        assert cell["seeds"] == seeds and cell["recipe"] == best["recipe"]
        assert cell["steps"] == [result["setup"]["budget_steps"]]
        assert cell["test_wer"]["min"] <= cell["test_wer"]["mean"] <= cell["test_wer"]["max"]
        by_length = cell["test_wer_by_length"]
        assert list(by_length) == list(best["test_by_length"])
        assert sum(b["words"] for b in by_length.values()) == sum(b["words"] for b in best["test_by_length"].values())
        assert result["equal_time"][m]["seeds"] == seeds
        assert result["equal_time"][m]["steps"] == [result["speed"]["equal_time_steps"][m]]
        converged = result["converged"][m]
        assert converged["steps"] == result["setup"]["converge_steps"] and converged["recipe"] == best["recipe"]
        assert converged["dev_sample_curve"][-1][0] == converged["steps"]
    for r in result["runs"]:
        assert 0.0 <= r["test_wer"] <= 1.0 and r["test_per"] >= 0.0
        sizes = [b["words"] for b in r["test_by_length"].values()]
        assert all(n > 0 for n in sizes)
    fastest = max(result["speed"]["steps_per_second"].values())
    assert result["speed"]["equal_time_seconds"] == pytest.approx(result["setup"]["budget_steps"] / fastest, abs=0.1)


def test_g2p_compare_smoke_run_writes_every_phase(tmp_path):
    result = _run("g2p_compare.py", tmp_path / "compare.json")
    _check_compare(result, seeds=2)
    _check_lr_and_matched(result)  # the lr and matched phases (one seed each in a smoke run)
    assert "transformer_matched" in result["matched"]


def test_committed_g2p_comparison_has_three_seeds_and_every_phase():
    result = load_result("g2p_compare.json")
    _check_compare(result, seeds=3)
    assert result["setup"]["budget_steps"] == 1200
    total = sum(b["words"] for b in result["converged"]["transformer"]["test_by_length"].values())
    assert total > 5000  # the whole test split


def _check_length(result: dict, seeds: int) -> None:
    assert set(result["by_length"]) == {"gru", "gru_attention"}
    for model, buckets in result["by_length"].items():
        assert list(buckets) == result["setup"]["buckets"]
        for cell in buckets.values():
            assert len(cell["per_by_seed"]) == seeds
            low, high = cell["pooled_interval_95"]
            assert low <= high
            assert min(cell["per_by_seed"]) <= cell["mean_per"] <= max(cell["per_by_seed"])
    assert {(r["model"], r["seed"]) for r in result["runs"]} == {
        (m, s) for m in ("gru", "gru_attention") for s in result["setup"]["seeds"]}


def test_bahdanau_length_smoke_run_writes_every_bucket(tmp_path):
    _check_length(_run("bahdanau_length.py", tmp_path / "length.json"), seeds=2)


def test_committed_length_results_have_three_seeds_and_100_inputs_per_bucket():
    result = load_result("bahdanau_length.json")
    _check_length(result, seeds=3)
    assert result["setup"]["buckets"][-1] == "50-59"
    assert all(cell["inputs"] >= 100 for buckets in result["by_length"].values() for cell in buckets.values())


def test_bahdanau_length_smoke_run_with_checkpoints(tmp_path):
    result = _run("bahdanau_length.py", tmp_path / "length.json", "--checkpoints", "2,4")
    curve = result["checkpoints"]
    assert curve["model"] == "gru" and curve["steps"][:2] == [2, 4]
    assert all(len(v) == len(curve["steps"]) for v in curve["per_by_length"].values())


def test_bahdanau_length_smoke_run_with_a_long_run(tmp_path):
    """--long logs one row per checkpoint and summarises the PER by bucket at each."""
    result = _run("bahdanau_length.py", tmp_path / "length.json", "--long", "4")
    longer = result["long_run"]
    assert longer["model"] == "gru" and longer["steps"] == [2, 4] and len(longer["loss"]) == 2
    assert all(len(v) == 2 for v in longer["per_by_length"].values())
    assert "--long 4" in result["command"]


def test_bahdanau_scores_smoke_run(tmp_path):
    """--scores: both scores for every seed, with the statistics section 2.8 prints."""
    result = _run("bahdanau_length.py", tmp_path / "scores.json", "--scores")
    assert {(r["score"], r["seed"]) for r in result["runs"]} == {
        (k, s) for k in ("additive", "bilinear", "scaled_bilinear", "bilinear_slow_w", "bilinear_small_init")
        for s in result["setup"]["seeds"]}
    assert all(0 < r["sharpness"] <= 1 and r["score_spread"] >= 0 for r in result["runs"])


def test_bahdanau_baselines_smoke_run(tmp_path):
    """--baselines: the four models for every seed; all but the learned one share Chapter 1's size."""
    result = _run("bahdanau_length.py", tmp_path / "baselines.json", "--baselines")
    runs = {(r["score"], r["seed"]): r for r in result["runs"]}
    assert set(runs) == {(k, s) for k in ("none", "uniform", "band", "additive") for s in result["setup"]["seeds"]}
    sizes = {k: r["parameters"] for (k, _), r in runs.items()}
    assert sizes["none"] == sizes["uniform"] == sizes["band"] < sizes["additive"]
    assert all("13+" in r["test_wer_by_length"] for r in result["runs"])


def test_band_score_follows_the_diagonal_and_resets_per_batch():
    """Step i's largest weight sits on letter round(i / ratio); ``prepare`` restarts the count."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bahdanau_length as script
    import torch
    band = script.BandScore(ratio=2.0, sigma=1.0)  # 2 phonemes per letter: half a letter a step
    keys, query = torch.zeros(2, 6, 4), torch.zeros(2, 1, 3)
    for _ in range(2):  # two batches: the counter restarts
        prepared = band.prepare(keys)
        tops = [int(band.score(query, prepared)[0, 0].argmax()) for _ in range(8)]
        assert tops == [0, 0, 1, 1, 2, 2, 3, 3]  # centres 0, .5, 1, 1.5, ...: ties go to the lower letter
    uniform = script.UniformScore()
    assert torch.equal(uniform.score(query, uniform.prepare(keys)), torch.zeros(2, 1, 6))


def test_scaled_bilinear_scores_are_the_bilinear_scores_over_sqrt_ds():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bahdanau_length as script
    import torch
    from attnbook.env import seed_everything
    seed_everything(0)
    scaled = script.scaled_bilinear_model(10, 12, smoke=True)
    q, k = torch.randn(2, 3, scaled.decoder.score.query_dim), torch.randn(2, 5, scaled.decoder.score.key_dim)
    prepared = scaled.decoder.score.prepare(k)
    unscaled = q @ prepared.transpose(1, 2)
    assert torch.allclose(scaled.decoder.score.score(q, prepared), unscaled / scaled.decoder.score.query_dim ** 0.5)


def test_committed_length_results_show_the_curve_during_training():
    curve = load_result("bahdanau_length.json")["checkpoints"]
    assert curve["steps"] == [250, 500, 750, 1500]
    assert list(curve["per_by_length"]) == load_result("bahdanau_length.json")["setup"]["buckets"]


def test_length_intervals_resample_inputs_not_answers():
    """Three identical seeds are one seed's evidence: resampling inputs gives the interval of one seed
    (pooling the 3 x n answers as independent would narrow it by about sqrt(3))."""
    import random
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bahdanau_length as script

    test = [("a" * (5 + 10 * (i % 6)), ("AH",) * (2 + i % 3)) for i in range(60)]  # every bucket
    errors = [random.Random(i).randrange(3) for i in range(60)]
    rows = [{"model": m, "seed": s, "errors": errors} for m in script.MODELS for s in (0, 1, 2)]
    one = [{"model": m, "seed": 0, "errors": errors} for m in script.MODELS]
    three = script.summarize(rows, test)["gru"]["1-9"]["pooled_interval_95"]
    single = script.summarize(one, test)["gru"]["1-9"]["pooled_interval_95"]
    assert three == single


def _check_lr_and_matched(result: dict) -> None:
    """The lr phase: every model at every peak rate run on the same seeds, the rate chosen on dev;
    the matched phase (when run): the wider Transformer beside the chapter's, same recipe; extra
    converge seeds (when run) summarised over every seed."""
    setup = result["setup"]
    alt_rates = setup.get("alt_peak_lrs", [setup["alt_peak_lr"]])
    rates = {f"{setup['peak_lr']:g}"} | {f"{x:g}" for x in alt_rates}
    for m in MODELS:
        cell = result["lr_sweep"][m]
        assert set(cell["by_peak_lr"]) == rates
        for at in cell["by_peak_lr"].values():
            assert at["seeds"] == setup["lr_seeds"] and len(at["dev_wer"]["values"]) == len(setup["lr_seeds"])
        assert cell["chosen_on_dev"] == min(cell["by_peak_lr"], key=lambda k: cell["by_peak_lr"][k]["dev_wer"]["mean"])
        alt = [r for r in result["runs"] if r["phase"] == "lr" and r["model"] == m]
        assert {r["peak_lr"] for r in alt} == set(alt_rates)
        assert {r["seed"] for r in alt} == set(setup["lr_seeds"])
        assert all(r["recipe"] == result["best_recipe"][m] for r in alt)
    matched = result["matched"]
    assert matched["transformer"] == {k: v for k, v in result["budget"]["transformer"].items()}
    if "transformer_matched" in matched:
        wide = matched["transformer_matched"]
        assert wide["seeds"] == len(setup["matched_seeds"]) and wide["recipe"] == result["best_recipe"]["transformer"]
        assert wide["parameters"] > matched["transformer"]["parameters"]
    for rate in setup.get("matched_rates", []):
        at = result["lr_sweep_matched"]["transformer_matched"]["by_peak_lr"][f"{rate:g}"]
        assert at["seeds"] == setup["lr_seeds"]
    for m, cell in result.get("converged_seeds", {}).items():
        assert cell["seeds"] == len(setup.get("converge_seeds", [0])) and cell["steps"] == [setup["converge_steps"]]


def test_committed_g2p_comparison_has_the_lr_check():
    result = load_result("g2p_compare.json")
    _check_lr_and_matched(result)
    assert result["setup"]["alt_peak_lr"] == 6e-3 and 0 in result["setup"]["lr_seeds"]


def _check_ablation(result: dict, seeds: list[int]) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import g2p_compare

    assert set(result["variants"]) == set(g2p_compare.ABLATIONS)
    compare = load_result("g2p_compare.json")
    assert result["setup"]["recipe"] == compare["best_recipe"]["transformer"]
    assert f"{result['setup']['peak_lr']:g}" == compare["lr_sweep"]["transformer"]["chosen_on_dev"]
    assert result["base"]["seeds"] == seeds
    for kind, cell in result["variants"].items():
        assert cell["seeds"] == seeds
        assert cell["test_wer"]["min"] <= cell["test_wer"]["mean"] <= cell["test_wer"]["max"]
    runs = {(r["model"], r["seed"]): r for r in result["runs"]}
    assert set(runs) == {(k, s) for k in g2p_compare.ABLATIONS for s in seeds}
    assert all(r["steps"] == result["setup"]["steps"] and r["peak_lr"] == result["setup"]["peak_lr"]
               for r in runs.values())
    params = {k: result["variants"][k]["parameters"] for k in result["variants"]}
    assert params["transformer_1layer"] < params["transformer_1head"]  # fewer layers, fewer weights
    assert params["transformer_learned_pos"] > params["transformer_1head"]  # heads cost nothing; a table does


def test_g2p_ablation_smoke_run_changes_one_thing_each(tmp_path):
    _check_ablation(_run("g2p_ablation.py", tmp_path / "ablation.json"), seeds=[0])


def test_committed_g2p_ablation_has_every_variant_on_two_seeds():
    result = load_result("g2p_ablation.json")
    _check_ablation(result, seeds=[0, 1])
    assert result["setup"]["steps"] == 1200 and result["base"]["parameters"] == 238507


def test_ablated_models_change_only_what_they_say():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import g2p_compare

    base = g2p_compare.build("transformer", 30, 40, smoke=False)
    one_head = g2p_compare.build("transformer_1head", 30, 40, smoke=False)
    shallow = g2p_compare.build("transformer_1layer", 30, 40, smoke=False)
    learned = g2p_compare.build("transformer_learned_pos", 30, 40, smoke=False)
    assert one_head.config.num_heads == 1 and base.config.num_heads == 4
    assert sum(p.numel() for p in one_head.parameters()) == sum(p.numel() for p in base.parameters())
    assert len(shallow.encoder_blocks) == len(shallow.decoder_blocks) == 1
    assert g2p_compare.build("transformer_dropout", 30, 40, smoke=False).config.dropout == 0.1
    assert base.config.dropout == 0.0 and one_head.config.dropout == 0.0
    table = learned.src_embeddings.positions.embedding.weight
    assert table.requires_grad and abs(table.std().item() - 2 ** -0.5) < 0.05
    assert not any(p.requires_grad for p in base.src_embeddings.positions.parameters())


def test_score_controls_split_the_division_in_two():
    """bilinear_slow_w: W alone at lr / sqrt(Ds), the same initial W; bilinear_small_init: W / sqrt(Ds)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bahdanau_length as script
    from attnbook.env import seed_everything
    built = {}
    for kind in ("bilinear", *script.SCALE_CONTROLS):
        seed_everything(0)
        built[kind] = script.bilinear_control_model(kind, 10, 12, smoke=True)
    w = {k: m.decoder.score.W.weight for k, m in built.items()}
    root = built["bilinear"].decoder.score.query_dim ** 0.5
    assert (w["bilinear_slow_w"] == w["bilinear"]).all()
    assert ((w["bilinear_small_init"] - w["bilinear"] / root).abs().max() < 1e-7)
    assert script.score_optimizer("bilinear_small_init", built["bilinear_small_init"], 0.003) is None
    optimizer = script.score_optimizer("bilinear_slow_w", built["bilinear_slow_w"], 0.003)
    rest, slow = optimizer.param_groups
    assert slow["params"] == [w["bilinear_slow_w"]] and abs(slow["lr"] - 0.003 / root) < 1e-12
    assert rest["lr"] == 0.003 and len(rest["params"]) == len(list(built["bilinear"].parameters())) - 1
