"""Row rules compiled to Spark Column predicates and evaluated in one pass over a batch.

Every rule compiles into one boolean "violated" Column, and one projection
carries the indices of the rules a row violates (an array, empty for a clean
row). The source is read once either way:

- `RuleCheck.tagged()`, for a writer that stages clean rows and quarantine
  records from one pass (PostgreSQL's COPY writer): each row carries the rules it
  broke as the bits of one bigint and, only when it is quarantined, itself as
  JSON; the writer counts rows and bits as they pass and `RuleCheck.finish()`
  judges the totals after it (an abort rule that failed raises there, and the
  staged rows are discarded). No cache, no job of its own.
- `RuleCheck.split()` (and `check_rows`), for writers that write the two outputs
  separately: the annotated frame is persisted and ONE aggregation job makes the
  report (an abort rule raises before anything is staged); the clean rows and the
  quarantine records are both derived from the cached frame.

Rows never reach the driver: only counts, and for an abort one sample row.

What each rule treats as a violation (NULL passes every rule but not_null;
combine them). On a string column the empty string '' counts as NULL for
every rule: an empty CSV cell is a missing value, and hakiri loads '' into
PostgreSQL text columns as NULL. Values are not trimmed for that test.

- not_null: NULL (or '' on a string column).
- regex: the value, cast to string, has no match of the Java regular
  expression anywhere in it (`rlike`: searched, not anchored; anchor with
  ^...$ yourself). An invalid pattern is refused before any job runs.
- range: the value is below `min` or above `max` (bounds inclusive), compared
  as a double. Strings are read as numbers the way field_type "float" reads
  them; a string that is not a number violates; NaN violates. Only numeric
  and string columns can carry a range rule.
- max_length: the value cast to string has more than `max` characters.
- field_type: the value cannot be read as `expected`:
    string      never violates (every value has a text form).
    integer     string: an optionally signed whole number within bigint
                ('12', ' +3 '; not '1.5', '1.0', '1e3'). Integer columns pass;
                float/double/decimal values must be whole and fit a bigint.
    float       string: a decimal number with optional exponent, or NaN /
                Infinity / inf (any case, optional sign), blanks around
                allowed; Java's '1d'/'1f' suffixes and hex are refused. Any
                numeric column passes.
    boolean     string: true/false, t/f, yes/no, y/n, on/off, 1/0 (any case,
                blanks around allowed: PostgreSQL's spellings). Boolean
                columns pass; integer columns pass for 0 and 1.
    date        string: yyyy-m-d alone, a real calendar day ('2024-02-30' and
                '2024-01-02 10:00' violate). Date columns pass; timestamp
                columns violate (they carry a time of day).
    timestamp   string: yyyy-m-d, optionally followed by ' ' or 'T' and a
                time, with an optional zone ('Z', '+02:00'), as Spark's
                timestamp cast reads it. Timestamp and date columns pass.
    json        string: one complete JSON value (objects, arrays and scalars,
                e.g. '{"a": 1}', '[1]', '3', 'null'); stray text after it
                violates. Struct, array, map and variant columns pass.
    uuid        string: 8-4-4-4-12 hex digits, any case, nothing around them.
    Any other column type violates for every non-null value (e.g. a numeric
    column checked as uuid or json, a boolean column checked as integer).

Every cast is a safe one (`try_cast` and friends), because Spark 4 runs with
ANSI mode on and a plain cast of a bad string would fail the whole job.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hakiri.errors import HakiriError, RuleViolation, SourceDataError
from hakiri.guards.spark_types import quoted_name
from hakiri.spec.quality import (
    FieldTypeRule,
    MaxLengthRule,
    NotNullRule,
    RangeRule,
    RegexRule,
    RowRule,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType

__all__ = ["TAGGABLE_RULES", "CheckedBatch", "RuleCheck", "RuleReport", "TaggedRows", "check_rows"]

_VIOLATED = "_hakiri_violated"  # the internal array<int> column, unless a column has that name
_SAMPLE_CHARS = 300
_ABORT_HINT = (
    'fix those rows at the source, or set on_fail = "warn" or "skip" '
    "(with [pipeline.quarantine] enabled = true to keep them)"
)
_BOOLEAN_SPELLINGS = ("true", "false", "t", "f", "yes", "no", "y", "n", "on", "off", "1", "0")
_UUID = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
_DATE_ONLY = r"^\s*[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}\s*$"
_DATE_FIRST = r"^\s*[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([T ]|\s*$)"
_JAVA_NUMBER_SUFFIX = r"[0-9.][dDfF]\s*$"


@dataclass(frozen=True)
class RuleReport:
    """What the rules found in one batch."""

    rows_in: int  # rows the batch had before rules
    rows_kept: int  # rows that go on to staging (skip-violating rows removed)
    counts: dict[str, int]  # rule_id -> violating rows, for every rule (0s included)
    quarantined: int  # records in `quarantine`: one per (row, violated warn/skip rule)


@dataclass
class CheckedBatch:
    """A batch after its row rules: the rows to stage, the records to quarantine, the report.

    `quarantine` (None when no rule is warn/skip) has the columns rule_id STRING,
    on_fail STRING ('warn'|'skip'), dropped BOOLEAN (the row violated a skip rule,
    so it is not loaded) and row STRING (the original row as a JSON object, null
    fields kept). Both frames read the cached annotated rows; call `release()`
    once they are staged.
    """

    clean: DataFrame
    quarantine: DataFrame | None
    report: RuleReport | None  # None when there are no rules
    _cached: DataFrame | None = field(default=None, repr=False, compare=False)

    def release(self) -> None:
        """Unpersist the cached annotated rows; safe to call more than once."""
        cached, self._cached = self._cached, None
        if cached is not None:
            cached.unpersist()


# Rules a one-pass writer can tell apart: one bit each of a bigint.
TAGGABLE_RULES = 62


@dataclass(frozen=True)
class TaggedRows:
    """A batch's rows for a one-pass writer: the data columns first (`width` of them), then

    - `broke` (bigint): bit i set when the row broke rule i (`rule_ids[i]`, `on_fails[i]`);
      the row is dropped when it broke a rule of `skip_bits`, and each rule of
      `aside_bits` it broke is one quarantine record (`aside_bits` is 0 without a quarantine);
    - `row` (string, only with a quarantine): the original row as a JSON object when it
      broke a rule of `aside_bits`, else NULL.

    The writer counts the rows and the bits as they pass and hands the totals to
    `RuleCheck.counted()`.
    """

    frame: DataFrame
    width: int
    broke: str
    row: str | None
    skip_bits: int
    aside_bits: int
    rule_ids: tuple[str, ...]
    on_fails: tuple[str, ...]


class RuleCheck:
    """A batch and its row rules, compiled but not evaluated: no Spark job runs until a
    writer consumes `tagged()` or `split()`. Call `finish()` after the write for the report
    (it raises `RuleViolation` when an abort rule failed), and `release()` at the end."""

    def __init__(self, frame: DataFrame, rules: Sequence[RowRule], *, label: str) -> None:
        self.frame, self.label = frame, label
        self.compiled = compile_rules(frame, rules) if rules else None
        self._checked: CheckedBatch | None = None
        self._tagged = False
        self._totals: tuple[int, int, tuple[int, ...], int] | None = None
        self._report: RuleReport | None = None

    @classmethod
    def unchecked(cls, frame: DataFrame) -> RuleCheck:
        """Rows that need no rule (every row is clean)."""
        return cls(frame, (), label="")

    @property
    def has_rules(self) -> bool:
        return self.compiled is not None

    @property
    def report(self) -> RuleReport | None:
        """What the rules found, once `finish()` ran; None without rules."""
        return self._report

    def split(self) -> tuple[DataFrame, DataFrame | None]:
        """(clean rows, quarantine records or None), both over the persisted annotated rows."""
        if self.compiled is None:
            return self.frame, None
        if self._checked is None:
            self._checked = _evaluate(self.compiled, self.label)
            self._report = self._checked.report
        return self._checked.clean, self._checked.quarantine

    def tagged(self, *, keep_quarantine: bool) -> TaggedRows | None:
        """The rows tagged for a one-pass writer (see `TaggedRows`); None when there are more
        rules than bits to tell them apart (stage `split()` instead)."""
        from pyspark.sql import functions as F

        compiled = self.compiled
        if compiled is None:
            raise ValueError("tagged() needs rules; stage `frame` as it is")
        rules = compiled.rules
        if len(rules) > TAGGABLE_RULES:
            return None
        skip = _bits(compiled.indices("skip"))
        aside = _bits(compiled.indices("warn", "skip")) if keep_quarantine else 0
        taken = list(self.frame.columns)
        broke_name = _free_name(taken, "_hakiri_broke")
        broke = F.col(quoted_name(broke_name))
        # One projection computes every rule's verdict once, as bits: no aggregation, no cache.
        mask = F.lit(0).cast("bigint")
        for i, violation in enumerate(compiled.violations):
            mask = mask + F.when(violation, F.lit(1 << i)).otherwise(F.lit(0)).cast("bigint")
        marked = self.frame.select("*", mask.alias(broke_name))
        data = [F.col(quoted_name(name)) for name in self.frame.columns]
        tags = [broke]
        row_name = None
        if aside:
            row_name = _free_name([*taken, broke_name], "_hakiri_row")
            row = F.when(broke.bitwiseAND(aside) != 0, _row_json(self.frame))
            tags.append(row.alias(row_name))
        self._tagged = True
        return TaggedRows(
            marked.select(*data, *tags),
            len(data),
            broke_name,
            row_name,
            skip,
            aside,
            tuple(rule.rule_id for rule in rules),
            tuple(rule.on_fail for rule in rules),
        )

    def counted(self, rows_in: int, rows_kept: int, broke: Sequence[int], quarantined: int) -> None:
        """What a one-pass writer counted: rows in, rows kept, rows that broke each rule, records."""
        self._totals = (rows_in, rows_kept, tuple(broke), quarantined)

    def finish(self) -> RuleReport | None:
        """The report, once the rows were written; raises RuleViolation for a failed abort rule."""
        compiled = self.compiled
        if compiled is None or not self._tagged:
            return self._report  # no rules, or split() judged them already
        if self._totals is None:
            raise RuntimeError("the rows were tagged for the rules, but no writer counted them")
        rows_in, rows_kept, counts, quarantined = self._totals
        rules = compiled.rules
        failing = [i for i in compiled.indices("abort") if counts[i]]
        if failing:
            raise _rule_violation(compiled.annotated, compiled, failing, list(counts), self.label)
        self._report = RuleReport(
            rows_in=rows_in,
            rows_kept=rows_kept,
            counts={rule.rule_id: counts[i] for i, rule in enumerate(rules)},
            quarantined=quarantined,
        )
        return self._report

    def release(self) -> None:
        if self._checked is not None:
            self._checked.release()


def check_rows(frame: DataFrame, rules: Sequence[RowRule], *, label: str) -> CheckedBatch:
    """Evaluate `rules` over `frame` in one pass; raise RuleViolation if an abort rule fails.

    `label` names the batch in messages ("orders batch 3"). With no rules the
    frame is returned as is and no Spark job runs.
    """
    if not rules:
        return CheckedBatch(frame, None, None)
    compiled = compile_rules(frame, rules)
    return _evaluate(compiled, label)


# --- the builder: rules -> one annotated frame (no Spark job) ----------------------------


@dataclass(frozen=True)
class CompiledRules:
    """The rules of one batch as Spark expressions over `annotated` (not yet persisted)."""

    rules: tuple[RowRule, ...]
    original: DataFrame
    annotated: DataFrame  # the original columns + `violated`
    violated: str  # name of the array<int> column of violated rule indices
    violations: tuple[Column, ...]  # per rule, over `original`: True when a row violates it

    def indices(self, *on_fail: str) -> list[int]:
        return [i for i, rule in enumerate(self.rules) if rule.on_fail in on_fail]


def compile_rules(frame: DataFrame, rules: Sequence[RowRule]) -> CompiledRules:
    """Check that the rules fit the frame, then add the violated-rules column in one projection."""
    from pyspark.sql import functions as F

    for rule in rules:
        _check_column(frame, rule)
    _check_patterns(frame.sparkSession, [r for r in rules if isinstance(r, RegexRule)])
    violated = [_violation(rule, frame.schema[rule.column].dataType) for rule in rules]
    indices = F.array(*[F.when(v, F.lit(i)) for i, v in enumerate(violated)])
    name = _free_name(frame.columns)
    annotated = frame.select("*", F.array_compact(indices).alias(name))
    return CompiledRules(tuple(rules), frame, annotated, name, tuple(violated))


def _violation(rule: RowRule, dtype: DataType) -> Column:
    """A never-NULL boolean Column: True when the row violates `rule`."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import NullType

    value = F.col(quoted_name(rule.column))
    present = value.isNotNull()
    if _is_text(dtype):
        present = present & (value != F.lit(""))
    if isinstance(rule, NotNullRule):
        return ~present
    if isinstance(dtype, NullType):
        return F.lit(False)
    if isinstance(rule, RegexRule):
        bad = _regex_violation(rule, value, dtype)
    elif isinstance(rule, RangeRule):
        bad = _range_violation(rule, value, dtype)
    elif isinstance(rule, MaxLengthRule):
        bad = _max_length_violation(rule, value, dtype)
    elif isinstance(rule, FieldTypeRule):
        bad = _field_type_violation(rule, value, dtype)
    else:  # pragma: no cover - the RowRule union is closed
        raise TypeError(f"unknown row rule {rule!r}")
    # A present value that a check cannot judge (NULL) violates rather than slips through.
    return present & F.coalesce(bad, F.lit(True))


