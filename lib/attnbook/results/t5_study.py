"""Chapter 10's pretraining study, read from its committed results: the rows each table needs.

The study's runs are spread over several result files (``benchmarks/t5_pretraining.py``,
``t5_low_label.py`` at each pretraining peak, ``t5_long_budget.py``, ``t5_count_width.py``,
``t5_peak_dev.py``, ...). This module does the filtering once, so that each of Section 10.6's
cells is a call and a table. Every WER and PER is returned in percent. ``SIZES`` are the numbers
of labelled words (``ALL``: every training word); ``STEPS`` the fine-tuning steps of the study.
"""
from __future__ import annotations

import functools
import statistics

from attnbook.results import load_result

STEPS = 600  # fine-tuning steps of 64 words, every network of the study
ALL = 105_103  # every training word
SIZES = (500, 2000, ALL)
PEAKS = (1e-3, 2e-3, 3e-3)  # the swept pretraining peaks (Adam); 1e-2 was run first
CHOSEN_PEAK = 3e-3  # by held-out span-corruption loss, a rule fixed before fine-tuning


@functools.lru_cache(maxsize=None)
def _file(name: str) -> dict:
    return load_result(name)


def _runs(name: str) -> list[dict]:
    return _file(name)["runs"]


def g2p_runs(source: list[dict], model: str = "t5", arm: str = "pretrained", size: int | None = None,
             steps: int = STEPS, tasks: str = "g2p") -> list[dict]:
    """The runs of ``source`` with that model, arm, task, size (None: any) and steps, by seed."""
    rows = [r for r in source if r.get("model", model) == model and r.get("arm") == arm
            and r.get("tasks") == tasks and r.get("steps") == steps
            and (size is None or r.get("size") == size)]
    return sorted(rows, key=lambda r: r["seed"])


def count_table(size: int) -> list[dict]:
    """The count table's runs (window width chosen on dev, per seed's words), as ``g2p_*`` rows."""
    rows = [{"g2p_wer": r["wer"], "g2p_per": r["per"], "seed": r["seed"], "width": r["width"]}
            for r in _file("t5_count_width.json")["chosen"] if r["size"] == size]
    return sorted(rows, key=lambda r: -1 if r["seed"] is None else r["seed"])  # all the words: one table


def arm_runs(name: str, size: int) -> list[dict]:
    """The runs of one row of the study's tables (``ARMS``) at ``size`` labelled words."""
    study = _runs("t5_pretraining.json")
    if name == "count table (no network)":
        return count_table(size)
    if name == "Chapter 5 Transformer":
        return g2p_runs(study, "transformer", "scratch", size)
    if name == "T5 from scratch":
        return g2p_runs(study, "t5", "scratch", size)
    if name == "T5 pretrained, peak 3e-3":
        return g2p_runs(_runs("t5_low_label_lr0.003.json"), size=size)
    if name == "T5 pretrained, peak 1e-2":
        return g2p_runs(_runs("t5_low_label.json") + _runs("t5_encoder_use_spellings.json"), size=size)
    if name == "T5, shuffled-byte null":  # t5_shuffled_null.py: seed 0; t5_null_seeds.py: 1, 2
        return g2p_runs(_runs("t5_shuffled_null.json") + _runs("t5_null_seeds.json"),
                        arm="pretrained on shuffled bytes", size=size)
    if name == "T5 on the Bible, peak 3e-3":
        return g2p_runs(_runs("t5_encoder_use_bible_lr0.003.json"), size=size)
    raise KeyError(name)


ARMS = ("count table (no network)", "Chapter 5 Transformer", "T5 from scratch", "T5 pretrained, peak 3e-3",
        "T5, shuffled-byte null")


def wer(rows: list[dict], key: str = "g2p_wer") -> list[float]:
    """The rows' scores in percent, in the rows' order (by seed)."""
    return [100 * r[key] for r in rows]


def summary(rows: list[dict], key: str = "g2p_wer") -> str:
    """``mean ± sd (runs)`` in percent; one run: its value; none: ``not run``."""
    values = wer(rows, key)
    if len(values) < 2:
        return f"{values[0]:5.1f}        (1)" if values else "not run"
    return f"{statistics.mean(values):5.1f} ± {statistics.stdev(values):4.1f} ({len(values)})"


def minus(rows: list[dict], other: list[dict], key: str = "g2p_wer") -> list[float]:
    """``rows`` minus ``other``, percentage points, paired by seed (same words, same batches)."""
    by_seed = {r["seed"]: r[key] for r in other}
    return [100 * (r[key] - by_seed[r["seed"]]) for r in rows if r["seed"] in by_seed]


