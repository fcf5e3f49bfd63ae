"""Repair a context table whose log spells its text columns `string collate UTF8_BINARY`.

Until the context store read its staged rows back with plain strings (`staging.plain_schema`
says why), hakiri
loaded PostgreSQL, CDC and REST sources into it on Apache Spark with such columns. The name is
Spark 4's, not Delta's: Delta's protocol has no such type (a collation lives in a field's
metadata, under a table feature), so delta-rs refuses the whole table. UTF8_BINARY is the
plain byte-wise string, so `string` is the same column; the repair writes that name into every
log entry that holds the schema — commits, checkpoints and Delta's checksum files — so that
every version stays readable, by delta-rs and delta-spark alike, for time travel too. No data
file is touched; each entry is replaced whole (written beside it, then renamed over it), and
the entries as they were are kept under `<store>/_repair/<table>/<time>/`.

A table with any other collation is left alone: it is refused with the column named.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hakiri.errors import HakiriError

__all__ = [
    "COLLATED_BINARY",
    "REPAIR_DIR",
    "LogRepair",
    "is_collation_error",
    "repair_collated_strings",
]

COLLATED_BINARY = "string collate UTF8_BINARY"
REPAIR_DIR = "_repair"
_COLLATE = "string collate "


def is_collation_error(message: str) -> bool:
    """Does a delta-rs error say the log holds a collated string type?"""
    return "Unsupported Delta table type" in message and _COLLATE in message


@dataclass
class LogRepair:
    """What `repair_collated_strings` found and changed in one table's log."""

    table: Path
    columns: set[str] = field(default_factory=set)  # column paths that were collated strings
    entries: list[str] = field(default_factory=list)  # log files rewritten (names)
    kept_in: Path | None = None  # where the entries as they were are kept

    @property
    def changed(self) -> bool:
        return bool(self.entries)


def repair_collated_strings(location: Path, *, dry_run: bool = False) -> LogRepair:
    """Rewrite `string collate UTF8_BINARY` as `string` in every schema of the table's log."""
    log = Path(location) / "_delta_log"
    found = LogRepair(Path(location))
    rewrites: list[tuple[Path, bytes]] = []
    for entry in sorted(log.iterdir()) if log.is_dir() else []:
        if entry.name.startswith("."):
            continue
        if entry.name.endswith(".json") or entry.name.endswith(".crc"):
            text = _read_text(entry)
            if _COLLATE not in text:
                continue
            fixed = _fixed_json_lines(text, entry, found.columns)
        elif ".checkpoint" in entry.name and entry.name.endswith(".parquet"):
            fixed = _fixed_checkpoint(entry, found.columns)
        else:
            continue
        if fixed is not None:
            rewrites.append((entry, fixed))
            found.entries.append(entry.name)
    if dry_run or not rewrites:
        return found
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    kept = Path(location).parent / REPAIR_DIR / Path(location).name / stamp
    kept.mkdir(parents=True, exist_ok=True)
    for entry, data in rewrites:
        shutil.copy2(entry, kept / entry.name)
        partial = entry.with_name(f".{entry.name}.repair")
        partial.write_bytes(data)
        os.replace(partial, entry)
        # Hadoop's checksum of the old bytes (.<name>.crc) would fail delta-spark's read of
        # the new ones; without one, the file is read unchecked, as delta-rs reads every file.
        entry.with_name(f".{entry.name}.crc").unlink(missing_ok=True)
    found.kept_in = kept
    return found


def _read_text(entry: Path) -> str:
    try:
        return entry.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise HakiriError(
            f"cannot read {entry}: {exc}",
            "restore the file from a backup, or move the table away and apply again",
        ) from None


