"""Chapter 8: where the GPT's deficit to counting sits. Held-out losses split by memory.

Usage: ``python benchmarks/gpt_seen_spans.py`` (writes ``lib/attnbook/results/gpt_seen_spans.json``,
which the chapter reads), or ``python benchmarks/gpt_seen_spans.py --smoke`` (seconds, untrained
weights; writes nothing unless ``--out``).

Same data, tokenizer and held-out windows of 64 as the chapter. The held-out chapters share
whole passages with the training chapters (the Bible repeats itself: parallel accounts, lists,
refrains), so some held-out text was seen verbatim in training. Every held-out target with at
least 7 tokens of context in its window is labelled *seen* when the 8-gram it ends (its 7
tokens of context and itself) occurs in the training stream, *unseen* otherwise; the stored
2400-step GPT (``gpt_bible_2400.safetensors``, its SHA-256 checked) and the Kneser-Ney 4-gram
(the chapter's discount, counted on the whole training stream) are scored on each group. One
thread.
"""
from __future__ import annotations

import json
from importlib import resources

import torch

import common
from attnbook.checkpoints import read_safetensors
from attnbook.data.bible import load_bible
from attnbook.models.gpt import GPT, GPTConfig
from attnbook.results import load_result
from attnbook.tasks.language_modeling import next_token_cross_entropy
from attnbook.tasks.token_stream import KneserNey, held_out_windows
from gpt_vs_ngram import VOCAB, WINDOW, streams

SPAN = 8  # an n-gram of 7 tokens of context and the target


def main() -> None:
    parser = common.experiment_parser(__doc__)
    args = parser.parse_args()
    torch.set_num_threads(1)
    train, test = streams(args.smoke)
    run = load_result("gpt_bible_2400.json")
    torch.manual_seed(0)
    model = GPT(GPTConfig(**run["config"]))
    if not args.smoke:
        model.load_state_dict(read_safetensors(
            resources.files("attnbook.results").joinpath(run["weights"]), run["sha256"]))
    model.eval()
    windows = held_out_windows(test, WINDOW)  # (N, WINDOW + 1)
    with torch.no_grad():  # (N, WINDOW): target i + 1 of each window, i + 1 tokens before it
        gpt = torch.cat([next_token_cross_entropy(model, chunk, reduction="none").double()
                         for chunk in windows.split(64)])
    discount = load_result("gpt_ngram_counts.json")["discount"]
    fourgram = KneserNey(train, VOCAB, order=4, discount=discount, raw_at_start=True)
    first = SPAN - 1  # targets at window index >= 7: at least 7 tokens of context
    # (N, WINDOW + 1 - first, SPAN): the 8-gram that each such target ends
    spans = windows.unfold(1, SPAN, 1)
    contexts = spans[..., -4:-1].reshape(-1, 3)  # the 4-gram's 3 tokens of context
    wanted = spans[..., -1].reshape(-1)
    ngram = torch.cat([  # -log P_4gram(target | 3 tokens), in chunks of 4096 targets
        -fourgram.next_token_probs(c).gather(1, w[:, None]).squeeze(1).log()
        for c, w in zip(contexts.split(4096), wanted.split(4096))]).view(len(windows), -1)
    gpt = gpt[:, first - 1:]  # (N, WINDOW + 1 - first): the same targets
    training = set(map(tuple, train.unfold(0, SPAN, 1).tolist()))
    seen = torch.tensor([tuple(s) in training for s in spans.reshape(-1, SPAN).tolist()]
                        ).view(len(windows), -1)
    rows = {}
    for name, mask in (("seen", seen), ("unseen", ~seen), ("all", torch.ones_like(seen))):
        g, k = gpt[mask].mean().item(), ngram[mask].mean().item()
        rows[name] = {"targets": int(mask.sum()), "gpt_loss": round(g, 4),
                      "fourgram_loss": round(k, 4), "gap": round(g - k, 4)}
    deficit = gpt - ngram  # (N, WINDOW + 1 - first)
    share = (deficit[seen].sum() / deficit.sum()).item()
    # the leak, verse by verse: held-out verses whose whole text is a training verse's
    verses = load_bible()
    chapters = list(dict.fromkeys((v.book, v.chapter) for v in verses))
    held = {c for i, c in enumerate(chapters) if i % 20 == 0}
    where = {}  # training verse text -> its first reference
    for v in verses:
        if (v.book, v.chapter) not in held:
            where.setdefault(v.text, f"{v.book_name} {v.chapter}:{v.verse}")
    test_verses = [v for v in verses if (v.book, v.chapter) in held]
    twins = [(f"{v.book_name} {v.chapter}:{v.verse}", where[v.text], v.text)
             for v in test_verses if v.text in where and len(v.text) >= 60]
    repeated = sum(v.text in where for v in test_verses)
    result = {"groups": rows,
              "held_out_verses": len(test_verses),
              "held_out_verses_also_in_training": repeated,
              "examples": [{"held_out": a, "training": b, "text": t} for a, b, t in twins[:5]], "seen_share_of_targets": round(seen.double().mean().item(), 4),
              "seen_share_of_gpt_deficit": round(share, 4)}
    print(json.dumps(result), flush=True)
    out = common.out_path(args, "gpt_seen_spans.json")
    if out is not None:
        common.write_result(out, {
            "description": "Chapter 8: held-out targets with at least 7 tokens of context, "
                           "split by whether the 8-gram they end occurs in the training "
                           "text; losses (nats) of the stored 2400-step GPT and the "
                           "Kneser-Ney 4-gram; written by benchmarks/gpt_seen_spans.py",
            "window": WINDOW, "span": SPAN, "discount": discount,
            "held_out_targets": (len(test) - 1) // WINDOW * WINDOW,
            "weights": run["weights"], "sha256": run["sha256"], **result,
            "machine": common.machine()})


if __name__ == "__main__":
    main()