def _regex_violation(rule: RegexRule, value: Column, dtype: DataType) -> Column:
    return ~_as_text(value, dtype).rlike(rule.pattern)


def _range_violation(rule: RangeRule, value: Column, dtype: DataType) -> Column:
    from pyspark.sql import functions as F
    from pyspark.sql.types import DecimalType, FractionalType, IntegralType

    if _is_text(dtype):
        number = _parse_double(value)
    elif isinstance(dtype, IntegralType | FractionalType):
        number = value
    else:
        raise SourceDataError(
            f"rule {rule.rule_id} checks a numeric range, but column {rule.column!r} "
            f"has Spark type {dtype.simpleString()}",
            "put range rules on numeric or string columns, or cast the column in a transform",
        )
    bad = number.isNull()
    if not isinstance(dtype, IntegralType | DecimalType):
        bad = bad | F.isnan(number)
    if rule.min is not None:
        bad = bad | (number < F.lit(rule.min))
    if rule.max is not None:
        bad = bad | (number > F.lit(rule.max))
    return bad


def _max_length_violation(rule: MaxLengthRule, value: Column, dtype: DataType) -> Column:
    from pyspark.sql import functions as F

    return F.length(_as_text(value, dtype)) > F.lit(rule.max)


def _field_type_violation(rule: FieldTypeRule, value: Column, dtype: DataType) -> Column:
    from pyspark.sql import functions as F

    if rule.expected == "string":
        return F.lit(False)
    if _is_text(dtype):
        return ~_text_reads_as(rule.expected, value)
    return ~_typed_reads_as(rule.expected, value, dtype)