def _fixed_json_lines(text: str, entry: Path, columns: set[str]) -> bytes | None:
    """A commit (JSON lines) or a Delta checksum file (one JSON object), its schemas fixed;
    None when no schema in it changed."""
    changed = False
    lines = []
    for line in text.splitlines():
        if _COLLATE not in line:
            lines.append(line)
            continue
        try:
            document = json.loads(line)
        except ValueError:
            raise HakiriError(
                f"{entry} is not valid JSON", "restore the file from a backup"
            ) from None
        for holder in _metadata_actions(document):
            schema = holder.get("schemaString")
            if isinstance(schema, str) and _COLLATE in schema:
                holder["schemaString"] = _fixed_schema(schema, entry, columns)
                changed = True
        lines.append(json.dumps(document, separators=(",", ":"), ensure_ascii=False))
    if not changed:
        return None
    ending = "\n" if text.endswith("\n") else ""
    return ("\n".join(lines) + ending).encode("utf-8")


def _metadata_actions(document: Any) -> list[dict[str, Any]]:
    """The metaData actions of a commit line, or the `metadata` of a checksum file."""
    found = []
    if isinstance(document, dict):
        for key in ("metaData", "metadata"):
            value = document.get(key)
            if isinstance(value, dict):
                found.append(value)
    return found


def _fixed_schema(schema: str, entry: Path, columns: set[str]) -> str:
    tree = json.loads(schema)
    _fix_type(tree, "", entry, columns)
    return json.dumps(tree, separators=(",", ":"), ensure_ascii=False)


def _fix_type(node: Any, path: str, entry: Path, columns: set[str]) -> Any:
    """`node` (a schema JSON type) with UTF8_BINARY-collated strings made plain, in place."""
    if isinstance(node, str):
        if node == COLLATED_BINARY:
            columns.add(path or "(element)")
            return "string"
        if node.startswith(_COLLATE):
            raise HakiriError(
                f"column {path!r} of the Delta table at {entry.parent.parent} is a "
                f"`{node}`: a collation other readers of the store cannot read",
                "hakiri repairs only UTF8_BINARY, which is the plain string; rewrite the table "
                "without the collation in Spark (CAST(col AS STRING))",
            )
        return node
    if isinstance(node, dict):
        kind = node.get("type")
        if kind == "struct":
            for child in node.get("fields", []):
                name = f"{path}.{child.get('name')}" if path else str(child.get("name"))
                child["type"] = _fix_type(child.get("type"), name, entry, columns)
        elif kind == "array":
            node["elementType"] = _fix_type(node.get("elementType"), f"{path}[]", entry, columns)
        elif kind == "map":
            node["keyType"] = _fix_type(node.get("keyType"), f"{path}{{key}}", entry, columns)
            node["valueType"] = _fix_type(node.get("valueType"), f"{path}{{value}}", entry, columns)
    return node


def _fixed_checkpoint(entry: Path, columns: set[str]) -> bytes | None:
    """A Parquet checkpoint with its metaData's schemaString fixed; None when unchanged."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(entry)
    if "metaData" not in table.column_names:
        return None
    index = table.column_names.index("metaData")
    metadata = table.column(index).combine_chunks()
    if not isinstance(metadata.type, pa.StructType):
        return None
    names = [metadata.type.field(i).name for i in range(metadata.type.num_fields)]
    if "schemaString" not in names:
        return None
    schemas = metadata.field("schemaString").to_pylist()
    if not any(isinstance(s, str) and _COLLATE in s for s in schemas):
        return None
    fixed = [
        _fixed_schema(s, entry, columns) if isinstance(s, str) and _COLLATE in s else s
        for s in schemas
    ]
    children = [
        pa.array(fixed, type=metadata.type.field(i).type)
        if name == "schemaString"
        else metadata.field(i)
        for i, name in enumerate(names)
    ]
    rebuilt = pa.StructArray.from_arrays(
        children, fields=list(metadata.type), mask=metadata.is_null()
    )
    out = io.BytesIO()
    pq.write_table(table.set_column(index, table.field(index), rebuilt), out)
    return out.getvalue()
