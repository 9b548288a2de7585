"""Chapter 6's full fine-tune: the committed recipe was chosen on development verses only, and every split is paired."""
from attnbook.results import load_result


def test_recipe_is_the_development_sets_best_and_every_split_is_paired():
    result = load_result("bert_finetune_full.json")
    assert "benchmarks/bert_finetune_full.py" in result["command"]
    runs = result["runs"]
    select = [r for r in runs if r["phase"] == "select"]
    assert sorted(r["lr"] for r in select) == sorted(result["lrs"])
    assert all(len(r["accuracy_by_epoch"]) == result["schedule_epochs"] for r in select)
    best = max((r["accuracy_by_epoch"][e], -e, -r["lr"], r["lr"], e + 1)
               for r in select for e in range(result["schedule_epochs"]))
    assert result["chosen"] == {"lr": best[3], "stop": best[4]}
    probe = {r["seed"]: r for r in runs if r["phase"] == "probe"}
    test = {r["seed"]: r for r in runs if r["phase"] == "test"}
    assert set(probe) == set(test) == {0, 1, 2, 3, 4}
    for seed, row in test.items():
        assert (row["lr"], row["stop"]) == (best[3], best[4])
        assert len(row["epoch_losses"]) == row["stop"]
        assert len(row["right"]) == len(probe[seed]["right"]) == 8 * (60 - result["per_genre"])
        assert abs(sum(row["right"]) / len(row["right"]) - row["accuracy"]) < 1e-6
