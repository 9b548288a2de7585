"""Chapter 7's per-image test errors: the script runs (smoke mode), its statistics are right on
hand-made inputs, and its committed results are complete and reproduce the data-efficiency grid."""
import json
import subprocess
import sys
from pathlib import Path

import torch

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def test_smoke_run_writes_every_model_with_its_wrong_digits(tmp_path):
    out = tmp_path / "result.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "vit_test_errors.py"), "--smoke", "--out", str(out)],
                   check=True, capture_output=True, timeout=600)
    result = json.loads(out.read_text())
    runs = result["runs"]
    assert {(r["model"], r["fraction"]) for r in runs} == {
        (m, f) for m in ("vit", "cnn", "svm_copies") for f in (0.1, 1.0)}
    for r in runs:
        assert abs(r["test_accuracy"] - (1 - len(r["wrong"]) / result["test_images"])) < 1e-4
    svm = [r for r in runs if r["model"] == "svm_copies"]
    assert all(r["C"] in result["svm_C_grid"] and r["fit_images"] == 5 * r["train_images"] for r in svm)
    assert all(r["gamma_times_scale"] in result["svm_gamma_grid_times_scale"] for r in svm)
    assert all(len(r["dev_accuracy"]) == len(result["svm_C_grid"]) * len(result["svm_gamma_grid_times_scale"])
               for r in svm)
    analysed = [r for r in runs if "analysis" in r]
    assert [(r["model"], r["fraction"]) for r in analysed] == [("vit", 1.0)]
    assert result["missing"] == []


def test_wrong_indices_and_position_groups():
    import vit_test_errors as bench
    assert bench.wrong_indices(torch.tensor([1, 2, 3, 4]), torch.tensor([1, 0, 3, 0])) == [1, 3]
    g = 4
    index = torch.arange(g * g)
    # positions that vary smoothly along each row, plus an unrelated vector per row: the
    # left and right neighbours are alike, the ones above and below are not
    angle = index % g * 0.8
    per_row = 2 * torch.randn(g, 3, generator=torch.Generator().manual_seed(0))[index // g]
    rows_only = torch.cat([angle.cos()[:, None], angle.sin()[:, None], per_row], dim=1)
    groups = bench.position_groups(rows_only, g)
    assert groups["row_neighbours"] > groups["column_neighbours"] + 0.3
    assert groups["neighbours"] > groups["further_apart"]


def test_committed_results_hold_every_run_and_reproduce_the_grid():
    result = load_result("vit_test_errors.json")
    grid = load_result("vit_data_efficiency.json")
    keys = {(r["model"], r["fraction"], r["seed"]) for r in result["runs"]}
    grid_keys = {(m, f, s) for m in ("vit", "cnn", "svm_copies")
                 for f in result["fractions"] for s in result["seeds"]}
    assert keys <= grid_keys and len(keys) + len(result["missing"]) == len(grid_keys)
    assert {(r["fraction"], r["seed"]) for r in result["runs"] if r["model"] == "svm_copies"} == {
        (f, s) for f in result["fractions"] for s in result["seeds"]}  # the SVM: every subset
    assert all("gamma_times_scale" in r for r in result["runs"] if r["model"] == "svm_copies")  # tuned
    committed = {(r["model"], r["fraction"], r["seed"]): r["test_accuracy"] for r in grid["runs"]}
    for r in result["runs"]:
        assert len(set(r["wrong"])) == len(r["wrong"]) and all(0 <= i < result["test_images"] for i in r["wrong"])
        if r["model"] != "svm_copies":
            assert r["same_as_results_file"] == (committed[r["model"], r["fraction"], r["seed"]]
                                                 == r["test_accuracy"])
    full = [r for r in result["runs"] if (r["model"], r["fraction"]) == ("vit", 1.0)]
    assert all(len(r["analysis"]["head_distance_pixels"]) == 16 for r in full)
    assert all(r["same_as_results_file"] for r in result["runs"] if r["model"] != "svm_copies")
