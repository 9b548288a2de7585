"""Chapter 10's pretraining study runs (smoke mode), resumes, and its committed results are complete."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = str(ROOT / "benchmarks" / "t5_pretraining.py")


def test_smoke_run_then_resume(tmp_path):
    checkpoint = str(tmp_path / "pretrained.pt")
    first = subprocess.run([sys.executable, SCRIPT, "--smoke", "--checkpoint", checkpoint],
                           check=True, capture_output=True, text=True, timeout=300)
    rows = [json.loads(line) for line in first.stdout.splitlines() if line.startswith("{")]
    assert rows[0]["kind"] == "pretrain" and len(rows[0]["encoder_bias"]) == 32
    arms = {(r["model"], r["arm"], r["tasks"], r["steps"]) for r in rows[1:]}
    assert ("t5", "pretrained", "g2p", 10) in arms and ("t5", "scratch", "g2p", 10) in arms
    assert ("transformer", "scratch", "g2p", 10) in arms and ("t5", "pretrained", "g2p+p2g", 20) in arms
    for r in rows[1:]:
        assert all(r[k] >= 0 for k in r if k.endswith(("_wer", "_per")))
    log = tmp_path / "first.log"
    log.write_text(first.stdout)
    out = tmp_path / "merged.json"
    again = subprocess.run([sys.executable, SCRIPT, "--smoke", "--checkpoint", checkpoint, "--resume", str(log),
                            "--out", str(out)], check=True, capture_output=True, text=True, timeout=300)
    assert not [line for line in again.stdout.splitlines() if line.startswith("{")]  # nothing was re-run
    assert json.loads(out.read_text())["runs"] == rows


def test_committed_results_cover_the_grid():
    result = load_result("t5_pretraining.json")
    runs = result["runs"]
    steps = result["settings"]["steps"]
    sizes = {r["size"] for r in runs if r.get("tasks") == "g2p" and r.get("steps") == steps}
    assert len(sizes) == 3
    for model, arm in (("t5", "pretrained"), ("t5", "scratch"), ("transformer", "scratch")):
        for size in sizes:
            seeds = {r["seed"] for r in runs if (r.get("model"), r.get("arm"), r.get("size"), r.get("tasks"),
                                                 r.get("steps")) == (model, arm, size, "g2p", steps)}
            assert seeds == {0, 1, 2}, (model, arm, size)
    assert len([r for r in runs if r.get("tasks") == "g2p+p2g"]) == 3
