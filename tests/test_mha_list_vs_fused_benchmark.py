"""Chapter 4's timing of the list of heads against the fused layer (benchmarks/mha_list_vs_fused.py)
runs end to end, checks that both layers compute the same outputs, and its committed results hold
what section 4.2 says of them: at the chapter's scale the fused layer is faster than the list with
8 and 64 heads and about as fast with one; on the larger shape the explicit fused layer gains
nothing at 8 heads and loses at 64, where the fused kernel is the fastest."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import mha_list_vs_fused  # noqa: E402


def test_the_script_runs_and_writes_its_results(tmp_path):
    out = tmp_path / "speed.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "mha_list_vs_fused.py"),
                    "--repeats", "1", "--warmup", "0", "--out", str(out)],
                   check=True, cwd=ROOT, capture_output=True)
    rows = json.loads(out.read_text())["runs"]
    assert [(r["shape"], r["heads"]) for r in rows] == [
        (shape, h) for shape in mha_list_vs_fused.SHAPES for h in mha_list_vs_fused.HEADS]
    assert all(r["list_ms"] > 0 and r["list_over_fused"] > 0 for r in rows)
    for r in rows:  # one repetition: its ratio is the median and both quartiles
        assert r["list_over_fused_iqr"] == [r["list_over_fused"]] * 2


def test_quartiles_of_the_per_repetition_ratios():
    assert mha_list_vs_fused.quartiles([1.0, 2.0, 3.0, 4.0, 5.0]) == [2.0, 4.0]
    assert mha_list_vs_fused.quartiles([0.9]) == [0.9, 0.9]


@pytest.mark.parametrize("heads", [1, 4])
def test_the_fused_copy_computes_the_list_of_heads(heads):
    torch.manual_seed(0)
    listed = mha_list_vs_fused.MultiHeadAsList(16, heads)
    x = torch.randn(2, 5, 16)
    fused = mha_list_vs_fused.fused_copy(listed)
    torch.testing.assert_close(fused(x, x, x), listed(x), atol=1e-5, rtol=1e-4)
    with torch.no_grad():  # a wrong layout (heads' rows interleaved) must differ
        fused.q_proj.weight.copy_(fused.q_proj.weight.flip(0))
    if heads > 1:
        assert not torch.allclose(fused(x, x, x), listed(x), atol=1e-5)


def _ratios(shape_prefix, key):
    return {r["heads"]: r[key] for r in load_result("mha_list_vs_fused.json")["runs"]
            if r["shape"].startswith(shape_prefix)}


def test_the_committed_runs_show_what_the_chapter_says():
    chapter = _ratios("chapter", "list_over_fused")
    assert sorted(chapter) == [1, 8, 64]
    assert 0.8 <= chapter[1] <= 1.25  # one head: the same operations either way
    assert chapter[8] > 1.2 and chapter[64] > 1.2  # many small heads: the fused layer wins
    larger = _ratios("larger", "list_over_fused")
    assert larger[8] < 1.2 and larger[64] < 1.0  # big tensors: batching the heads gains little
    assert _ratios("larger", "list_over_fused_kernel")[64] > 1.3  # the kernel still wins


def test_every_committed_ratio_lies_inside_its_interquartile_range():
    for r in load_result("mha_list_vs_fused.json")["runs"]:
        for key in ("list_over_fused", "list_over_fused_kernel"):
            low, high = r[key + "_iqr"]
            assert low <= r[key] <= high, (r["shape"], r["heads"], key)
