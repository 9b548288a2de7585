"""Chapter 5's base-size gradient check (benchmarks/norm_gradients_base_size.py): the script runs
end to end, and the committed results are consistent with themselves."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def test_smoke_run_writes_both_placements(tmp_path):
    out = tmp_path / "grads.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "norm_gradients_base_size.py"),
                    "--smoke", "--out", str(out)], check=True, capture_output=True, timeout=600)
    result = json.loads(out.read_text())
    assert set(result["runs"]) == {"post-norm", "pre-norm"}
    for run in result["runs"].values():
        assert len(run["decoder_layer_grad_norms"]) == 6
        assert len(run["ffn_w2_grad_norms_mean"]) == 6


def test_committed_result_is_the_base_size_and_its_ratios_hold():
    result = load_result("norm_gradients_base_size.json")
    setup = result["setup"]
    assert (setup["d_model"], setup["num_heads"], setup["d_ff"], setup["layers"]) == (512, 8, 2048, 6)
    for run in result["runs"].values():
        norms = run["decoder_layer_grad_norms"]
        assert abs(run["layer6_over_layer1"] - norms[-1] / norms[0]) < 1e-3


def test_committed_result_has_xiongs_w2_gradients_for_three_seeds():
    """The second feed-forward matrix's gradient per decoder layer (Xiong et al.'s quantity)."""
    result = load_result("norm_gradients_base_size.json")
    assert result["setup"]["w2_seeds"] == [0, 1, 2]
    for run in result["runs"].values():
        by_seed = run["ffn_w2_grad_norms_by_seed"]
        assert sorted(by_seed) == ["0", "1", "2"] and all(len(v) == 6 for v in by_seed.values())
        for layer, mean in enumerate(run["ffn_w2_grad_norms_mean"]):
            assert abs(mean - sum(v[layer] for v in by_seed.values()) / 3) < 1e-3
