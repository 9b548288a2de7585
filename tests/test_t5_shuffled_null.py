"""Chapter 10's shuffled-byte null (benchmarks/t5_shuffled_null.py): the smoke run writes every part,
and the shuffle keeps the bytes and loses their order."""
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_shuffle_keeps_the_bytes_not_their_order():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from t5_shuffled_null import shuffled
    text = "the cat sat on the mat " * 20
    mixed = shuffled(text)
    assert Counter(mixed) == Counter(text) and mixed != text
    assert shuffled(text) == mixed  # seeded


def test_smoke_run_records_pretraining_biases_and_runs(tmp_path):
    out = tmp_path / "null.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "t5_shuffled_null.py"), "--smoke",
                    "--out", str(out)], check=True, capture_output=True, timeout=600)
    result = json.loads(out.read_text())
    assert result["pretrain"]["corpus"] == "shuffled spellings"
    assert len(result["pretrain"]["encoder_bias_summary"]["heads"]) == 2  # the smoke model's heads
    assert [r["arm"] for r in result["runs"]] == ["pretrained on shuffled bytes"] * 3
