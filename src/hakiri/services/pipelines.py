"""`hakiri pipeline create|convert|edit`: build the request, let spec.edit change the files safely."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hakiri.sources.kinds import kind_of as source_kind
from hakiri.spec.connections import destination_document
from hakiri.spec.edit import (
    Change,
    Format,
    convert_pipeline,
    create_pipeline,
    edit_pipeline,
    parse_key_path,
    parse_value,
    set_at,
)


def new_pipeline_document(
    pipeline_id: str,
    *,
    source: str,
    path: str | None,
    file_format: str | None,
    connection: str | None,
    tables: list[str],
    destination: str | None,
    mode: str | None,
    upsert_key: list[str],
    watermark_column: str | None,
    schedule: str | None,
    sets: list[tuple[str, str]],
) -> dict[str, Any]:
    """The document `pipeline create` writes, in the key order a person would write it."""
    options = {"path": path, "format": file_format, "connection": connection}
    config = source_kind(source).starter(pipeline_id, options)
    document: dict[str, Any] = {
        "id": pipeline_id,
        "source": {"connector": source, "config": config},
    }
    document["tables"] = tables or [pipeline_id]
    if destination:
        document["destination"] = destination_document(destination)
    if schedule:
        document["schedule"] = schedule
    load: dict[str, Any] = {}
    if mode:
        load["mode"] = mode
    if upsert_key:
        load["upsert_key"] = upsert_key
    if watermark_column:
        load["watermark_column"] = watermark_column
    if load:
        document["load"] = load
    for key, value in sets:
        set_at(document, parse_key_path(key), parse_value(value), lambda _parent: {})
    return document


def create(root: Path, document: dict[str, Any], fmt: Format) -> Change:
    return create_pipeline(root, document, fmt)


def convert(root: Path, pipeline_id: str, to: Format) -> Change:
    return convert_pipeline(root, pipeline_id, to)


def edit(root: Path, pipeline_id: str, sets: list[tuple[str, str]], unsets: list[str]) -> Change:
    return edit_pipeline(root, pipeline_id, sets, unsets)
