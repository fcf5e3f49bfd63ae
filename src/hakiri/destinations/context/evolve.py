"""Schema evolution of a context table: a `SchemaChange` applied as ONE new Delta version.

Which kind of version depends on the change:

- only added columns: a metadata-only commit (Delta's `ALTER TABLE ... ADD COLUMNS`, run by
  Spark). No data file is touched; readers see NULL in the new columns for every existing row.
- any rename, widening or retype: a rewrite. Spark reads the current version (as
  `tables.frame_of` does), renames, converts, adds the new columns as NULL and overwrites
  the table with the new schema (`overwriteSchema`) in one commit, in the executors, as a
  truncate load commits its rows. When the new schema needs a Delta feature the table does
  not have yet (a timestamp_ntz column), the same commit turns it on.

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

from hakiri.destinations.base import LoadRequest, SchemaChange
from hakiri.destinations.context.commit import (
    PIPELINE_KEY,
    PROJECT_KEY,
    RUN_KEY,
    delta_errors,
    delta_uri,
    open_table,
    user_metadata,
)
from hakiri.destinations.context.inspect import type_name
from hakiri.destinations.context.rs_commit import commit_properties
from hakiri.destinations.context.staging import sql_type
from hakiri.destinations.context.tables import require_delta
from hakiri.destinations.context.types import delta_type_json
from hakiri.errors import LoadError
from hakiri.guards.spark_types import quoted_name

if TYPE_CHECKING:
    from deltalake import DeltaTable
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
    if not evolution.rewrites and not evolution.adds:
        return  # every part was already so (a rename to itself, a type spelled another way)
    by_delta_rs = _metadata_by_delta_rs(spark)
    if _needs_timestamp_ntz(table, location, evolution):
        if by_delta_rs:
            _enable_timestamp_ntz_by_delta_rs(table, location, metadata)
        else:
            _enable_timestamp_ntz(location, spark(), metadata)
        table = open_table(location) or table  # the rewrite reads the version after it
    if evolution.rewrites:
        _rewrite(table, location, spark(), evolution, metadata)
    elif by_delta_rs:  # a rewrite goes through the engine's Delta writer on every engine
        _add_columns_by_delta_rs(table, location, evolution, metadata)
    else:
        _add_columns(location, spark(), evolution, metadata)


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
    location: Path, spark: SparkSession, evolution: _Evolution, metadata: dict[str, str]
) -> None:
    """Delta's `ALTER TABLE ... ADD COLUMNS`, run by Spark: a metadata-only version."""
    from hakiri.spark.errors import spark_errors

    added = [c.field for c in evolution.columns if c.source is None]
    session = _session(spark, metadata)
    with spark_errors(f"adding columns to the Delta table at {location}", fallback=LoadError):
        ddl = ", ".join(_field_ddl(field, " ") for field in added)
        session.sql(f"ALTER TABLE delta.{quoted_name(delta_uri(location))} ADD COLUMNS ({ddl})")


def _metadata_by_delta_rs(spark: Callable[[], SparkSession]) -> bool:
    """Are metadata-only changes (added columns, table features) made by delta-rs? On an engine
    without Delta's ALTER TABLE (Sail): the same single version, committed in this process."""
    from hakiri.destinations.context.txn import commits_by_delta_rs

    return commits_by_delta_rs(spark())


def _add_columns_by_delta_rs(
    table: DeltaTable, location: Path, evolution: _Evolution, metadata: dict[str, str]
) -> None:
    """`_add_columns` by delta-rs: one metadata-only version carrying hakiri's metadata."""
    from deltalake.schema import Field

    added = [Field.from_json(json.dumps(c.field)) for c in evolution.columns if c.source is None]
    with delta_errors(location, "add columns to"):
        table.alter.add_columns(added, commit_properties=commit_properties(metadata))


def _enable_timestamp_ntz_by_delta_rs(
    table: DeltaTable, location: Path, metadata: dict[str, str]
) -> None:
    from deltalake import TableFeatures

    with delta_errors(location, "enable timestamp_ntz in"):
        table.alter.add_feature(
            TableFeatures.TimestampWithoutTimezone,
            allow_protocol_versions_increase=True,
            commit_properties=commit_properties(metadata),
        )


def _field_ddl(field: dict[str, Any], separator: str) -> str:
    """A Delta (Spark JSON) schema field as Spark SQL DDL: every name quoted, nested ones too."""
    text = f"{quoted_name(str(field['name']))}{separator}{_type_ddl(field['type'])}"
    if not field.get("nullable", True):
        text += " NOT NULL"
    comment = (field.get("metadata") or {}).get("comment")
    if comment:
        text += " COMMENT '" + str(comment).replace("\\", "\\\\").replace("'", "\\'") + "'"
    return text


