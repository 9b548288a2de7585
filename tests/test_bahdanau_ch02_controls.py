"""Chapter 2's round-26 controls: the learned position-only score (vowels-last task), the fixed band
on joined inputs, and the §2.6 table helper."""
import json
import subprocess
import sys
from pathlib import Path

import torch

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bahdanau_content_position as position  # noqa: E402


def test_position_score_sees_positions_not_content():
    torch.manual_seed(0)
    score = position.PositionAdditiveScore(query_dim=8, key_dim=12, hidden=5)
    keys = torch.randn(2, 4, 12)
    keys[1, 3:] = 0  # word 2 has 3 letters (zeros at padding, as packed sequences give)
    other = torch.randn(2, 4, 12)
    other[1, 3:] = 0
    query, other_query = torch.randn(2, 1, 8), torch.randn(2, 1, 8)
    first = [score.score(query, score.prepare(keys)) for _ in range(1)]
    prepared = score.prepare(other)
    again = score.score(other_query, prepared)
    assert torch.equal(first[0], again)  # new contents, new query: the same scores
    later = score.score(other_query, prepared)  # the next step: a different query code
    assert not torch.equal(later, again)
    assert sum(p.numel() for p in score.parameters()) == 8 * 5 + 12 * 5 + 5


def test_committed_position_results_match_the_additive_size():
    result = load_result("bahdanau_content_position.json")
    content = load_result("bahdanau_content.json")
    additive = {r["seed"]: r for r in content["runs"] if r["model"] == "additive"}
    assert sorted(r["seed"] for r in result["runs"]) == [0, 1, 2]
    for r in result["runs"]:
        assert r["parameters"] == additive[r["seed"]]["parameters"]
        assert r["steps"] == additive[r["seed"]]["steps"] and r["test_words"] == additive[r["seed"]]["test_words"]


def test_position_smoke_run_writes_every_seed(tmp_path):
    out = tmp_path / "position.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bahdanau_content_position.py"), "--smoke",
                    "--out", str(out)], check=True, capture_output=True, timeout=400)
    result = json.loads(out.read_text())
    assert [r["seed"] for r in result["runs"]] == result["setup"]["seeds"]


def test_committed_band_results_have_bucket_sizes_and_the_band_ratio():
    result = load_result("bahdanau_length_band.json")
    assert abs(result["setup"]["ratio"] - 0.85) < 0.01 and result["setup"]["sigma"] == 1.0
    for cell in result["by_length"].values():
        assert cell["inputs"] == 150
        for per_step in cell["band_per"].values():
            assert all(0 <= p < 2 for p in per_step.values())
    assert all(r["parameters"] == 364_971 for r in result["runs"])  # Chapter 1's size


def test_budget_table_prints_the_four_budgets(capsys):
    from types import SimpleNamespace

    from attnbook.tasks.g2p_budgets import budget_table
    shipped = budget_table(SimpleNamespace(wer=0.6, per=0.2), SimpleNamespace(wer=0.5, per=0.1))
    out = capsys.readouterr().out
    assert "fixed band" in out and "8,000 steps" in out and "count table, 9 letters" in out
    table = shipped["table"]
    assert set(table) == {"no attention", "fixed band", "learned attention"}
    assert all(len(row) == 5 for row in table.values())
    # this page's own recipe (train_g2p, default Adam betas) at 1,200 steps: attention, 3 seeds
    page = shipped["page_1200"]
    assert [r["seed"] for r in page] == [0, 1, 2]
    assert all(r["recipe"]["steps"] == 1200 and r["recipe"]["lr"] == 0.003
               and r["recipe"]["label_smoothing"] == 0.0 for r in page)
    mean = sum(r["test_wer"] for r in page) / 3
    assert table["learned attention"][1][0] == mean and table["learned attention"][1][2] == 3
    assert table["no attention"][1] is None
    assert table["fixed band"][1] is None and table["fixed band"][4] is None
    assert "one recipe change at a time" in out and "warm-up + linear decay, smoothing 0.1" in out
    assert "seed 0 is this page's pair of models: False" in out  # the fake page models above


def test_budget_table_quiet_returns_the_text(capsys):
    from types import SimpleNamespace

    from attnbook.tasks.g2p_budgets import budget_table
    pages = SimpleNamespace(wer=0.6, per=0.2), SimpleNamespace(wer=0.5, per=0.1)
    loud = budget_table(*pages)
    printed = capsys.readouterr().out
    quiet = budget_table(*pages, quiet=True)
    assert capsys.readouterr().out == ""
    assert quiet["printout"] == printed and quiet["table"] == loud["table"]
