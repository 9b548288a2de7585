"""Chapter 4's block benchmark runs end to end (a few steps, seconds), and its committed results
hold what section 4.6 says: inside a pre-norm block one head ends close to, but below, two and
eight heads, and is far behind them at step 200."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def test_the_script_runs_and_writes_its_results(tmp_path):
    out = tmp_path / "block.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "mha_block.py"), "--heads", "1", "2",
                    "--seeds", "0", "--steps", "4", "--eval-every", "2", "--out", str(out)],
                   check=True, cwd=ROOT, capture_output=True)
    rows = json.loads(out.read_text())["runs"]
    assert [(r["heads"], r["head_dim"], r["seed"]) for r in rows] == [(1, 64, 0), (2, 32, 0)]
    assert rows[0]["parameters"] == rows[1]["parameters"]  # the same model size for every H
    for row in rows:
        assert list(row["both_right"]) == ["2", "4"]
        assert all(0.0 <= value <= 1.0 for value in row["both_right"].values())


def test_the_block_is_pre_norm_with_a_residual_and_feed_forward_layer():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import torch
        from mha_block import block_tagger
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    model = block_tagger(2)
    assert model.block.norm_first and model.block.self_attn.num_heads == 2
    assert model.block.feed_forward is not None
    logits = model(torch.randint(16, (3, 12)))
    assert logits.shape == (3, 12, 2, 16)


def test_the_committed_runs_show_what_the_chapter_says():
    runs = load_result("mha_block.json")["runs"]
    by_heads = {h: [r for r in runs if r["heads"] == h] for h in (1, 2, 8)}
    assert all(len({r["seed"] for r in rows}) >= 3 for rows in by_heads.values())
    assert len({r["parameters"] for r in runs}) == 1
    for row in by_heads[1]:
        for step in ("600", "1200"):  # close to the task, short of it
            assert 0.9 < row["both_right"][step] < 0.999
        assert row["both_right"]["200"] < 0.3  # far behind at step 200
    for row in by_heads[2] + by_heads[8]:
        assert row["both_right"]["600"] > 0.99
    for row in by_heads[8]:
        assert row["both_right"]["200"] > 0.99
