"""The malformed-record policy (`on_malformed`): judging what a read left out, and naming it.

A `Check` judges one part's counts once its frame was consumed: the records left out under
"drop"; under "fail" a SourceDataError naming the file, line and value of the first
malformed record (looked for only when the read fails, by reading the file here and asking
the engine about single values). Also the messages for bytes the encoding cannot decode,
a broken JSON array, and a record an engine's parser stopped at (Sail's).
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from hakiri.errors import SourceDataError
from hakiri.sources.files.datetimes import parsed_date, parsed_timestamp
from hakiri.sources.files.inspect import BOM, csv_rows, first_line, skip_separators
from hakiri.sources.files.part import BAD, FILE, MISTYPED, POS, TEXT, Part, metrics, quoted_col
from hakiri.sources.files.stand_ins import Located
from hakiri.spark.tally import Tally
from hakiri.spec.pipeline import FilesConfig

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


_ROW = "_hakiri_row"
_ESCAPED = re.compile("[\udc80-\udcff]")  # undecodable bytes under errors="surrogateescape"
_MALFORMED_HINT = 'fix the file, or set `on_malformed = "drop"` in the source config to skip and count bad records'


class Check:
    """The malformed-record verdict of one part, from counts observed while its rows pass."""

    def __init__(
        self, config: FilesConfig, part: Part, observed: bool = True, tallied: bool = False
    ) -> None:
        self.config, self.part = config, part
        self.observation: Any = None
        self.tally: Tally | None = None
        self.dropped: int | None = None  # the verdict, once judged
        # A part without columns delivers no rows to observe.
        if part.has_bad and part.columns and observed:
            from pyspark.sql import Observation

            self.observation = Observation()
        elif part.has_bad and part.columns and tallied:
            self.tally = Tally(3)

    def frame(self, hashes: Mapping[Path, str] | None = None) -> DataFrame:
        return self.part.frame(self.observation, self.tally, hashes)

    def judge(self) -> int:
        """The records left out (or raises); judged once, the first time it is asked for."""
        if self.dropped is None:
            self.dropped = self._judged()
        return self.dropped

    def _judged(self) -> int:
        part = self.part
        if not part.has_bad:
            return 0  # inferred JSON Lines without a corrupt-record column: nothing is malformed
        if self.observation is not None:
            counts = self.observation.get
        elif self.tally is not None:
            malformed, replaced, broken = self.tally.counts()
            counts = {"malformed": malformed, "replaced": replaced, "broken": broken}
        elif part.parsed or part.kind == "json-array":
            try:
                counts = part.raw.agg(*metrics(part)).first().asDict()  # type: ignore[union-attr]
            except Exception as exc:
                if not PARSER_STOPPED.search(str(exc)):
                    raise
                raise unreadable_record(self.config, part, exc) from None
        else:
            # Spark refuses a query of the corrupt-record column alone; with no other column
            # every record is malformed (the frame delivered none): count them.
            counts = {"malformed": part.raw.count(), "replaced": 0, "broken": 0}
        malformed, replaced, broken = counts["malformed"], counts["replaced"], counts["broken"]
        return _verdict(self.config, part, int(malformed), int(replaced), int(broken))


# What Sail says when its CSV or JSON parser meets a record it cannot read (it stops there).
PARSER_STOPPED = re.compile(r"\b(Csv|Json|Parser) error: |unequal lengths between records")
# What Sail's typed CSV parser says of a value it cannot read as its column's type.
_VALUE_REFUSED = re.compile(r"Error while parsing value .* as type")


def refused_value(config: FilesConfig, part: Part, failure: str) -> SourceDataError | None:
    """For a read that failed because the engine's typed parser refused a value of a column it
    typed (`Part.spelled`): the error the conversion path raises for that batch (the file,
    line and value of its first malformed record, and how many), judged over the text read;
    None when that is not why the read failed (`failure`: what the engine said)."""
    if part.spelled is None or not _VALUE_REFUSED.search(failure):
        return None
    try:
        Check(config, part.spelled, observed=False).judge()
    except SourceDataError as found:
        return found
    return None


def unreadable_record(config: FilesConfig, part: Part, exc: Exception) -> SourceDataError:
    """The first record of the part an engine's parser stopped at (a CSV record with a wrong
    number of fields, a JSON line that is not JSON), found by reading the files here, with how
    many the batch holds: the message Apache Spark's reader gives, for an engine that cannot
    set such a record aside (Sail). Under on_malformed = "drop" it still fails the batch."""
    return misshapen_records(config, part) or engine_stopped(config, part, exc)


def misshapen_records(config: FilesConfig, part: Part) -> SourceDataError | None:
    """`unreadable_record`'s message when the part's files hold such a record, else None."""
    first, total = None, 0
    for loc in part.files:
        with open(loc.path, encoding=config.encoding, errors="replace", newline="") as stream:
            found = (
                _misshapen_csv(part, config, stream) if part.kind == "csv" else _not_json(stream)
            )
            for line, why in found:
                total += 1
                if first is None:
                    first = (loc, line, why)
    if first is None:
        return None
    loc, line, why = first
    noun = "record" if total == 1 else "records"
    return SourceDataError(
        f"{loc.shown}:{line}: malformed {config.format} record: {why} "
        f"({total} malformed {noun} in this batch)",
        _stopped_hint(config),
    )


def engine_stopped(config: FilesConfig, part: Part, exc: BaseException) -> SourceDataError:
    """The engine refused a record Python reads: say what the engine said."""
    shown = part.files[0].shown if len(part.files) == 1 else f"{len(part.files)} files"
    return SourceDataError(
        f"{shown}: the engine could not read a {config.format} record: {first_line(exc)}",
        _stopped_hint(config),
    )


def _stopped_hint(config: FilesConfig) -> str:
    if config.on_malformed == "fail":
        return _MALFORMED_HINT
    return (
        "the engine stops at such a record and cannot set it aside: fix the file, or use "
        'engine = "spark", whose reader can'
    )


def _misshapen_csv(part: Part, config: FilesConfig, stream: Any) -> Iterator[tuple[int, str]]:
    """(line, why) of each CSV record whose number of fields is not the columns'."""
    expected = len(part.parsed)
    counted = _CountedLines(stream)
    for index, fields in enumerate(csv_rows(config, counted)):
        if index == 0 and config.header:
            continue
        if len(fields) != expected:
            found = f"{len(fields)} field" + ("" if len(fields) == 1 else "s")
            yield counted.number, f"{found} where {expected} are expected"


