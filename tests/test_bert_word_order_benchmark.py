"""Chapter 6's word-order side study: the shuffle keeps words and punctuation, and the results
file holds what the chapter prints."""
import random
import sys
from collections import Counter
from pathlib import Path

from attnbook.data.wordpiece import basic_tokenize
from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bert_word_order  # noqa: E402


def test_shuffle_moves_words_only():
    text = "And God said, Let there be light: and there was light."
    out = bert_word_order.shuffle_words(text, random.Random(0)).split()
    pieces = basic_tokenize(text)
    assert out != pieces  # the order changed
    assert Counter(out) == Counter(pieces)  # the same words and marks
    assert [(n, p) for n, p in enumerate(out) if not p[0].isalnum()] == \
        [(n, p) for n, p in enumerate(pieces) if not p[0].isalnum()]  # marks stay in place
    # a verse of one repeated word cannot change: it is returned as it is
    assert bert_word_order.shuffle_words("Holy, holy, holy.", random.Random(0)).split() == \
        basic_tokenize("Holy, holy, holy.")


def test_results_file():
    result = load_result("bert_word_order.json")
    assert result["command"] == "python benchmarks/bert_word_order.py"
    assert result["verses"] == result["shuffles that differ"] == 480
    assert result["same token counts"] and result["regex split equals basic_tokenize"]
    accuracy = result["accuracy"]
    assert set(accuracy) == {"pretrained MiniLM", "random init", "bag of tokens", "bag of bigrams",
                             "word-bigram LM"}
    assert all(len(a) == 5 for a in accuracy.values())
    assert accuracy["bag of tokens"] == [0.5] * 5  # the same counts: chance by construction
    assert result["rule 'original iff it ends in punctuation'"] == 0.5
