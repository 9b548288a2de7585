"""Chapter 10's early-stopping control (benchmarks/t5_early_stop.py): smoke run, collect, committed results."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = str(ROOT / "benchmarks" / "t5_early_stop.py")


def test_smoke_run_then_collect(tmp_path):
    run = subprocess.run([sys.executable, SCRIPT, "--smoke"], check=True, capture_output=True, text=True,
                         timeout=300)
    rows = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    arms = {r["arm"]: r for r in rows if "arm" in r}
    assert set(arms) == {"pretrained", "scratch"}
    for r in arms.values():
        assert [step for step, *_ in r["dev_curve"]] == [10, 20]
        best = min(r["dev_curve"], key=lambda row: (row[2], row[0]))
        assert r["chosen_step"] == best[0]
    log = tmp_path / "smoke.log"
    log.write_text(run.stdout)
    out = tmp_path / "early_stop.json"
    subprocess.run([sys.executable, SCRIPT, "--collect", "--resume", str(log), "--out", str(out)], check=True,
                   capture_output=True, text=True, timeout=300)
    written = json.loads(out.read_text())
    assert len(written["runs"]) == 2 and written["settings"]["dev_words"] == rows[0]["dev_words"]


def test_committed_results_cover_both_arms_and_repeat_the_study():
    result = load_result("t5_early_stop.json")
    runs = {(r["arm"], r["seed"]): r for r in result["runs"]}
    assert set(runs) == {(arm, seed) for arm in ("pretrained", "scratch") for seed in (0, 1, 2)}
    for r in runs.values():
        assert [step for step, *_ in r["dev_curve"]] == list(range(100, 601, 100))
        assert r["chosen_step"] == min(r["dev_curve"], key=lambda row: (row[2], row[0]))[0]
