"""CI as a maintainer sees it: the GitHub workflows are valid and run the same commands as
.ci/run, CI installs from a complete lock, the tests run two at a time with the CPU-measuring ones
alone, and asking for a GPU that is not there stops the tests at once."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
CI_RUN = (ROOT / ".ci" / "run").read_text()
CI_INSTALL = (ROOT / ".ci" / "install").read_text()
LOCK = ROOT / "requirements-lock.txt"


def lint(*paths):
    """The workflows' JSON schema (vendored by check-jsonschema: no network)."""
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", *map(str, paths)],
        capture_output=True, text=True,
    )


def test_there_are_the_four_workflows():
    assert {p.stem for p in WORKFLOWS} == {"ci", "gpu", "deploy", "drift"}


def test_workflows_pass_the_linter():
    result = lint(*WORKFLOWS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_linter_catches_a_typo(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text((ROOT / ".github/workflows/ci.yml").read_text().replace("runs-on:", "runs_on:"))
    assert lint(broken).returncode != 0


def _run_commands(path):
    workflow = yaml.safe_load(path.read_text())
    return [step["run"] for job in workflow["jobs"].values() for step in job.get("steps", []) if "run" in step]


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_commands_are_those_of_ci_run(path):
    """Install, test and build exactly as .ci/run does (one recipe, not two)."""
    for command in _run_commands(path):
        if command.startswith("python -c"):  # the GPU workflow's visibility check
            continue
        if path.name == "gpu.yml" and command == "python -m tools.tolerances":
            continue  # the headroom of every comparison on CUDA: a GPU-only step
        assert command in CI_RUN, f"{path.name} runs {command!r}, which .ci/run does not"


def test_cpu_workflows_install_the_cpu_torch_and_gpu_asks_for_cuda():
    for name in ("ci", "deploy", "drift"):
        env = yaml.safe_load((ROOT / f".github/workflows/{name}.yml").read_text())["jobs"]
        assert all(job.get("env", {}).get("ATTNBOOK_TORCH_INDEX", "").endswith("/whl/cpu")
                   for job in env.values() if "steps" in job and any("run" in s for s in job["steps"]))
    gpu = yaml.safe_load((ROOT / ".github/workflows/gpu.yml").read_text())["jobs"]["test-on-cuda"]
    assert gpu["env"]["ATTNBOOK_DEVICE"] == "cuda" and "gpu" in gpu["runs-on"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_asking_for_cuda_without_a_gpu_fails_at_once():
    env = {**os.environ, "ATTNBOOK_DEVICE": "cuda"}
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "tests/test_metrics.py"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "ATTNBOOK_DEVICE=cuda" in result.stdout + result.stderr


def _workflow(name):
    return yaml.safe_load((ROOT / f".github/workflows/{name}.yml").read_text())


def test_only_the_drift_workflow_ignores_the_lock_and_it_runs_weekly_and_on_demand():
    for path in WORKFLOWS:
        envs = [job.get("env", {}) for job in yaml.safe_load(path.read_text())["jobs"].values()]
        installs = {env.get("ATTNBOOK_INSTALL", "locked") for env in envs}
        assert installs == ({"newest"} if path.stem == "drift" else {"locked"}), path.name
    drift = _workflow("drift")
    triggers = drift.get("on", drift.get(True))  # YAML 1.1 reads a bare `on` as True
    assert set(triggers) == {"schedule", "workflow_dispatch"} and triggers["schedule"][0]["cron"]
    assert _run_commands(ROOT / ".github/workflows/drift.yml") == [
        "bash .ci/install", "pytest", "jupyter-book build . -W --keep-going"]
    assert "ATTNBOOK_INSTALL:-locked" in CI_INSTALL and "pip install -r requirements.txt" in CI_INSTALL


def _requirements(path):
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return [Requirement(line) for line in lines if line and not line.startswith("-")]


def test_the_lock_pins_every_requirement_within_requirements_txt():
    locked = {r.name.lower(): r for r in _requirements(LOCK)}
    assert all(len(r.specifier) == 1 and next(iter(r.specifier)).operator == "==" for r in locked.values())
    for wanted in _requirements(ROOT / "requirements.txt"):
        if wanted.name == "torch":
            continue
        version = next(iter(locked[wanted.name.lower()].specifier)).version
        assert wanted.specifier.contains(version, prereleases=True), (wanted, version)
    assert str(locked["nbval"].specifier) == "==0.11.0"
    assert "pytest-xdist" in locked


def test_the_lock_says_how_it_was_made_and_leaves_torch_to_ci_install():
    head = LOCK.read_text().splitlines()[:2]
    assert head == ["# This file was autogenerated by uv via the following command:", "#    bash .ci/lock"]
    names = {r.name.lower() for r in _requirements(LOCK)}
    # torch's build (CPU on CI, CUDA on the GPU runner) comes from the index, not from the lock;
    # the CUDA build's libraries (2.2 GB) must not be pinned for every install
    assert not {n for n in names if re.match(r"(torch|triton|nvidia-|cuda-)", n)}
    assert {"sympy", "networkx", "filelock", "setuptools"} <= names  # the CPU torch's dependencies
    assert "pip install -r requirements-lock.txt \"$torch\"" in CI_INSTALL
    assert "pip install --no-deps -e ." in CI_INSTALL


def test_pytest_runs_two_workers_with_each_notebook_whole_on_one():
    import tomllib

    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "-n 2 --dist loadfile" in options["addopts"]


TURNS_TESTS = """
import os, time
import pytest

def record(name):
    start = time.time()
    time.sleep(0.3)
    with open(os.environ["TURNS_LOG"], "a") as log:
        log.write(f"{name} {start} {time.time()}\\n")

@pytest.mark.parametrize("i", range(8))
def test_busy(i):
    record("busy")

@pytest.mark.runs_alone
@pytest.mark.parametrize("i", range(3))
def test_alone(i):
    record("alone")
"""


def test_under_xdist_a_runs_alone_test_runs_while_the_other_worker_waits(tmp_path):
    (tmp_path / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    (tmp_path / "test_turns.py").write_text(TURNS_TESTS)
    log = tmp_path / "turns.log"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "load", "-p", "no:cacheprovider", "-q",
         "--rootdir", str(tmp_path), "test_turns.py"],
        cwd=tmp_path, env={**os.environ, "TURNS_LOG": str(log), "PYTHONPATH": os.pathsep.join(
            [str(ROOT), os.environ.get("PYTHONPATH", "")])},  # the conftest imports tools/ from the root
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    runs = [(name, float(start), float(end)) for name, start, end in map(str.split, log.read_text().splitlines())]
    alone = [(s, e) for name, s, e in runs if name == "alone"]
    busy = [(s, e) for name, s, e in runs if name == "busy"]
    assert len(alone) == 3 and len(busy) == 8

    def overlap(a, b):
        return a[0] < b[1] and b[0] < a[1]

    assert not [(a, b) for a in alone for b in busy + alone if a is not b and overlap(a, b)]
    assert any(overlap(a, b) for i, a in enumerate(busy) for b in busy[i + 1:])  # two workers did run