def _text_reads_as(expected: str, text: Column) -> Column:
    """True when the (non-empty) string `text` can be read as `expected`."""
    from pyspark.sql import functions as F

    if expected == "integer":
        return text.try_cast("bigint").isNotNull()
    if expected == "float":
        return _parse_double(text).isNotNull()
    if expected == "boolean":
        return F.lower(F.trim(text)).isin(*_BOOLEAN_SPELLINGS)
    # Trimmed as Spark's casts trim (Sail's do not).
    if expected == "date":
        return text.rlike(_DATE_ONLY) & F.trim(text).try_cast("date").isNotNull()
    if expected == "timestamp":
        return text.rlike(_DATE_FIRST) & F.trim(text).try_cast("timestamp").isNotNull()
    if expected == "json":
        # try_parse_json accepts some trailing text ('{"a":1} x'); json_array_length does
        # not, but accepts single quotes. A value passing both is one complete JSON value.
        wrapped = F.concat(F.lit("["), text, F.lit(", 0]"))
        return F.try_parse_json(text).isNotNull() & F.json_array_length(wrapped).eqNullSafe(2)
    if expected == "uuid":
        return text.rlike(_UUID)
    raise ValueError(f"unknown field type {expected!r}")  # pragma: no cover


def _typed_reads_as(expected: str, value: Column, dtype: DataType) -> Column:
    """True when a value of the non-string type `dtype` can be read as `expected`."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import (
        ArrayType,
        BooleanType,
        DateType,
        FractionalType,
        IntegralType,
        MapType,
        StructType,
        TimestampNTZType,
        TimestampType,
        VariantType,
    )

    if expected == "integer":
        if isinstance(dtype, IntegralType):
            return F.lit(True)
        if isinstance(dtype, FractionalType):
            return (value % F.lit(1) == F.lit(0)) & value.try_cast("bigint").isNotNull()
    elif expected == "float":
        return F.lit(isinstance(dtype, IntegralType | FractionalType))
    elif expected == "boolean":
        if isinstance(dtype, BooleanType):
            return F.lit(True)
        if isinstance(dtype, IntegralType):
            return value.isin(0, 1)
    elif expected == "date":
        return F.lit(isinstance(dtype, DateType))
    elif expected == "timestamp":
        return F.lit(isinstance(dtype, DateType | TimestampType | TimestampNTZType))
    elif expected == "json":
        return F.lit(isinstance(dtype, StructType | ArrayType | MapType | VariantType))
    return F.lit(False)


def _parse_double(text: Column) -> Column:
    """`text` as a double, NULL when it is not a number (Java's 1d/1f suffixes refused)."""
    from pyspark.sql import functions as F

    return F.when(~text.rlike(_JAVA_NUMBER_SUFFIX), text.try_cast("double"))


def _as_text(value: Column, dtype: DataType) -> Column:
    return value if _is_text(dtype) else value.cast("string")


def _is_text(dtype: DataType) -> bool:
    from pyspark.sql.types import CharType, StringType, VarcharType

    return isinstance(dtype, StringType | CharType | VarcharType)


def _free_name(columns: Sequence[str], name: str = _VIOLATED) -> str:
    taken = {c.lower() for c in columns}
    while name.lower() in taken:
        name = "_" + name
    return name


def _check_column(frame: DataFrame, rule: RowRule) -> None:
    if rule.column not in frame.columns:
        available = ", ".join(frame.columns) or "(none)"
        raise SourceDataError(
            f"rule {rule.rule_id} checks column {rule.column!r}, which the rows do not have "
            f"(columns: {available})",
            "fix the rule's `column` (names are case-sensitive), or add the column in a transform",
        )


def _check_patterns(spark: SparkSession, rules: Sequence[RegexRule]) -> None:
    """Compile the patterns where the rows are matched, on the engine (a query of literals: a
    bad pattern fails while it is planned, before any job), so a bad one fails here with the
    rule's name and not inside a task. Literals, not SQL parameters: Delta's SQL parser loses
    parameters."""
    if not rules:
        return

    from pyspark.sql import functions as F

    def probe(patterns: Sequence[str]) -> None:
        spark.sql("SELECT 1").select(*[F.lit("").rlike(p) for p in patterns]).collect()

    try:
        probe([r.pattern for r in rules])
        return
    except Exception:
        pass
    for rule in rules:  # rare: find which pattern the engine refused
        try:
            probe([rule.pattern])
        except Exception as exc:
            if "INVALID_PARAMETER_VALUE.PATTERN" not in str(exc):
                raise
            raise HakiriError(
                f"rule {rule.rule_id} has an invalid Java regular expression "
                f"{rule.pattern!r}{_pattern_detail(rule.pattern)}",
                "fix the rule's `pattern` (Java regex syntax; in TOML, prefer '...' literal "
                "strings so backslashes stay as written)",
            ) from exc


def _pattern_detail(pattern: str) -> str:
    """What is wrong with a pattern the engine refused, when Python's `re` sees it too (Spark's
    error names the pattern only); '' when `re` accepts it."""
    try:
        re.compile(pattern)
    except re.error as exc:
        return f": {exc.msg} at position {exc.pos}"
    return ""


# --- the evaluator: one job for the report, then frames over the cache -------------------


def _evaluate(compiled: CompiledRules, label: str) -> CheckedBatch:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from hakiri.spark.errors import spark_errors

    rules = compiled.rules
    skip = compiled.indices("skip")
    kept_aside = compiled.indices("warn", "skip")
    violated = F.col(quoted_name(compiled.violated))
    dropped = _any_of(violated, skip)

    annotated = compiled.annotated.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        with spark_errors(f"checking the row rules of {label}", side="source"):
            totals = annotated.agg(
                F.count(F.lit(1)).alias("rows_in"),
                F.count_if(~dropped).alias("rows_kept"),
                (F.sum(F.size(_only(violated, kept_aside))) if kept_aside else F.lit(0)).alias(
                    "aside"
                ),
                *[
                    F.count_if(F.array_contains(violated, i)).alias(f"r{i}")
                    for i in range(len(rules))
                ],
            ).first()
        assert totals is not None
        counts = [int(totals[f"r{i}"]) for i in range(len(rules))]
        failing = [i for i in compiled.indices("abort") if counts[i]]
        if failing:
            raise _rule_violation(annotated, compiled, failing, counts, label)
    except BaseException:
        annotated.unpersist()
        raise

    report = RuleReport(
        rows_in=int(totals["rows_in"]),
        rows_kept=int(totals["rows_kept"]),
        counts={rule.rule_id: counts[i] for i, rule in enumerate(rules)},
        quarantined=int(totals["aside"] or 0),
    )
    clean = annotated.where(~dropped) if skip else annotated
    quarantine = None
    if kept_aside:
        rule_ids = F.array(*[F.lit(rule.rule_id) for rule in rules])
        on_fails = F.array(*[F.lit(rule.on_fail) for rule in rules])
        quarantine = (
            annotated.where(_any_of(violated, kept_aside))
            .select(
                F.explode(_only(violated, kept_aside)).alias("_rule"),
                dropped.alias("dropped"),
                _row_json(compiled.original).alias("row"),
            )
            .select(
                F.get(rule_ids, F.col("_rule")).alias("rule_id"),
                F.get(on_fails, F.col("_rule")).alias("on_fail"),
                "dropped",
                "row",
            )
        )
    return CheckedBatch(clean.drop(compiled.violated), quarantine, report, annotated)


def _rule_violation(
    annotated: DataFrame,
    compiled: CompiledRules,
    failing: list[int],
    counts: list[int],
    label: str,
) -> RuleViolation:
    """Describe the first failing abort rule, with one sample row fetched from the cache."""
    from pyspark.sql import functions as F

    from hakiri.spark.errors import spark_errors

    first = failing[0]
    rule = compiled.rules[first]
    with spark_errors(f"fetching a row that violates {rule.rule_id} in {label}", side="source"):
        sample = (
            annotated.where(F.array_contains(F.col(quoted_name(compiled.violated)), first))
            .select(_row_json(compiled.original))
            .limit(1)
            .first()
        )
    row = sample[0] if sample is not None else "?"
    if len(row) > _SAMPLE_CHARS:
        row = row[:_SAMPLE_CHARS] + "…"
    rows = "1 row violates" if counts[first] == 1 else f"{counts[first]:,} rows violate"
    reason = f"rule {rule.rule_id} (abort) failed on {label}: {rows} it; first: {row}"
    others = [compiled.rules[i].rule_id for i in failing[1:]]
    if others:
        noun = "rule" if len(others) == 1 else "rules"
        named = ", ".join(others[:3]) + (", …" if len(others) > 3 else "")
        reason += f" ({len(others)} other abort {noun} failed too: {named})"
    return RuleViolation(reason, _ABORT_HINT)


# Set functions, not lambdas (exists/filter): these compile into Spark's generated code,
# higher-order functions are interpreted row by row. `violated` holds no NULLs.
def _bits(indices: list[int]) -> int:
    return sum(1 << i for i in indices)


def _any_of(violated: Column, indices: list[int]) -> Column:
    from pyspark.sql import functions as F

    if not indices:
        return F.lit(False)
    return F.arrays_overlap(violated, F.array(*[F.lit(i) for i in indices]))


def _only(violated: Column, indices: list[int]) -> Column:
    from pyspark.sql import functions as F

    return F.array_intersect(violated, F.array(*[F.lit(i) for i in indices]))


def _row_json(original: DataFrame) -> Column:
    """The original row as a JSON object; null fields are written, not left out.

    Written field by field, each value as the engine's to_json writes it inside an array
    (Sail's to_json of a struct leaves NULL fields out whatever `ignoreNullFields` says), and
    timestamps and decimals as Spark's to_json writes them: milliseconds and the decimal's
    scale (Sail's writes microseconds, and drops trailing zeros)."""
    import json

    from pyspark.sql import functions as F
    from pyspark.sql.types import DecimalType, TimestampNTZType, TimestampType

    formats = {
        TimestampType: "yyyy-MM-dd'T'HH:mm:ss.SSSXXX",
        TimestampNTZType: "yyyy-MM-dd'T'HH:mm:ss.SSS",
    }
    parts: list[Column] = []
    for i, each in enumerate(original.schema.fields):
        column = F.col(quoted_name(each.name))
        pattern = formats.get(type(each.dataType))
        if pattern is not None:
            text = F.concat(F.lit('"'), F.date_format(column, pattern), F.lit('"'))
            value = F.coalesce(text, F.lit("null"))
        elif isinstance(each.dataType, DecimalType):  # with its scale, as Spark writes it
            value = F.coalesce(column.cast("string"), F.lit("null"))
        else:
            value = F.regexp_extract(F.to_json(F.array(column)), r"^\[(.*)\]$", 1)
        parts += [F.lit(("{" if i == 0 else ",") + json.dumps(each.name) + ":"), value]
    return F.concat(*parts, F.lit("}")) if parts else F.lit("{}")
