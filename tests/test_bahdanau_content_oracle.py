"""Chapter 2's vowels-last ceiling: a parameter-free band told each word's true alignment."""
import sys
from pathlib import Path

import torch

from attnbook.data import build_vocabs, make_batch
from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bahdanau_content_oracle as script  # noqa: E402
from bahdanau_content import source_positions, vowels_last_pairs  # noqa: E402
from attnbook.data.g2p import G2PSplit  # noqa: E402


def test_oracle_band_looks_at_the_copied_letter_of_each_word():
    pairs = vowels_last_pairs([("phone", ()), ("cat", ()), ("diagonal", ())])
    task = G2PSplit(pairs, [], pairs)
    src_vocab, tgt_vocab = build_vocabs(task)
    torch.manual_seed(0)
    model = script.oracle_model(task, src_vocab, tgt_vocab, width=8).eval()
    batch = make_batch(pairs, src_vocab, tgt_vocab)
    with torch.no_grad():
        _, w = model(batch.src, batch.src_lengths, batch.tgt_in, need_weights=True)  # (B, T, S)
    for b, (word, _) in enumerate(pairs):
        assert w[b, : len(word)].argmax(-1).tolist() == source_positions(word)
        assert int(w[b, len(word)].argmax()) == len(word) - 1  # <eos>: the last letter
        assert float(w[b, :, len(word):].abs().sum()) == 0.0  # padding: no weight


def test_oracle_has_no_score_parameters_and_committed_results_cover_three_seeds():
    result = load_result("bahdanau_content_oracle.json")
    runs = sorted(result["runs"], key=lambda r: r["seed"])
    assert [r["seed"] for r in runs] == [0, 1, 2]
    content = load_result("bahdanau_content.json")
    none = [r for r in content["runs"] if r["model"] == "none"]
    assert all(r["parameters"] == none[0]["parameters"] for r in runs)  # as large as no attention
    assert all(r["strongest_on_copied_letter"] == 1.0 and r["test_words"] == 858 for r in runs)
    assert "/tmp" not in result["command"]
