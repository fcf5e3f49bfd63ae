"""The committed JSON Schemas are generated from the models and must not drift."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import jsonschema

from hakiri.server.api import openapi_document
from hakiri.spec.schema_export import render
from tests.unit.conftest import REPO


def test_committed_schemas_match_the_models(cli) -> None:
    result = cli("schema", "export", "--check", "--project", str(REPO))
    assert result.exit_code == 0, result.stderr


def test_committed_openapi_document_matches_the_api() -> None:
    committed = (REPO / "schemas/openapi.json").read_text(encoding="utf-8")
    assert committed == render(openapi_document()), "run `hakiri schema export` and commit"


def test_check_fails_after_a_model_change_without_re_export(tmp_path) -> None:
    # Change a real model in a fresh interpreter (a new default), then run the CLI.
    script = textwrap.dedent(f"""
        import sys
        from hakiri.spec.load import LoadSpec
        from hakiri.spec.pipeline import PipelineSpec
        from hakiri.spec.project import ProjectFile
        LoadSpec.model_fields["window_runs"].default = 9
        for model in (LoadSpec, PipelineSpec, ProjectFile):
            model.model_rebuild(force=True)
        from hakiri.cli.main import main
        sys.argv = ["hakiri", "schema", "export", "--check", "--project", {str(REPO)!r}]
        main()
    """)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1, result.stderr
    assert "error: JSON Schema out of date: " in result.stderr
    assert "hint: run `hakiri schema export`" in result.stderr


def test_export_then_check_in_another_directory(tmp_path, cli) -> None:
    out = tmp_path / "s"
    assert cli("schema", "export", "--out", str(out)).exit_code == 0
    assert cli("schema", "export", "--check", "--out", str(out)).exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "openapi.json",
        "pipeline.json",
        "plan.json",
        "project.json",
        "saved-plan.json",
        "transforms.json",
        "view.json",
    ]
    for name in ("pipeline.json", "openapi.json"):
        fresh = (out / name).read_text()
        (out / name).write_text("{}\n")
        assert cli("schema", "export", "--check", "--out", str(out)).exit_code == 1
        (out / name).write_text(fresh)


def test_example_json_pipelines_validate_against_the_committed_schema() -> None:
    schema = json.loads((REPO / "schemas/pipeline.json").read_text())
    for path in (REPO / "pipelines").glob("*.json"):
        document = json.loads(path.read_text())
        assert document["$schema"] == "../schemas/pipeline.json"
        jsonschema.validate(document, schema)
