"""Chapter 6's NSP study: its committed results hold what the chapter reads, its AUC is right, its runs resume."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = str(ROOT / "benchmarks" / "bert_nsp.py")
sys.path.insert(0, str(ROOT / "benchmarks"))
import bert_nsp  # noqa: E402


def test_committed_results_hold_three_seeds_of_each_objective_on_the_same_pairs():
    result = load_result("bert_nsp.json")
    assert "benchmarks/bert_nsp.py" in result["command"]
    runs = result["runs"]
    assert {(r["objective"], r["seed"]) for r in runs} == {(o, s) for o in ("mlm+nsp", "nsp") for s in (0, 1, 2)}
    assert len({(r["eval_pairs"], r["is_next"], r["jaccard_auc"]) for r in runs}) == 1  # the same held-out pairs
    assert len({(r["steps"], r["d_model"], r["num_layers"], r["lr"]) for r in runs}) == 1  # the same budget
    assert all(0.0 <= r["nsp_accuracy"] <= 1.0 and 0.0 <= r["nsp_auc"] <= 1.0 for r in runs)
    assert all(r["curve"][-1]["step"] == r["steps"] for r in runs)


def test_committed_controls_hold_the_positive_control_and_a_learning_rate_sweep():
    result = load_result("bert_nsp_controls.json")
    runs = result["runs"]
    assert "--task copy" in result["command"]
    assert {(r["task"], r["lr"]) for r in runs} == {("copy", 3e-3)} | {("nsp", lr) for lr in (3e-4, 1e-3, 3e-3, 1e-2)}
    assert len({(r["steps"], r["d_model"], r["num_layers"], r["objective"], r["seed"]) for r in runs}) == 1
    assert all(r["curve"][-1]["step"] == r["steps"] for r in runs)


def test_copy_pairs_copy_a_into_b_for_is_next_only():
    pairs = [("a1", "b1", bert_nsp.mlm.IS_NEXT), ("a2", "b2", bert_nsp.mlm.NOT_NEXT)]
    assert bert_nsp.copy_pairs(pairs) == [("a1", "a1", bert_nsp.mlm.IS_NEXT), ("a2", "b2", bert_nsp.mlm.NOT_NEXT)]


@pytest.mark.parametrize("scores, positive, expected", [
    ([1.0, 2.0, 3.0, 4.0], [False, False, True, True], 1.0),
    ([4.0, 3.0, 2.0, 1.0], [False, False, True, True], 0.0),
    ([1.0, 1.0, 1.0, 1.0], [False, True, False, True], 0.5),  # ties count half
    ([1.0, 3.0, 2.0, 4.0], [False, False, True, True], 0.75),
])
def test_auc_is_the_chance_a_positive_outscores_a_negative(scores, positive, expected):
    assert bert_nsp.auc(torch.tensor(scores), torch.tensor(positive)) == pytest.approx(expected)


def test_resume_reads_earlier_runs_instead_of_repeating_them(tmp_path):
    rows = [{"objective": o, "seed": 0, "steps": 20, "nsp_accuracy": 0.5, "nsp_auc": 0.5, "jaccard_auc": 0.8,
             "seconds": 1.0}
            for o in ("mlm+nsp", "nsp")]
    old = {k: v for k, v in rows[0].items() if k != "objective"}  # logged before objectives existed
    log = tmp_path / "earlier.log"
    log.write_text("header\n" + json.dumps(old) + "\n" + json.dumps(rows[1]) + "\n")
    out = tmp_path / "merged.json"
    subprocess.run([sys.executable, SCRIPT, "--smoke", "--seeds", "0", "--resume", str(log), "--out", str(out)],
                   check=True, capture_output=True, text=True, timeout=300)
    runs = json.loads(out.read_text())["runs"]
    assert [(r["objective"], r["seed"]) for r in runs] == [("mlm+nsp", 0), ("nsp", 0)]
