"""Chapter 10's study tables (attnbook.results.t5_study): the filtering the chapter's cells call."""
import statistics

import pytest

from attnbook.results import load_result
from attnbook.results import t5_study as study


@pytest.mark.parametrize("name", study.ARMS)
@pytest.mark.parametrize("size", study.SIZES)
def test_every_row_of_the_headline_table_has_its_seeds(name, size):
    rows = study.arm_runs(name, size)
    if name == "count table (no network)" and size == study.ALL:
        assert len(rows) == 1  # one table: all the words are the same for every seed
    elif name == "T5, shuffled-byte null":  # one pretraining, three seeds, all the words only
        assert [r["seed"] for r in rows] == ([0, 1, 2] if size == study.ALL else [])
    else:
        assert [r["seed"] for r in rows] == [0, 1, 2]
    assert all(0 <= r["g2p_wer"] <= 1 and 0 <= r["g2p_per"] <= 1 for r in rows)


def test_rows_are_the_ones_the_files_hold():
    raw = [r for r in load_result("t5_low_label_lr0.003.json")["runs"] if r["size"] == 2000]
    mine = study.arm_runs("T5 pretrained, peak 3e-3", 2000)
    assert [r["g2p_wer"] for r in mine] == [r["g2p_wer"] for r in sorted(raw, key=lambda r: r["seed"])]
    scratch = study.arm_runs("T5 from scratch", 2000)
    gaps = study.minus_scratch(mine, 2000)
    assert gaps == pytest.approx([100 * (p["g2p_wer"] - s["g2p_wer"]) for p, s in zip(mine, scratch)])
    assert study.summary(mine).startswith(f"{statistics.mean(study.wer(mine)):5.1f} ± ")
    assert study.summary([]) == "not run"
    assert study.summary(mine[:1]).endswith("(1)")
    with pytest.raises(KeyError):
        study.arm_runs("no such arm", 2000)


def test_curves_hold_three_seeds_to_1200_steps_and_seed_0_to_3600():
    curves = study.curves()
    assert set(curves) == {(arm, s) for arm in ("scratch", "pretrained") for s in (0, 1, 2)}
    for (arm, seed), points in curves.items():
        assert sorted(points) == ([600, 1200, 2400, 3600] if seed == 0 else [600, 1200])


def test_times_and_the_sweep():
    t = study.training_seconds()
    assert set(t["sweep"]) == {1e-3, 2e-3, 3e-3, 1e-2} and t["pretraining"] == t["sweep"][3e-3]
    assert study.total_seconds("scratch", 1200) == pytest.approx(1200 * t["per_step"]["scratch"])
    assert study.total_seconds("pretrained", 0) == t["pretraining"]
    rows = study.peak_sweep()
    assert [r["chosen"] for r in rows].count(True) == 1
    chosen = next(r for r in rows if r["chosen"])
    assert chosen["peak"] == study.CHOSEN_PEAK
    # the label-free rule (lowest held-out pretraining loss) picks the same peak with 1e-2 included
    first_pretrainings = [r for r in rows if "seed 1" not in r["name"]]
    assert min(first_pretrainings, key=lambda r: r["loss"]) is chosen
    assert all(len(r["wer"]) == len(r["minus_scratch"]) == 3 for r in rows)


def test_the_null_diagnosis_covers_the_three_starts():
    d = study.null_diagnosis()
    assert set(d) == {"scratch", "spellings", "shuffled"}
    assert all(row["first_loss"] > 0 and row["table_rms"] > 0 for row in d.values())


def test_counted_flops():
    f = study.step_flops()
    assert 1e9 < f["pretraining"] < 3e9
    assert all(1e9 < v < 5e9 for means in f["fine_tuning"].values() for v in means.values())
    assert study.total_flops("pretrained", 0) == pytest.approx(3000 * f["pretraining"])
    assert study.total_flops("scratch", 1200, seed=1) == pytest.approx(
        1200 * f["fine_tuning"][study.ALL, 1][1200])


def test_the_peak_chosen_on_dev():
    dev = study.peak_on_dev()
    assert dev["seeds"] and dev["chosen"] in (1e-2, 3e-3)
    means = dev["mean_dev_wer"]
    assert dev["chosen"] == min(means, key=means.get)
    compared = [r for r in dev["rows"] if r["seed"] in dev["seeds"]]
    assert {r["peak"] for r in compared} == {1e-2, 3e-3}
    assert all(r["same_as_study"] for r in dev["rows"])  # the reruns reproduce the study on test
