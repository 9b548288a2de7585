"""Chapter 7's pre-training control: does pre-training on other digits narrow the ViT-CNN gap?

Usage: ``python benchmarks/vit_pretraining.py --jobs 2`` (writes
``lib/attnbook/results/vit_pretraining.json``, which the chapter prints), or
``python benchmarks/vit_pretraining.py --smoke`` (a seconds-long run that writes nothing unless
``--out`` is given).

For each model (the chapter's ViT and CNN) and seed (0, 1, 2):

- **pre-trained**: train on every training digit labelled 0-4 (``PRETRAIN_STEPS`` steps), reset
  the linear read-out, then fine-tune on 125 training digits labelled 5-9 (25 per class, picked by
  the seed) for ``FINETUNE_STEPS`` steps;
- **from scratch**: the same model, seed and 125 digits, trained for
  ``PRETRAIN_STEPS + FINETUNE_STEPS`` steps, so both arms take the same number of steps.

Every stage uses the chapter's recipe (``ImageRecipe``: AdamW, warm-up then linear decay, label
smoothing, the augmentation) with only the steps and warm-up changed, the same for both models.
Test accuracy is measured on the test digits labelled 5-9. The budget is small (a few CPU
minutes in all, one thread per run): the runs say whether pre-training narrows the gap at this
scale, not what a full budget would reach.
"""
from __future__ import annotations

import dataclasses
import json
import time

import torch

import common
from attnbook.data.digits import ImageSet, load_digits_splits, subset
from attnbook.env import seed_everything
from attnbook.models.cnn import CNNConfig, SmallCNN
from attnbook.models.vit import ViT, ViTConfig
from attnbook.tasks.image_classification import ImageRecipe, accuracy, train_classifier

SEEDS = (0, 1, 2)
MODELS = ("vit", "cnn")
PRETRAIN_STEPS, FINETUNE_STEPS = 300, 200
PRETRAIN_CLASSES, TARGET_CLASSES = (0, 1, 2, 3, 4), (5, 6, 7, 8, 9)
PER_CLASS = 25  # 125 fine-tuning digits


def classes(data: ImageSet, keep: tuple[int, ...]) -> ImageSet:
    """The images of ``data`` whose label is in ``keep``."""
    chosen = torch.isin(data.labels, torch.tensor(keep))
    return ImageSet(data.images[chosen], data.labels[chosen])


def few(data: ImageSet, per_class: int, seed: int) -> ImageSet:
    """``per_class`` images of every class of ``data``, picked by ``seed``."""
    fraction = per_class / min(torch.bincount(data.labels)[list(set(data.labels.tolist()))]).item()
    part = subset(data, min(1.0, fraction + 1e-9), seed)
    keep = torch.cat([torch.nonzero(part.labels == c).flatten()[:per_class]
                      for c in torch.unique(part.labels)])
    keep = torch.sort(keep).values
    return ImageSet(part.images[keep], part.labels[keep])


def build(model: str):
    return ViT(ViTConfig()) if model == "vit" else SmallCNN(CNNConfig())


def head(net) -> torch.nn.Linear:
    return net.readout if isinstance(net, ViT) else net.head


def run_one(model: str, seed: int, smoke: bool) -> dict:
    torch.set_num_threads(1)
    start = time.process_time()
    digits = load_digits_splits()
    source = classes(digits.train, PRETRAIN_CLASSES)
    target = few(classes(digits.train, TARGET_CLASSES), PER_CLASS, seed)
    test = classes(digits.test, TARGET_CLASSES)
    pre, fine = (4, 4) if smoke else (PRETRAIN_STEPS, FINETUNE_STEPS)
    base = dataclasses.replace(ImageRecipe(), seed=seed)
    stage = {name: dataclasses.replace(base, steps=steps, warmup_steps=max(1, steps // 20))
             for name, steps in (("pretrain", pre), ("finetune", fine), ("scratch", pre + fine))}
    fill = digits.background
    row = {"model": model, "seed": seed, "pretrain_images": len(source),
           "finetune_images": len(target), "test_images": len(test),
           "steps": {k: r.steps for k, r in stage.items()}}

    seed_everything(seed)
    net = build(model)
    train_classifier(net, target, stage["scratch"], fill=fill, progress=False)
    row["scratch_test_accuracy"] = accuracy(net, test)

    seed_everything(seed)
    net = build(model)
    train_classifier(net, source, stage["pretrain"], fill=fill, progress=False)
    row["pretrain_test_accuracy"] = accuracy(net, classes(digits.test, PRETRAIN_CLASSES))
    torch.manual_seed(seed)
    head(net).reset_parameters()  # a fresh read-out for the new classes
    train_classifier(net, target, stage["finetune"], fill=fill, progress=False)
    row["pretrained_test_accuracy"] = accuracy(net, test)
    row["cpu_seconds"] = round(time.process_time() - start, 1)
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    p = common.experiment_parser(__doc__)
    args = p.parse_args()
    common.check_jobs(p, args)
    done = {(r["model"], r["seed"]): r for r in common.log_rows(args.resume)}
    todo = [(m, s, args.smoke) for s in SEEDS for m in MODELS if (m, s) not in done]
    for row in common.run_jobs(run_one, todo, args.jobs):
        done[(row["model"], row["seed"])] = row
    out = common.out_path(args, "vit_pretraining.json")
    if out is not None:
        common.write_result(out, {
            "description": "Chapter 7: the ViT and the CNN fine-tuned on 125 digits 5-9 after "
                           "pre-training on the training digits 0-4, against the same models trained "
                           "from scratch for as many steps; test digits 5-9; written by "
                           "benchmarks/vit_pretraining.py",
            "machine": common.machine(args.jobs),
            "runs": sorted(done.values(), key=lambda r: (r["seed"], r["model"])),
        })


if __name__ == "__main__":
    main()
