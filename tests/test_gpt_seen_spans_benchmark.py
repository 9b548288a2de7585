"""Chapter 8's seen/unseen 8-gram split (benchmarks/gpt_seen_spans.py) runs in smoke mode, its
committed result is consistent with the stored 2400-step run, and the chapter quotes it."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def test_seen_spans_smoke_run(tmp_path):
    out = tmp_path / "seen.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpt_seen_spans.py"), "--smoke",
                    "--out", str(out)], check=True, capture_output=True, text=True,
                   timeout=300, cwd=ROOT / "benchmarks")
    groups = json.loads(out.read_text())["groups"]
    assert groups["seen"]["targets"] + groups["unseen"]["targets"] == groups["all"]["targets"]
    assert groups["all"]["targets"] == (3000 - 1) // 64 * 58  # smoke: 3,000 held-out tokens


def test_committed_split_matches_the_stored_run_and_the_chapter():
    split, run = load_result("gpt_seen_spans.json"), load_result("gpt_bible_2400.json")
    assert split["sha256"] == run["sha256"] and split["held_out_targets"] == 88960
    groups = split["groups"]
    assert groups["all"]["targets"] == 88960 // 64 * 58  # 7 or more tokens of context
    # the GPT's loss on those targets is the stored run's, positions 7 to 64
    assert abs(groups["all"]["gpt_loss"] - sum(run["position_losses"][6:]) / 58) < 1e-3
    for g in groups.values():
        assert abs(g["gap"] - (g["gpt_loss"] - g["fourgram_loss"])) < 1e-3
    assert groups["seen"]["gap"] > groups["unseen"]["gap"] > 0
    notebook = json.loads((ROOT / "chapters" / "08_gpt.ipynb").read_text())
    text = next("".join(c["source"]) for c in notebook["cells"]
                if c.get("id") == "ch08-seen-spans-md")
    for number in (f"{groups['seen']['gap']:+.3f}", f"{groups['unseen']['gap']:+.3f}",
                   f"{split['seen_share_of_targets']:.0%}",
                   f"{split['seen_share_of_gpt_deficit']:.0%}"):
        assert number in text, number
