"""Chapter 5's timing of a fused plain GRU beside GRU + attention and the Transformer
(benchmarks/step_time_length.py --models ...): the smoke run writes all three models' columns,
and the committed file holds what the chapter reads."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]


def test_three_model_smoke_run(tmp_path):
    out = tmp_path / "fused.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "step_time_length.py"), "--models", "gru",
                    "gru_attention", "transformer", "--lengths", "4", "--repeats", "1", "--out", str(out)],
                   check=True, capture_output=True, timeout=300)
    result = json.loads(out.read_text())
    (row,) = result["runs"]
    assert result["device"] == "cpu"
    for key in ("gru_ms", "gru_attention_ms", "transformer_ms", "gru_time_ratio", "time_ratio"):
        assert row[key] > 0


def test_committed_fused_timing():
    result = load_result("step_time_length_fused.json")
    runs = sorted(result["runs"], key=lambda r: r["T"])
    assert [r["T"] for r in runs] == [8, 64, 256] and result["device"] == "cpu"
    for r in runs:
        assert r["gru_flop_ratio"] == 1.4
        assert r["gru_time_ratio_min"] <= r["gru_time_ratio"] <= r["gru_time_ratio_max"]
        assert r["gru_time_ratio"] < r["time_ratio"]  # the fused model trails less
    assert runs[0]["gru_time_ratio_max"] < runs[-1]["gru_time_ratio_min"]  # as the chapter says


def test_committed_cuda_timing():
    """The H100 run (device tool): the Transformer's step time stays nearly flat from T = 8 to
    512 while GRU + attention's, a Python loop over the T steps, grows with T."""
    result = load_result("step_time_length_cuda.json")
    runs = sorted(result["runs"], key=lambda r: r["T"])
    assert result["device"] == "cuda" and [r["T"] for r in runs] == [8, 32, 64, 128, 256, 512]
    transformer = [r["transformer_ms"] for r in runs]
    assert max(transformer) < 1.5 * min(transformer)
    attention = [r["gru_attention_ms"] for r in runs]
    assert attention == sorted(attention) and attention[-1] > 20 * attention[0]
    for r in runs:
        assert r["time_ratio_min"] <= r["time_ratio"] <= r["time_ratio_max"]
