"""The engines behind hakiri's PySpark code, and what each can do: one table, read by the code
that picks a path, by `validate` and `plan` (which refuse a pipeline before any data moves),
and by docs/engines.md (generated from it; a test keeps the two equal).

An engine is "spark" (Apache Spark: a warm local Spark Connect server, a driver in the command,
or a cluster's endpoint) or "sail" (Sail, a Spark Connect server in Rust, run inside the hakiri
process). Every capability is one of:

- `works`: the engine runs hakiri's code for it as it is;
- `neutral`: hakiri takes a path of its own on this engine (the `how` says which) and the
  result is the same as on the other engine, which the conformance suite checks;
- `refused`: `validate` and `plan` fail the pipeline with `why` and the alternative.

Nothing here imports pyspark.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from hakiri.spec.pipeline import PipelineSpec

__all__ = [
    "CAPABILITIES",
    "ENGINES",
    "SAIL",
    "SPARK",
    "Capability",
    "Support",
    "engine_of_session",
    "mark_engine",
    "markdown_table",
    "pipeline_refusals",
    "refusal",
    "refusal_message",
    "support",
]

SPARK = "spark"
SAIL = "sail"
ENGINES = (SPARK, SAIL)

Status = Literal["works", "neutral", "refused"]


@dataclass(frozen=True)
class Support:
    status: Status
    how: str = ""  # neutral: the path hakiri takes; refused: why, and what to do instead


@dataclass(frozen=True)
class Capability:
    name: str
    what: str
    engines: dict[str, Support]


_WORKS = Support("works")


def _cap(name: str, what: str, sail: Support, spark: Support = _WORKS) -> Capability:
    return Capability(name, what, {SPARK: spark, SAIL: sail})


CAPABILITIES: tuple[Capability, ...] = (
    _cap(
        "csv_source",
        "CSV files: declared or inferred columns, header, delimiter, quoting, encoding",
        _WORKS,
    ),
    _cap(
        "json_source",
        "JSON Lines files, declared or inferred columns",
        _WORKS,
    ),
    _cap(
        "parquet_source",
        "Parquet files",
        _WORKS,
    ),
    _cap(
        "text_encodings",
        "CSV and JSON files in an encoding other than UTF-8 (encoding = 'latin-1', 'cp1252', …)",
        Support(
            "neutral",
            "read through a UTF-8 copy hakiri makes of each file, line for line (Sail's "
            "readers take every file as UTF-8 and ignore the encoding option)",
        ),
    ),
    _cap(
        "datetime_formats",
        "date_format and timestamp_format for CSV and JSON files (hakiri's own pattern "
        "language, parsed by one expression of functions both engines implement alike)",
        _WORKS,
    ),
    _cap(
        "glob_file_names",
        "files whose names hold glob characters ([, ], {, }, *, ?)",
        Support(
            "neutral",
            "read through a link with a plain name in a directory of hakiri's (Sail takes such "
            "a name for a pattern and has no escape for it)",
        ),
    ),
    _cap(
        "parquet_nanoseconds",
        "Parquet files with nanosecond timestamps (pandas' and pyarrow's default)",
        Support(
            "neutral",
            "read by pyarrow in an engine task, the timestamps floored to microseconds as on "
            "Spark (Sail's Parquet reader refuses nanosecond timestamps)",
        ),
    ),
    _cap(
        "malformed_fail",
        'on_malformed = "fail": a malformed record fails the batch, naming its file and line',
        Support(
            "neutral",
            "counted in the staging pass itself by a step that runs in the hakiri process "
            "(Sail has no observed metrics); the staged rows are discarded, the target is not "
            "touched (a Sail server outside the process: an aggregate of their own, first); a "
            "record Sail's parser refuses is found by hakiri's own reader in the driver, for "
            "the message",
        ),
    ),
    _cap(
        "malformed_drop",
        'on_malformed = "drop" for records with a value of the wrong type',
        Support("neutral", "left out and counted in the staging pass itself, as on Spark"),
    ),
    _cap(
        "malformed_drop_shape",
        'on_malformed = "drop" for CSV records with a wrong number of fields and JSON lines '
        "that are not JSON",
        Support(
            "neutral",
            "Sail's readers stop at such a record, so under drop hakiri's engine tasks split the "
            "files (a CSV line is a record, as Spark reads it) and set such records aside and "
            "count them; the engine's reader is kept otherwise",
        ),
    ),
    _cap(
        "json_array_source",
        "JSON files holding one array of records",
        Support(
            "neutral",
            "Sail's from_json cannot say which element does not fit: hakiri's engine tasks "
            "stream each file, split its array into elements and type them by Spark's JSON "
            "rules (and infer undeclared columns as Spark does), naming a misfit element",
        ),
        Support(
            "neutral",
            "the same engine tasks as on Sail: Spark's from_json over a whole file slowed "
            "past a few thousand elements (20,000 took minutes)",
        ),
    ),
    _cap(
        "file_provenance",
        "provenance = true with several CSV or declared JSON Lines files in one batch "
        "(truncate, blue_green snapshots)",
        Support(
            "neutral",
            "each file is read on its own with its name as a literal, which gives the row its "
            "file's hash (Sail has no input_file_name() nor _metadata.file_path)",
        ),
    ),
    _cap(
        "file_provenance_inferred",
        "provenance = true with several Parquet or undeclared JSON Lines files in one batch",
        Support(
            "neutral",
            "the batch's one schema is found first (JSON Lines: inferred from all its files; "
            "Parquet: merged from the footers), then each file is read on its own with that "
            "schema and its name as a literal, which gives the row its file's hash (Sail has "
            "no input_file_name() nor _metadata.file_path)",
        ),
    ),
    _cap(
        "postgres_source",
        "a PostgreSQL table as the source (chunked reads, split into parallel partitions), "
        "read on every engine by COPY … TO STDOUT in the engine's tasks (`pg_reader`)",
        _WORKS,
    ),
    _cap(
        "postgres_target",
        "a PostgreSQL target, staged by binary COPY from the engine's tasks",
        _WORKS,
    ),
    _cap(
        "postgres_jdbc_writer",
        'writer = "jdbc" (Spark\'s JDBC writer) for a PostgreSQL target',
        Support("neutral", 'every run stages through COPY (writer = "copy")'),
    ),
    _cap(
        "postgres_delete_guard",
        "the delete guard's count in plan (scd2, upsert with deletes) against a PostgreSQL "
        "target: the target's live keys read back by the engine",
        Support(
            "neutral",
            "on every engine the keys are read by the engine's own task with COPY (`pg_reader`), "
            "not Spark's JDBC reader",
        ),
    ),
    _cap(
        "postgres_replay",
        "hakiri replay: quarantined rows loaded back into a PostgreSQL target, read by COPY in "
        "an engine task (`pg_reader`) on every engine",
        _WORKS,
    ),
    _cap(
        "context_append",
        "context store: append, truncate and blue_green (one Delta commit per batch, exactly "
        "once by the batch's transaction id)",
        Support(
            "neutral",
            "Sail's Delta writer ignores txnAppId/txnVersion: the engine stages Parquet files and "
            "hakiri commits them with delta-rs, carrying the batch's transaction in the commit",
        ),
    ),
    _cap(
        "context_merge",
        "context store: upsert and incremental_watermark",
        Support(
            "neutral",
            "the engine stages Parquet files and delta-rs merges (upsert) or appends them, "
            "carrying the batch's transaction, in the hakiri process (where Sail runs)",
        ),
    ),
    _cap(
        "context_history",
        "context store: scd2, replace_window, and upsert with deletes (Delta MERGE with "
        "conditions on the target)",
        Support(
            "neutral",
            "the engine computes the MERGE's source and stages it as Parquet; delta-rs runs the "
            "same MERGE clauses carrying the batch's transaction (Sail's MERGE drops it)",
        ),
    ),
    _cap(
        "context_maintenance",
        "hakiri context optimize (Delta OPTIMIZE)",
        Support(
            "neutral",
            "delta-rs's optimize (Sail has no OPTIMIZE statement)",
        ),
    ),
)

_BY_NAME = {cap.name: cap for cap in CAPABILITIES}


def support(engine: str, capability: str) -> Support:
    """How `engine` does `capability` (a name from CAPABILITIES; KeyError for any other)."""
    return _BY_NAME[capability].engines[engine]


def refusal(engine: str, capability: str) -> str | None:
    """Why `engine` refuses `capability`, or None when it runs it."""
    found = support(engine, capability)
    return found.how if found.status == "refused" else None


def refusal_message(engine: str, capability: str, subject: str) -> tuple[str, str] | None:
    """(reason, hint) for a one-line error about `subject` when `engine` refuses `capability`."""
    why = refusal(engine, capability)
    if why is None:
        return None
    reason, _, hint = why.partition(". ")
    return f"{subject}: {reason} (engine {engine})", hint or why


def pipeline_refusals(
    spec: PipelineSpec, engine: str, needs: Iterable[str]
) -> list[tuple[str, str]]:
    """(reason, hint) for each capability the pipeline needs that `engine` refuses: what
    `validate` and `plan` report and `apply` refuses before any data moves. `needs` are its
    source's and its targets' (`sources.kinds`, `destinations.kinds`: `engine_needs`)."""
    found = []
    for name in dict.fromkeys(needs):
        message = refusal_message(engine, name, f"pipeline {spec.id}")
        if message is not None:
            found.append(message)
    return found


def mark_engine(session: Any, engine: str) -> Any:
    """Record on a session object which engine it runs on (read by `engine_of_session`)."""
    session._hakiri_engine = engine
    return session


def engine_of_session(session: Any) -> str:
    """The engine a session runs on: the one `mark_engine` recorded, else Apache Spark."""
    return str(getattr(session, "_hakiri_engine", SPARK))


def markdown_table() -> str:
    """The capability-by-engine table of docs/engines.md."""
    lines = [
        "| capability | spark | sail |",
        "|---|---|---|",
    ]
    for cap in CAPABILITIES:
        cells = [_cell(cap.engines[engine]) for engine in ENGINES]
        lines.append(f"| {cap.what} (`{cap.name}`) | {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"


def _cell(found: Support) -> str:
    if found.status == "works":
        return "works"
    label = "engine-neutral path" if found.status == "neutral" else "refused"
    return f"{label}: {found.how}"
