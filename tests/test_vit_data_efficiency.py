"""The data-efficiency benchmark runs (smoke mode), and its committed results are complete."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def test_smoke_run_writes_every_model_fraction_and_shift(tmp_path):
    out = tmp_path / "result.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "vit_data_efficiency.py"), "--smoke", "--out", str(out)],
                   check=True, capture_output=True, timeout=300)
    result = json.loads(out.read_text())
    runs = result["runs"]
    assert {(r["model"], r["fraction"]) for r in runs} == {(m, f) for m in ("vit", "cnn") for f in (0.1, 1.0)}
    controls = result["controls"]
    assert {(r["model"], r["fraction"]) for r in controls} == {
        ("vit_small", 0.1), ("vit_small", 1.0), ("vit_nopos", 1.0), ("vit_noaug", 1.0), ("cnn_noaug", 1.0),
        ("vit_local", 0.1), ("vit_nopos_noaug", 1.0)}
    for r in runs + controls:
        for key in ("test_accuracy", "test_accuracy_shift_1", "test_accuracy_shift_2"):
            assert 0.0 <= r[key] <= 1.0
    sizes = {r["model"]: r["parameters"] for r in runs + controls}
    assert sizes["vit_small"] < sizes["vit"] and sizes["vit_nopos"] < sizes["vit"]  # no position table
    assert sizes["vit_noaug"] == sizes["vit"] and sizes["cnn_noaug"] == sizes["cnn"]
    assert sizes["vit_local"] == sizes["vit"]  # the mask adds no parameter
    assert sizes["vit_nopos_noaug"] == sizes["vit_nopos"]  # the same model, other training data


def test_the_local_vit_sees_only_neighbouring_patches():
    """A patch token's output after one block depends on its 3 x 3 neighbourhood of patches only;
    the class token still sees every patch."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import torch
    import vit_data_efficiency as bench
    from attnbook.layers import run_blocks
    mask = bench.neighbour_mask(4)
    assert mask.shape == (17, 17) and mask[0].all() and not mask[1:, 0].any()
    assert mask[1:, 1:].sum(1).tolist() == [4, 6, 6, 4, 6, 9, 9, 6, 6, 9, 9, 6, 4, 6, 6, 4]
    model = bench.build("vit_local", 0, smoke=False).eval()
    x = model.embeddings(torch.randn(1, 1, 8, 8)).detach().requires_grad_(True)  # (1, 17, D)
    run_blocks(model.blocks[:1], x, model.mask).hidden[0, 1].sum().backward()  # patch 0 (top left)
    reached = (x.grad[0].abs().sum(-1) > 0).tolist()
    assert reached == [False, True, True, False, False, True, True] + [False] * 10
    assert model(torch.randn(3, 1, 8, 8)).shape == (3, 10)


def test_the_small_vit_has_about_the_cnns_parameter_count():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import vit_data_efficiency as bench
    from attnbook.checks import count_parameters
    small, cnn = (count_parameters(bench.build(kind, 0, smoke=False)) for kind in ("vit_small", "cnn"))
    assert 0.8 < small / cnn < 1.25
    assert bench.build("vit_nopos", 0, smoke=False).embeddings.positions is None


