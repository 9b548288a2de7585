"""Chapter 6's side study: a verse or its word-shuffled copy? Token counts cannot tell (the two
hold the same tokens); MiniLM's mean-pooled vectors, a random-init encoder, a bag of bigrams and
a word-bigram language model counted on the rest of the Bible are compared.

Usage (from the repository root), about 20 CPU-seconds:
``python benchmarks/bert_word_order.py``
(writes ``lib/attnbook/results/bert_word_order.json``)

The data are the chapter's: the 480 verses of at most 32 WordPiece tokens, 60 per genre
(``genre_sample(seed=0)``). Each verse's words are shuffled among the word slots (punctuation
stays in place, ``random.Random(0)``). The chapter's linear probe is trained on 240 verses and
their shuffles and tested on the other 240 and theirs (5 splits, seeds 0-4, each verse kept with
its shuffle). Features: MiniLM's sentence embeddings (mean-pooled, normalised); the same
architecture with random weights (``torch.manual_seed(0)``) and MiniLM's position and segment
tables copied in; token counts; counts of the adjacent token pairs found in at least 2 of the 960
texts. The word-bigram LM (add-0.1 smoothing) is counted on every verse outside the 480; its one
feature, a text's mean log-probability per word, gets a threshold fitted on each training half.
This code was the chapter's own (run on the page until this script took it over).
"""
from __future__ import annotations

import math
import random
import re
import statistics
from collections import Counter

import torch

import common
from attnbook.checkpoints import MINILM_SHA256, minilm_dir
from attnbook.data.bible import genre_names, load_bible
from attnbook.data.wordpiece import WordPieceTokenizer, basic_tokenize
from attnbook.models.bert import Bert, BertConfig, load_pretrained_bert
from attnbook.tasks import text_classification as tc


def shuffle_words(text, rng):
    """The verse's words shuffled among the word slots; punctuation stays in place."""
    pieces = basic_tokenize(text)  # lower-cased words and punctuation marks
    slots = [n for n, piece in enumerate(pieces) if piece[0].isalnum()]
    for _ in range(10):  # a verse of repeated words may need more than one try
        words = [pieces[n] for n in slots]
        rng.shuffle(words)
        out = list(pieces)
        for n, word in zip(slots, words):
            out[n] = word
        if out != pieces:
            break
    return " ".join(out)


