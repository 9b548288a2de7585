"""Chapter 2 only (the G2P task's longer runs): §2.6's table of the shipped longer runs, read from the results files.

``budget_table(page_gru, page_attn)`` prints one table: the page's two models and the fixed
diagonal band at 360 steps (``benchmarks/bahdanau_length.py --baselines``, three seeds), the
attention model trained with this page's own recipe for 1,200 steps (``bahdanau_page_1200.py``,
three seeds), the two models trained by ``benchmarks/g2p_compare.py`` (Adam betas 0.9/0.98) for
1,200 steps with the recipe chosen on dev (three seeds, peak rates 0.003 and the one dev chose; the
band from ``bahdanau_length.py --tuned-baselines``) and for 8,000 steps (two seeds), and the count
tables (no network). Below the table, g2p_compare's four recipes at 1,200 steps, seed 0, one change
at a time. It returns the files the chapter reads again later.
"""
from __future__ import annotations

from attnbook.results import load_result

NAMES = (("gru", "no attention"), ("gru_attention", "attention"))


def _mean(values):
    return sum(values) / len(values)


def budget_table(page_gru, page_attn, quiet: bool = False) -> dict:
    """Print §2.6's one table of G2P results; ``page_gru``, ``page_attn``: the page's results (.wer, .per).

    Rows: no attention, the fixed band, learned attention, then the count tables (no network).
    Columns: 360 steps and 1,200 steps with this page's recipe (``train_g2p``: Adam, default
    betas, a constant 0.003; at 1,200 steps attention only), 1,200 steps with the recipe chosen on
    dev (warm-up + linear decay, label smoothing 0.1, Adam betas 0.9/0.98) at peak rates 0.003 and
    the one dev chose, and 8,000 steps with that recipe. Each cell is the mean test WER / PER over
    the seeds counted in brackets.

    Returns ``{"compare": g2p_compare.json, "count_table": count_table_width.json,
    "rate": the peak rate dev chose for attention, "table": {row: [(WER, PER, seeds) or None]}}``;
    ``quiet``: print nothing, and return the text under ``"printout"`` instead."""
    if quiet:
        import contextlib
        import io

        with contextlib.redirect_stdout(io.StringIO()) as text:
            shipped = budget_table(page_gru, page_attn)
        return shipped | {"printout": text.getvalue()}
    compare = load_result("g2p_compare.json")
    baselines = load_result("bahdanau_baselines.json")  # 360 steps, this page's recipe, seeds 0-2
    print(compare["command"], "|", compare["machine"])
    print(baselines["command"], "|", baselines["machine"])
    sweep = compare["lr_sweep"]  # 1,200 steps, the chosen recipe, peak rates 0.003 to 0.012
    rate = sweep["gru_attention"]["chosen_on_dev"]
    tuned_recipe = compare["budget"]["gru"]["recipe"]
    assert tuned_recipe == compare["budget"]["gru_attention"]["recipe"]
    print(f"tuned = the recipe dev chose for both models ({tuned_recipe}); peak rate chosen on "
          f"dev: no attention {sweep['gru']['chosen_on_dev']}, attention {rate}")

    def cell(runs, wer="test_wer", per="test_per"):
        runs = list(runs)
        return (_mean([r[wer] for r in runs]), _mean([r[per] for r in runs]), len(runs))

    page_runs = {key: sorted((r for r in baselines["runs"] if r["score"] == key), key=lambda r: r["seed"])
                 for key in ("none", "band", "additive")}
    seed0 = (page_runs["none"][0]["test_wer"], page_runs["additive"][0]["test_wer"])
    page_1200 = sorted(load_result("bahdanau_page_1200.json")["runs"], key=lambda r: r["seed"])
    one_change = {(r["model"], r["recipe"]): r for r in compare["runs"] if r["phase"] == "tune"
                  and r["steps"] == 1200 and r["seed"] == 0}  # g2p_compare's 4 recipes, seed 0
    tuned_band = load_result("bahdanau_baselines_tuned.json")["runs"]
    band_runs = {"0.003": [r for r in tuned_band if r["model"] == "band"],
                 rate: load_result(f"bahdanau_baselines_tuned_{rate}.json")["runs"]}
    seeds_8000 = compare["converged_seeds"]  # 8,000 steps, rate 0.003
    table = {}
    for row, key, page_key in (("no attention", "gru", "none"), ("fixed band", None, "band"),
                               ("learned attention", "gru_attention", "additive")):
        cells = [cell(page_runs[page_key])]
        cells.append(cell(page_1200) if key == "gru_attention" else None)
        for peak in ("0.003", rate):
            if key is None:
                cells.append(cell(band_runs[peak]))
            else:
                c = sweep[key]["by_peak_lr"][peak]
                cells.append((c["test_wer"]["mean"], c["test_per"]["mean"], len(c["seeds"])))
        cells.append(None if key is None else (seeds_8000[key]["test_wer"]["mean"],
                                               seeds_8000[key]["test_per"]["mean"], seeds_8000[key]["seeds"]))
        table[row] = cells
    heads = (("360 steps", "page, 0.003"), ("1,200 steps", "page, 0.003"), ("1,200 steps", "tuned, 0.003"),
             (f"1,200 steps", f"tuned, {rate}"), ("8,000 steps", "tuned, 0.003"))
    print("\ntest WER / PER, mean over (seeds); page = this page's recipe (Adam, default betas, "
          "constant rate);\ntuned = warm-up + linear decay, smoothing 0.1, Adam betas (0.9, 0.98)")
    for k in range(2):
        print(f"{'':>18}" + "".join(f"{h[k]:>16}" for h in heads))
    for row, cells in table.items():
        print(f"{row:>18}" + "".join(f"{'-':>16}" if c is None else f"{c[0]:.1%}/{c[1]:.1%} ({c[2]})".rjust(16)
                                     for c in cells))
    tuned = load_result("count_table_width.json")  # Chapter 5: width 5, 7 or 9, by dev
    wider = load_result("count_table_wider.json")  # Chapter 5's wider grid, windows 5 to 13
    window = load_result("g2p_transformer_recipes.json")["count_table"]["letter window"]
    for name, row in (("5-letter window (Chapter 1)", window),
                      (f"{tuned['chosen_width']} letters, chosen on dev", tuned["chosen"]),
                      (f"{wider['chosen_width']} letters, dev, wider grid", wider["chosen"])):
        print(f"{'count table, ' + name:>48}: {row['test_wer']:.1%}/{row['test_per']:.1%} "
              "(no network, no steps)")
    print("\nthis page's recipe, attention, 1,200 steps, test WER by seed: "
          + ", ".join(f"{r['seed']}: {r['test_wer']:.1%}" for r in page_1200))
    print(f"1,200 steps, seed 0, Adam betas (0.9, 0.98), peak rate {compare['setup']['peak_lr']}: "
          "one recipe change at a time, test WER no attention / attention")
    for recipe in ("constant", "constant, smoothing 0.1", "warm-up + linear decay",
                   "warm-up + linear decay, smoothing 0.1"):
        wers = [one_change[key, recipe]["test_wer"] for key in ("gru", "gru_attention")]
        print(f"{recipe:>40}: {wers[0]:.1%} / {wers[1]:.1%}")
    spread = max(max(c[key]["test_wer"]["values"]) - min(c[key]["test_wer"]["values"])
                 for c in (sweep["gru"]["by_peak_lr"], sweep["gru_attention"]["by_peak_lr"])
                 for key in ("0.003", rate))
    rate_att = {peak: sweep["gru_attention"]["by_peak_lr"][peak]["test_wer"]["values"] for peak in ("0.003", rate)}
    below = {peak: sum(b["test_wer"] < a for b, a in zip(sorted(band_runs[peak], key=lambda r: r["seed"]),
                                                           rate_att[peak])) for peak in ("0.003", rate)}
    below_360 = sum(b["test_wer"] < a["test_wer"] for b, a in zip(page_runs["band"], page_runs["additive"]))
    print(f"\n360 steps, seed 0 is this page's pair of models: "
          f"{all(abs(a - b) < 1e-4 for a, b in zip(seed0, (page_gru.wer, page_attn.wer)))}")
    print(f"largest seed spread of a tuned 1,200-step model's WER: {100 * spread:.1f} points")
    print(f"band below learned attention, seeds: 360 steps {below_360} of {len(page_runs['band'])}; "
          f"1,200 tuned at 0.003 {below['0.003']} of 3, at {rate} {below[rate]} of 3")
    return {"compare": compare, "count_table": tuned, "rate": rate, "table": table,
            "page_1200": page_1200}