def test_the_matched_no_position_control_is_vit_nopos_on_plain_digits():
    """``vit_nopos_noaug`` is ``vit_nopos`` (same weights at a seed) trained without augmentation."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import vit_data_efficiency as bench
    plain, augmented = (bench.build(kind, 0, smoke=False) for kind in ("vit_nopos_noaug", "vit_nopos"))
    assert plain.embeddings.positions is None
    for a, b in zip(plain.parameters(), augmented.parameters(), strict=True):
        assert a.equal(b)
    assert "vit_nopos_noaug" in bench.DEFAULT_CONTROLS and bench.CONTROLS["vit_nopos_noaug"] == (1.0,)


def test_committed_matched_no_position_rows():
    """The chapter compares these rows with the bags fitted on plain digits: every seed of the
    file, all training digits, the same model as ``vit_nopos``, and accuracies that are measured."""
    result = load_result("vit_data_efficiency.json")
    rows = {r["seed"]: r for r in result["controls"] if r["model"] == "vit_nopos_noaug"}
    augmented = {r["seed"]: r for r in result["controls"] if r["model"] == "vit_nopos"}
    assert sorted(rows) == sorted(result["seeds"])
    for seed, row in rows.items():
        assert row["fraction"] == 1.0 and row["train_images"] == augmented[seed]["train_images"]
        assert row["parameters"] == augmented[seed]["parameters"]
        for key in ("test_accuracy", "test_accuracy_shift_1", "test_accuracy_shift_2"):
            assert 0.1 < row[key] < 1.0 and row[key] != augmented[seed][key]
    assert len({row["test_accuracy"] for row in rows.values()}) == len(rows)  # not one row copied


def test_committed_results_cover_the_grid():
    result = load_result("vit_data_efficiency.json")
    cells = {(r["model"], r["fraction"], r["seed"]) for r in result["runs"]}
    assert cells == {(m, f, s) for m in ("vit", "cnn") for f in result["fractions"] for s in result["seeds"]}
    assert len(result["seeds"]) >= 3 and len(result["fractions"]) >= 3 and result["fractions"][-1] == 1.0
    # the chapter reads the ViT without positions; every control kind in the file covers its whole grid
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import vit_data_efficiency as bench
    controls = {(r["model"], r["fraction"], r["seed"]) for r in result["controls"]}
    kinds = {kind for kind, _, _ in controls}
    assert "vit_nopos" in kinds
    expected = {(m, f, s) for m in kinds for f in bench.CONTROLS[m] for s in result["seeds"]}
    assert controls == expected
    if "vit_rerun" in kinds or "cnn_rerun" in kinds:  # reruns: the same recipe, a newer library
        assert {"vit_rerun", "cnn_rerun"} <= kinds and result.get("note")


def test_a_rerun_is_the_same_model_as_the_main_grid_s():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import vit_data_efficiency as bench
    from attnbook.checks import count_parameters
    for kind in ("vit", "cnn"):
        main, rerun = bench.build(kind, 0, smoke=False), bench.build(f"{kind}_rerun", 0, smoke=False)
        assert type(main) is type(rerun) and count_parameters(main) == count_parameters(rerun)
        for a, b in zip(main.parameters(), rerun.parameters()):  # same seed, same initial weights
            assert a.equal(b)


def test_incomplete_runs_write_no_file(tmp_path):
    out = tmp_path / "partial.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "vit_data_efficiency.py"), "--smoke",
                           "--models", "cnn", "--out", str(out)], check=True, capture_output=True, text=True,
                          timeout=300)
    assert "still missing" in done.stdout and not out.exists()


def test_resume_reuses_the_runs_of_an_earlier_log(tmp_path):
    script = str(ROOT / "benchmarks" / "vit_data_efficiency.py")
    first = subprocess.run([sys.executable, script, "--smoke"], check=True, capture_output=True, text=True, timeout=300)
    log = tmp_path / "first.log"
    log.write_text(first.stdout)
    out = tmp_path / "merged.json"
    again = subprocess.run([sys.executable, script, "--smoke", "--resume", str(log), "--out", str(out)],
                           check=True, capture_output=True, text=True, timeout=300)
    assert not [line for line in again.stdout.splitlines() if line.startswith("{")]  # nothing was re-run
    merged = json.loads(out.read_text())
    key = lambda row: (row["model"], row["fraction"], row["seed"])  # noqa: E731
    logged = [json.loads(line) for line in first.stdout.splitlines() if line.startswith("{")]
    # the main grid goes into "runs", the controls into "controls"; together they are the log
    assert sorted(merged["runs"] + merged["controls"], key=key) == sorted(logged, key=key)
    assert merged["runs"] and merged["controls"]