class _CountedLines:
    """A text stream's lines, counting them: `number` is the line a record read so far ended on."""

    def __init__(self, stream: Any) -> None:
        self.stream, self.number = stream, 0

    def __iter__(self) -> Any:
        for line in self.stream:
            self.number += 1
            yield line


def _not_json(stream: Any) -> Iterator[tuple[int, str]]:
    """(line, why) of each JSON line that is not a JSON object."""
    for number, raw in enumerate(stream, 1):
        line = raw.removeprefix(BOM) if number == 1 else raw
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            yield number, f"not valid JSON ({exc.msg})"
            continue
        if not isinstance(value, dict):
            yield number, "not a JSON object"


def _verdict(config: FilesConfig, part: Part, malformed: int, replaced: int, broken: int) -> int:
    """Raise what `on_malformed = "fail"` (and a wrong encoding) asks for; else the count dropped."""
    text = part.kind != "parquet"
    if text and (replaced or broken or (malformed and config.on_malformed == "fail")):
        # Wrong bytes for the encoding show up as U+FFFD or as malformed records;
        # say which line has them rather than blaming the records.
        raise_if_undecodable(config, part.files)
    if broken:
        raise _broken_array(config, part.files)
    if malformed and config.on_malformed == "fail":
        raise _first_malformed(config, part.spelled or part, malformed)
    return malformed if config.on_malformed == "drop" else 0


def raise_if_undecodable(config: FilesConfig, files: Sequence[Located]) -> None:
    for loc in files:
        try:
            with open(loc.path, encoding=config.encoding, errors="surrogateescape") as stream:
                for number, line in enumerate(stream, 1):
                    if _ESCAPED.search(line):
                        raise _undecodable(config, f"{loc.shown}:{number}")
        except UnicodeError:
            raise _undecodable(config, loc.shown) from None


def _undecodable(config: FilesConfig, where: str) -> SourceDataError:
    return SourceDataError(
        f"{where}: bytes that are not valid {config.encoding}",
        "set `encoding` in the source config to the file's encoding (e.g. 'latin-1' or 'cp1252')",
    )


def _broken_array(config: FilesConfig, files: Sequence[Located]) -> SourceDataError:
    hint = (
        "fix the file: a JSON file that starts with '[' must hold one JSON array "
        "(on_malformed cannot skip records inside a broken array)"
    )
    for loc in files:
        text = loc.path.read_text(encoding=config.encoding, errors="replace").lstrip(BOM)
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            return SourceDataError(
                f"{loc.shown}:{exc.lineno}: not a valid JSON array: {exc.msg}", hint
            )
    return SourceDataError(f"{files[0].shown}: Spark cannot read the JSON array", hint)


