"""Chapter 8's two benchmarks run (smoke mode), and their committed results are complete: every
position-initialisation setting with 3 seeds at one budget; every Kneser-Ney order and the
GPT's curve to the end of its run."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def _run(script, *args, timeout=300):
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], check=True,
                          capture_output=True, text=True, timeout=timeout)


def test_position_init_smoke_run_and_resume(tmp_path):
    first = _run("gpt_position_init.py", "--smoke")
    rows = [json.loads(line) for line in first.stdout.splitlines() if line.startswith("{")]
    assert [r["setting"] for r in rows] == ["both small", "mixed", "both large", "large tokens"]
    assert all(len(r["losses"]) == 5 for r in rows)
    log = tmp_path / "first.log"
    log.write_text(first.stdout)
    out = tmp_path / "result.json"
    again = _run("gpt_position_init.py", "--smoke", "--resume", str(log), "--out", str(out))
    assert not [line for line in again.stdout.splitlines() if line.startswith("{")]  # nothing re-run
    assert json.loads(out.read_text())["runs"] == rows


def test_committed_position_init_is_complete():
    result = load_result("gpt_position_init.json")
    runs = result["runs"]
    assert {(r["setting"], r["seed"]) for r in runs} == {
        (s, seed) for s in ("both small", "mixed", "both large", "large tokens")
        for seed in (0, 1, 2)}
    assert {len(r["losses"]) for r in runs} == {result["steps"]}


def test_committed_gpt_vs_ngram_is_complete():
    result = load_result("gpt_vs_ngram.json")
    assert set(result["kneser_ney"]) == {"2", "3", "4", "5"}
    curve = result["gpt"]["curve"]
    assert curve[-1]["step"] == result["gpt"]["steps"] and len(curve) == 10
    assert len(result["gpt"]["position_losses"]) == result["gpt"]["max_len"]
    assert result["held_out_targets"] == 88960  # the chapter's held-out targets


def test_lr_sweep_smoke_run_merges_runs(tmp_path):
    out = tmp_path / "sweep.json"
    _run("gpt_vs_ngram.py", "--smoke", "--lr-sweep", "--lrs", "3e-3", "--out", str(out))
    _run("gpt_vs_ngram.py", "--smoke", "--lr-sweep", "--lrs", "2e-2", "--out", str(out))
    result = json.loads(out.read_text())
    assert [r["lr"] for r in result["runs"]] == [0.003, 0.02]  # the second run kept the first
    assert result["command"].count("--lr-sweep") == 2


def test_committed_lr_sweep_is_complete():
    """The rate is chosen on the training text's last tenth (dev), never on the held-out text."""
    result = load_result("gpt_lr_sweep.json")
    runs = result["runs"]
    assert [r["lr"] for r in runs] == [0.003, 0.01, 0.02]
    assert result["steps"] == 600 and {r["seed"] for r in runs} == {0}
    assert result["held_out_targets"] == 88960  # the chapter's held-out targets
    assert result["dev_targets"] == 166080  # windows of 64 in the training stream's last tenth
    assert result["chosen_lr"] == min(runs, key=lambda r: r["dev_perplexity"])["lr"]
    assert "--lr-sweep" in result["command"]


