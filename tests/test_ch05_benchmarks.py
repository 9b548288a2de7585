"""Chapter 5's two benchmark scripts run end to end (smoke settings, seconds), and their committed
results hold what the chapter reads: pre- and post-norm with the same recipe over three seeds, the
size and dropout timings, the count-table baseline on the same words, and KV-cache speed-ups with
identical tokens at several output lengths."""
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
    table = result["count_table"]
    for method in ("letter window", "letter rule"):
        row = table[method]
        for key in ("dev_wer", "dev_per", "test_wer", "test_per"):
            assert 0.0 < row[key] < 1.0
        by_length = row["test_wer_by_length"]
        assert list(by_length) == ["1-4", "5-6", "7-8", "9-10", "11-12", "13+"][: len(by_length)]
    window, rule = table["letter window"], table["letter rule"]
    assert window["test_wer"] < rule["test_wer"]  # context beats one phoneme per letter


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
    table = result["count_table"]
    assert table["training_words"] == 105_103
    assert sum(c["words"] for c in table["letter window"]["test_wer_by_length"].values()) == 5_825


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
    for batch in (32, 128):
        runs = sorted((r for r in result["runs"] if r["batch"] == batch), key=lambda r: r["new_tokens"])
        assert [r["new_tokens"] for r in runs] == [8, 16, 32, 64]
        for run in runs:
            assert run["identical_tokens"] is True and run["speedup"] > 1.0
            assert run["position_ratio"] == (run["new_tokens"] + 1) / 2
        # the chapter says the measured speed-up grows with the output length
        assert all(a["speedup"] < b["speedup"] for a, b in zip(runs, runs[1:]))


def test_committed_kv_cache_speedups_are_below_the_counted_flop_ratio():
    """Chapter 5 counts both loops with FlopCounterMode on the benchmark's model: recomputation does more
    than (T + 1) / 2 times the cached loop's work (it re-runs the encoder every step), the encoder is most of
    that work at 8 tokens, and every committed speed-up is below the FLOP ratio."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from attnbook.decoding import greedy_decode, greedy_decode_uncached
    from attnbook.models.transformer import Transformer, TransformerConfig

    def flops(fn):
        counter = FlopCounterMode(display=False)
        with counter, torch.no_grad():
            fn()
        return counter.get_total_flops()

    runs = load_result("kv_cache_speed.json")["runs"]
    for T in (8, 64):
        torch.manual_seed(0)
        model = Transformer(TransformerConfig(32, 48, d_model=128, num_heads=4, d_ff=512, num_encoder_layers=2,
                                              num_decoder_layers=2, dropout=0.0, max_len=max(T + 1, 12))).eval()
        src, lengths = torch.randint(4, 32, (1, 12)), torch.full((1,), 12)
        cached = flops(lambda: greedy_decode(model, src, lengths, 1, -1, T))
        recomputed = flops(lambda: greedy_decode_uncached(model, src, lengths, 1, -1, T))
        encoder = flops(lambda: model.encode(src, lengths))
        assert recomputed / cached > (T + 1) / 2
        if T == 8:
            assert T * encoder / recomputed > 0.5  # re-encoding is most of the recomputing loop's work
        for run in (r for r in runs if r["new_tokens"] == T):
            assert run["speedup"] < recomputed / cached, run


def test_step_time_length_smoke_run(tmp_path):
    out = tmp_path / "steps.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "step_time_length.py"), "--lengths", "4", "8",
                    "--repeats", "1", "--out", str(out)], check=True, capture_output=True, timeout=300)
    runs = json.loads(out.read_text())["runs"]
    assert [r["T"] for r in runs] == [4, 8]
    assert all(r["gru_attention_gflop"] > r["transformer_gflop"] > 0 for r in runs)


def test_committed_step_times_grow_apart_with_length():
    """Chapter 5 says: the FLOP ratio of the two models stays near 2 at every length while their time ratio
    grows, and the per-round ranges of the shortest and longest lengths do not overlap."""
    result = load_result("step_time_length.json")
    runs = sorted(result["runs"], key=lambda r: r["T"])
    assert [r["T"] for r in runs] == [8, 16, 32, 64, 128, 256] and "command" in result
    for r in runs:
        assert 1.5 < r["flop_ratio"] < 2.2
        assert r["time_ratio_min"] <= r["time_ratio"] <= r["time_ratio_max"]
    assert runs[0]["time_ratio_max"] < runs[-1]["time_ratio_min"]
    assert runs[-1]["time_ratio"] > 3 * runs[0]["time_ratio"]


def test_long_reversal_smoke_runs_both_parts(tmp_path):
    out = tmp_path / "long.json"
    script = str(ROOT / "benchmarks" / "long_reversal.py")
    for part in ("reversal", "mask"):
        subprocess.run([sys.executable, script, "--smoke", "--part", part, "--out", str(out)],
                       check=True, capture_output=True, timeout=300)
    result = json.loads(out.read_text())
    assert [r["model"] for r in result["reversal"]["runs"]] == ["transformer", "gru_attention"]
    for run in result["reversal"]["runs"]:
        assert run["steps"] >= 1 and 0.0 <= run["exact_match"] <= 1.0
    assert [r["mask"] for r in result["mask"]["runs"]] == ["causal mask", "no mask"]


def test_committed_long_reversal_has_equal_budgets_and_three_mask_seeds():
    result = load_result("long_reversal.json")
    runs = result["reversal"]["runs"]
    budget = result["reversal"]["budget_cpu_seconds"]
    assert {r["model"] for r in runs} == {"transformer", "gru_attention"}
    for run in runs:  # each run stopped at its budget (one step past it at most)
        assert budget <= run["train_cpu_seconds"] < budget * 1.1
    by_seed = {(r["model"], r["seed"]): r for r in runs}
    for seed in {r["seed"] for r in runs}:
        t, g = by_seed["transformer", seed], by_seed["gru_attention", seed]
        assert t["steps"] > g["steps"]  # the chapter: more steps in the same time
    mask = result["mask"]["runs"]
    assert sorted({r["seed"] for r in mask}) == [0, 1, 2]
    for seed in (0, 1, 2):
        causal, none = (r for r in mask if r["seed"] == seed)
        assert none["empty"] > 0.9 * none["words"] and causal["empty"] == 0
        assert none["dev_loss"] < causal["dev_loss"]
