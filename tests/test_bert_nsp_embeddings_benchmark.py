"""Chapter 6's MiniLM cosines of its NSP pairs: the committed file holds them for the page's own pairs."""
import sys
from pathlib import Path

from attnbook.checkpoints import minilm_dir
from attnbook.data.wordpiece import WordPieceTokenizer
from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bert_nsp_embeddings  # noqa: E402


def test_committed_cosines_belong_to_the_chapters_first_400_pairs():
    result = load_result("bert_nsp_embeddings.json")
    assert result["command"] == "python benchmarks/bert_nsp_embeddings.py"
    assert result["pairs"] == len(result["cosine"]) == len(result["is_next"]) == 400
    assert all(-1.0 <= c <= 1.0 for c in result["cosine"])
    tokenizer = WordPieceTokenizer.from_file(minilm_dir() / "vocab.txt")
    is_next, a_texts, b_texts = bert_nsp_embeddings.side_texts(tokenizer, 400)
    assert is_next == result["is_next"]
    assert bert_nsp_embeddings.digest(a_texts, b_texts) == result["texts_sha256"]


def test_digest_depends_on_order_and_side():
    digest = bert_nsp_embeddings.digest
    assert digest(["a"], ["b"]) != digest(["b"], ["a"])
    assert digest(["a", "b"], ["c", "d"]) != digest(["b", "a"], ["c", "d"])
    assert digest(["a"], ["b"]) == digest(["a"], ["b"])
