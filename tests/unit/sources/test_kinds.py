"""Source connectors are registered kinds (`sources.kinds`); nothing outside `hakiri.sources`
(and the manifest's own models in `hakiri.spec`) tests a connector by name or by its config
or source class, and a connector registered from outside is a manifest's like any other."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import hakiri
from hakiri.errors import HakiriError
from hakiri.sources.kinds import KINDS, engine_needs, kind_of, source_for
from hakiri.spec.pipeline import PipelineSpec
from hakiri.spec.project import ProjectFile
from hakiri.spec.schema_export import pipeline_schema
from tests.support.sequence_source import SequenceConfig, SequenceSource, sequence_connector

SRC = Path(hakiri.__file__).parent
CONNECTORS = {"files", "postgres", "github", "rest", "shopify"}
# The connectors' own classes: testing isinstance against one is testing the connector.
CLASSES = {
    "FilesConfig",
    "PostgresSourceConfig",
    "CdcConfig",
    "GithubConfig",
    "RestConfig",
    "ShopifyConfig",
    "FileSource",
    "TableSource",
    "CdcSource",
    "RestTableSource",
    "GithubTableSource",
    "ShopifyTableSource",
}


def _offences(tree: ast.AST) -> list[int]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
            names_connector = any(
                isinstance(p, ast.Attribute) and p.attr == "connector" for p in parts
            )
            names_one = any(isinstance(p, ast.Constant) and p.value in CONNECTORS for p in parts)
            if names_connector and names_one:
                found.append(node.lineno)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
            classes = ast.unparse(node.args[1]) if len(node.args) > 1 else ""
            if any(name in classes.replace("|", " ").replace(",", " ").split() for name in CLASSES):
                found.append(node.lineno)
    return found


def test_no_module_outside_sources_tests_a_connector() -> None:
    offenders = [
        f"{path.relative_to(SRC)}:{line}"
        for path in sorted(SRC.rglob("*.py"))
        if path.relative_to(SRC).parts[0] not in ("sources", "spec")
        for line in _offences(ast.parse(path.read_text()))
    ]
    assert offenders == []


def test_the_check_finds_what_it_looks_for() -> None:
    code = 'if spec.source.connector == "postgres": pass\nisinstance(c, FilesConfig | int)\n'
    assert _offences(ast.parse(code)) == [1, 2]


def test_each_connector_names_itself_and_is_found_by_name() -> None:
    assert set(KINDS) == CONNECTORS
    for name, kind in KINDS.items():
        assert kind.name == name
        assert kind_of(name) is kind
    with pytest.raises(HakiriError, match="unknown connector 'salesforce'") as raised:
        kind_of("salesforce")
    assert "files" in (raised.value.hint or "")


def _spec(source: dict) -> PipelineSpec:
    return PipelineSpec.model_validate(
        {"id": "p", "source": source, "tables": ["t"], "load": {"mode": "truncate"}}
    )


def test_what_a_connector_needs_of_the_engine_comes_from_its_kind() -> None:
    assert engine_needs(_spec({"connector": "postgres", "config": {"connection": "wh"}})) == [
        "postgres_source"
    ]
    files = {"connector": "files", "config": {"path": "d/*.csv", "date_format": "dd.MM.yyyy"}}
    assert engine_needs(_spec(files)) == ["datetime_formats"]
    assert kind_of("postgres").spark_jars == frozenset({"jdbc"})
    assert kind_of("files").has_cursors is False
    assert kind_of("rest").pages_in_order is True


def test_a_registered_connector_is_validated_with_its_model_and_listed_in_the_schema() -> None:
    source = {"connector": "sequence", "config": {"rows": 3}}
    with pytest.raises(ValueError, match="tag"):
        _spec(source)  # not registered yet
    assert "sequence" not in json.dumps(pipeline_schema()["properties"]["source"])
    with sequence_connector():
        spec = _spec(source)
        assert isinstance(spec.source.config, SequenceConfig)
        assert spec.source.config.rows == 3
        opened = source_for(
            Path("."), ProjectFile.model_validate({"project": {"name": "x"}}), spec, {}
        )
        assert isinstance(opened, SequenceSource)
        mapping = pipeline_schema()["properties"]["source"]["discriminator"]["mapping"]
        assert set(mapping) == CONNECTORS | {"sequence"}
        with pytest.raises(ValueError, match="rows"):
            _spec({"connector": "sequence", "config": {"rows": -1}})
    assert set(pipeline_schema()["properties"]["source"]["discriminator"]["mapping"]) == CONNECTORS
    assert "sequence" not in KINDS
