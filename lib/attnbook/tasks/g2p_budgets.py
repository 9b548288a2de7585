"""Chapter 2 only (the G2P task's longer runs): §2.6's table of the shipped longer runs, read from the results files.

``budget_table(page_gru, page_attn)`` prints, beside the page's 360-step models, the same two
models trained by ``benchmarks/g2p_compare.py`` for 1,200 steps (three seeds, the recipe chosen on
dev, peak rates 0.003 and the one dev chose) and 8,000 steps (two seeds), the fixed diagonal band
of ``benchmarks/bahdanau_length.py --tuned-baselines`` in place of the learned score, and the
count tables (no network). It returns the files the chapter reads again later.
"""
from __future__ import annotations

from attnbook.results import load_result

NAMES = (("gru", "no attention"), ("gru_attention", "attention"))


def _mean(values):
    return sum(values) / len(values)


def budget_table(page_gru, page_attn) -> dict:
    """Print §2.6's table; ``page_gru`` and ``page_attn`` are the page's G2P results (.wer, .per).

    Returns ``{"compare": g2p_compare.json, "count_table": count_table_width.json,
    "rate": the peak rate dev chose for attention, "table": {model: [(WER, PER) or None]}}``."""
    compare = load_result("g2p_compare.json")
    print(compare["command"], "|", compare["machine"])
    sweep = compare["lr_sweep"]  # 1,200 steps, the chosen recipe, peak rates 0.003 to 0.012
    rate = sweep["gru_attention"]["chosen_on_dev"]
    print("peak rate chosen on dev: no attention", sweep["gru"]["chosen_on_dev"],
          "| attention", rate, "| recipe (best on dev, for both):", compare["budget"]["gru"]["recipe"])
    # the fixed band (no parameters) in place of the score, the same runs otherwise
    tuned_band = sorted((r for r in load_result("bahdanau_baselines_tuned.json")["runs"] if r["model"] == "band"),
                        key=lambda r: r["seed"])
    rate_band = sorted(load_result(f"bahdanau_baselines_tuned_{rate}.json")["runs"], key=lambda r: r["seed"])
    seeds_8000 = compare["converged_seeds"]  # 8,000 steps, rate 0.003, two seeds
    table = {"no attention": [(page_gru.wer, page_gru.per)], "attention": [(page_attn.wer, page_attn.per)],
             "fixed band": [None]}
    for key, name in NAMES:
        for peak in ("0.003", rate):
            cell = sweep[key]["by_peak_lr"][peak]
            table[name].append((cell["test_wer"]["mean"], cell["test_per"]["mean"]))
        run = seeds_8000[key]
        table[name].append((run["test_wer"]["mean"], run["test_per"]["mean"]))
    for runs in (tuned_band, rate_band):
        table["fixed band"].append((_mean([r["test_wer"] for r in runs]), _mean([r["test_per"] for r in runs])))
    table["fixed band"].append(None)
    budgets = ("360, seed 0", "1,200, 0.003", f"1,200, {rate}", "8,000, 0.003")
    seeds_per = ("(this page)", "(3 seeds)", "(3 seeds)", f"({seeds_8000['gru']['seeds']} seeds)")
    print("\ntest WER / PER, by steps and peak rate (means over seeds)")
    print(f"{'':>13}" + "".join(f"{b:>16}" for b in budgets))
    print(f"{'':>13}" + "".join(f"{s:>16}" for s in seeds_per))
    for name, row in table.items():
        print(f"{name:>13}" + "".join(f"{'-':>16}" if c is None else f"{c[0]:>9.1%} /{c[1]:5.1%}" for c in row))
    gaps = [table["no attention"][k][0] - table["attention"][k][0] for k in range(4)]
    print(f"{'WER gap':>13}" + "".join(f"{100 * g:>13.1f} pt" for g in gaps))
    spread = max(max(c[key]["test_wer"]["values"]) - min(c[key]["test_wer"]["values"])
                 for c in (sweep["gru"]["by_peak_lr"], sweep["gru_attention"]["by_peak_lr"])
                 for key in ("0.003", rate))
    print(f"largest seed spread of a 1,200-step model's WER: {100 * spread:.1f} points")
    for key, name in NAMES:
        wer = seeds_8000[key]["test_wer"]
        print(f"8,000 steps, {name}: WER {wer['mean']:.1%} ({wer['min']:.1%} to {wer['max']:.1%})")
    budget_wers = {r["seed"]: r["test_wer"] for r in compare["runs"]
                   if r["model"] == "gru_attention" and r["phase"] in ("tune", "seeds") and r["steps"] == 1200
                   and r["recipe"] == compare["budget"]["gru_attention"]["recipe"]}
    rate_att = sweep["gru_attention"]["by_peak_lr"][rate]["test_wer"]["values"]  # seeds 0-2
    print("band below attention in every seed: at 0.003",
          all(r["test_wer"] < budget_wers[r["seed"]] for r in tuned_band),
          f"| at {rate}", all(r["test_wer"] < a for r, a in zip(rate_band, rate_att)))
    tuned = load_result("count_table_width.json")  # Chapter 5: width 5, 7 or 9, by dev
    wider = load_result("count_table_wider.json")  # Chapter 5's wider grid, windows 5 to 13
    window = load_result("g2p_transformer_recipes.json")["count_table"]["letter window"]
    print("\ncount tables (no network, no steps): test WER / PER")
    for name, row in (("5-letter window (Chapter 1)", window),
                      (f"{tuned['chosen_width']} letters, chosen on dev", tuned["chosen"]),
                      (f"{wider['chosen_width']} letters, dev, wider grid", wider["chosen"])):
        print(f"  {name:>30}: {row['test_wer']:.1%} / {row['test_per']:.1%}")
    return {"compare": compare, "count_table": tuned, "rate": rate, "table": table}
