"""Chapter 6's fine-tuning study: its committed results hold what the chapter reads, and its runs resume."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = str(ROOT / "benchmarks" / "bert_finetune.py")
CONDITIONS = {"probe", "pretrained-cls", "pretrained-pooler", "pretrained-mean", "random-mean"}


def test_committed_results_cover_every_condition_on_a_shared_split():
    result = load_result("bert_finetune.json")
    assert "benchmarks/bert_finetune.py" in result["command"]
    runs = result["runs"]
    assert {r["condition"] for r in runs} == CONDITIONS
    assert all(0.0 <= r["accuracy"] <= 1.0 and r["per_genre"] == result["per_genre"] for r in runs)
    shared = set.intersection(*({r["seed"] for r in runs if r["condition"] == c} for c in CONDITIONS))
    assert 0 in shared  # the chapter compares every row on split 0
    tuned = {r["lr"] for r in runs if r["condition"] != "probe"}
    assert len(tuned) == 1  # one learning rate for every fine-tuned row
    assert all(len(r["epoch_losses"]) == result["epochs"] for r in runs if r["condition"] != "probe")


def test_resume_reads_earlier_runs_instead_of_repeating_them(tmp_path):
    row = {"condition": "random-mean", "lr": 1e-4, "seed": 0, "per_genre": 4, "epochs": 1, "test_examples": 64,
           "accuracy": 0.25, "epoch_losses": [2.0], "seconds": 1.0}
    log = tmp_path / "earlier.log"
    log.write_text("header\n" + json.dumps(row) + "\n")
    out = tmp_path / "merged.json"
    done = subprocess.run([sys.executable, SCRIPT, "--smoke", "--seeds", "0", "--conditions", "random-mean",
                           "--resume", str(log), "--out", str(out)], check=True, capture_output=True, text=True,
                          timeout=300)
    assert "0 runs to do, 1 read from earlier logs" in done.stdout
    assert json.loads(out.read_text())["runs"] == [row]


# --- the affordable fine-tuning: the last block and a head, rate chosen on training verses --------
def test_every_committed_condition_has_all_three_splits():
    runs = load_result("bert_finetune.json")["runs"]
    for condition in CONDITIONS:
        assert {r["seed"] for r in runs if r["condition"] == condition} == {0, 1, 2}, condition


def test_top_results_choose_each_rate_on_validation_verses_only():
    result = load_result("bert_finetune_top.json")
    assert "benchmarks/bert_finetune_top.py" in result["command"]
    runs = result["runs"]
    for seed in (0, 1, 2):
        select = [r for r in runs if r["phase"] == "select" and r["seed"] == seed]
        (test,) = [r for r in runs if r["phase"] == "test" and r["seed"] == seed]
        (probe,) = [r for r in runs if r["phase"] == "probe" and r["seed"] == seed]
        assert sorted(r["lr"] for r in select) == sorted(result["lrs"])
        best = max(select, key=lambda r: (r["accuracy"], -r["lr"]))
        assert test["lr"] == best["lr"]  # the rate the held-out *training* verses preferred
        assert test["evaluated"] == 240 and all(r["evaluated"] == 80 for r in select)
        assert 0.0 <= probe["accuracy"] <= 1.0


def test_fine_tune_top_trains_copies_and_learns_a_separable_task():
    import torch

    from attnbook.models.bert import Bert, BertConfig
    from attnbook.tasks import text_classification as tc

    torch.manual_seed(0)
    model = Bert(BertConfig(vocab_size=30, d_model=16, num_layers=2, num_heads=2, d_ff=32, max_len=8,
                            dropout=0.0)).eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    labels = torch.arange(64) % 2
    ids = torch.randint(5, 17, (64, 6)) + 12 * labels[:, None]  # class 1 uses other tokens
    ids[:, 0] = 2
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[::2, 4:] = False

    class Tokenizer:  # cached_states' interface, for ids already made
        def encode_batch(self, texts):
            rows = list(texts)
            return type("Inputs", (), {"input_ids": ids[rows], "segment_ids": torch.zeros_like(ids[rows]),
                                       "token_mask": mask[rows]})()

    cached, cached_mask = tc.cached_states(model, Tokenizer(), list(range(64)), depth=1)
    assert cached.shape == (64, 6, 16) and torch.equal(cached_mask, mask)
    train, test = torch.arange(0, 48), torch.arange(48, 64)
    result = tc.fine_tune_top(model, cached, cached_mask, labels, train, test, num_blocks=1, lr=3e-3,
                              epochs=30, seed=0)
    assert result.epoch_losses[-1] < result.epoch_losses[0]
    assert result.final_train_loss < 0.3 and result.accuracy > 0.8  # it fits, and it generalises
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())  # the model is untouched
