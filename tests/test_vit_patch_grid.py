"""Chapter 7's patch-grid control runs (smoke mode), its stem CNN reads the ViT's grid, and its
committed results are complete."""
import json
import subprocess
import sys
from pathlib import Path

import torch

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

GRID = {(kind, recipe) for kind, recipe in (("vit", "short"), ("vit_p1", "short"), ("cnn", "short"),
                                            ("cnn_stem", "short"), ("cnn_stem", "full"))}


def test_smoke_run_writes_the_default_grid(tmp_path):
    out = tmp_path / "result.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "vit_patch_grid.py"), "--smoke", "--out", str(out)],
                   check=True, capture_output=True, timeout=600)
    runs = json.loads(out.read_text())["runs"]
    assert {(r["model"], r["recipe"]) for r in runs} == GRID


def test_the_stem_cnn_reads_the_vit_grid_and_the_p1_vit_every_pixel():
    import vit_patch_grid as bench
    stem = bench.build("cnn_stem", 0, smoke=False)
    first = stem.features[0]
    assert (first.kernel_size, first.stride) == ((2, 2), (2, 2))
    images = torch.zeros(3, 1, 8, 8)
    assert tuple(stem.features(images).shape) == (3, 64, 2, 2)  # the chapter CNN's final map
    assert tuple(stem(images).shape) == (3, 10)
    vit = bench.build("vit_p1", 0, smoke=False)
    assert vit.config.patch_size == 1 and vit.config.grid_size == 8
    mlp = bench.build("vit_mlp", 0, smoke=False)
    assert mlp.config.head_hidden == mlp.config.d_model


def test_committed_results_hold_three_seeds_of_every_run():
    result = load_result("vit_patch_grid.json")
    keys = {(r["model"], r["recipe"], r["train_images"], r["seed"]) for r in result["runs"]}
    three = {(k, rec, 125, s) for k, rec in GRID | {("vit_mlp", "short")} for s in (0, 1, 2)}
    # the MLP head's full runs: those that finished on a shared machine (the docstring says)
    finished = {("vit_mlp", "full", 125, s) for s in (0, 1, 2)} | {("vit_mlp", "full", 312, 0)}
    assert keys == three | finished
    assert {r["steps"] for r in result["runs"] if r["recipe"] == "short"} == {300}
    assert {r["steps"] for r in result["runs"] if r["recipe"] == "full"} == {2000}
    assert {r["fraction"] for r in result["runs"] if r["train_images"] == 125} == {0.1}
    assert "vit_patch_grid.py" in result["command"]
