"""Chapter 7's position-table control runs (smoke mode), measures the grid statistic correctly, and its
committed results are complete."""
import json
import subprocess
import sys
from pathlib import Path

import torch

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def test_smoke_run_writes_both_conditions_and_every_seed(tmp_path):
    out = tmp_path / "result.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "vit_position_table.py"), "--smoke", "--out", str(out)],
                   check=True, capture_output=True, timeout=600)
    runs = json.loads(out.read_text())["runs"]
    assert {(r["augmented"], r["seed"]) for r in runs} == {(a, s) for a in (True, False) for s in (0, 1, 2)}


def test_neighbour_similarity_separates_a_grid_from_its_absence():
    import vit_position_table as bench
    g = 4
    index = torch.arange(g * g)
    # embeddings that vary smoothly over the grid: neighbours similar, far positions not
    angle_r, angle_c = index // g * 0.8, index % g * 0.8
    smooth = torch.stack([angle_r.cos(), angle_r.sin(), angle_c.cos(), angle_c.sin()], dim=1)
    near, far = bench.neighbour_similarity(smooth, g)
    assert near > far + 0.2
    # the same vectors in a shuffled order keep the set of similarities but lose the grid
    shuffled = smooth[torch.randperm(g * g, generator=torch.Generator().manual_seed(0))]
    near_s, far_s = bench.neighbour_similarity(shuffled, g)
    assert near_s - far_s < near - far - 0.2
    # orthogonal embeddings: no similarity at all
    assert bench.neighbour_similarity(torch.eye(g * g), g) == (0.0, 0.0)


def test_committed_results_hold_three_seeds_with_and_without_augmentation():
    result = load_result("vit_position_table.json")
    assert {(r["augmented"], r["seed"]) for r in result["runs"]} == {(a, s) for a in (True, False) for s in (0, 1, 2)}
    assert "vit_position_table.py" in result["command"]