def minus_scratch(rows: list[dict], size: int, key: str = "g2p_wer") -> list[float]:
    """Pretrained minus the T5 from scratch at ``size`` words, points, paired by seed."""
    return minus(rows, arm_runs("T5 from scratch", size), key)


def curves() -> dict[tuple[str, int], dict[int, tuple[float, float]]]:
    """(arm, seed) -> {fine-tuning steps: (WER %, PER %)}, all the words: 600 and 1,200 steps on
    three seeds, 2,400 and 3,600 on seed 0 (``t5_long_budget.json``, whose 1,200-step reruns must
    equal the committed ones: ``ValueError`` otherwise)."""
    out: dict = {}

    def add(arm, rows):
        for r in rows:
            out.setdefault((arm, r["seed"]), {})[r["steps"]] = (100 * r["g2p_wer"], 100 * r["g2p_per"])

    study = _runs("t5_pretraining.json")
    add("scratch", arm_runs("T5 from scratch", ALL))
    add("pretrained", arm_runs("T5 pretrained, peak 3e-3", ALL))
    add("scratch", g2p_runs(study, "t5", "scratch", ALL, steps=2 * STEPS))
    add("pretrained", [{**r, "steps": 2 * STEPS} for r in _runs("t5_low_label_lr0.003_ft1200.json")])
    for r in _runs("t5_long_budget.json"):
        point = out[r["arm"], r["seed"]].get(r["steps"])
        if point is not None and abs(100 * r["g2p_wer"] - point[0]) > 0.05:
            raise ValueError(f"the long budget's {r['steps']}-step {r['arm']} run is not the committed one")
    add("scratch", [r for r in _runs("t5_long_budget.json") if r["arm"] == "scratch"])
    add("pretrained", [r for r in _runs("t5_long_budget.json") if r["arm"] == "pretrained"])
    return out


def training_seconds() -> dict:
    """One-thread training times: ``pretraining`` (the chosen 3,000-step run), ``per_step`` by arm
    (fine-tuning, from the long-budget runs), and ``sweep``: every pretraining the choice of peak
    depended on, by peak, as recorded (1e-2 included: it was scored before the sweep)."""
    per_step = {arm: statistics.mean(r["train_cpu_s"] for r in _runs("t5_long_budget.json")
                                     if r["arm"] == arm) / (2 * STEPS) for arm in ("scratch", "pretrained")}
    sweep = {p: _file(f"t5_low_label_lr{p:g}.json")["pretrain"]["seconds"] for p in PEAKS}
    sweep[1e-2] = _file("t5_low_label.json")["pretrain"]["seconds"]
    return {"pretraining": _file("t5_low_label_lr0.003.json")["pretrain"]["seconds"],
            "per_step": per_step, "sweep": sweep}


def total_seconds(arm: str, steps: int) -> float:
    """Training time in all, one thread: the pretraining (pretrained arm) plus ``steps`` of fine-tuning."""
    t = training_seconds()
    return (t["pretraining"] if arm == "pretrained" else 0) + steps * t["per_step"][arm]


def null_diagnosis() -> dict:
    """``benchmarks/t5_null_seeds.py``'s look at each start before fine-tuning, by start
    (``scratch``, ``spellings``, ``shuffled``): ``table_rms``, ``logit_rms``, ``first_loss`` and
    ``first_loss_swapped_sources`` (nats per output byte, seed 0's first four batches)."""
    return _file("t5_null_seeds.json")["diagnosis"]


def step_flops() -> dict:
    """Counted FLOPs (``benchmarks/t5_step_flops.py``, forward and backward): ``pretraining``, one
    span-corruption step (every step has the same shape); ``fine_tuning[(size, seed)][steps]``, the
    mean fine-tuning step over the first ``steps`` batches that seed draws from ``size`` words."""
    f = _file("t5_step_flops.json")
    tuning = {(r["size"], r["seed"]): {int(n): v for n, v in r["mean_flops"].items()}
              for r in f["fine_tuning"]}
    return {"pretraining": f["pretraining"]["mean_flops"], "fine_tuning": tuning}


def total_flops(arm: str, steps: int, seed: int = 0, size: int = ALL) -> float:
    """Training FLOPs in all: 3,000 pretraining steps (pretrained arm) plus ``steps`` of fine-tuning."""
    f = step_flops()
    pretraining = 3000 * f["pretraining"] if arm == "pretrained" else 0
    return pretraining + (steps * f["fine_tuning"][size, seed][steps] if steps else 0)


