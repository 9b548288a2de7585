"""Chapter 7's pre-training control runs (smoke mode), picks its data as documented, and its committed
results are complete; the learning-rate edge run's results are committed too."""
import json
import subprocess
import sys
from pathlib import Path

import torch

from attnbook.data.digits import load_digits_splits
from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def test_smoke_run_writes_both_models_and_every_seed(tmp_path):
    out = tmp_path / "result.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "vit_pretraining.py"), "--smoke", "--out", str(out)],
                   check=True, capture_output=True, timeout=600)
    runs = json.loads(out.read_text())["runs"]
    assert {(r["model"], r["seed"]) for r in runs} == {(m, s) for m in ("vit", "cnn") for s in (0, 1, 2)}
    for r in runs:  # both arms take the same number of steps
        assert r["steps"]["scratch"] == r["steps"]["pretrain"] + r["steps"]["finetune"]


def test_the_splits_keep_the_classes_apart_and_the_seed_picks_the_few():
    import vit_pretraining as bench
    digits = load_digits_splits()
    source = bench.classes(digits.train, bench.PRETRAIN_CLASSES)
    assert set(source.labels.tolist()) == set(bench.PRETRAIN_CLASSES)
    target = bench.classes(digits.train, bench.TARGET_CLASSES)
    few = [bench.few(target, bench.PER_CLASS, seed) for seed in (0, 1)]
    for part in few:
        assert torch.bincount(part.labels, minlength=10)[list(bench.TARGET_CLASSES)].tolist() == [25] * 5
    assert not torch.equal(few[0].images, few[1].images)


def test_committed_results_hold_three_seeds_of_both_models():
    result = load_result("vit_pretraining.json")
    runs = result["runs"]
    assert {(r["model"], r["seed"]) for r in runs} == {(m, s) for m in ("vit", "cnn") for s in (0, 1, 2)}
    assert all(r["finetune_images"] == 125 for r in runs)
    assert "vit_pretraining.py" in result["command"]
    edge = load_result("vit_lr_edge.json")
    assert edge["runs"][0]["lr"] == 1e-2 and edge["runs"][0]["steps"] == 2000
    assert "vit_lr_edge.py" in edge["command"]
