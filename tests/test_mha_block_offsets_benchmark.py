"""Chapter 4's positional control (the letter before + the letter k back, in a pre-norm block)
runs end to end (a few steps, seconds), its task names the right letters, and its committed
results hold what section 4.6 says."""
import json
import subprocess
import sys
from pathlib import Path

import torch

from attnbook.data.synthetic import IGNORE
from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from mha_block_offsets import offset_task  # noqa: E402


def test_the_task_names_the_letter_before_and_the_letter_k_back():
    tokens, targets = offset_task(3)(2, 12, 16, torch.Generator().manual_seed(0))
    assert torch.equal(targets[:, 1:, 0], tokens[:, :-1])
    assert torch.equal(targets[:, 3:, 1], tokens[:, :-3])
    assert (targets[:, :3, 1] == IGNORE).all() and (targets[:, 0, 0] == IGNORE).all()
    tokens, targets = offset_task(4, far_only=True)(2, 12, 16, torch.Generator().manual_seed(0))
    assert torch.equal(targets[:, 4:, 0], tokens[:, :-4])  # far only: both slots 4 back
    assert torch.equal(targets[:, 4:, 1], tokens[:, :-4])


def test_the_script_runs(tmp_path):
    out = tmp_path / "offsets.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "mha_block_offsets.py"), "--smoke",
                    "--out", str(out)], check=True, cwd=ROOT, capture_output=True)
    rows = json.loads(out.read_text())["runs"]
    assert [r["task"] for r in rows] == ["both", "far only"]
    assert rows[0]["scored_positions"] == 2000 * 8  # k = 4: positions 4 .. 11
    assert all(0.0 <= r["both_right"] <= 1.0 for r in rows)


def test_committed_results_match_the_chapter():
    result = load_result("mha_block_offsets.json")
    assert "mha_block_offsets.py" in result["command"] and "/tmp" not in result["command"]
    runs = result["runs"]

    def both(k, h, **kw):
        want = {"task": "both", "lr": 3e-3, "steps": 600, "k": k, "heads": h, **kw}
        rows = [r for r in runs if all(r[key] == v for key, v in want.items())]
        return [r["both_right"] for r in rows]

    for k in (2, 3, 4):
        for h in (1, 2):
            assert len(both(k, h)) == 3  # three seeds
    assert all(0.055 <= s <= 0.07 for s in both(4, 1))  # the far letter at chance (1/16)
    assert all(s >= 0.999 for s in both(4, 2) + both(3, 2) + both(2, 1) + both(2, 2))
    assert all(0.91 <= s <= 0.925 for s in both(3, 1))  # "91.6% to 92.1%"
    far_alone = [r["far_right"] for r in runs if r["task"] == "far only"]
    assert len(far_alone) == 2 and min(far_alone) >= 0.999  # one head reaches 4 back alone
    others = both(4, 1, lr=1e-2) + both(4, 1, lr=1e-3) + both(4, 1, steps=2400)
    assert len(others) == 3 and all(0.055 <= s <= 0.07 for s in others)