def peak_sweep() -> list[dict]:
    """One row per pretraining at 2,000 labelled words: ``name``, ``peak``, the held-out
    span-corruption ``loss`` and wrong-input ``gap`` at step 3,000, ``wer`` by seed and
    ``minus_scratch`` by seed (test, in %), and ``chosen`` (lowest loss among ``PEAKS``)."""
    sources = [(f"peak {p:.0e}".replace("e-0", "e-"), p, f"t5_low_label_lr{p:g}.json") for p in PEAKS]
    sources += [("peak 1e-2 (T5's Adafactor peak)", 1e-2, "t5_low_label.json"),
                ("peak 3e-3, pretraining seed 1", 3e-3, "t5_low_label_lr0.003_ps1.json")]
    rows = []
    for name, peak, file in sources:
        _, own, _, gap = _file(file)["pretrain"]["gap_track"][-1]  # step, own, wrong input, gap
        runs = g2p_runs(_runs(file), size=2000)
        rows.append({"name": name, "peak": peak, "loss": own, "gap": gap, "wer": wer(runs),
                     "minus_scratch": minus_scratch(runs, 2000)})
    swept = [r for r in rows[:len(PEAKS)]]
    chosen = min(swept, key=lambda r: r["loss"])
    for r in rows:
        r["chosen"] = r is chosen
    return rows


def peak_on_dev() -> dict:
    """``t5_peak_dev.json`` (``benchmarks/t5_peak_dev.py``): the two kept pretrainings (1e-2, 3e-3)
    fine-tuned on 2,000 words and scored on dev; ``rows``: peak, seed, dev and test WER in %, and
    whether the test score equals the study's committed one; ``chosen``: the lower mean dev WER."""
    result = _file("t5_peak_dev.json")
    study = {p: {r["seed"]: r["g2p_wer"] for r in g2p_runs(_runs(f), size=2000)}
             for p, f in ((1e-2, "t5_low_label.json"), (3e-3, "t5_low_label_lr0.003.json"))}
    rows = [{"peak": r["peak"], "seed": r["seed"], "dev_wer": 100 * r["dev_wer"],
             "test_wer": 100 * r["g2p_wer"], "same_as_study": r["g2p_wer"] == study[r["peak"]].get(r["seed"])}
            for r in result["runs"]]
    chosen = float(result["chosen"]) if result["chosen"] is not None else None
    return {"rows": rows, "seeds": result["seeds_compared"], "dev_words": result["dev_words"],
            "mean_dev_wer": {float(k): 100 * v for k, v in result["mean_dev_wer"].items()},
            "chosen": chosen}


def study_runs() -> list[dict]:
    """The runs of ``t5_pretraining.json`` (``benchmarks/t5_pretraining.py``): the study's scratch
    arms, Chapter 5's Transformer, the Bible-64 pretraining and the two-direction runs."""
    return _runs("t5_pretraining.json")


def _matching(source: list[dict], arm: str = "pretrained", **match) -> list[dict]:
    return sorted((r for r in source if r.get("arm") == arm and r.get("tasks") == "g2p"
                   and r.get("steps") == STEPS and all(r.get(k) == v for k, v in match.items())),
                  key=lambda r: r["seed"])