def _first_malformed(config: FilesConfig, part: Part, total: int) -> SourceDataError:
    """The file and line of the first malformed record; runs only when the read fails."""
    from pyspark.sql import functions as F

    counted = [F.count(quoted_col(name)) for name in part.parsed]  # parse all columns, as counted
    if part.kind == "parquet":
        return _first_mistyped(config, part, total)
    if part.kind == "json-array":
        firsts = (
            part.raw.where(F.col(BAD).isNotNull())
            .groupBy(FILE)
            .agg(F.min(POS).alias("first"), *counted)
            .collect()
        )
    elif part.parsed:
        # min_by over a row number taken before the filter: Spark reads a file's splits in
        # order, so the smallest number is the record nearest the start of the file.
        extra = [quoted_col(MISTYPED), quoted_col(TEXT)] if part.has_mistyped else []
        numbered = part.raw.select(
            (quoted_col(FILE) if FILE in part.raw.columns else F.col("_metadata.file_path")).alias(
                FILE
            ),
            F.monotonically_increasing_id().alias(_ROW),
            quoted_col(BAD),
            *extra,
            *[quoted_col(name) for name in part.parsed],
        )
        bad = F.col(BAD).isNotNull()
        if part.has_mistyped:
            bad = bad | F.col(MISTYPED)
        first = F.struct(BAD, MISTYPED, TEXT) if part.has_mistyped else F.col(BAD)
        firsts = (
            numbered.where(bad)
            .groupBy(FILE)
            .agg(F.min_by(first, _ROW).alias("first"), *counted)
            .collect()
        )
    else:
        firsts = []
    by_path = {_local_path(row[FILE]): row["first"] for row in firsts}
    noun = "record" if total == 1 else "records"
    count = f"{total} malformed {noun} in this batch"
    for loc in part.files:
        at = next((path for path in by_path if loc.is_at(path)), None)
        if at is None and firsts:
            continue
        first = by_path.get(at) if at is not None else None
        if part.kind == "json-array":
            line = _array_element_line(config, loc, int(first or 0))
            why = f"element {int(first or 0) + 1} of the array does not fit the columns' types"
            element = _array_element(config, loc, int(first or 0))
            bad = _bad_json_value(config, part, element) if isinstance(element, dict) else None
            if bad:
                why = f"element {int(first or 0) + 1} of the array: {bad}"
        elif part.has_mistyped and first is not None and first[BAD] is None:
            text = list(first[TEXT])
            line = _line_of_fields(config, loc, text)
            values = dict(zip(part.parsed, text, strict=True))
            why = _bad_value(config, part, values) or "a value does not fit its column's type"
        else:
            if part.has_mistyped and first is not None:
                first = first[BAD]
            line, record = _line_of(config, loc, first)
            why = (
                _why_csv(config, part, record)
                if part.kind == "csv"
                else _why_json(config, part, record)
            )
        where = f"{loc.shown}:{line}" if line else loc.shown
        return SourceDataError(
            f"{where}: malformed {config.format} record: {why} ({count})", _MALFORMED_HINT
        )
    return SourceDataError(f"malformed {config.format} records ({count})", _MALFORMED_HINT)


def _first_mistyped(config: FilesConfig, part: Part, total: int) -> SourceDataError:
    """The file and the value of the first Parquet value that does not convert to its type."""
    from pyspark.sql import functions as F

    first = part.raw.where(F.col(BAD).isNotNull()).select(FILE, BAD).first()
    noun = "record" if total == 1 else "records"
    count = f"{total} malformed {noun} in this batch"
    if first is None:
        return SourceDataError(f"malformed parquet records ({count})", _MALFORMED_HINT)
    path = _local_path(first[FILE])
    shown = next((loc.shown for loc in part.files if loc.is_at(path)), path)
    return SourceDataError(
        f"{shown}: malformed parquet record: {first[BAD]} ({count})", _MALFORMED_HINT
    )


def _local_path(spark_path: str) -> str:
    path = unquote(spark_path)
    for prefix in ("file://", "file:"):
        if path.startswith(prefix):
            return "/" + path[len(prefix) :].lstrip("/")
    return path


def _line_of(config: FilesConfig, loc: Located, record: str | None) -> tuple[int | None, str]:
    """(line number, text) of `record` in the file; the first non-blank line when record is None."""
    target = (record or "").rstrip("\r\n")
    loose: tuple[int, str] | None = None
    with open(loc.path, encoding=config.encoding, errors="surrogateescape") as stream:
        for number, raw in enumerate(stream, 1):
            line = (raw.removeprefix(BOM) if number == 1 else raw).rstrip("\n")
            if record is None and line.strip():
                return number, line
            if line == target:
                return number, line
            if loose is None and line.strip() == target.strip():
                loose = number, line
    return loose if loose else (None, target)


def _line_of_fields(config: FilesConfig, loc: Located, fields: list[str | None]) -> int | None:
    """The line of the CSV record whose fields are `fields` (NULL: empty or the null value);
    None when no single line holds it (a record over several lines)."""
    wanted = [value or "" for value in fields]
    null = config.null_value or ""
    with open(loc.path, encoding=config.encoding, errors="surrogateescape") as stream:
        for number, raw in enumerate(stream, 1):
            if number == 1 and config.header:
                continue
            try:
                rows = list(csv_rows(config, [raw]))
            except csv.Error:
                continue
            if rows and [("" if v == null else v) for v in rows[0]] == wanted:
                return number
    return None


