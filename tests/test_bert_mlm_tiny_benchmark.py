"""Chapter 6's 400-step tiny BERT, trained by benchmarks/bert_mlm_tiny.py: the committed file holds
what the chapter loads (the command, 400 losses, a state_dict that fits the page's model), and a
smoke run writes the same fields."""
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bert_mlm_tiny  # noqa: E402

from attnbook.models.bert import BertForPreTraining  # noqa: E402


def check_saved(saved: dict, steps: int) -> None:
    assert saved["command"].startswith("python benchmarks/bert_mlm_tiny.py")
    assert saved["steps"] == steps and len(saved["losses"]) == steps
    model = BertForPreTraining(bert_mlm_tiny.config(saved["vocab_size"]))
    model.load_state_dict(saved["state_dict"])  # strict: every tensor, the right shapes
    assert model.mlm.readout.weight is model.bert.embeddings.tokens.weight


def test_committed_weights_fit_the_chapter_model():
    saved = torch.load(bert_mlm_tiny.WEIGHTS)
    check_saved(saved, 400)
    assert saved["vocab_size"] == 1005
    late = sum(saved["losses"][-50:]) / 50
    assert 4.5 < late < 5.2  # the chapter prints 4.87
    assert late < saved["losses"][0] - 1.5  # it trained (the first step: about ln 1005 = 6.9)


def test_smoke_run_writes_the_same_fields(tmp_path):
    out = tmp_path / "tiny.pt"
    assert bert_mlm_tiny.main(["--smoke", "--out", str(out)]) == 0
    check_saved(torch.load(out), 5)