def other_pretrainings() -> list[dict]:
    """The pretrainings other than the chosen one, each fine-tuned on three seeds: ``name``,
    ``text``, ``recipe`` (windows, steps, rate), ``gap`` (the wrong-input gap at the end of the
    pretraining, nats; None where not probed), ``runs`` and ``size`` (labelled words)."""
    probes = {r.get("corpus", "bible"): r for r in _runs("t5_diagnosis.json") if r.get("kind") == "mismatch"}

    def probe_gap(corpus):  # nats per hidden byte: the next window's input minus the own
        p = probes[corpus]
        return p["next window's input"]["nats_per_hidden_byte"] - p["own input"]["nats_per_hidden_byte"]

    def last_gap(name):
        return _file(name)["pretrain"]["gap_track"][-1][3]

    inv, const = "3,000 steps, inv. sqrt", "1,500 steps, 3e-3"
    return [
        {"name": "Spellings-32, peak 1e-2", "text": "spellings", "recipe": f"32 B, {inv}",
         "gap": last_gap("t5_low_label.json"), "runs": g2p_runs(_runs("t5_low_label.json"), size=2000),
         "size": 2000},
        {"name": "Spellings-96, peak 1e-2", "text": "spellings", "recipe": f"96 B, {inv}",
         "gap": last_gap("t5_low_label_w96.json"), "runs": g2p_runs(_runs("t5_low_label_w96.json"), size=2000),
         "size": 2000},
        {"name": "Bible-32, peak 1e-2", "text": "Bible", "recipe": f"32 B, {inv}",
         "gap": last_gap("t5_encoder_use_bible.json"), "runs": _runs("t5_encoder_use_bible.json"), "size": ALL},
        {"name": "Bible-64", "text": "Bible", "recipe": f"64 B, {const}", "gap": probe_gap("bible"),
         "runs": g2p_runs(study_runs(), size=ALL), "size": ALL},
        {"name": "Bible-64, spans of 20", "text": "Bible", "recipe": f"64 B, {const}", "gap": None,
         "runs": _matching(_runs("t5_pretraining_ablation.json"), mean_span=20.0, lr=3e-3), "size": ALL},
        {"name": "Bible-32, peak 3e-3 (after)", "text": "Bible", "recipe": f"32 B, {inv}",
         "gap": last_gap("t5_encoder_use_bible_lr0.003.json"),
         "runs": _runs("t5_encoder_use_bible_lr0.003.json"), "size": ALL},
        {"name": "Pairs-64 (labelled: a control)", "text": "G2P pairs", "recipe": f"64 B, {const}",
         "gap": probe_gap("g2p train"), "runs": _matching(_runs("t5_diagnosis.json"), arm="pretrained on g2p words"),
         "size": ALL},
    ]


def two_directions() -> dict:
    """From the Bible-64 pretraining, all the words: the mean WER (%) of ``both`` (one model, both
    prefixes, 1,200 steps; keys ``g2p``, ``p2g``, ``seeds``) and of one model per direction
    (``g2p_600``, ``g2p_1200``, ``p2g_600``); ``g2p_pairs_seen``: the g2p pairs among the shared
    model's training pairs, seeds 0, 1, 2 (its list shuffled by the seed, g2p pairs first)."""
    import torch

    def runs(task, steps):
        return [r for r in study_runs() if r.get("model") == "t5" and r.get("arm") == "pretrained"
                and r.get("tasks") == task and r["steps"] == steps and r["size"] == ALL]

    def mean(rows, task):
        return statistics.mean(100 * r[task + "_wer"] for r in rows)

    both = runs("g2p+p2g", 2 * STEPS)
    mixed = 2 * STEPS * 64
    seen = [int((torch.randperm(2 * ALL, generator=torch.Generator().manual_seed(s))[:mixed] < ALL).sum())
            for s in (0, 1, 2)]
    return {"g2p": mean(both, "g2p"), "p2g": mean(both, "p2g"), "seeds": len(both),
            "g2p_600": mean(runs("g2p", STEPS), "g2p"), "g2p_1200": mean(runs("g2p", 2 * STEPS), "g2p"),
            "p2g_600": mean(runs("p2g", STEPS), "p2g"), "pairs": mixed, "g2p_pairs_seen": seen}


def scratch_recipes() -> list[dict]:
    """The scratch T5's fine-tuning recipes on seed 0 (``t5_scratch_tuning.json``): ``size``,
    ``recipe`` (in words), ``dev`` and ``test`` WER (%), ``chosen`` (lowest dev WER), then per size
    the chosen pretrained arm's seed-0 test WER as a row with ``dev`` None."""
    tuning = _file("t5_scratch_tuning.json")
    out = []
    for size in sorted({r["size"] for r in tuning["runs"]}):
        for r in (r for r in tuning["runs"] if r["size"] == size and r["seed"] == 0):
            recipe = (f"peak {r['lr']:g}, {r['warmup']}-step warm-up, linear decay" if r["warmup"]
                      else f"constant {r['lr']:g}")
            out.append({"size": size, "recipe": recipe, "dev": 100 * r["dev_wer"], "test": 100 * r["g2p_wer"],
                        "chosen": r["recipe"] == tuning["chosen"][str(size)]})
        pretrained = next(r for r in arm_runs("T5 pretrained, peak 3e-3", size) if r["seed"] == 0)
        out.append({"size": size, "recipe": "pretrained (peak 3e-3), constant 0.003", "dev": None,
                    "test": 100 * pretrained["g2p_wer"], "chosen": False})
    return out
