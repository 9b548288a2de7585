"""Chapter 2: benchmarks/bahdanau_align_1200.py scores the 1,200-step model's alignment."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
KEYS = ("learned", "global_band", "per_word_band")


def test_committed_result_is_seed_0_at_1200_steps_of_the_page_recipe():
    result = load_result("bahdanau_align_1200.json")
    assert "bahdanau_align_1200.py" in result["command"]
    (run,) = result["runs"]
    assert run["seed"] == 0 and run["steps"] == 1200 and run["test_words"] == 5825
    # the same training as bahdanau_page_1200.py's seed 0
    page = {r["seed"]: r for r in load_result("bahdanau_page_1200.json")["runs"]}
    assert abs(run["test_wer"] - page[0]["test_wer"]) < 0.01
    a = run["alignment"]
    assert a["test_words"] == 486 and a["aligned_phonemes"] == 3072
    for key in KEYS:
        assert 0.0 <= a[key]["exact"] <= a[key]["within_one"] <= 1.0


def test_smoke_run_writes_the_scores(tmp_path):
    out = tmp_path / "align.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bahdanau_align_1200.py"),
                    "--smoke", "--out", str(out)], check=True, capture_output=True, timeout=600)
    (run,) = json.loads(out.read_text())["runs"]
    assert run["steps"] == 3
    # the bands do not depend on the model: the values the chapter prints for them
    assert abs(run["alignment"]["per_word_band"]["exact"] - 0.757) < 0.001
    assert abs(run["alignment"]["global_band"]["exact"] - 0.603) < 0.001


def test_committed_tuned_model_is_g2p_compare_seed_0_at_rate_0006():
    """The weights §2.7-§2.9 load: the page's model, tuned recipe, seed 0, peak rate 0.006."""
    from importlib import resources

    from attnbook.checkpoints import read_safetensors
    from attnbook.data import build_vocabs, load_g2p
    from attnbook.models.rnn import RNNAttentionSeq2Seq, RNNAttentionSeq2SeqConfig

    result = load_result("bahdanau_align_1200_tuned.json")
    assert "bahdanau_align_1200.py --tuned --save" in result["command"]
    (run,) = result["runs"]
    assert run["seed"] == 0 and run["steps"] == 1200 and run["peak_lr"] == 0.006
    compare = [r for r in load_result("g2p_compare.json")["runs"] if r["model"] == "gru_attention"
               and r["seed"] == 0 and r["steps"] == 1200 and r.get("peak_lr") == 0.006
               and r["recipe"] == run["recipe"]]
    assert compare and all(r["test_wer"] == run["test_wer"] for r in compare)  # the same run
    assert run["alignment"]["aligned_phonemes"] == 3072
    src_vocab, tgt_vocab = build_vocabs(load_g2p())
    model = RNNAttentionSeq2Seq(RNNAttentionSeq2SeqConfig(len(src_vocab), len(tgt_vocab)))
    weights = resources.files("attnbook.results").joinpath(run["weights"])
    model.load_state_dict(read_safetensors(weights, run["sha256"]))  # refuses a changed file


def test_tuned_smoke_run_writes_the_scores(tmp_path):
    out = tmp_path / "tuned.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bahdanau_align_1200.py"),
                    "--tuned", "--smoke", "--out", str(out)], check=True, capture_output=True,
                   timeout=600)
    (run,) = json.loads(out.read_text())["runs"]
    assert run["steps"] == 3 and run["peak_lr"] == 0.006 and "weights" not in run
    assert abs(run["alignment"]["per_word_band"]["exact"] - 0.757) < 0.001
