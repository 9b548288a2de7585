"""Chapter 10's null on more seeds (benchmarks/t5_null_seeds.py): the smoke run writes the
diagnosis of each start and one run per seed."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_smoke_run_diagnoses_the_starts_and_fine_tunes_each_seed(tmp_path):
    out = tmp_path / "null_seeds.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "t5_null_seeds.py"), "--smoke",
                    "--out", str(out)], check=True, capture_output=True, timeout=600)
    result = json.loads(out.read_text())
    assert set(result["diagnosis"]) == {"scratch", "shuffled"}  # smoke: no checkpoint read
    for row in result["diagnosis"].values():
        assert row["first_loss"] > 0 and row["first_loss_swapped_sources"] > 0
    assert [r["seed"] for r in result["runs"]] == [1, 2]
    assert {r["arm"] for r in result["runs"]} == {"pretrained on shuffled bytes"}
