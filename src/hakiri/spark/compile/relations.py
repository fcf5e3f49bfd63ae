"""A Spark Connect relation tree -> hakiri's declarative transform steps.

`relation_steps(root, frames)` walks the plan PySpark built for `transform(df)` from its leaf
(the input frame) up, and writes each relation as steps (JSON form, as a manifest's
`transforms` holds them):

    with_columns (withColumn, withColumns)     with_columns
    filter (filter, where)                     filter
    project (select)                           select, after a with_columns for named
                                               expressions (`F.upper("a").alias("b")`)
    with_columns_renamed (withColumnRenamed)   rename (a name the batch lacks: no-op, as PySpark)
    drop                                       drop (likewise)
    deduplicate (dropDuplicates)               dedupe (all columns, or the keys)
    to_df (toDF)                               rename
    join with context_table(name)              join (USING columns: inner, left, semi, anti)
    subquery_alias (alias), hint (broadcast)   nothing: they change no row

Anything else is refused, naming the DataFrame method that made it: a read (spark.read,
spark.table, spark.sql), a frame made inside transform (createDataFrame), sort/limit/sample,
aggregates, unions, Python functions over partitions (mapInPandas, mapInArrow).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hakiri.spark.compile.expressions import (
    CompileRefusal,
    call_site,
    expression_sql,
    split_name,
)

__all__ = ["STEP_CALLS", "Frames", "relation_steps"]

# The DataFrame methods that make each step: where to look in a module for a step's line.
STEP_CALLS = {
    "filter": ("filter", "where"),
    "with_columns": ("withColumn", "withColumns", "select"),
    "select": ("select",),
    "rename": ("withColumnRenamed", "withColumnsRenamed", "toDF"),
    "drop": ("drop",),
    "dedupe": ("dropDuplicates", "drop_duplicates", "distinct"),
    "join": ("join",),
}

_JOIN_TYPES = {
    "JOIN_TYPE_INNER": "inner",
    "JOIN_TYPE_LEFT_OUTER": "left",
    "JOIN_TYPE_LEFT_SEMI": "left_semi",
    "JOIN_TYPE_LEFT_ANTI": "left_anti",
}
_READS_HINT = (
    "a compiled transform reads only its batch and the context store's tables: "
    "join with context_table(name) from hakiri.compile"
)
# relation kind -> (what it is, hint, the DataFrame methods that make it)
_REFUSED: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "read": ("a read of files or tables", _READS_HINT, ("read", "table", "readStream")),
    "sql": ("a SQL query (spark.sql)", _READS_HINT, ("sql",)),
    "local_relation": (
        "a frame made inside transform (createDataFrame)",
        _READS_HINT,
        ("createDataFrame",),
    ),
    "range": ("a frame made inside transform (spark.range)", _READS_HINT, ("range",)),
    "map_partitions": (
        "Python code over the rows (mapInPandas/mapInArrow)",
        "use Spark's built-in functions; the runtime never runs the module",
        ("mapInPandas", "mapInArrow"),
    ),
    "group_map": (
        "Python code over groups (applyInPandas)",
        "use Spark's built-in functions; the runtime never runs the module",
        ("applyInPandas", "applyInArrow"),
    ),
    "sort": (
        "sorting (orderBy/sort)",
        "a load does not keep the order of rows: sort when you read the target "
        "(to keep one row per key, use dropDuplicates)",
        ("orderBy", "sort", "sortWithinPartitions"),
    ),
    "limit": (
        "limit",
        "which rows of a batch come first is not fixed: filter the rows you want",
        ("limit", "head", "take"),
    ),
    "offset": ("offset", "which rows come first is not fixed: filter instead", ("offset",)),
    "tail": ("tail", "which rows come last is not fixed: filter instead", ("tail",)),
    "sample": ("sampling", "it picks rows at random: filter instead", ("sample", "sampleBy")),
    "aggregate": (
        "an aggregate (groupBy/agg)",
        "a compiled transform works one row at a time: aggregate in a view over the target",
        ("groupBy", "groupby", "agg", "rollup", "cube", "pivot"),
    ),
    "set_op": (
        "a union/intersect/except of frames",
        _READS_HINT,
        ("union", "unionAll", "unionByName", "intersect", "intersectAll", "subtract", "exceptAll"),
    ),
    "repartition": (
        "repartitioning (repartition/coalesce)",
        "leave partitioning to the engine",
        ("repartition", "coalesce"),
    ),
    "repartition_by_expression": (
        "repartitioning (repartition/repartitionByRange)",
        "leave partitioning to the engine",
        ("repartition", "repartitionByRange"),
    ),
    "unpivot": ("unpivot/melt", "it makes several rows of one; not compiled", ("unpivot", "melt")),
    "with_watermark": ("a watermark", "batches are not streams", ("withWatermark",)),
}


@dataclass(frozen=True)
class Frames:
    """The frames transform(df) may build on: the input's plan id and its columns, and each
    context table's plan id -> (table name, its columns)."""

    input_id: int
    input_columns: Sequence[str]
    tables: Mapping[int, tuple[str, Sequence[str]]]


