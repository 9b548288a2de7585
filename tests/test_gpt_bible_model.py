"""benchmarks/gpt_bible_model.py's stored GPTs (Chapter 8): each file matches its recorded hash,
loads strictly into its recorded configuration with the read-out tied, and its record agrees
with itself and with the chapter's other results."""
from importlib import resources

import pytest
import torch

from attnbook.checkpoints import read_safetensors
from attnbook.models.gpt import GPT, GPTConfig
from attnbook.results import load_result


@pytest.mark.parametrize("steps", [600, 2400])
def test_stored_gpt_loads_and_its_record_holds(steps):
    run = load_result(f"gpt_bible_{steps}.json")
    assert run["steps"] == steps
    assert run["command"] == f"python benchmarks/gpt_bible_model.py --steps {steps}"
    weights = resources.files("attnbook.results").joinpath(run["weights"])
    state = read_safetensors(weights, run["sha256"])  # refuses a file with another hash
    model = GPT(GPTConfig(**run["config"]))
    model.load_state_dict(state)  # strict: no name missing or extra
    assert torch.equal(state["readout.weight"], state["embeddings.tokens.weight"])  # tied
    assert run["curve"][-1]["step"] == steps
    assert run["curve"][-1]["perplexity"] == pytest.approx(run["perplexity"], abs=1e-3)
    assert run["held_out_targets"] == load_result("gpt_ngram_counts.json")["held_out_targets"]


def test_the_runs_reproduce_the_chapters_other_records():
    # the 2400-step run is gpt_vs_ngram.py's run again; the 600-step one the chapter's run
    long, stored = load_result("gpt_bible_2400.json")["curve"], load_result("gpt_vs_ngram.json")
    assert [p["step"] for p in long] == [p["step"] for p in stored["gpt"]["curve"]]
    assert all(abs(a["perplexity"] - b["perplexity"]) < 0.01
               for a, b in zip(long, stored["gpt"]["curve"]))
    short = load_result("gpt_bible_600.json")
    assert 23.0 < short["perplexity"] < 24.0  # the chapter's 600-step run: 23.37
