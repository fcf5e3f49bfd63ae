"""The columns a pipeline's transforms produce, computed without data (for `plan`).

`transform_schema(columns, steps)` follows the steps over the source's columns
(name and Spark type, the type None when only the data will tell) the way
`hakiri.spark.transforms` applies them:

    select / rename / drop   names, as Spark resolves them (case-insensitively)
    cast                     the column takes the cast's type
    with_columns             new columns go last, replaced ones stay in place; the type
                             is known for a plain column reference, a CAST or a literal
    filter / dedupe          no change
    flatten                  a struct's fields, when its type is known; otherwise the
                             column goes and a note says its fields show only at run time
    explode                  the array's element type, when known
    join                     the `on` columns first, then the batch's, then the table's
                             (their types show at load; with no `columns` list, all
                             of them show only at load)

A step naming a column the source does not have gives a note (apply would fail
there). Pure: no I/O, no JVM.

Each column also carries the source columns it derives from (`inputs`), for
OpenLineage's column lineage (`column_lineage`): a rename, cast, flatten or explode keeps
its column's inputs, a `with_columns` expression takes those of every column it reads
(found by sqlglot, `guards.expressions.referenced_columns`). What a filter or dedupe reads
decides which rows stay, not any column's value, so it is no column's input.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from hakiri.spec.transforms import (
    CastStep,
    DedupeStep,
    DropStep,
    ExplodeStep,
    FilterStep,
    FlattenStep,
    JoinStep,
    RenameStep,
    SelectStep,
    TransformStep,
    WithColumnsStep,
)

__all__ = [
    "OutputColumn",
    "OutputSchema",
    "column_lineage",
    "transform_schema",
    "transformed_columns",
]

# Columns hakiri adds to a files batch; a select keeps them (see hakiri.spark.transforms).
_HAKIRI_COLUMNS = ("_source_file_hash", "_hakiri_batch_id")


@dataclass(frozen=True)
class OutputColumn:
    name: str
    type: str | None  # canonical Spark type; None when only the data will tell
    source: str | None = None  # the source column it is, unchanged (None once computed or cast)
    inputs: tuple[str, ...] = ()  # the source columns its values derive from, in source order


@dataclass(frozen=True)
class OutputSchema:
    columns: tuple[OutputColumn, ...] | None  # None: not known without reading data
    notes: tuple[str, ...] = field(default=())


def transformed_columns(
    columns: Sequence[tuple[str, str | None]] | None, steps: Sequence[TransformStep]
) -> list[tuple[str, str | None]] | None:
    """(name, Spark type) of each column after `steps`; None when not known without data."""
    schema = transform_schema(columns, steps)
    return None if schema.columns is None else [(c.name, c.type) for c in schema.columns]


def column_lineage(
    columns: Sequence[tuple[str, str | None]], steps: Sequence[TransformStep]
) -> dict[str, tuple[str, ...]]:
    """Each output column of `steps` -> the source columns it derives from (none for a
    literal); a column whose origin only the data would tell (a struct's fields unknown
    without types) is left out. Case as the steps and the source spell it."""
    schema = transform_schema(columns, steps)
    return {c.name: c.inputs for c in schema.columns or ()}


def transform_schema(
    columns: Sequence[tuple[str, str | None]] | None, steps: Sequence[TransformStep]
) -> OutputSchema:
    """The columns after `steps`, with notes on what only the data will tell."""
    state = _State(
        None if columns is None else [OutputColumn(n, t, source=n, inputs=(n,)) for n, t in columns]
    )
    for index, step in enumerate(steps):
        state.where = f"transforms[{index}] ({step.op})"
        _apply(state, step)
    return OutputSchema(None if state.columns is None else tuple(state.columns), tuple(state.notes))


class _State:
    def __init__(self, columns: list[OutputColumn] | None) -> None:
        self.columns = columns
        self.notes: list[str] = []
        self.where = ""
        # a source column's position: the order a column's inputs are listed in
        self.order = {c.name: i for i, c in enumerate(columns or ())}

    def find(self, name: str) -> int | None:
        """Index of column `name`: exactly, else ignoring case; a note when there is none."""
        assert self.columns is not None
        for i, c in enumerate(self.columns):
            if c.name == name:
                return i
        matches = [i for i, c in enumerate(self.columns) if c.name.lower() == name.lower()]
        if len(matches) == 1:
            return matches[0]
        self.notes.append(
            f"{self.where}: no column {name!r} among the source's columns (apply would fail)"
        )
        return None


def _apply(state: _State, step: TransformStep) -> None:
    if isinstance(step, FilterStep | DedupeStep):
        return
    if isinstance(step, JoinStep) and step.how in ("left_semi", "left_anti"):
        return
    if state.columns is None:
        # Unknown columns stay unknown, except that a select names them all.
        if isinstance(step, SelectStep):
            state.columns = [OutputColumn(n, None) for n in step.columns]
        return
    if isinstance(step, SelectStep):
        picked = [i for n in step.columns if (i := state.find(n)) is not None]
        chosen = [state.columns[i] for i in picked]
        kept = [c for c in state.columns if c.name in _HAKIRI_COLUMNS and c not in chosen]
        state.columns = chosen + kept
    elif isinstance(step, RenameStep):
        for old, new in step.columns.items():
            i = state.find(old)
            if i is not None:
                old_column = state.columns[i]
                state.columns[i] = replace(old_column, name=new)
    elif isinstance(step, CastStep):
        _cast(state, step)
    elif isinstance(step, WithColumnsStep):
        _with_columns(state, step)
    elif isinstance(step, DropStep):
        dropped = {i for n in step.columns if (i := state.find(n)) is not None}
        state.columns = [c for i, c in enumerate(state.columns) if i not in dropped]
    elif isinstance(step, FlattenStep):
        _flatten(state, step)
    elif isinstance(step, ExplodeStep):
        _explode(state, step)
    elif isinstance(step, JoinStep):
        _join(state, step)


def _join(state: _State, step: JoinStep) -> None:
    """A USING join: the key columns first (the batch's), then the batch's others, then the
    table's others, whose types only the table tells (plan does not open the store)."""
    assert state.columns is not None
    if step.columns is None:
        state.notes.append(
            f"{state.where}: the columns of context table {step.table!r} show at load; "
            "list them in the step's `columns` for plan to show them"
        )
        state.columns = None
        return
    keys = [i for n in step.on if (i := state.find(n)) is not None]
    keyed = {state.columns[i].name.lower() for i in keys}
    state.columns = (
        [state.columns[i] for i in keys]
        + [c for c in state.columns if c.name.lower() not in keyed]
        + [OutputColumn(n, None) for n in step.columns if n.lower() not in keyed]
    )


def _cast(state: _State, step: CastStep) -> None:
    from hakiri.guards.expressions import UnsafeExpression
    from hakiri.guards.spark_types import spark_type

    assert state.columns is not None
    for name, type_text in step.columns.items():
        i = state.find(name)
        if i is None:
            continue
        try:
            cast = spark_type(type_text)
        except UnsafeExpression:  # the manifest would not have validated
            cast = None
        state.columns[i] = OutputColumn(state.columns[i].name, cast, inputs=state.columns[i].inputs)


def _with_columns(state: _State, step: WithColumnsStep) -> None:
    from hakiri.guards.expressions import referenced_columns
    from hakiri.guards.spark_types import static_type

    assert state.columns is not None
    before = list(state.columns)  # every expression of the step sees the columns before it
    types = {c.name: c.type for c in before}
    for name, text in step.columns.items():
        read = {n.lower() for n in referenced_columns(text)}
        # A name no column has is a lambda's variable or a struct's field: no input of its own.
        inputs = {i for c in before if c.name.lower() in read for i in c.inputs}
        ordered = tuple(sorted(inputs, key=state.order.__getitem__))
        column = OutputColumn(name, static_type(text, types), inputs=ordered)
        same = [i for i, c in enumerate(state.columns) if c.name.lower() == name.lower()]
        if same:
            state.columns[same[0]] = column
        else:
            state.columns.append(column)


def _flatten(state: _State, step: FlattenStep) -> None:
    from hakiri.guards.spark_types import is_struct, struct_fields

    assert state.columns is not None
    i = state.find(step.column)
    if i is None:
        return
    column = state.columns[i]
    fields = struct_fields(column.type)
    if fields is None:
        if is_struct(column.type) is False:
            state.notes.append(
                f"{state.where}: column {column.name!r} is {column.type}, not a struct "
                "(apply would fail)"
            )
        else:
            state.notes.append(
                f"{state.where}: the fields of {column.name!r} are known only at run time; "
                "the plan leaves them out"
            )
        del state.columns[i]
        return
    state.columns[i : i + 1] = [
        OutputColumn(f"{column.name}{step.separator}{name}", kind, inputs=column.inputs)
        for name, kind in fields
    ]


def _explode(state: _State, step: ExplodeStep) -> None:
    from hakiri.guards.spark_types import array_element_type, is_array

    assert state.columns is not None
    i = state.find(step.column)
    if i is None:
        return
    column = state.columns[i]
    if is_array(column.type) is False:
        state.notes.append(
            f"{state.where}: column {column.name!r} is {column.type}, not an array "
            "(apply would fail)"
        )
    state.columns[i] = OutputColumn(
        step.alias or column.name, array_element_type(column.type), inputs=column.inputs
    )
