"""CI as a maintainer sees it: the GitHub workflows are valid and run the same commands as
.ci/run, and asking for a GPU that is not there stops the tests at once."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
CI_RUN = (ROOT / ".ci" / "run").read_text()


def lint(*paths):
    """The workflows' JSON schema (vendored by check-jsonschema: no network)."""
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", *map(str, paths)],
        capture_output=True, text=True,
    )


def test_there_are_the_three_workflows():
    assert {p.stem for p in WORKFLOWS} == {"ci", "gpu", "deploy"}


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
        assert command in CI_RUN, f"{path.name} runs {command!r}, which .ci/run does not"


def test_cpu_workflows_install_the_cpu_torch_and_gpu_asks_for_cuda():
    for name in ("ci", "deploy"):
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
