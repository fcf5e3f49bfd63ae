"""docs/ci.md's workflow files are valid YAML with the structure GitHub Actions and GitLab CI
expect, and their shell runs: on the example project it posts the plan and passes on exit 2;
on an invalid manifest it posts the error lines and fails."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
PLAN = "hakiri plan --format markdown --detailed-exitcode"


def blocks() -> list[Any]:
    page = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
    found = re.findall(r"^```yaml\n(.*?)^```$", page, re.S | re.M)
    assert found, "docs/ci.md has no yaml block"
    return [yaml.safe_load(block) for block in found]


def github() -> dict[str, Any]:
    return next(b for b in blocks() if isinstance(b, dict) and "jobs" in b)


def gitlab() -> dict[str, Any]:
    return next(
        job
        for b in blocks()
        if isinstance(b, dict) and "jobs" not in b
        for job in b.values()
        if isinstance(job, dict) and "script" in job
    )


def test_every_yaml_block_parses_and_is_a_github_or_gitlab_file() -> None:
    kinds = []
    for block in blocks():
        if isinstance(block, list):  # a step to paste into the workflow's steps
            assert all("run" in step or "uses" in step for step in block)
            kinds.append("step")
        elif "jobs" in block:
            kinds.append("github")
        else:
            assert any("script" in job for job in block.values()), block
            kinds.append("gitlab")
    assert {"github", "gitlab"} <= set(kinds)


def test_the_github_workflow_plans_on_pull_requests_and_posts_the_comment() -> None:
    workflow = github()
    # YAML 1.1 (PyYAML) reads the key `on` as True; GitHub reads it as "on"
    triggers = workflow.get("on", workflow.get(True))
    assert "pull_request" in triggers
    assert workflow["permissions"]["pull-requests"] == "write"
    (job,) = workflow["jobs"].values()
    steps = job["steps"]
    uses = [s["uses"].split("@")[0] for s in steps if "uses" in s]
    assert uses == [
        "actions/checkout",
        "actions/setup-python",
        "marocchino/sticky-pull-request-comment",
    ]
    plan = next(s for s in steps if PLAN in s.get("run", ""))
    assert "${{ secrets." in plan["env"]["HAKIRI_CATALOG_URL"]
    post = next(s for s in steps if s.get("uses", "").startswith("marocchino/"))
    assert post["with"]["path"] == "plan.md"
    assert steps.index(plan) < steps.index(post) < len(steps) - 1
    assert steps[-1]["if"] == f"steps.{plan['id']}.outputs.exitcode == '1'"
    assert steps[-1]["run"] == "exit 1"


def test_the_gitlab_job_plans_on_merge_requests_and_posts_a_note() -> None:
    job = gitlab()
    assert any("merge_request_event" in rule["if"] for rule in job["rules"])
    script = "\n".join(job["script"])
    assert PLAN in script
    assert "$CI_MERGE_REQUEST_IID/notes" in script and "PRIVATE-TOKEN: $GITLAB_TOKEN" in script
    assert job["script"][-1].startswith('test "$code" -ne 1')
    assert job["artifacts"]["paths"] == ["plan.md"]


# ---------------------------------------------------------------- the shell, run


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """`hakiri` (this tree, as `python -m`) and a `curl` that keeps the note it would post."""
    path = tmp_path / "bin"
    path.mkdir()
    shims = {
        "hakiri": f'exec "{sys.executable}" -m hakiri.cli.main "$@"',
        "curl": 'for a in "$@"; do case "$a" in body@*) cp "${a#body@}" posted.md;; esac; done',
    }
    for name, body in shims.items():
        (path / name).write_text(f"#!/bin/sh\n{body}\n")
        (path / name).chmod(0o755)
    return path


def example(root: Path, *, valid: bool = True) -> Path:
    root.mkdir()
    shutil.copy(REPO / "hakiri.toml", root)
    for folder in ("pipelines", "data", "schemas"):
        shutil.copytree(REPO / folder, root / folder)
    if not valid:
        with (root / "hakiri.toml").open("a") as manifest:
            manifest.write('\n[[pipeline]]\nid = "broken"\n')
    return root


def run(script: str, root: Path, bin_dir: Path) -> subprocess.CompletedProcess[str]:
    """As GitHub runs a step (`bash -eo pipefail`) and GitLab a job's script (stops on the
    first failing command)."""
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        "GITHUB_OUTPUT": str(root / "github_output"),
        "GITHUB_STEP_SUMMARY": str(root / "summary.md"),
        "HAKIRI_CATALOG_URL": f"sqlite:///{root / 'catalog.sqlite'}",
    }
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("valid", [True, False], ids=["changes", "invalid manifest"])
def test_the_github_step_keeps_the_exit_code_and_always_writes_a_comment(
    tmp_path: Path, bin_dir: Path, valid: bool
) -> None:
    root = example(tmp_path / "project", valid=valid)
    plan = next(s for s in github()["jobs"]["plan"]["steps"] if PLAN in s.get("run", ""))
    step = run(plan["run"], root, bin_dir)
    assert step.returncode == 0, step.stderr  # the step passes; the last step fails the job
    exitcode = "2" if valid else "1"
    assert (root / "github_output").read_text() == f"exitcode={exitcode}\n"
    comment = (root / "plan.md").read_text()
    assert (root / "summary.md").read_text() == comment
    if valid:
        assert comment.startswith("### hakiri plan: hakiri-example\n")
    else:
        assert comment.startswith("### hakiri plan failed\n\n~~~\nerror:")


@pytest.mark.parametrize("valid", [True, False], ids=["changes", "invalid manifest"])
def test_the_gitlab_script_posts_the_note_then_fails_only_on_exit_1(
    tmp_path: Path, bin_dir: Path, valid: bool
) -> None:
    root = example(tmp_path / "project", valid=valid)
    job = run("\n".join(gitlab()["script"]), root, bin_dir)
    assert (job.returncode == 0) is valid, job.stderr
    posted = (root / "posted.md").read_text()
    assert posted == (root / "plan.md").read_text()
    assert posted.startswith("### hakiri plan: " if valid else "### hakiri plan failed")
