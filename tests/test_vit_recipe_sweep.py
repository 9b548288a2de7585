"""Chapter 7's recipe sweep runs (smoke mode), chooses on dev, and its committed results are complete."""
import json
import subprocess
import sys
from pathlib import Path

from attnbook.results import load_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def test_smoke_run_sweeps_both_models_and_adds_seeds_to_the_chosen_recipes(tmp_path):
    out = tmp_path / "result.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "vit_recipe_sweep.py"), "--smoke", "--out", str(out)],
                   check=True, capture_output=True, timeout=600)
    result = json.loads(out.read_text())
    import vit_recipe_sweep as sweep
    swept = {(r["model"], r["recipe"]) for r in result["runs"] if r["stage"] == "sweep"}
    assert swept == {(m, name) for m in ("vit", "cnn") for name in sweep.CANDIDATES}
    assert set(result["chosen_on_dev"]) == {"vit", "cnn"}
    for model, name in result["chosen_on_dev"].items():  # smoke: one more seed of each chosen recipe
        assert any(r["stage"] == "seeds" and (r["model"], r["recipe"]) == (model, name) for r in result["runs"])
    assert not any(r["stage"] == "shift" for r in result["runs"])  # not a default stage


def test_the_choice_is_the_best_dev_accuracy_with_ties_to_the_chapter_recipe():
    import vit_recipe_sweep as sweep

    def rows(dev):
        return [{"stage": "sweep", "model": "vit", "recipe": name, "dev_accuracy": d}
                for name, d in zip(sweep.CANDIDATES, dev)]
    names = list(sweep.CANDIDATES)
    assert sweep.choose(rows([0.5, 0.9, 0.8, 0.7, 0.6]), "vit") == names[1]
    assert sweep.choose(rows([0.9, 0.9, 0.9, 0.9, 0.9]), "vit") == sweep.DEFAULT
    assert sweep.choose(rows([0.5, 0.6, 0.6, 0.9, 0.9]), "vit") == names[3]  # a tie: the earlier one
    # the recipes differ from the chapter's in what their names say, and in nothing else
    base = sweep.recipe_for(sweep.DEFAULT, smoke=False)
    for name, changes in sweep.CANDIDATES.items():
        recipe = sweep.recipe_for(name, smoke=False)
        assert {k for k in base.__dict__ if getattr(recipe, k) != getattr(base, k)} <= set(changes)
        assert all(getattr(recipe, k) == v for k, v in changes.items())


def test_committed_results_hold_the_whole_sweep_and_the_chosen_recipes_seeds():
    import vit_recipe_sweep as sweep
    result = load_result("vit_recipe_sweep.json")
    runs = result["runs"]
    for model in ("vit", "cnn"):
        assert {r["recipe"] for r in runs if r["stage"] == "sweep" and r["model"] == model} == set(sweep.CANDIDATES)
        assert result["chosen_on_dev"][model] == sweep.choose(runs, model)
