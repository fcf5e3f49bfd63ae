"""Schema evolution of a context table: a `SchemaChange` applied as ONE new Delta version.

Which kind of version depends on the change:

- only added columns: a metadata-only commit (delta-rs `alter.add_columns`). No data
  file is touched; readers see NULL in the new columns for every existing row.
- any rename, widening or retype: a rewrite. Spark reads the current version (its live
  files, as `tables.frame_of` does), renames, converts, adds the new columns as NULL and
  writes Parquet into a staging area of the store; the files are then renamed into the
  table directory and committed in place of every file of the current version, with the
  new schema, in one overwrite commit (as a truncate load commits its rows). When the new
  schema needs a Delta feature the table does not have yet (a timestamp_ntz column), the
  staged files are streamed through delta-rs's writer instead: an AddAction commit cannot
  upgrade the protocol, and a schema without the feature leaves an unreadable table.

Converted (widened or retyped) values are checked before anything is written: a value
the new type cannot hold fails the whole change with a LoadError naming the column and a
value. The conversion is Spark's `try_cast` (ANSI semantics, whatever
`spark.sql.ansi.enabled` says), so "cannot hold" is exactly "try_cast gave NULL for a
value that was not NULL". The version before stays readable by time travel.

The commit carries hakiri's metadata (project, pipeline, run) and `hakiri.schema_change`
(what changed), but no batch app transaction: it loads no batch.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from hakiri.destinations.base import LoadRequest, SchemaChange
from hakiri.destinations.context.commit import (
    PIPELINE_KEY,
    PROJECT_KEY,
    RUN_KEY,
    delta_errors,
    move_into_table,
    open_table,
    staged_arrow_schema,
)
from hakiri.destinations.context.inspect import type_name
from hakiri.destinations.context.staging import new_staging_area, write_parquet
from hakiri.destinations.context.types import delta_type_json
from hakiri.errors import LoadError

if TYPE_CHECKING:
    from deltalake import DeltaTable, Schema
    from deltalake.transaction import CommitProperties
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = ["SCHEMA_CHANGE_KEY", "evolve_table"]

SCHEMA_CHANGE_KEY = "hakiri.schema_change"

_STALE_HINT = (
    "the table changed after the plan was made; run `hakiri plan` again, then apply "
    "(the table was not changed)"
)
_BUG_HINT = "report this as a bug; the table was not changed"


@dataclass(frozen=True)
class _Column:
    """One column of the evolved table."""

    field: dict[str, Any]  # its Delta schema field (JSON): name, type, nullable, metadata
    source: str | None  # its name in the current version; None: an added column
    old_type: str | None = None  # set when the values are converted: the type they have now

    @property
    def name(self) -> str:
        return str(self.field["name"])

    @property
    def converted(self) -> bool:
        return self.old_type is not None

    @property
    def type(self) -> str:
        return _type_name(self.field["type"])


@dataclass(frozen=True)
class _Evolution:
    """The evolved table's columns (current ones in place, added ones last), decided before
    anything is read or written."""

    columns: tuple[_Column, ...]
    summary: str  # for the commit's metadata: "rename a -> b; add c long; widen d integer -> long"

    @property
    def adds(self) -> bool:
        return any(c.source is None for c in self.columns)

    @property
    def rewrites(self) -> bool:
        """Renamed or converted columns: every data file must be rewritten."""
        return any(c.source not in (None, c.name) or c.converted for c in self.columns)

    def schema_json(self) -> dict[str, Any]:
        return {"type": "struct", "fields": [c.field for c in self.columns]}


def evolve_table(
    location: Path,
    store: Path,
    spark: Callable[[], SparkSession],
    request: LoadRequest,
    change: SchemaChange,
) -> None:
    """Apply `change` to the Delta table at `location` as one new version, or raise and leave
    the table as it was. Spark is started only for a rewrite."""
    if change.empty:
        return
    table = open_table(location)
    if table is None:
        raise LoadError(
            f"cannot change the columns of the Delta table at {location}: there is no such table",
            "a missing table is created from the staged rows; " + _STALE_HINT,
        )
    with delta_errors(location, "read", reading=True):
        current = json.loads(table.schema().to_json())["fields"]
    evolution = _evolution(current, change, location)
    metadata = {
        PROJECT_KEY: request.project,
        PIPELINE_KEY: request.pipeline_id,
        RUN_KEY: request.run_id,
        SCHEMA_CHANGE_KEY: evolution.summary,
    }
    if evolution.rewrites:
        _rewrite(table, location, store, spark(), request, evolution, metadata)
    elif evolution.adds:
        _add_columns(table, location, evolution, metadata)
    # else: every part was already so (a rename to itself, a type spelled another way)


# ------------------------------------------------------------------ deciding


def _evolution(current: list[dict[str, Any]], change: SchemaChange, location: Path) -> _Evolution:
    """The evolved columns: renames first, then added columns, then widened and retyped ones."""
    names = {f["name"] for f in current}
    renames: dict[str, str] = {}
    parts: list[str] = []
    for old, new in change.rename:
        if old not in names:
            raise LoadError(
                f"cannot rename column {old!r} of the Delta table at {location}: "
                "the table has no such column",
                _STALE_HINT,
            )
        if old in renames:
            raise LoadError(f"column {old!r} is renamed twice in one schema change", _BUG_HINT)
        renames[old] = new
        if new != old:
            parts.append(f"rename {old} -> {new}")
    columns = [
        _Column({**f, "name": renames.get(f["name"], f["name"])}, f["name"]) for f in current
    ]
    _check_unique(columns, location, "renaming")

    for added in change.add:
        kind = _delta_type(added.type, added.name, location)
        # Existing rows get NULL in it: an added column is nullable whatever the request says.
        columns.append(
            _Column({"name": added.name, "type": kind, "nullable": True, "metadata": {}}, None)
        )
        parts.append(f"add {added.name} {_type_name(kind)}")
    _check_unique(columns, location, "adding")

    index = {c.name: i for i, c in enumerate(columns)}
    for verb, retypes in (("widen", change.widen), ("retype", change.retype)):
        for retype in retypes:
            name = retype.column if retype.column in index else renames.get(retype.column, "")
            column = columns[index[name]] if name in index else None
            if column is None or column.source is None:
                raise LoadError(
                    f"cannot change the type of column {retype.column!r} of the Delta table at "
                    f"{location}: the table has no such column",
                    _STALE_HINT,
                )
            if column.converted:
                raise LoadError(
                    f"column {name!r} is given two new types in one schema change", _BUG_HINT
                )
            if _normalized(retype.old_type) != column.type:
                raise LoadError(
                    f"column {name!r} of the Delta table at {location} is {column.type}, "
                    f"not {retype.old_type} as planned",
                    _STALE_HINT,
                )
            kind = _delta_type(retype.new_type, name, location)
            if _type_name(kind) == column.type:
                continue  # spelled differently, the same type: nothing to convert
            columns[index[name]] = _Column(
                {**column.field, "type": kind}, column.source, old_type=column.type
            )
            parts.append(f"{verb} {name} {column.type} -> {_type_name(kind)}")
    return _Evolution(tuple(columns), "; ".join(parts))


def _check_unique(columns: list[_Column], location: Path, doing: str) -> None:
    """Delta column names are unique regardless of case."""
    seen: set[str] = set()
    for column in columns:
        if column.name.lower() in seen:
            raise LoadError(
                f"{doing} columns would give the Delta table at {location} two columns named "
                f"{column.name!r} (ignoring case)",
                _STALE_HINT,
            )
        seen.add(column.name.lower())


def _delta_type(name: str, column: str, location: Path) -> str | dict[str, Any]:
    kind = delta_type_json(name)
    if kind is None:
        raise LoadError(
            f"column {column!r} cannot have type {name!r} in the Delta table at {location}: "
            "the context store has no such type",
            "use a Delta type (long, integer, double, string, date, timestamp, decimal(p,s), ...)",
        )
    return kind


def _type_name(kind: str | dict[str, Any]) -> str:
    """A schema JSON type as `inspect.type_name` (what `target_columns` and the commit use) names it."""
    from deltalake import Field

    document = {"name": "c", "type": kind, "nullable": True, "metadata": {}}
    return type_name(Field.from_json(json.dumps(document)).type)


def _normalized(name: str) -> str:
    kind = delta_type_json(name)
    return _type_name(kind) if kind is not None else name.strip().lower()


# ------------------------------------------------------------------ metadata-only


def _add_columns(
    table: DeltaTable, location: Path, evolution: _Evolution, metadata: dict[str, str]
) -> None:
    from deltalake import Field
    from deltalake.transaction import CommitProperties

    fields = [Field.from_json(json.dumps(c.field)) for c in evolution.columns if c.source is None]
    with delta_errors(location, "add columns to"):
        table.alter.add_columns(
            fields, commit_properties=CommitProperties(custom_metadata=metadata)
        )


# ------------------------------------------------------------------ rewrite


def _rewrite(
    table: DeltaTable,
    location: Path,
    store: Path,
    spark: SparkSession,
    request: LoadRequest,
    evolution: _Evolution,
    metadata: dict[str, str],
) -> None:
    from deltalake import Schema
    from pyspark.sql.types import StructType

    from hakiri.destinations.context.tables import frame_of

    frame = frame_of(spark, table, location)
    target = StructType.fromJson(evolution.schema_json())
    projection = _projection(frame, evolution, target, location)
    _check_conversions(frame, evolution, target, location)

    schema = Schema.from_json(json.dumps(evolution.schema_json()))
    area = new_staging_area(store, request)
    try:
        with delta_errors(area.root, "create", what="the staging directory"):
            area.root.mkdir(parents=True)
        write_parquet(
            frame.select(*projection),
            area.rows_dir,
            f"rewriting the Delta table at {location} with its new columns",
        )
        files = area.part_files(area.rows_dir)
        _check_written(files, schema, location)
        if _needs_timestamp_ntz(table, location, evolution):
            _write_through_delta_rs(table, location, files, metadata)
        else:
            _commit_in_place(table, location, files, schema, request, area.name, metadata)
    finally:
        area.remove()


def _projection(
    frame: DataFrame, evolution: _Evolution, target: StructType, location: Path
) -> list[Column]:
    """The evolved columns as Spark expressions over the current rows; a conversion Spark
    cannot do at all (date -> boolean) fails here, naming the column."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    projection = []
    for column in evolution.columns:
        data_type = target[column.name].dataType
        if column.source is None:
            expression = F.lit(None).cast(data_type)
        elif column.converted:
            expression = F.col(_quoted(column.source)).try_cast(data_type)
            try:
                frame.select(expression).schema  # noqa: B018 - analysing is the check
            except AnalysisException:
                raise LoadError(
                    f"column {column.source!r} of the Delta table at {location} cannot be "
                    f"converted from {column.old_type} to {column.type}",
                    "keep the column's type, or load the new values into a new column; "
                    "the table was not changed",
                ) from None
        else:
            expression = F.col(_quoted(column.source))
        projection.append(expression.alias(column.name))
    return projection


