"""Chapter 1, section 1.8: greedy, exact and beam search (K = 4) on about 1,000 test words.

The chapter's page model (``rnn_page_model.json`` and its weights, checked by SHA-256) decodes
every ``EVERY``-th test word (``data.test[::EVERY]``) three ways: greedy, exact best-first search
(``attnbook.tasks.g2p_search``) and the library's ``beam_search`` with K = 4. Writes
``lib/attnbook/results/rnn_search_sample.json``: the counts the chapter prints (words where the
searches differ, right under each, words still wrong), McNemar's exact p and a paired-bootstrap
interval for exact search against greedy, and the CPU seconds of each search.

Reproduce with ``OMP_NUM_THREADS=1 nice python benchmarks/rnn_search_sample.py`` (about a
CPU-minute); ``--smoke --out FILE`` scores 12 words.
"""
from __future__ import annotations

import math
import time
from importlib import resources

import torch

import common
from attnbook.checkpoints import read_safetensors
from attnbook.data import build_vocabs, load_g2p
from attnbook.decoding import beam_search
from attnbook.models.rnn import RNNSeq2Seq, RNNSeq2SeqConfig
from attnbook.results import load_result
from attnbook.tasks.g2p import evaluate_g2p
from attnbook.tasks.g2p_search import compare_with_greedy

EVERY = 6


def main() -> None:
    parser = common.experiment_parser(__doc__)
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = load_g2p()
    src_vocab, tgt_vocab = build_vocabs(data)
    model = RNNSeq2Seq(RNNSeq2SeqConfig(src_vocab_size=len(src_vocab),
                                        tgt_vocab_size=len(tgt_vocab)))
    run = load_result("rnn_page_model.json")
    weights = resources.files("attnbook.results").joinpath(run["weights"])
    model.load_state_dict(read_safetensors(weights, run["sha256"]))
    model.eval()
    sample = data.test[::EVERY][:12] if args.smoke else data.test[::EVERY]
    n = len(sample)
    t0 = time.process_time()
    greedy = evaluate_g2p(model, sample, src_vocab, tgt_vocab)
    t1 = time.process_time()
    differ = compare_with_greedy(model, sample, src_vocab, tgt_vocab)
    t2 = time.process_time()

    def beam4(m, src, src_lengths, max_len):
        return beam_search(m, src, src_lengths, tgt_vocab.bos_id, tgt_vocab.eos_id, max_len,
                           beam_size=4)

    beam = evaluate_g2p(model, sample, src_vocab, tgt_vocab, decode=beam4)
    t3 = time.process_time()
    exact_of = {d.word: d.exact for d in differ}
    exact = [exact_of.get(w, p) for w, p in zip(greedy.words, greedy.predictions)]
    refs = greedy.references
    g_right = [p == r for p, r in zip(greedy.predictions, refs)]
    e_right = [p == r for p, r in zip(exact, refs)]
    b_right = [p == r for p, r in zip(beam.predictions, refs)]

    def paired(a, b):  # a against b: words right only under a, only under b, McNemar, bootstrap
        only_a = sum(x and not y for x, y in zip(a, b))
        only_b = sum(y and not x for x, y in zip(a, b))
        k, m = only_a + only_b, min(only_a, only_b)
        p = min(1.0, 2 * sum(math.comb(k, i) for i in range(m + 1)) / 2 ** k) if k else 1.0
        change = torch.tensor([float(x) - float(y) for x, y in zip(a, b)])
        draws = torch.randint(n, (2000, n), generator=torch.Generator().manual_seed(0))
        low, high = change[draws].mean(1).quantile(torch.tensor([0.025, 0.975])).tolist()
        return {"right_only_first": only_a, "right_only_second": only_b, "mcnemar_p": p,
                "wer_drop": change.mean().item(), "bootstrap_95": [low, high]}

    lean = [len(d.exact) - len(d.greedy) for d in differ]
    common.write_result(common.out_path(args, "rnn_search_sample.json"), {
        "description": "Chapter 1 section 1.8: greedy, exact and beam (K = 4) search of the page "
                       f"model on data.test[::{EVERY}]",
        "every": EVERY, "n": n, "machine": common.machine(),
        "greedy_wer": 1 - sum(g_right) / n, "exact_wer": 1 - sum(e_right) / n,
        "beam_wer": 1 - sum(b_right) / n,
        "exact_differs": len(differ),
        "exact_vs_greedy": paired(e_right, g_right),
        "beam_vs_greedy": paired(b_right, g_right),
        "beam_differs": sum(b != g for b, g in zip(beam.predictions, greedy.predictions)),
        "beam_is_most_probable": sum(b == e for b, e in zip(beam.predictions, exact)),
        "exact_shorter": sum(x < 0 for x in lean), "exact_longer": sum(x > 0 for x in lean),
        "length_change_phonemes": sum(lean),
        "cpu_seconds": {"greedy": t1 - t0, "exact": t2 - t1, "beam": t3 - t2},
    })


if __name__ == "__main__":
    main()
