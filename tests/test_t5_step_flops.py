"""Chapter 10's counted compute (benchmarks/t5_step_flops.py): the smoke run writes both counts."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_smoke_run_counts_pretraining_and_fine_tuning_steps(tmp_path):
    out = tmp_path / "flops.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "t5_step_flops.py"), "--smoke",
                    "--out", str(out)], check=True, capture_output=True, timeout=600)
    result = json.loads(out.read_text())
    pre = result["pretraining"]
    assert pre["min_flops"] == pre["max_flops"] > 0  # every pretraining step has one shape
    assert [(r["size"], r["seed"]) for r in result["fine_tuning"]] == [
        (2000, 0), (2000, 0), (2000, 1), (2000, 2)]  # smoke: "all the words" are 2,000
    assert all(v > 0 for r in result["fine_tuning"] for v in r["mean_flops"].values())
