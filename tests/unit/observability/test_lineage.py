"""OpenLineage's sender: off unless the environment asks, the client's own transports when
it does, one warning when the events cannot go."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from hakiri.observability.lineage import (
    InputField,
    LineageDataset,
    lineage_from_env,
    lineage_run_id,
)


def test_off_without_openlineage_variables_or_when_disabled() -> None:
    assert lineage_from_env({}) is None
    assert lineage_from_env({"OPENLINEAGE_URL": "http://x", "OPENLINEAGE_DISABLED": "true"}) is None
    sender = lineage_from_env({"OPENLINEAGE_URL": "http://x/", "OPENLINEAGE_NAMESPACE": "wh"})
    assert sender is not None
    assert (sender.namespace, sender.where) == ("wh", "http://x/api/v1/lineage")


def test_a_run_id_is_its_uuid_or_one_derived_from_it_the_same_each_time() -> None:
    hex_id = uuid.uuid4().hex
    assert lineage_run_id(hex_id) == str(uuid.UUID(hex_id))
    assert lineage_run_id("manual-1") == lineage_run_id("manual-1") != lineage_run_id("manual-2")
    uuid.UUID(lineage_run_id("manual-1"))


def test_the_clients_file_transport_writes_each_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = tmp_path / "events.jsonl"
    variables = {
        "OPENLINEAGE__TRANSPORT__TYPE": "file",
        "OPENLINEAGE__TRANSPORT__LOG_FILE_PATH": str(events),
        "OPENLINEAGE__TRANSPORT__APPEND": "true",
    }
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    sender = lineage_from_env(variables)
    assert sender is not None and sender.namespace == "hakiri"
    source = LineageDataset("file", "/data/*.csv", fields=(("a", "int"),))
    target = LineageDataset(
        "postgres://db:5432",
        "wh.public.t",
        fields=(("b", "integer"),),
        row_count=3,
        column_lineage={"b": (InputField("file", "/data/*.csv", "a"),)},
    )
    sender.start("r1", "p", [source], [target])
    sender.fail("r1", "p", [source], [target], "it broke")
    start, fail = (json.loads(line) for line in events.read_text().splitlines())
    assert (start["eventType"], fail["eventType"]) == ("START", "FAIL")
    assert fail["run"]["facets"]["errorMessage"]["message"] == "it broke"
    (out,) = start["outputs"]
    assert out["outputFacets"]["outputStatistics"]["rowCount"] == 3
    assert out["facets"]["columnLineage"]["fields"]["b"]["inputFields"] == [
        {"namespace": "file", "name": "/data/*.csv", "field": "a", "transformations": []}
    ]


def test_a_sender_that_fails_warns_once(capsys: pytest.CaptureFixture[str]) -> None:
    sender = lineage_from_env({"OPENLINEAGE_URL": "not a url"})
    assert sender is not None
    sender.start("r1", "p", [], [])
    sender.fail("r1", "p", [], [], "x")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("warning: could not send OpenLineage events to not a url/")