def relation_steps(root: Any, frames: Frames) -> tuple[list[dict[str, Any]], list[str | None]]:
    """The steps that make `root` (a `spark.connect.Relation`) of the input frame, and for
    each the Python call site PySpark recorded for its expressions (None: none recorded)."""
    walk = _Walk(frames)
    walk.visit(root)
    return walk.steps, walk.sites


class _Walk:
    def __init__(self, frames: Frames) -> None:
        self.frames = frames
        self.steps: list[dict[str, Any]] = []
        self.sites: list[str | None] = []
        self.columns: list[str] = []

    # ---------------------------------------------------------------- columns

    def find(self, name: str) -> str | None:
        """The batch's spelling of `name` (Spark matches names ignoring case)."""
        if name in self.columns:
            return name
        matches = [c for c in self.columns if c.lower() == name.lower()]
        return matches[0] if len(matches) == 1 else None

    def add(self, step: dict[str, Any], made_of: Any = None) -> None:
        self.steps.append(step)
        self.sites.append(call_site(made_of) if made_of is not None else None)

    # `made_of`: the step's own expressions, never the relation (whose input is the steps
    # before it, with call sites of their own).

    # ---------------------------------------------------------------- relations

    def visit(self, rel: Any) -> None:
        kind = rel.WhichOneof("rel_type")
        if kind == "local_relation" and rel.common.plan_id == self.frames.input_id:
            self.columns = list(self.frames.input_columns)
            return
        method = getattr(self, f"_{kind}", None)
        if method is None:
            raise _refused(kind)
        method(rel)

    def _subquery_alias(self, rel: Any) -> None:
        self.visit(rel.subquery_alias.input)

    def _hint(self, rel: Any) -> None:
        self.visit(rel.hint.input)

    def _filter(self, rel: Any) -> None:
        self.visit(rel.filter.input)
        self.add(
            {"op": "filter", "expr": expression_sql(rel.filter.condition)}, rel.filter.condition
        )

    def _with_columns(self, rel: Any) -> None:
        self.visit(rel.with_columns.input)
        columns: dict[str, str] = {}
        for alias in rel.with_columns.aliases:
            if len(alias.name) != 1:
                raise CompileRefusal(
                    "an expression named by several names (a generator) cannot be compiled",
                    "give each column its own withColumn",
                    call_site(alias),
                )
            columns[alias.name[0]] = expression_sql(alias.expr)
        self.add({"op": "with_columns", "columns": columns}, list(rel.with_columns.aliases))
        for name in columns:
            if self.find(name) is None:
                self.columns.append(name)

    def _with_columns_renamed(self, rel: Any) -> None:
        renamed = rel.with_columns_renamed
        self.visit(renamed.input)
        pairs = [(r.col_name, r.new_col_name) for r in renamed.renames] or list(
            renamed.rename_columns_map.items()
        )
        renames: dict[str, str] = {}
        for old, new in pairs:
            found = self.find(old)
            if found is not None:  # PySpark renames a column the frame lacks to nothing
                renames[found] = new
        if renames:
            self.add({"op": "rename", "columns": renames})
            self.columns = [renames.get(c, c) for c in self.columns]

    def _to_df(self, rel: Any) -> None:
        self.visit(rel.to_df.input)
        names = list(rel.to_df.column_names)
        if len(names) != len(self.columns):
            raise CompileRefusal(
                f"toDF names {len(names)} columns of {len(self.columns)}",
                "name every column",
                calls=("toDF",),
            )
        renames = {old: new for old, new in zip(self.columns, names, strict=True) if old != new}
        if renames:
            self.add({"op": "rename", "columns": renames})
            self.columns = names

    def _drop(self, rel: Any) -> None:
        drop = rel.drop
        self.visit(drop.input)
        names = list(drop.column_names)
        for column in drop.columns:
            if column.WhichOneof("expr_type") != "unresolved_attribute":
                raise CompileRefusal(
                    "drop of an expression that is not a column",
                    "drop columns by name",
                    call_site(column),
                    ("drop",),
                )
            names.append(column.unresolved_attribute.unparsed_identifier)
        dropped = list(dict.fromkeys(f for n in names if (f := self.find(n)) is not None))
        if dropped:  # PySpark drops a column the frame lacks as nothing
            self.add({"op": "drop", "columns": dropped})
            self.columns = [c for c in self.columns if c not in dropped]

    def _deduplicate(self, rel: Any) -> None:
        dedupe = rel.deduplicate
        self.visit(dedupe.input)
        if dedupe.within_watermark:
            raise _refused("with_watermark")
        keys = list(self.columns) if dedupe.all_columns_as_keys else list(dedupe.column_names)
        if not keys:
            keys = list(self.columns)
        self.add({"op": "dedupe", "keys": [self.find(k) or k for k in keys]})

    def _project(self, rel: Any) -> None:
        project = rel.project
        self.visit(project.input)
        chosen: list[str] = []
        computed: dict[str, str] = {}
        for item in project.expressions:
            kind = item.WhichOneof("expr_type")
            if kind == "unresolved_star" and not item.unresolved_star.unparsed_target:
                chosen.extend(self.columns)
                continue
            name = self._plain_column(item)
            if name is not None:
                chosen.append(name)
                continue
            if kind != "alias" or len(item.alias.name) != 1:
                raise CompileRefusal(
                    "select of an expression without a name",
                    'name it with .alias("name")',
                    call_site(item),
                    ("select",),
                )
            alias = item.alias.name[0]
            plain = self._plain_column(item.alias.expr)
            if plain is not None and plain == alias:
                chosen.append(plain)
                continue
            computed[alias] = expression_sql(item.alias.expr)
            chosen.append(alias)
        if len({c.lower() for c in chosen}) != len(chosen):
            raise CompileRefusal(
                f"select makes two columns of one name ({', '.join(chosen)})",
                "select each column once, or alias one of them",
                call_site(project),
                ("select",),
            )
        if computed:
            self.add({"op": "with_columns", "columns": computed}, list(project.expressions))
        if chosen != self.columns or computed:
            self.add({"op": "select", "columns": chosen})
        self.columns = chosen

    def _plain_column(self, item: Any) -> str | None:
        """The batch's name for `item` when it is one of its columns, as is; else None."""
        if item.WhichOneof("expr_type") != "unresolved_attribute":
            return None
        parts = split_name(item.unresolved_attribute.unparsed_identifier)
        if len(parts) != 1:
            return None
        found = self.find(parts[0])
        if found is None:
            raise CompileRefusal(
                f"no column {parts[0]!r} in the frame (columns: {', '.join(self.columns)})",
                "check the name against the pipeline's source and the steps before",
                call_site(item),
                ("select",),
            )
        return found

    def _join(self, rel: Any) -> None:
        join = rel.join
        self.visit(join.left)
        table, table_columns = self._context_table(join.right)
        how = _JOIN_TYPES.get(join.JoinType.Name(join.join_type))
        if how is None:
            raise CompileRefusal(
                f"a {join.JoinType.Name(join.join_type).removeprefix('JOIN_TYPE_').lower()} "
                "join keeps rows that are not the batch's",
                'join with how="inner", "left", "left_semi" or "left_anti"',
                calls=("join", "crossJoin"),
            )
        if join.HasField("join_condition") or not join.using_columns:
            raise CompileRefusal(
                "a join on a condition: compiled joins match columns of the same name",
                'name the columns: df.join(context_table("t"), ["key"], "left")',
                call_site(join.join_condition) if join.HasField("join_condition") else None,
                ("join",),
            )
        on = [self.find(k) or k for k in join.using_columns]
        step: dict[str, Any] = {"op": "join", "table": table, "on": on, "how": how}
        if table_columns is not None:
            step["columns"] = table_columns
        self.add(step)
        if how in ("inner", "left"):
            keyed = {k.lower() for k in on}
            right = table_columns if table_columns is not None else self._all_of(table)
            self.columns = (
                on
                + [c for c in self.columns if c.lower() not in keyed]
                + [c for c in right if c.lower() not in keyed]
            )

    def _all_of(self, table: str) -> list[str]:
        return next(list(cols) for name, cols in self.frames.tables.values() if name == table)

    def _context_table(self, rel: Any) -> tuple[str, list[str] | None]:
        """The context table a join's right side reads, and the columns it selects of it
        (None: all of them)."""
        kind = rel.WhichOneof("rel_type")
        if kind in ("subquery_alias", "hint"):
            return self._context_table(getattr(rel, kind).input)
        if kind == "local_relation" and rel.common.plan_id in self.frames.tables:
            return self.frames.tables[rel.common.plan_id][0], None
        if kind == "project":
            table, columns = self._context_table(rel.project.input)
            available = columns or self._all_of(table)
            picked = []
            for item in rel.project.expressions:
                name = None
                if item.WhichOneof("expr_type") == "unresolved_attribute":
                    parts = split_name(item.unresolved_attribute.unparsed_identifier)
                    matches = [c for c in available if c.lower() == parts[0].lower()]
                    name = matches[0] if len(parts) == 1 and len(matches) == 1 else None
                if name is None:
                    raise CompileRefusal(
                        "a join's context table can only have columns selected by name",
                        "transform the batch after the join instead",
                        call_site(item),
                        ("join",),
                    )
                picked.append(name)
            return table, picked
        raise CompileRefusal(
            "a join with a frame that is not a context-store table",
            _READS_HINT,
            calls=("join",),
        )


def _refused(kind: str | None) -> CompileRefusal:
    what, hint, calls = _REFUSED.get(
        kind or "", (f"{kind} cannot be compiled", "use the DataFrame methods docs list", ())
    )
    return CompileRefusal(f"{what} cannot be compiled", hint, calls=calls)
