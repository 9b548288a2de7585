"""Chapter 7's SVM baselines: the script runs (smoke mode), the set kernel cannot see positions, the
settings are chosen on dev, and the committed results are complete."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def test_smoke_run_writes_both_baselines(tmp_path):
    out = tmp_path / "result.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "vit_svms.py"), "--smoke", "--out", str(out)],
                   check=True, capture_output=True, timeout=600)
    runs = json.loads(out.read_text())["runs"]
    assert {r["model"] for r in runs} == {"svm_pixels", "set_kernel"}
    assert all(0.0 <= r["test_accuracy"] <= 1.0 for r in runs)


def test_set_kernel_ignores_patch_order_and_equals_the_pairwise_mean():
    import vit_svms as bench
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(3, 16, 4)), rng.normal(size=(5, 16, 4))
    k = bench.set_kernel(a, b, (0.7,), chunk=2)[0]
    assert k.shape == (3, 5)
    direct = np.exp(-0.7 * ((a[0][:, None] - b[1][None]) ** 2).sum(-1)).mean()
    assert np.isclose(k[0, 1], direct)
    shuffled = a[:, rng.permutation(16)]
    assert np.allclose(bench.set_kernel(shuffled, b, (0.7,))[0], k)


def test_patches_are_the_vits_sixteen_2x2_patches():
    import vit_svms as bench
    images = torch.arange(64.0).reshape(1, 1, 8, 8)
    p = bench.patches(images)
    assert p.shape == (1, 16, 4)
    assert p[0, 0].tolist() == [0.0, 1.0, 8.0, 9.0] and p[0, 1].tolist() == [2.0, 3.0, 10.0, 11.0]


def test_choice_uses_dev_and_breaks_ties_towards_small_c():
    import vit_svms as bench
    assert bench.choose({(1.0, 1.0): 0.9, (3.0, 2.0): 0.95, (10.0, 1.0): 0.95}) == (3.0, 2.0)
    assert bench.choose({(1.0, 4.0): 0.9, (1.0, 1.0): 0.9}) == (1.0, 1.0)


def test_committed_results_cover_the_grid_and_the_set_kernel():
    result = load_result("vit_svms.json")
    assert "vit_svms.py" in result["command"]
    pixels = [r for r in result["runs"] if r["model"] == "svm_pixels"]
    assert {(r["fraction"], r["seed"]) for r in pixels} == {(f, s) for f in result["fractions"]
                                                            for s in result["seeds"]}
    (kernel,) = [r for r in result["runs"] if r["model"] == "set_kernel"]
    assert kernel["same_predictions_with_patches_reversed"]
    assert {"test_accuracy_shift_1", "test_accuracy_shift_2"} <= set(kernel)
    for r in result["runs"]:  # the chosen setting is the best on dev
        assert r["dev_accuracy"][f"C={r['C']},gamma={r['gamma_times_scale']}"] == max(r["dev_accuracy"].values())
