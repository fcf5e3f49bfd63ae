"""docs/reference.md is generated from the JSON Schemas: it must equal a fresh rendering."""

from __future__ import annotations

import copy
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[3]


def _generator() -> ModuleType:
    path = REPO / "scripts" / "gen_reference.py"
    spec = importlib.util.spec_from_file_location("gen_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _generator()


def test_the_committed_reference_matches_the_schemas() -> None:
    fresh = gen.render(*gen.load_schemas())
    committed = (REPO / "docs" / "reference.md").read_text(encoding="utf-8")
    assert committed == fresh, gen.STALE


def test_a_change_in_the_models_changes_the_reference() -> None:
    project, pipeline = gen.load_schemas()
    before = gen.render(project, pipeline)
    changed = copy.deepcopy(pipeline)
    changed["$defs"]["LoadSpec"]["properties"]["window_runs"]["description"] = "Runs to average."
    changed["$defs"]["LoadSpec"]["properties"]["brand_new_key"] = {"type": "boolean"}
    after = gen.render(project, changed)
    assert after != before
    assert "Runs to average." in after
    assert "| `brand_new_key` | boolean | no |  |  |" in after


def test_check_fails_with_one_line_when_the_file_is_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "reference.md"
    output.write_text("stale\n", encoding="utf-8")
    assert gen.main(["--check"], output=output) == 1
    assert capsys.readouterr().err.strip() == gen.STALE
    assert gen.main([], output=output) == 0
    assert gen.main(["--check"], output=output) == 0


def test_every_object_has_a_section_and_every_link_lands() -> None:
    text = gen.render(*gen.load_schemas())
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', text))
    links = set(re.findall(r"\]\(#([^)]+)\)", text))
    assert links <= anchors
    project, pipeline = gen.load_schemas()
    objects = {n for n, d in {**project["$defs"], **pipeline["$defs"]}.items() if "properties" in d}
    # PipelineSpec is the pipeline file itself, documented once as "Pipeline".
    assert {n.lower() for n in objects - {"PipelineSpec"}} | {"project-file", "pipeline"} == anchors


def test_discriminated_variants_name_their_tag() -> None:
    text = gen.render(*gen.load_schemas())
    assert '[RegexRule](#regexrule) (`type = "regex"`)' in text
    assert 'Selected by `connector = "files"`.' in text
    assert 'one of `"append"` \\| `"truncate"`' in text  # enums are written out, pipes escaped
