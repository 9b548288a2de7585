"""Chapter 2's step-cost timing (benchmarks/bahdanau_step_cost.py): a smoke run, and the committed
results file that section 2.9 prints."""
import json
import subprocess
import sys
from pathlib import Path

import torch

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bahdanau_step_cost as step_cost  # noqa: E402


def test_zero_score_control_has_uniform_weights_and_same_parameters_otherwise():
    nets = step_cost.models(30, 40)
    zero, additive = nets["zero_score"], nets["additive"]
    src = torch.randint(4, 30, (2, 5))
    lengths = torch.tensor([5, 3])
    tgt = torch.randint(4, 40, (2, 4))
    with torch.no_grad():
        _, w = zero(src, lengths, tgt, need_weights=True)
    assert torch.allclose(w[1, :, :3], torch.full((4, 3), 1 / 3))
    assert (w[1, :, 3:] == 0).all()
    score_params = {f"decoder.score.{n}" for n, _ in additive.decoder.score.named_parameters()}
    assert set(dict(additive.named_parameters())) - score_params == set(dict(zero.named_parameters()))


def test_smoke_run_writes_medians(tmp_path):
    out = tmp_path / "cost.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bahdanau_step_cost.py"), "--smoke",
                    "--out", str(out)], check=True, cwd=ROOT)
    result = json.loads(out.read_text())
    assert set(result["median_ms"]) == {"gru", "zero_score", "additive"}
    assert all(len(v) == result["setup"]["repeats"] for v in result["ms_per_step"].values())


def test_committed_file():
    result = load_result("bahdanau_step_cost.json")
    assert result["command"] == "python benchmarks/bahdanau_step_cost.py"
    assert result["setup"]["words"] == 128
    assert all(v > 0 for v in result["median_ms"].values())