def _check_conversions(
    frame: DataFrame, evolution: _Evolution, target: StructType, location: Path
) -> None:
    """One Spark aggregation over the current rows: per converted column, how many values the
    new type cannot hold, and one of them."""
    from pyspark.sql import functions as F

    from hakiri.spark.errors import spark_errors

    converted = [c for c in evolution.columns if c.converted and c.source is not None]
    if not converted:
        return
    aggregates = []
    for n, column in enumerate(converted):
        values = F.col(_quoted(column.source or ""))
        unfit = values.isNotNull() & values.try_cast(target[column.name].dataType).isNull()
        aggregates += [
            F.count_if(unfit).alias(f"lost{n}"),
            F.first(F.when(unfit, values.cast("string")), ignorenulls=True).alias(f"value{n}"),
        ]
    with spark_errors(
        f"checking the converted columns of the Delta table at {location}", fallback=LoadError
    ):
        found = frame.agg(*aggregates).first()
    if found is None:  # pragma: no cover - a global aggregation always has one row
        return
    for n, column in enumerate(converted):
        lost = int(found[f"lost{n}"] or 0)
        if lost:
            raise LoadError(
                f"cannot convert column {column.name!r} of the Delta table at {location} from "
                f"{column.old_type} to {column.type}: {lost:,} "
                f"{'value does' if lost == 1 else 'values do'} not fit, e.g. "
                f"{_shown(found[f'value{n}'])}",
                "the table was not changed; fix or remove those rows at the source and in the "
                "table, or keep the column's old type",
            )


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _check_written(files: list[Path], schema: Schema, location: Path) -> None:
    """Spark wrote the evolved columns, with the evolved types (else nothing is committed)."""
    if not files:
        raise LoadError(f"rewriting the Delta table at {location} wrote no data file", _BUG_HINT)
    from deltalake import Schema

    with delta_errors(location, "convert the rewritten rows of"):
        written = [
            (f.name, type_name(f.type))
            for f in Schema.from_arrow(staged_arrow_schema(files)).fields
        ]
    expected = [(f.name, type_name(f.type)) for f in schema.fields]
    if written != expected:
        shown = ", ".join(f"{n} {t}" for n, t in written)
        raise LoadError(
            f"rewriting the Delta table at {location} wrote the columns ({shown}), not the "
            "evolved ones",
            _BUG_HINT,
        )


