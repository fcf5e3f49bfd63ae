"""Unsafe hooks are refused when the manifest is loaded: `hakiri validate` names each one."""

from __future__ import annotations

import pytest

from tests.unit.conftest import FILES_PIPELINE, MINIMAL, error_lines

PIPELINE = FILES_PIPELINE


def test_unsafe_hooks_are_reported_with_file_line_and_key(project, cli) -> None:
    project.write(
        "hakiri.toml",
        MINIMAL
        + PIPELINE
        + """
[[pipeline.hooks.pre]]
type = "sql"
statement = "DELETE FROM orders"

[[pipeline.hooks.post]]
type = "webhook"
url = "http://hooks.example.com/run"

[[pipeline.hooks.post]]
type = "webhook"
url = "https://169.254.169.254/latest/meta-data"

[[pipeline.hooks.post]]
type = "custom_function"
function = "mymodule.notify"
""",
    )

    result = cli("validate")

    assert result.exit_code == 1
    assert error_lines(result) == [
        "error: hook SQL refused: DELETE is not an admin statement "
        "(hakiri.toml:11 at pipeline[0].hooks.pre[0].statement)",
        "error: webhook URL refused: only https:// URLs are allowed (got http://) "
        "(hakiri.toml:15 at pipeline[0].hooks.post[0].url)",
        "error: webhook URL refused: 169.254.169.254 is a link-local address "
        "(the cloud metadata service lives there) (hakiri.toml:19 at pipeline[0].hooks.post[1].url)",
        "error: custom_function hooks are not supported yet "
        "(hakiri.toml:22 at pipeline[0].hooks.post[2].type)",
        "error: 4 problems in the project manifests",
    ]
    assert "Traceback" not in result.stderr


def test_safe_hooks_validate(project, cli) -> None:
    project.write(
        "hakiri.toml",
        MINIMAL
        + PIPELINE
        + """
[[pipeline.hooks.post]]
type = "sql"
statement = "ANALYZE orders;"

[[pipeline.hooks.post]]
type = "webhook"
url = "https://hooks.example.com/services/${HOOK_TOKEN:-unset}"
""",
    )

    result = cli("validate")

    assert result.exit_code == 0, result.stderr


def test_a_placeholder_host_is_checked_when_the_hook_runs(project, cli) -> None:
    # ${WEBHOOK_HOST} is unknown until run time: validate checks everything else now.
    project.write(
        "hakiri.toml",
        MINIMAL
        + PIPELINE
        + """
[[pipeline.hooks.post]]
type = "webhook"
url = "https://${WEBHOOK_HOST}/run"
""",
    )

    assert cli("validate", env={"WEBHOOK_HOST": "hooks.example.com"}).exit_code == 0


def test_vacuum_in_a_blue_green_post_hook_is_refused_at_parse_time() -> None:
    from pydantic import ValidationError

    from hakiri.spec.pipeline import PipelineSpec

    base = {
        "id": "p",
        "source": {"connector": "files", "config": {"path": "data/*.csv"}},
        "tables": ["t"],
        "hooks": {"post": [{"type": "sql", "statement": "VACUUM t"}]},
    }
    PipelineSpec.model_validate({**base, "load": {"mode": "append"}})  # fine outside a swap
    with pytest.raises(ValidationError, match="inside its swap transaction"):
        PipelineSpec.model_validate({**base, "load": {"mode": "blue_green"}})
