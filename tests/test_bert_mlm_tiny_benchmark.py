"""Chapter 6's tiny BERTs, saved as safetensors by benchmarks/bert_mlm_tiny.py (400 steps, BERT's
masking) and benchmarks/bert_mlm_weights.py (the [MASK]-only twin): the committed files hold what
the chapter loads (the command, the losses, weights that fit the page's model), and smoke runs
write the same fields."""
import json
import sys
from pathlib import Path

from safetensors import safe_open

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bert_mlm_tiny  # noqa: E402
import bert_mlm_weights  # noqa: E402

from attnbook.models.bert import BertForPreTraining  # noqa: E402


def read(path):
    with safe_open(str(path), "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, f.metadata()


def check_saved(path, steps: int, command: str, vocab_size: int | None = None) -> list[float]:
    state, meta = read(path)
    assert meta["command"].startswith(command)
    losses = json.loads(meta["losses"])
    assert int(meta["steps"]) == steps and len(losses) == steps
    vocab = vocab_size or state["bert.embeddings.tokens.weight"].shape[0]
    model = BertForPreTraining(bert_mlm_tiny.config(vocab))
    model.load_state_dict(state)  # strict: every tensor, the right shapes
    assert model.mlm.readout.weight is model.bert.embeddings.tokens.weight
    return losses


def test_committed_weights_fit_the_chapter_model():
    losses = check_saved(bert_mlm_tiny.WEIGHTS, 400, "python benchmarks/bert_mlm_tiny.py", 1005)
    late = sum(losses[-50:]) / 50
    assert 4.5 < late < 5.2  # the chapter prints 4.87
    assert late < losses[0] - 1.5  # it trained (the first step: about ln 1005 = 6.9)
    assert not (bert_mlm_tiny.WEIGHTS.parent / "bert_mlm_tiny.pt").exists()  # no pickle left


def test_committed_mask_only_twin():
    path = bert_mlm_tiny.WEIGHTS.with_name("bert_mlm_mask-only.safetensors")
    losses = check_saved(path, 400, "python benchmarks/bert_mlm_weights.py --model mask-only", 1005)
    assert read(path)[1]["masking"] == "15% chosen; 100% [MASK]"
    assert sum(losses[-50:]) / 50 < losses[0] - 1.0


def test_committed_1000_step_model():
    path = bert_mlm_tiny.WEIGHTS.with_name("bert_mlm_1000.safetensors")
    losses = check_saved(path, 1000, "python benchmarks/bert_mlm_weights.py --model longer --steps 1000",
                         1005)
    assert sum(losses[-50:]) / 50 < 4.8  # lower than the 400-step model's 4.87


def test_smoke_runs_write_the_same_fields(tmp_path):
    out = tmp_path / "tiny.safetensors"
    assert bert_mlm_tiny.main(["--smoke", "--out", str(out)]) == 0
    check_saved(out, 5, "python benchmarks/bert_mlm_tiny.py")
    twin = tmp_path / "twin.safetensors"
    assert bert_mlm_weights.main(["--model", "mask-only", "--smoke", "--out", str(twin)]) == 0
    check_saved(twin, 5, "python benchmarks/bert_mlm_weights.py")
    assert read(twin)[1]["masking"] == "15% chosen; 100% [MASK]"