def _needs_timestamp_ntz(table: DeltaTable, location: Path, evolution: _Evolution) -> bool:
    if '"timestamp_ntz"' not in json.dumps(evolution.schema_json()):
        return False
    with delta_errors(location, "read", reading=True):
        features = set(table.protocol().reader_features or ())
    return "timestampNtz" not in features


def _commit_in_place(
    table: DeltaTable,
    location: Path,
    files: list[Path],
    schema: Schema,
    request: LoadRequest,
    staging: str,
    metadata: dict[str, str],
) -> None:
    """Move the rewritten files into the table and commit them in place of every current file,
    with the new schema (the log's new metaData), in one overwrite commit."""
    moved = move_into_table(files, location, request, staging)
    try:
        with delta_errors(location, "commit the new columns of"):
            table.create_write_transaction(
                list(moved.actions),
                "overwrite",
                schema,
                commit_properties=_commit_properties(metadata),
            )
    except Exception:
        if not _landed(location, [a.path for a in moved.actions]):
            moved.remove()
        raise


def _commit_properties(metadata: dict[str, str]) -> CommitProperties:
    """A rewrite commits on top of the version it read, or not at all: delta-rs would otherwise
    retry on top of a concurrent commit and keep that commit's files under the new schema
    (a renamed column NULL in them), or replace its rows. A lost race fails with delta-rs's
    CommitFailedError, "another writer committed ... apply again"."""
    from deltalake.transaction import CommitProperties

    return CommitProperties(custom_metadata=metadata, max_commit_retries=0)