def _type_ddl(kind: str | dict[str, Any]) -> str:
    """A Spark JSON data type as DDL; primitive names (long, decimal(10,2), timestamp_ntz) are
    valid DDL as they are."""
    if isinstance(kind, str):
        return kind
    if kind["type"] == "struct":
        return "STRUCT<" + ", ".join(_field_ddl(f, ": ") for f in kind["fields"]) + ">"
    if kind["type"] == "array":
        return f"ARRAY<{_type_ddl(kind['elementType'])}>"
    if kind["type"] == "map":
        return f"MAP<{_type_ddl(kind['keyType'])}, {_type_ddl(kind['valueType'])}>"
    raise LoadError(f"unknown Delta column type {json.dumps(kind)}")


def _enable_timestamp_ntz(location: Path, spark: SparkSession, metadata: dict[str, str]) -> None:
    """Turn on Delta's timestampNtz table feature: a version of its own (Delta enables it by
    hand only), before the version that adds or converts the column. delta-rs reads it."""
    from hakiri.spark.errors import spark_errors

    session = _session(spark, metadata)
    with spark_errors(
        f"enabling timestamp_ntz in the Delta table at {location}", fallback=LoadError
    ):
        session.sql(
            f"ALTER TABLE delta.{quoted_name(delta_uri(location))} "
            "SET TBLPROPERTIES ('delta.feature.timestampNtz' = 'supported')"
        )


def _session(spark: SparkSession, metadata: dict[str, str]) -> SparkSession:
    """A session of its own (`isolated_session`) whose Delta commits carry `metadata`."""
    from hakiri.spark.session import isolated_session

    return isolated_session(
        require_delta(spark),
        {"spark.databricks.delta.commitInfo.userMetadata": user_metadata(metadata)},
    )


# ------------------------------------------------------------------ rewrite


def _rewrite(
    table: DeltaTable,
    location: Path,
    spark: SparkSession,
    evolution: _Evolution,
    metadata: dict[str, str],
) -> None:
    """Spark reads the current version, converts, and overwrites the table with the new schema
    (`overwriteSchema`) in one Delta commit."""
    from pyspark.sql.types import StructType

    from hakiri.destinations.context.tables import frame_of
    from hakiri.spark.errors import spark_errors

    session = _session(spark, metadata)
    frame = frame_of(session, table, location)
    target = StructType.fromJson(evolution.schema_json())
    projection = _projection(frame, evolution, target, location)
    _check_conversions(frame, evolution, target, location)
    writer = (
        frame.select(*projection)
        .write.format("delta")
        .mode("overwrite")
        .option("overwriteSchema", "true")
        # The commit's metadata: set on `session` for delta-spark; Sail reads the option.
        .option("userMetadata", user_metadata(metadata))
    )
    _check_still_at(table, location)
    with spark_errors(
        f"rewriting the Delta table at {location} with its new columns", fallback=LoadError
    ):
        writer.save(delta_uri(location))


def _check_still_at(table: DeltaTable, location: Path) -> None:
    """The table is still at the version the rewrite read. Another commit in between would be
    replaced by the overwrite (its rows lost): refuse instead. A commit during the write itself
    is Delta's to catch: an overwrite reads the whole table, so it conflicts with any commit."""
    latest = open_table(location)
    with delta_errors(location, "read", reading=True):
        moved = latest is None or latest.version() != table.version()
    if moved:
        raise LoadError(
            f"cannot commit the new columns of the Delta table at {location}: it changed while "
            "they were computed",
            "another writer committed to the table at the same time; apply again "
            "(the table was left at its previous version)",
        )


def _projection(
    frame: DataFrame, evolution: _Evolution, target: StructType, location: Path
) -> list[Column]:
    """The evolved columns as Spark expressions over the current rows; a conversion Spark
    cannot do at all (date -> boolean) fails here, naming the column."""
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    projection = []
    for column in evolution.columns:
        # Spelt in SQL: a type object sent over Spark Connect would make a string column a
        # collated one in the rewritten table's log (`staging.plain_schema` says why).
        data_type = sql_type(target[column.name].dataType)
        if column.source is None:
            expression = F.lit(None).cast(data_type)
        elif column.converted:
            expression = F.col(quoted_name(column.source)).try_cast(data_type)
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
            expression = F.col(quoted_name(column.source))
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
        values = F.col(quoted_name(column.source or ""))
        unfit = (
            values.isNotNull() & values.try_cast(sql_type(target[column.name].dataType)).isNull()
        )
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


def _needs_timestamp_ntz(table: DeltaTable, location: Path, evolution: _Evolution) -> bool:
    if '"timestamp_ntz"' not in json.dumps(evolution.schema_json()):
        return False
    with delta_errors(location, "read", reading=True):
        features = set(table.protocol().reader_features or ())
    return "timestampNtz" not in features
