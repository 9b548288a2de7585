"""Chapter 1's width benchmark runs (smoke mode), resumes, and its committed results hold what the
chapter reads: per width and seed, PER by length bucket, and a summary recomputed from the runs."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = str(ROOT / "benchmarks" / "rnn_width.py")
BUCKETS = ["1-4", "5-6", "7-8", "9-10", "11-12", "13+"]


def test_smoke_run_then_resume(tmp_path):
    first = subprocess.run([sys.executable, SCRIPT, "--smoke", "--seeds", "0", "--widths", "64", "128"],
                           check=True, capture_output=True, text=True, timeout=600)
    rows = [json.loads(line) for line in first.stdout.splitlines() if line.startswith("{")]
    assert [(r["width"], r["context"]) for r in rows] == [(64, 128), (128, 256)]
    assert rows[0]["parameters"] < rows[1]["parameters"]  # the width really changed
    log = tmp_path / "first.log"
    log.write_text(first.stdout)
    out = tmp_path / "merged.json"
    again = subprocess.run([sys.executable, SCRIPT, "--smoke", "--seeds", "0", "--widths", "64", "128",
                            "--resume", str(log), "--out", str(out)],
                           check=True, capture_output=True, text=True, timeout=300)
    assert not [line for line in again.stdout.splitlines() if line.startswith("{")]  # nothing re-run
    merged = json.loads(out.read_text())
    assert merged["runs"] == rows and set(merged["summary"]) == {"64", "128"}


def test_committed_results_hold_what_the_chapter_reads():
    result = load_result("rnn_width.json")
    table = load_result("rnn_bottleneck.json")["count_table"]
    assert result["widths"] == [64, 128, 256] and len(result["seeds"]) >= 2
    assert result["recipe"]["peak_lr"] == 6e-3 and result["recipe"]["label_smoothing"] == 0.1
    assert {(r["width"], r["seed"]) for r in result["runs"]} == {
        (w, s) for w in result["widths"] for s in result["seeds"]}
    for w, s in result["summary"].items():
        runs = [r for r in result["runs"] if str(r["width"]) == w]
        assert all(r["steps"] == 1200 and list(r["by_length"]) == BUCKETS for r in runs)
        for i, b in enumerate(BUCKETS):  # the summary is the mean of the runs' gaps to the table
            gaps = [100 * (r["by_length"][b]["per"] - table["by_length"][b]["per"]) for r in runs]
            assert s["gap_mean"][b] == pytest.approx(sum(gaps) / len(gaps), abs=0.01)
            assert s["words"][b] == table["by_length"][b]["words"]  # the same test words
        assert s["rise"] == pytest.approx(
            [100 * ((r["by_length"]["13+"]["per"] - table["by_length"]["13+"]["per"])
                    - (r["by_length"]["1-4"]["per"] - table["by_length"]["1-4"]["per"]))
             for r in sorted(runs, key=lambda r: r["seed"])], abs=0.01)


def test_bottleneck_model_squeezes_c_and_decodes_as_it_trains():
    """The bottleneck mode's model: C has K numbers, the decoder sees only that C, and stepping
    through ``start``/``step`` gives the teacher-forced logits."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from rnn_width import BottleneckSeq2Seq
    from attnbook.models.rnn import RNNSeq2SeqConfig

    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    config = RNNSeq2SeqConfig(src_vocab_size=9, tgt_vocab_size=7, emb_dim=8, enc_hidden=16, dec_hidden=12)
    model = BottleneckSeq2Seq(config, context=5).eval()
    src = torch.randint(1, 9, (3, 6))
    lengths = torch.tensor([6, 4, 2])
    tgt_in = torch.randint(1, 7, (3, 4))
    state = model.start(src, lengths)
    assert state.context.shape == (3, 5)  # K numbers, not 2 * enc_hidden
    assert model.decoder.gru.input_size == 8 + 5 and model.decoder.init_state.in_features == 5
    steps = []
    for t in range(tgt_in.shape[1]):
        logits, state = model.step(tgt_in[:, t], state)
        steps.append(logits)
    torch.testing.assert_close(torch.stack(steps, 1), model(src, lengths, tgt_in))
    with torch.no_grad():  # a different squeeze gives a different output: the map is in the path
        before = model(src, lengths, tgt_in)
        model.bottleneck.weight.mul_(-1)
        assert not torch.allclose(before, model(src, lengths, tgt_in))


def test_bottleneck_smoke_run(tmp_path):
    run = subprocess.run([sys.executable, SCRIPT, "--smoke", "--seeds", "0", "--bottleneck", "64", "256",
                          "--out", str(tmp_path / "b.json")],
                         check=True, capture_output=True, text=True, timeout=600)
    rows = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    assert [(r["width"], r["context"], r["bottleneck"]) for r in rows] == [(128, 64, 64), (128, 256, 256)]
    assert rows[0]["parameters"] < rows[1]["parameters"]
    result = json.loads((tmp_path / "b.json").read_text())
    assert set(result["summary"]) == {"64", "256"} and result["enc_hidden"] == 128


def test_committed_bottleneck_results_hold_what_the_chapter_reads():
    result = load_result("rnn_width_bottleneck.json")
    table = load_result("rnn_bottleneck.json")["count_table"]
    assert result["bottleneck"] == [64, 128, 256] and result["seeds"] == [0, 1, 2]
    assert result["enc_hidden"] == 128 and result["recipe"]["peak_lr"] == 6e-3
    assert {(r["context"], r["seed"]) for r in result["runs"]} == {
        (k, s) for k in result["bottleneck"] for s in result["seeds"]}
    for k, s in result["summary"].items():
        runs = sorted((r for r in result["runs"] if str(r["context"]) == k), key=lambda r: r["seed"])
        assert all(r["steps"] == 1200 and r["width"] == 128 and list(r["by_length"]) == BUCKETS
                   for r in runs)
        for b in BUCKETS:
            gaps = [100 * (r["by_length"][b]["per"] - table["by_length"][b]["per"]) for r in runs]
            assert s["gap_mean"][b] == pytest.approx(sum(gaps) / len(gaps), abs=0.01)
        assert s["rise"] == pytest.approx(
            [100 * ((r["by_length"]["13+"]["per"] - table["by_length"]["13+"]["per"])
                    - (r["by_length"]["1-4"]["per"] - table["by_length"]["1-4"]["per"])) for r in runs],
            abs=0.01)