def _landed(location: Path, paths: list[str]) -> bool:
    """Does the table's current version hold these files (the commit landed and only a
    post-commit step failed)?"""
    from deltalake import DeltaTable

    if not paths:
        return False
    try:
        live = {Path(unquote(uri)).name for uri in DeltaTable(str(location)).file_uris()}
    except Exception:
        return True  # cannot tell: keep the files (vacuum removes them if they are orphans)
    return any(Path(unquote(p)).name in live for p in paths)


def _write_through_delta_rs(
    table: DeltaTable, location: Path, files: list[Path], metadata: dict[str, str]
) -> None:
    """Stream the rewritten rows (Arrow batches, never the whole table at once) into one
    delta-rs overwrite that also replaces the schema and upgrades the protocol."""
    import pyarrow.dataset as ds
    from deltalake import write_deltalake

    schema = staged_arrow_schema(files)
    with delta_errors(location, "commit the new columns of"):
        reader = (
            ds.dataset([str(f) for f in files], format="parquet", schema=schema)
            .scanner()
            .to_reader()
        )
        write_deltalake(
            table,
            reader,
            mode="overwrite",
            schema_mode="overwrite",
            commit_properties=_commit_properties(metadata),
        )


def _quoted(name: str) -> str:
    """A column name for F.col: backquoted, so dots and spaces in it are part of the name."""
    return "`" + name.replace("`", "``") + "`"
