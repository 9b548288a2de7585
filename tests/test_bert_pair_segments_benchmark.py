"""Chapter 6's pair tasks with segment ids: pairs split by chapter, labels as documented, results files."""
import sys
from pathlib import Path

import pytest

from attnbook.data.bible import Verse
from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bert_pair_segments  # noqa: E402


def _verses(chapters: int = 20, per_chapter: int = 8):
    return [Verse(book=1 + c // 10, chapter=1 + c % 10, verse=v + 1, book_name="B", testament="OT",
                  genre="Law", text=f"c{c} v{v}") for c in range(chapters) for v in range(per_chapter)]


def _chapter_of(verses, text):
    v = next(v for v in verses if v.text == text)
    return (v.book, v.chapter)


def test_order_pairs_are_consecutive_and_labelled_by_swap():
    verses = _verses()
    counts = [3] * len(verses)
    a, b, labels, train, test = bert_pair_segments.order_pairs(verses, counts, 40, 20)
    index = {v.text: i for i, v in enumerate(verses)}
    for x, y, label in zip(a, b, labels.tolist()):
        first, second = (y, x) if label else (x, y)
        assert index[second] == index[first] + 1
        assert _chapter_of(verses, first) == _chapter_of(verses, second)
    train_chapters = {_chapter_of(verses, a[i]) for i in train.tolist()}
    test_chapters = {_chapter_of(verses, a[i]) for i in test.tolist()}
    assert not train_chapters & test_chapters
    assert 0 < int(labels.sum()) < len(labels)


def test_chapter_pairs_labels_and_split():
    verses = _verses()
    counts = [3] * len(verses)
    a, b, labels, train, test = bert_pair_segments.chapter_pairs(verses, counts, 60, 30)
    for x, y, label in zip(a, b, labels.tolist()):
        assert x != y
        assert (_chapter_of(verses, x) == _chapter_of(verses, y)) == (label == 0)
    train_chapters = {_chapter_of(verses, t) for i in train.tolist() for t in (a[i], b[i])}
    test_chapters = {_chapter_of(verses, t) for i in test.tolist() for t in (a[i], b[i])}
    assert not train_chapters & test_chapters


def test_long_verses_are_left_out():
    verses = _verses()
    counts = [bert_pair_segments.MAX_TOKENS + 1 if v.verse % 2 else 3 for v in verses]
    a, b, *_ = bert_pair_segments.chapter_pairs(verses, counts, 20, 10)
    index = {v.text: i for i, v in enumerate(verses)}
    assert all(counts[index[t]] <= bert_pair_segments.MAX_TOKENS for t in a + b)


@pytest.mark.parametrize("task", ["order", "chapter"])
def test_committed_results(task):
    result = load_result(f"bert_pair_{task}.json")
    assert result["command"] == f"python benchmarks/bert_pair_segments.py --task {task}"
    assert result["task"] == task and result["train_pairs"] == 640 and result["test_pairs"] == 400
    arms = {(r["segment ids"], r["seed"]) for r in result["runs"]}
    assert arms == {(arm, seed) for arm in ("on", "all 0") for seed in (0, 1)}
    assert all(0.0 <= r["accuracy"] <= 1.0 for r in result["runs"])
    assert 0.0 <= result["baseline"]["accuracy"] <= 1.0
