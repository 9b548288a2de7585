"""Chapter 8's pruned n-gram benchmark runs (smoke mode), its pruning keeps every distribution
normalised, and its committed result is the chapter's: the same held-out targets and discount,
each pruned model within its storage budget."""
import json
import math
import subprocess
import sys
from pathlib import Path

import torch

from attnbook.results import load_result
from attnbook.tasks.token_stream import KneserNey

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def test_pruned_ngram_smoke_run(tmp_path):
    out = tmp_path / "pruned.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpt_pruned_ngram.py"), "--smoke",
                    "--out", str(out)], check=True, capture_output=True, text=True, timeout=300)
    result = json.loads(out.read_text())
    assert {r["order"] for r in result["runs"]} == {3, 4}
    assert all(len(r["position_losses"]) == 64 for r in result["runs"])


def test_pruning_keeps_distributions_normalised():
    from gpt_pruned_ngram import pruned, stored
    gen = torch.Generator().manual_seed(0)
    stream = torch.randint(12, (3000,), generator=gen) // torch.randint(1, 3, (3000,),
                                                                          generator=gen)
    full = KneserNey(stream, 12, order=4, discount=0.9, raw_at_start=True)
    model = pruned(full, 3)
    assert stored(model) < stored(full)
    for context in ((), (1,), (2, 0), (0, 1, 2), (11, 11, 11)):
        assert math.isclose(sum(model.prob(context, w) for w in range(12)), 1.0, rel_tol=1e-9)


def test_committed_pruned_ngram_matches_the_chapter():
    result, counts = load_result("gpt_pruned_ngram.json"), load_result("gpt_ngram_counts.json")
    assert result["held_out_targets"] == counts["held_out_targets"]
    assert result["discount"] == counts["discount"]
    for run in result["runs"]:
        assert run["stored"] <= run["budget_parameters"]
        mean = sum(run["position_losses"]) / len(run["position_losses"])
        assert math.isclose(math.exp(mean), run["perplexity"], rel_tol=1e-9)