def _array_element_line(config: FilesConfig, loc: Located, index: int) -> int | None:
    text = loc.path.read_text(encoding=config.encoding, errors="replace")
    decoder = json.JSONDecoder()
    position = text.find("[") + 1
    for current in range(index + 1):
        position = skip_separators(text, position, first=current == 0)
        if current == index:
            return text.count("\n", 0, position) + 1
        try:
            _, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError:
            return None
    return None


def _array_element(config: FilesConfig, loc: Located, index: int) -> Any:
    """The `index`-th element of the file's top-level array; None when it cannot be read."""
    try:
        value = json.loads(
            loc.path.read_text(encoding=config.encoding, errors="replace").lstrip(BOM)
        )
    except json.JSONDecodeError:
        return None
    return value[index] if isinstance(value, list) and 0 <= index < len(value) else None


def _why_csv(config: FilesConfig, part: Part, record: str) -> str:
    expected = len(part.parsed)
    try:
        fields = next(csv_rows(config, [record]), [])  # split as the source config says
    except csv.Error as exc:
        return f"cannot be split into fields ({exc})"
    if len(fields) != expected:
        found = f"{len(fields)} field" + ("" if len(fields) == 1 else "s")
        return f"{found} where {expected} are expected"
    values = {
        name: (None if value == (config.null_value or "") else value)
        for name, value in zip(part.parsed, fields, strict=True)
    }
    return _bad_value(config, part, values) or "a value does not fit its column's type"


def _why_json(config: FilesConfig, part: Part, record: str) -> str:
    try:
        value = json.loads(record)
    except json.JSONDecodeError as exc:
        return f"not valid JSON ({exc.msg})"
    if not isinstance(value, dict):
        return "not a JSON object"
    return _bad_json_value(config, part, value) or "a value does not fit its column's type"


_NUMERIC = ("tinyint", "smallint", "int", "bigint", "float", "double", "decimal")


def _bad_json_value(config: FilesConfig, part: Part, record: dict[str, Any]) -> str | None:
    """The first value of a JSON record that does not fit its column's type, as
    "amount: 'x4.50' is not decimal(10,2)"; None when none can be named."""
    types = _column_types(part)
    values: dict[str, str | None] = {}
    for name in part.parsed:
        value = record.get(name)
        kind = types.get(name, "string")
        if value is None:
            values[name] = None
            continue
        # The JSON reader takes no quoted number or boolean, and no object where a scalar goes.
        wrong_json_type = (
            (kind.startswith(_NUMERIC) and not _is_json_number(value))
            or (kind == "boolean" and not isinstance(value, bool))
            or (isinstance(value, dict | list) and not kind.startswith(("struct", "array", "map")))
        )
        if wrong_json_type:
            return f"{name}: {json.dumps(value)} is not {kind}"
        values[name] = value if isinstance(value, str) else json.dumps(value)
    return _bad_value(config, part, {n: v for n, v in values.items() if n in types})


def _is_json_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _column_types(part: Part) -> dict[str, str]:
    """The Spark type of each parsed column, as DDL ('int', 'decimal(10,2)')."""
    return {
        field.name: field.dataType.simpleString()
        for field in part.raw.schema.fields
        if field.name in part.parsed
    }


def _bad_value(config: FilesConfig, part: Part, values: dict[str, str | None]) -> str | None:
    """Asked of the engine, in one row of literals: the first of `values` (a record's fields
    as text) that does not convert to its column's type; "amount: 'x4.50' is not
    decimal(10,2)", or None when every value converts."""
    from pyspark.sql import functions as F

    types = _column_types(part)
    nan = config.nan_value or "NaN"
    checked = [
        (name, "NaN" if value == nan else value, types[name])
        for name, value in values.items()
        if value not in (None, "") and types.get(name, "string") != "string"
    ]
    if not checked:
        return None
    probes = []
    for i, (_, value, kind) in enumerate(checked):
        text = F.lit(value)
        if kind == "date" and config.date_format:
            probe = parsed_date(text, config.date_format)
        elif kind == "timestamp" and config.timestamp_format:
            probe = parsed_timestamp(text, config.timestamp_format)
        else:
            probe = text.try_cast(kind)
        probes.append(probe.isNotNull().alias(f"ok{i}"))
    try:
        row = part.raw.sparkSession.sql("SELECT 1").select(*probes).first()
    except Exception:  # the report stays general rather than fail on its own details
        return None
    for i, (name, value, kind) in enumerate(checked):
        if row is not None and not row[f"ok{i}"]:
            return f"{name}: {value!r} is not {kind}"
    return None