def main() -> None:
    torch.set_num_threads(1)
    tokenizer = WordPieceTokenizer.from_file(minilm_dir() / "vocab.txt")
    verses = load_bible()
    texts = [v.text for v in verses]
    counts = [len(ids) - 2 for ids in (tokenizer.encode(t)[0] for t in texts)]
    labelled = tc.genre_sample(verses, counts, per_genre=60, max_tokens=32, seed=0, genres=genre_names())
    model = load_pretrained_bert(minilm_dir(), MINILM_SHA256).eval()
    torch.manual_seed(0)
    random_encoder = Bert(BertConfig.minilm_l6())
    for table in ("positions", "segments"):  # only the layers and the token table differ
        getattr(random_encoder.embeddings, table).load_state_dict(getattr(model.embeddings, table).state_dict())
    random_encoder = random_encoder.eval()

    shuffle_rng = random.Random(0)
    shuffled = [shuffle_words(t, shuffle_rng) for t in labelled.texts]
    marks = lambda t: [(n, p) for n, p in enumerate(basic_tokenize(t)) if not p[0].isalnum()]
    differ = sum(s.split() != basic_tokenize(t) for s, t in zip(shuffled, labelled.texts))
    same_marks = sum(marks(s) == marks(t) for s, t in zip(shuffled, labelled.texts))
    tokens = tc.bag_of_tokens(tokenizer, labelled.texts)
    shuffled_tokens = tc.bag_of_tokens(tokenizer, shuffled)
    # bag of bigrams: counts of the adjacent token pairs found in at least 2 of the 960 texts
    verse_ids = [tokenizer.encode(t)[0][1:-1] for t in [*labelled.texts, *shuffled]]
    in_texts = Counter(p for v in verse_ids for p in set(zip(v, v[1:])))
    columns = {p: n for n, p in enumerate(p for p, k in in_texts.items() if k >= 2)}
    bigram_counts = torch.zeros(len(verse_ids), len(columns))  # (960, pairs)
    for row, v in enumerate(verse_ids):
        for p in zip(v, v[1:]):
            if p in columns:
                bigram_counts[row, columns[p]] += 1
    both = [*labelled.texts, *shuffled]
    order_features = {  # (960, D) each: the 480 originals, then their shuffles
        "pretrained MiniLM": tc.encode_texts(model, tokenizer, both),
        "random init": tc.encode_texts(random_encoder, tokenizer, both),
        "bag of tokens": torch.cat([tokens, shuffled_tokens]),
        "bag of bigrams": bigram_counts,
    }
    is_shuffled = torch.arange(2 * len(shuffled)) >= len(shuffled)  # (960,)
    results = {name: [] for name in order_features}
    splits = []
    for seed in range(5):  # split the verses, keeping each verse with its shuffle
        order = torch.randperm(len(shuffled), generator=torch.Generator().manual_seed(seed))
        train = torch.cat([order[:240], order[:240] + len(shuffled)])
        test = torch.cat([order[240:], order[240:] + len(shuffled)])
        splits.append((train, test))
        for name, x in order_features.items():
            probe = tc.train_linear_probe(x[train], is_shuffled[train].long(), 2, seed=seed)
            results[name].append(tc.accuracy(probe, x[test], is_shuffled[test].long()))
    ends = torch.tensor([not basic_tokenize(t)[-1][0].isalnum() for t in both])
    ends_rule = float((ends == ~is_shuffled).float().mean())

    # the word-bigram language model, counted on the verses outside the 480
    words_of = re.compile(r"\w+|[^\w\s]").findall  # basic_tokenize's split, faster
    in_pool = set(labelled.texts)
    before_word, word_pairs = Counter(), Counter()
    for text in texts:
        if text not in in_pool:
            w = ["<s>", *words_of(text.lower()), "</s>"]
            before_word.update(w[:-1])
            word_pairs.update(zip(w, w[1:]))
    n_types = len(before_word) + 1

    def mean_log_prob(text):
        w = ["<s>", *words_of(text.lower()), "</s>"]
        return statistics.mean(math.log((word_pairs[a, b] + 0.1) / (before_word[a] + 0.1 * n_types))
                               for a, b in zip(w, w[1:]))

    same_split = all(words_of(t.lower()) == basic_tokenize(t) for t in both)
    lm_score = torch.tensor([mean_log_prob(t) for t in both])  # (960,)
    results["word-bigram LM"] = []
    for train, test in splits:  # the same splits as above
        cut = lm_score[train]  # candidate thresholds: "shuffled iff the score is below"
        cut_fits = ((cut[None, :] < cut[:, None]) == is_shuffled[train]).float().mean(1)
        said = lm_score[test] < cut[cut_fits.argmax()]
        results["word-bigram LM"].append(float((said == is_shuffled[test]).float().mean()))
    above = int((lm_score[:len(shuffled)] > lm_score[len(shuffled):]).sum())
    result = {
        "description": "a verse or its word-shuffled copy: test accuracy of each feature set on 5 splits",
        "verses": len(shuffled),
        "shuffles that differ": differ,
        "same punctuation at the same places": same_marks,
        "same token counts": bool(torch.equal(shuffled_tokens, tokens)),
        "example": [labelled.texts[2], shuffled[2]],
        "bigram columns": len(columns),
        "rule 'original iff it ends in punctuation'": ends_rule,
        "regex split equals basic_tokenize": same_split,
        "word-bigram LM verses": sum(t not in in_pool for t in texts),
        "originals above their shuffle": above,
        "accuracy": results,
        "machine": common.machine(),
    }
    for name, accs in results.items():
        print(f"{name:20s} {100 * statistics.mean(accs):5.1f}%  " + " ".join(f"{100 * a:.1f}" for a in accs))
    common.write_result(common.RESULTS / "bert_word_order.json", result)


if __name__ == "__main__":
    main()
