"""benchmarks/gpt_bible_model.py's stored GPTs (Chapter 8): each file matches its recorded hash,
loads strictly into its recorded configuration with the read-out tied, and its record agrees
with itself and with the chapter's other results."""
import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

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


def test_the_2400_step_record_holds_a_train_vs_held_out_curve():
    # Section 8.4's train-vs-held-out figure: the training windows' loss at every held-out step
    run = load_result("gpt_bible_2400.json")
    steps = [p["step"] for p in run["curve"]]
    assert [p["step"] for p in run["train_curve"]] == steps
    assert run["train_windows"] == run["held_out_targets"] // run["window"]
    for point in run["train_curve"]:
        assert 2.0 < point["train_windows_loss"] < 4.0 and 2.0 < point["batch_loss"] < 5.0


def test_a_smoke_run_writes_the_train_curve(tmp_path):
    out = tmp_path / "gpt_bible_20.json"
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, str(root / "benchmarks" / "gpt_bible_model.py"), "--smoke",
                    "--out", str(out)], check=True, capture_output=True, text=True, timeout=300)
    run = json.loads(out.read_text())
    assert [p["step"] for p in run["train_curve"]] == [p["step"] for p in run["curve"]]
    assert run["train_windows"] > 0