def test_lr_sweep_chooses_on_dev_not_held_out(tmp_path):
    """A smoke sweep scores each rate on the training stream's last tenth and chooses the rate
    with the lowest of those (dev) perplexities."""
    out = tmp_path / "sweep.json"
    _run("gpt_vs_ngram.py", "--smoke", "--lr-sweep", "--lrs", "1e-4", "3e-2", "--out", str(out))
    result = json.loads(out.read_text())
    dev = {r["lr"]: r["dev_perplexity"] for r in result["runs"]}
    assert result["chosen_lr"] == min(dev, key=dev.get)
    assert result["dev_targets"] == (20000 - 20000 * 9 // 10 - 1) // 64 * 64  # smoke: 20,000


def test_committed_induction_heads_store_every_seeds_curve():
    result = load_result("gpt_induction_heads.json")
    assert [r["seed"] for r in result["runs"]] == [0, 1, 2]
    for run in result["runs"]:
        steps = [p["step"] for p in run["curve"]]
        assert steps == list(range(20, result["steps"] + 1, 20))
        assert all(0 <= p["prefix_matching"] <= 1 for p in run["curve"])
        assert abs(run["curve"][-1]["repeat_loss"] - run["repeat_loss"]) < 0.5  # 128 of 512


def test_scale_up_smoke_run_writes_its_curve_and_positions(tmp_path):
    out = tmp_path / "wide.json"
    _run("gpt_scale_up.py", "--smoke", "--name", "wide", "--d-model", "32", "--out", str(out))
    result = json.loads(out.read_text())
    assert result["complete"] and result["gpt"]["d_model"] == 32
    assert [p["step"] for p in result["gpt"]["curve"]] == list(range(2, 21, 2))
    assert len(result["position_losses"]) == result["gpt"]["max_len"]


def test_committed_scale_up_run_is_a_prefix_of_its_schedule():
    """The committed wide run may have been stopped early (complete false): its curve is then
    the measurements made so far, every tenth of its schedule, on the chapter's targets."""
    result = load_result("gpt_scale_up_wide.json")
    run = result["gpt"]
    every = run["steps"] // 10
    assert [p["step"] for p in run["curve"]] == [every * (i + 1) for i in range(len(run["curve"]))]
    assert result["complete"] == (len(run["curve"]) == 10)
    assert result["held_out_targets"] == 88960


def test_committed_2400_step_runs_are_complete_and_as_named():
    """The chapter's scale-up comparison: the narrow recipe with seeds 1 and 2, the narrow
    model at the wide model's rate, and the wide model, each the full 2400-step schedule."""
    expected = {"long_seed1": (64, 0.01, 1), "long_seed2": (64, 0.01, 2),
                "narrow_lr5e-3": (64, 0.005, 0), "wide": (128, 0.005, 0)}
    for name, (width, lr, seed) in expected.items():
        result = load_result(f"gpt_scale_up_{name}.json")
        run = result["gpt"]
        assert result["complete"] and run["steps"] == 2400, name
        assert (run["d_model"], run["lr"], run["seed"]) == (width, lr, seed), name
        assert [p["step"] for p in run["curve"]] == list(range(240, 2401, 240)), name
        assert result["held_out_targets"] == 88960


def test_window_smoke_run_keeps_the_tokens_per_step(tmp_path):
    out = tmp_path / "window.json"
    _run("gpt_vs_ngram.py", "--smoke", "--window", "16", "--out", str(out))
    result = json.loads(out.read_text())
    assert result["window"] == 16 and result["batch"] == 256 and result["steps"] == 20
    assert 1 < result["perplexity"] < 512


def test_committed_window16_is_the_exercises_run():
    result = load_result("gpt_window16.json")
    assert (result["window"], result["batch"], result["steps"], result["seed"]) == (16, 256, 600, 0)
    assert "--window 16" in result["command"]


def test_finetune_smoke_run_chooses_on_validation(tmp_path):
    out = tmp_path / "finetune.json"
    _run("gpt_finetune.py", "--smoke", "--seeds", "0", "--lrs", "1e-3", "3e-3", "--out", str(out))
    result = json.loads(out.read_text())
    assert len(result["runs"]) == 4 and len(result["chosen"]) == 2
    _assert_chosen_on_validation(result)


def _assert_chosen_on_validation(result):
    """Each chosen point is the best validation accuracy of its side and seed (the earliest
    step, then the lowest rate, on ties); the test accuracy chooses nothing."""
    for pick in result["chosen"]:
        points = [(-p["valid"], p["step"], r["lr"], p["test"]) for r in result["runs"]
                  if r["side"] == pick["side"] and r["seed"] == pick["seed"]
                  for p in r["curve"]]
        assert min(points) == (-pick["valid"], pick["step"], pick["lr"], pick["test"])
        assert pick["valid"] == max(-p[0] for p in points)


def test_committed_finetune_is_complete():
    result = load_result("gpt_finetune.json")
    assert {(r["side"], r["seed"], r["lr"]) for r in result["runs"]} == {
        (side, seed, lr) for side in ("pre-trained", "from scratch") for seed in (0, 1, 2)
        for lr in result["lrs"]}
    assert all(r["curve"][-1]["step"] == result["steps"] for r in result["runs"])
    assert (result["train_verses"], result["valid_verses"], result["test_verses"]) == (
        1200, 400, 600)
    _assert_chosen_on_validation(result)


def test_induction_heads_smoke_run_stores_curves(tmp_path):
    out = tmp_path / "heads.json"
    _run("gpt_induction_heads.py", "--smoke", "--out", str(out))
    runs = json.loads(out.read_text())["runs"]
    assert [r["seed"] for r in runs] == [0, 1, 2]
    assert all([p["step"] for p in r["curve"]] == [20] for r in runs)  # 20 smoke steps


def _finetune_module():
    import importlib.util
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("gpt_finetune",
                                                      ROOT / "benchmarks" / "gpt_finetune.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return module


def test_mcnemar_exact_p_values():
    mcnemar_p = _finetune_module().mcnemar_p
    assert mcnemar_p(0, 5) == 2 / 32  # all five discordant pairs one way
    assert mcnemar_p(5, 0) == mcnemar_p(0, 5)  # two-sided
    assert mcnemar_p(7, 7) == 1.0 and mcnemar_p(0, 0) == 1.0
    assert abs(mcnemar_p(10, 20) - 0.0987) < 1e-3  # scipy.stats.binomtest(10, 30).pvalue


def test_committed_finetune_stores_predictions_that_give_its_accuracies():
    """Every checkpoint's per-verse predictions give its stored test accuracy, and the paired
    test's discordant counts are those of the chosen checkpoints' predictions."""
    result = load_result("gpt_finetune.json")
    labels = [int(ch) for ch in result["test_labels"]]
    assert len(labels) == result["test_verses"] and sum(labels) == result["test_verses"] // 2

    def right(predictions):
        assert len(predictions) == len(labels) and set(predictions) <= {"0", "1"}
        return [int(p) == y for p, y in zip(predictions, labels)]

    for run in result["runs"]:
        for point in run["curve"]:
            assert round(sum(right(point["test_predictions"])) / len(labels), 4) == point["test"]
    chosen = {(c["side"], c["seed"]): right(c["test_predictions"]) for c in result["chosen"]}
    for row in result["paired"]["per_seed"]:
        pre, scratch = chosen["pre-trained", row["seed"]], chosen["from scratch", row["seed"]]
        assert row["b"] == sum(p and not s for p, s in zip(pre, scratch))
        assert row["c"] == sum(s and not p for p, s in zip(pre, scratch))
    low, high = result["paired"]["bootstrap_95"]
    assert low <= result["paired"]["mean_difference"] <= high


def test_discounts_smoke_run_chooses_on_dev(tmp_path):
    out = tmp_path / "counts.json"
    _run("gpt_vs_ngram.py", "--smoke", "--discounts", "--out", str(out))
    result = json.loads(out.read_text())
    dev = {r["discount"]: r["dev_loss"] for r in result["discount_runs"]}
    assert sorted(dev) == [0.75, 0.9, 0.95] and result["discount"] == min(dev, key=dev.get)
    assert len(result["fivegram_position_losses"]) == result["window"] == 64


def test_committed_ngram_counts_are_the_chapters():
    result = load_result("gpt_ngram_counts.json")
    dev = {r["discount"]: r["dev_loss"] for r in result["discount_runs"]}
    assert result["discount"] == min(dev, key=dev.get)
    assert result["held_out_targets"] == 88960  # the chapter's held-out targets
    assert result["dev_targets"] == 166080  # as the rate sweep's dev windows
    assert len(result["fivegram_position_losses"]) == 64
    assert "--discounts" in result["command"]


def test_one_layer_smoke_run_trains_one_layer(tmp_path):
    out = tmp_path / "one.json"
    _run("gpt_induction_heads.py", "--smoke", "--layers", "1", "--seeds", "0", "--out", str(out))
    result = json.loads(out.read_text())
    assert result["layers"] == 1 and [r["seed"] for r in result["runs"]] == [0]
    run = result["runs"][0]
    assert run["layers"] == 1 and len(run["previous_token_scores"]) == 1
    assert set(run["repeat_loss_without"]) == {"layer 1, head 1", "layer 1, head 2"}


def test_committed_one_layer_control_matches_the_two_layer_runs():
    """The one-layer control: the same seeds and steps as the two-layer runs it is set beside."""
    one, two = load_result("gpt_induction_one_layer.json"), load_result("gpt_induction_heads.json")
    assert one["layers"] == 1 and one["steps"] == two["steps"] == 500
    assert [r["seed"] for r in one["runs"]] == [r["seed"] for r in two["runs"]] == [0, 1, 2]
    for run in one["runs"]:
        assert run["layers"] == 1 and len(run["previous_token_scores"]) == 1
        assert [p["step"] for p in run["curve"]] == list(range(20, 501, 20))
