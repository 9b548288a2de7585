"""benchmarks/gpt_component_ladder.py (Chapter 8): a removed sublayer adds nothing and gets no
gradient, the smoke run writes every variant, and the committed results are complete and
reproduce the chapter's stored 600-step GPT."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attnbook.models.gpt import GPTConfig
from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from gpt_component_ladder import VARIANTS, build  # noqa: E402

SMALL = GPTConfig(vocab_size=32, max_len=8, d_model=16, num_heads=2, d_ff=32, num_layers=2)


@pytest.mark.parametrize("variant, unused", [("no_attention", ("self_attn", "norm1")),
                                             ("no_feed_forward", ("feed_forward", "norm2"))])
def test_a_removed_sublayer_adds_nothing_and_learns_nothing(variant, unused):
    model, used = build(variant, SMALL)
    full, all_params = build("full", SMALL)
    assert all_params == sum(p.numel() for p in full.parameters())
    removed = sum(p.numel() for block in model.blocks for name in unused
                  for p in getattr(block, name).parameters())
    assert used == all_params - removed
    tokens = torch.randint(32, (2, 8), generator=torch.Generator().manual_seed(0))
    model(tokens).sum().backward()
    for block in model.blocks:
        for name in unused:
            assert all(p.grad is None for p in getattr(block, name).parameters())
    # the same seed draws the same weights: only the removed sublayer differs
    assert torch.equal(model.embeddings.tokens.weight, full.embeddings.tokens.weight)
    assert not torch.allclose(model(tokens), full(tokens))


def test_no_attention_means_no_context():
    model, _ = build("no_attention", SMALL)
    tokens = torch.randint(32, (1, 8), generator=torch.Generator().manual_seed(1))
    changed = tokens.clone()
    changed[0, 0] = (tokens[0, 0] + 1) % 32
    with torch.no_grad():
        assert torch.equal(model(tokens)[0, 1:], model(changed)[0, 1:])


def test_smoke_run_writes_every_variant(tmp_path):
    out = tmp_path / "ladder.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpt_component_ladder.py"),
                    "--smoke", "--out", str(out)], check=True, capture_output=True, text=True,
                   timeout=600)
    assert [r["variant"] for r in json.loads(out.read_text())["runs"]] == list(VARIANTS)


def test_committed_results_are_complete_and_reproduce_the_chapters_run():
    ladder = load_result("gpt_component_ladder.json")
    assert ladder["command"] == "python benchmarks/gpt_component_ladder.py"
    assert [r["variant"] for r in ladder["runs"]] == list(VARIANTS)
    stored = load_result("gpt_bible_600.json")
    assert ladder["steps"] == stored["steps"] == 600
    assert ladder["held_out_targets"] == stored["held_out_targets"]
    full = next(r for r in ladder["runs"] if r["variant"] == "full")
    assert full["parameters"] == stored["parameters"]
    assert full["perplexity"] == pytest.approx(stored["perplexity"], abs=0.01)
