"""The `rest` connector: the endpoints of any JSON HTTP API, declared in the manifest
(`spec.rest`), read in the engine (`rest.engine_read`).

A table reads one of two ways, by the specification's cursor kinds:

- **past a cursor** (the table's `incremental`, a time field of the records): batches are
  ranges of it, planned like a PostgreSQL table's (`plan_table`: `window` chunks from
  `start_from`, then one range per run up to now). The endpoint's params carry the range
  ('{cursor}', '{cursor_end}'); whatever the API sends back, the engine keeps the rows
  inside the range, so each row loads with exactly one range. Ranges are safe in parallel.
- **walked** (no cursor: an opaque page token, or pages the API numbers): the endpoint's
  pages in order, never in parallel. A merge load commits `pages_per_batch` pages per
  batch; the engine task that reads a batch records where its pages end
  (`.hakiri/walks/<pipeline>/`, beside the rate budgets) before the batch is staged, and
  the next batch starts there, so a stopped backfill resumes at the page after the last
  committed batch and asks for no committed page again. A run plans the next batch each
  time one commits (`next_batches`), until the last page; the next run walks from the
  first page again. A full-refresh load (truncate, blue_green) is one batch per walk.

A child endpoint (`parent`) is fetched once per record of its parent's batch, its path
filled from the parent's columns ('issues/{number}/comments'), in the engine; an endpoint
with `for_each` is walked once per entry, side by side, its path filled from the entry.
Records become rows of the declared `columns` (a JSON path each), or of the fields of the
first page's records when none are declared (`infer_columns`).

A preset is a connector that is a configuration of this one (`rest.github`): a subclass
that builds the RestConfig from its own manifest keys and sets what a manifest cannot say
(the class attributes and hooks below: how messages name it, where a first range starts,
an API sorted by its cursor, its own last step on a table's rows).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hakiri.catalog.records import Batch, BatchStatus, NewBatch
from hakiri.errors import HakiriError
from hakiri.sources.base import BatchRead, Reload, SourceColumn, SourceObservation, TablePlan
from hakiri.sources.cursors.batches import (
    check_cursor_fits_mode,
    incremental_of,
    plan_table,
    reload_from_source,
)
from hakiri.sources.cursors.ranges import CursorBounds, CursorColumn, CursorRange
from hakiri.sources.rest.budget import LeakyBucket, RateBudget, pipeline_budget
from hakiri.sources.rest.client import ApiKey, Auth, BasicAuth, BearerToken, RestClient
from hakiri.sources.rest.columns import declared_columns, infer_columns, key_path
from hakiri.sources.rest.engine_read import (
    ApiColumn,
    Endpoint,
    Walk,
    read_children,
    read_walks,
    recorded_end,
)
from hakiri.sources.rest.paginate import (
    LinkHeader,
    NextToken,
    NextUrl,
    Offset,
    PageNumber,
    PagePosition,
    Paginator,
    SinglePage,
    walk_pages,
)
from hakiri.sources.rest.ranges import api_time, in_range, settled_now
from hakiri.sources.rest.select import JsonPath
from hakiri.sources.task_errors import task_error
from hakiri.spec.pipeline import PipelineSpec, TableSpec
from hakiri.spec.project import ProjectFile
from hakiri.spec.rest import (
    CURSOR_END,
    CURSOR_START,
    RestConfig,
    RestEndpoint,
    RestPaginator,
    template_fields,
)

if TYPE_CHECKING:
    from hakiri.catalog.records import Batch
    from hakiri.catalog.store import Catalog

__all__ = ["RestTableSource", "WalkPart", "infer_columns"]

_CURSOR_TYPE = "timestamp with time zone"
# Where a range without `start_from` begins; its params leave the cursor out (the first
# read asks for everything).
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_WALK = "walk"


@dataclass(frozen=True)
class WalkPart:
    """One batch of a walked table: walk number `walk` (one per run that starts a walk),
    its `segment`-th batch, from page position `start` (None: the first page), at most
    `pages` pages (None: to the last)."""

    walk: int
    segment: int
    start: dict[str, Any] | None
    pages: int | None

    def batch(self, table: str) -> NewBatch:
        predicate = json.dumps(
            {"walk": self.walk, "segment": self.segment, "start": self.start, "pages": self.pages},
            sort_keys=True,
        )
        return NewBatch(
            f"{_WALK}:{table}:w{self.walk}:s{self.segment}", table, _WALK, predicate=predicate
        )

    @classmethod
    def of(cls, batch: Batch | NewBatch) -> WalkPart:
        data = json.loads(batch.predicate or "{}")
        return cls(int(data["walk"]), int(data["segment"]), data.get("start"), data.get("pages"))

    def describe(self) -> str:
        where = "the first page" if self.start is None else f"page {_shown(self.start)}"
        count = "to the last page" if self.pages is None else f"up to {self.pages} page(s)"
        return f"walk {self.walk}: from {where}, {count}"


class RestTableSource:
    has_cursors = True
    # How messages and batch labels name the source ("rest orders").
    connector = "rest"
    # Where a table's first range starts without backfill.start_from. None: 1970, and the
    # first read asks for everything ('{cursor}' left out). A preset's time (an API with no
    # record before it): the first read asks from it.
    start: dt.datetime | None = None
    # The API lists every endpoint's records by ascending cursor: a range's walk stops at
    # the first page whose last record is past the range's end (later pages are too).
    sorted_by_cursor = False
    # The API reports its own rate limit in its answers (`rest.budget.LeakyBucket`).
    api_bucket: LeakyBucket | None = None

    def __init__(
        self,
        root: Path,
        spec: PipelineSpec,
        config: RestConfig,
        env: Mapping[str, str],
        budget: RateBudget | None = None,
    ) -> None:
        self.root, self.spec, self.config, self.env, self.budget = root, spec, config, env, budget

    @classmethod
    def from_spec(
        cls, root: Path, settings: ProjectFile, spec: PipelineSpec, env: Mapping[str, str]
    ) -> RestTableSource:
        assert isinstance(spec.source.config, RestConfig)
        rate = spec.backfill.rate_budget if spec.backfill else None
        return cls(root, spec, spec.source.config, env, pipeline_budget(root, spec.id, rate))

    # ------------------------------------------------------------------ observing and planning

    def observe(self, table: TableSpec, cursor: dict[str, Any] | None = None) -> SourceObservation:
        """The declared columns; nothing is requested (undeclared columns are told by the
        first page a read asks for)."""
        endpoint = self._endpoint(table.name)
        declared = declared_columns(endpoint)
        if declared is None:
            return SourceObservation(table.name)
        columns = [SourceColumn(c.name, c.type) for c in declared]
        extra = [*endpoint.for_each_fields, *endpoint.parent_columns]
        columns += [SourceColumn(name, "string") for name in extra]
        return SourceObservation(table.name, columns=tuple(columns))

    def plan_batches(self, table: TableSpec, catalog: Catalog) -> TablePlan:
        return self._plan(table, catalog, new_walk=True)

    def next_batches(self, table: TableSpec, catalog: Catalog) -> TablePlan:
        """In a run, after a batch committed: the next batch of a walk that has pages left
        (never a new walk: that is the next run's)."""
        return self._plan(table, catalog, new_walk=False)

    def _plan(self, table: TableSpec, catalog: Catalog, *, new_walk: bool) -> TablePlan:
        where = f"pipeline `{self.spec.id}` ({self.connector} {table.name})"
        cursor = self.cursor(table)
        walked = cursor is None or self.spec.load.strategy.snapshot
        if not walked and not new_walk:
            return TablePlan()  # a range is planned once per run
        existing = [b for b in catalog.batches(self.spec.id) if b.table_name == table.name]
        if walked:
            check_cursor_fits_mode(self.spec, None, where)
            return self._plan_walk(table, existing, new_walk=new_walk)
        assert cursor is not None
        check_cursor_fits_mode(self.spec, cursor, where)
        state = catalog.get_cursor(self.spec.id, table.name)
        now = settled_now()
        low = self._first_start(table, cursor, state, now)
        return plan_table(
            self.spec,
            table,
            cursor,
            state,
            existing,
            lambda: CursorBounds(_CURSOR_TYPE, low, now),
            _no_fingerprint,
        )

    def _first_start(
        self, table: TableSpec, cursor: CursorColumn, state: dict[str, Any] | None, now: dt.datetime
    ) -> dt.datetime:
        """Where the table's first range starts when backfill.start_from does not say: `start`.
        A windowed backfill is refused (its ranges would start in 1970); a preset whose API
        tells its oldest record may start there instead."""
        backfill = self.spec.backfill
        if backfill and backfill.window and backfill.start_from is None:
            raise HakiriError(
                f"pipeline `{self.spec.id}` ({self.connector} {table.name}): backfill.window "
                f"cuts the history of `{cursor.column}` into chunks, and without start_from it "
                "would start in 1970",
                'set backfill.start_from (e.g. "2024-01-01"), or remove window to read it '
                "in one range",
            )
        return self.start or _EPOCH

    def _plan_walk(self, table: TableSpec, existing: list[Batch], *, new_walk: bool) -> TablePlan:
        endpoint = self._endpoint(table.name)
        # a snapshot's, a child's and a for_each endpoint's walks are read whole
        whole = self.spec.load.strategy.snapshot or endpoint.parent is not None
        pages = None if whole or endpoint.for_each else endpoint.pages_per_batch
        unfinished = [b for b in existing if b.status.unfinished]
        if unfinished:
            return TablePlan(notes=[f"{table.name}: {len(unfinished)} batch(es) to finish"])
        walked = [b for b in existing if b.kind == _WALK and b.status is BatchStatus.COMMITTED]
        if not walked:
            return TablePlan(batches=[WalkPart(1, 0, None, pages).batch(table.name)])
        latest = max(walked, key=lambda b: (WalkPart.of(b).walk, WalkPart.of(b).segment))
        part = WalkPart.of(latest)
        if part.pages is not None:
            found, following = recorded_end(self._end_file(latest.batch_id))
            if not found:
                raise HakiriError(
                    f"pipeline `{self.spec.id}`: where batch {latest.batch_id} of "
                    f"{table.name} stopped walking pages was not recorded "
                    f"({self._end_file(latest.batch_id)})",
                    "the engine's tasks record it in the project's .hakiri directory, so they "
                    "must run on this machine: engine = 'sail', or 'spark' with a local[...] "
                    "master",
                )
            if following is not None:
                more = WalkPart(part.walk, part.segment + 1, following, pages)
                return TablePlan(batches=[more.batch(table.name)])
        if not new_walk:
            return TablePlan()
        return TablePlan(batches=[WalkPart(part.walk + 1, 0, None, pages).batch(table.name)])

    def cursor(self, table: TableSpec) -> CursorColumn | None:
        incremental = incremental_of(self.spec, table)
        if incremental is None:
            return None
        return CursorColumn.resolve(incremental, _CURSOR_TYPE, f"{self.connector} {table.name}")

    def reloadable(
        self, table: TableSpec, committed: Sequence[Batch], upcoming: Sequence[Batch | NewBatch]
    ) -> Reload:
        return reload_from_source(committed)

    def requests_per_read(self) -> int:
        # Counted where they are made: every request takes from the pipeline's shared budget.
        return 0

    def refresh(self) -> None:
        pass

    # ------------------------------------------------------------------ reading

    def read(self, spark: Any, batch: Batch) -> BatchRead:
        endpoint = self._endpoint(batch.table_name)
        source = f"{self.connector} {batch.table_name}"
        if batch.kind == "chunk" and batch.predicate:
            chunk: CursorRange | None = CursorRange.from_predicate(batch.predicate)
            label = f"{source} ({chunk.describe()})"
        elif batch.kind == _WALK and batch.predicate:
            chunk = None
            label = f"{source} ({WalkPart.of(batch).describe()})"
        else:
            raise HakiriError(
                f"batch {batch.batch_id} of {source} is neither a range nor a walk",
                "run `hakiri apply` again: the planner makes one of them for each batch",
            )
        table = next(t for t in self.spec.table_specs() if t.name == batch.table_name)
        cursor = self.cursor(table)  # the table's own `incremental`, else the pipeline's
        frame = self._frame(spark, batch.table_name, batch, chunk, cursor)
        if frame is None:
            return BatchRead(_no_rows(spark), label=label, empty=True, evidence=False)
        frame = self._shaped(batch.table_name, frame)
        if endpoint.primary_key:  # a list that shifted while it was walked repeats records
            missing = [k for k in endpoint.primary_key if k not in frame.columns]
            if missing:
                raise HakiriError(
                    f"rest {batch.table_name}: primary_key {', '.join(missing)} is not a column "
                    f"of its records ({', '.join(frame.columns)})",
                    "name columns the records have, or declare them in `columns`",
                )
            frame = frame.dropDuplicates(endpoint.primary_key)
        return BatchRead(frame, label=label, explain=task_error)

    def _shaped(self, table: str, frame: Any) -> Any:
        """A table's rows as it loads them: a preset's own last step on the engine (a row
        filter, a derived column); the rest connector loads them as read."""
        return frame

    def _frame(
        self,
        spark: Any,
        name: str,
        batch: Batch,
        chunk: CursorRange | None,
        cursor: CursorColumn | None,
    ) -> Any:
        """The rows of endpoint `name` for this batch; None when the first page holds no
        record and no column is declared (nothing tells the columns)."""
        endpoint = self._endpoint(name)
        if endpoint.parent is not None:
            parents = self._frame(spark, endpoint.parent, batch, chunk, cursor)
            if parents is None:
                return None
            missing = [
                f
                for f in [*template_fields(endpoint.path), *endpoint.parent_columns.values()]
                if f not in parents.columns
            ]
            if missing:
                raise HakiriError(
                    f"rest {name}: its parent {endpoint.parent} has no column "
                    f"{', '.join(missing)} ({', '.join(parents.columns)})",
                    "name the parent's columns in path and parent_columns",
                )
            columns = declared_columns(endpoint) or self._sampled(name, batch, chunk)
            if columns is None:
                return None
            tasks = self.spec.backfill.parallelism if self.spec.backfill else 1
            return read_children(
                spark,
                self._api(endpoint, columns),
                parents,
                endpoint.path,
                endpoint.parent_columns,
                _params(endpoint, None),
                tasks,
            )
        columns = declared_columns(endpoint) or self._sampled(name, batch, chunk)
        if columns is None:
            return None
        walks = self._walks(endpoint, batch, chunk, _cursor_path(cursor, columns))
        frame = read_walks(spark, self._api(endpoint, columns), walks)
        if chunk is not None and cursor is not None:
            found = dict(frame.dtypes).get(cursor.column)
            if found is None or found not in ("timestamp", "timestamp_ntz", "date"):
                raise HakiriError(
                    f"rest {name}: its cursor `{cursor.column}` is "
                    + ("not a column of its records" if found is None else f"a {found} column")
                    + ", and a rest table reads past a time",
                    f'declare it in columns: {cursor.column} = "timestamp" (a field that '
                    "holds ISO 8601 times)",
                )
            frame = frame.where(in_range(chunk, cursor.column))
        return frame

    def _walks(
        self,
        endpoint: RestEndpoint,
        batch: Batch,
        chunk: CursorRange | None,
        cursor_path: str | None = None,
    ) -> list[Walk]:
        """The batch's walks: one, or one per `for_each` entry (their pages read whole). A
        range of an endpoint sorted by its cursor (at `cursor_path` in a record) stops at
        the first page past the range's end."""
        if chunk is not None:
            params = _params(endpoint, chunk, open_start=self.start is None)
            until = None
            if self.sorted_by_cursor and cursor_path is not None and chunk.hi is not None:
                until = (cursor_path, api_time(chunk.hi))
            return [
                Walk(path, params, values=values, until=until) for path, values in endpoint.paths()
            ]
        part = WalkPart.of(batch)
        end_file = str(self._end_file(batch.batch_id)) if part.pages is not None else None
        return [
            Walk(
                path,
                _params(endpoint, None),
                start=part.start,
                values=values,
                pages=part.pages,
                end_file=end_file,
            )
            for path, values in endpoint.paths()
        ]

    def _sampled(
        self, name: str, batch: Batch, chunk: CursorRange | None
    ) -> tuple[ApiColumn, ...] | None:
        """The columns of an endpoint without declared ones: the fields of the records of
        its first page (one request; a child's: of its first parent's, two)."""
        with self._client() as client:
            records = self._sample(client, name, batch, chunk)
        return infer_columns(records) if records else None

    def _sample(
        self, client: RestClient, name: str, batch: Batch, chunk: CursorRange | None
    ) -> list[dict[str, Any]]:
        """The records of endpoint `name`'s first page for this batch."""
        endpoint = self._endpoint(name)
        if endpoint.parent is None:
            walk = self._walks(endpoint, batch, chunk)[0]
            path, params = walk.path, dict(walk.params)
            start = PagePosition.from_json(walk.start) if walk.start else None
        else:
            parents = self._sample(client, endpoint.parent, batch, chunk)
            if not parents:
                return []
            parent = self._endpoint(endpoint.parent)
            columns = declared_columns(parent) or infer_columns(parents)
            values = {c.name: JsonPath.parse(c.path).first(parents[0]) for c in columns}
            path = re.sub(r"\{([^{}]+)\}", lambda m: str(values.get(m.group(1))), endpoint.path)
            params, start = _params(endpoint, None), None
        pages = walk_pages(
            client,
            path,
            params,
            _paginator(self.config.paginator_of(endpoint)),
            JsonPath.parse(endpoint.records),
            start=start,
        )
        return next(pages).records

    # ------------------------------------------------------------------ the API

    def _endpoint(self, table: str) -> RestEndpoint:
        try:
            return self.config.endpoints[table]
        except KeyError:
            raise HakiriError(
                f"pipeline `{self.spec.id}` reads table `{table}`, and the rest source has no "
                "endpoint of that name",
                f"add [pipeline.source.config.endpoints.{table}] with its path",
            ) from None

    def _api(self, endpoint: RestEndpoint, columns: tuple[ApiColumn, ...]) -> Endpoint:
        auth, secrets = self._auth()
        return Endpoint(
            base_url=self.config.base_url,
            paginator=_paginator(self.config.paginator_of(endpoint)),
            records=endpoint.records,
            columns=columns,
            auth=auth,
            secrets=secrets,
            headers=dict(self.config.headers),
            budget=self.budget,
            bucket=self.api_bucket,
            timeout=self.config.timeout,
        )

    def _client(self) -> RestClient:
        auth, secrets = self._auth()
        return RestClient(
            self.config.base_url,
            auth=auth,
            secrets=secrets,
            headers=dict(self.config.headers),
            timeout=self.config.timeout,
            budget=self.budget,
            bucket=self.api_bucket,
        )

    def _auth(self) -> tuple[Auth | None, dict[str, str]]:
        spec = self.config.auth
        if spec is None:
            return None, {}
        auth: Auth
        if spec.type == "bearer":
            auth = BearerToken(spec.secret)
        elif spec.type == "api_key":
            auth = ApiKey(spec.secret, spec.name, spec.location)
        else:
            auth = BasicAuth(spec.username, spec.secret)
        return auth, {name: self.env[name] for name in auth.secret_names if name in self.env}

    def _end_file(self, batch_id: str) -> Path:
        digest = hashlib.sha256(batch_id.encode()).hexdigest()[:32]
        return self.root / ".hakiri" / "walks" / self.spec.id / f"{digest}.json"


def _cursor_path(cursor: CursorColumn | None, columns: Sequence[ApiColumn]) -> str | None:
    """Where the cursor's column is in a record."""
    if cursor is None:
        return None
    return next((c.path for c in columns if c.name == cursor.column), key_path(cursor.column))


def _params(
    endpoint: RestEndpoint, chunk: CursorRange | None, *, open_start: bool = True
) -> dict[str, str]:
    """The endpoint's params with the range filled in; a param whose placeholder has no
    value (a range without an end; with `open_start`, the first read's start, 1970) is left
    out."""
    lo = chunk.lo if chunk is not None else None
    hi = chunk.hi if chunk is not None else None
    if lo is not None and open_start and not _after_epoch(lo):
        lo = None  # the first range of a table without start_from: everything
    values = {
        CURSOR_START: api_time(lo) if lo is not None else None,
        CURSOR_END: api_time(hi) if hi is not None else None,
    }
    found = {}
    for name, value in endpoint.params.items():
        filled: str | None = value
        for placeholder, given in values.items():
            if placeholder in value:
                filled = (
                    None if given is None or filled is None else filled.replace(placeholder, given)
                )
        if filled is not None:
            found[name] = filled
    return found


def _after_epoch(value: Any) -> bool:
    moment = dt.datetime.fromisoformat(str(value))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment > _EPOCH


def _paginator(spec: RestPaginator) -> Paginator:
    if spec.type == "link_header":
        return LinkHeader()
    if spec.type == "next_url":
        return NextUrl(JsonPath.parse(spec.path))
    if spec.type == "next_token":
        return NextToken(JsonPath.parse(spec.token), spec.param)
    if spec.type == "offset":
        total = JsonPath.parse(spec.total) if spec.total else None
        return Offset(spec.limit, spec.offset_param, spec.limit_param, total=total)
    if spec.type == "page_number":
        total = JsonPath.parse(spec.total_pages) if spec.total_pages else None
        return PageNumber(spec.param, spec.first, spec.size, spec.size_param, total)
    return SinglePage()


def _shown(position: dict[str, Any]) -> str:
    ((kind, value),) = position.items()
    text = str(value)
    return f"{kind} {text[:40]}…" if len(text) > 40 else f"{kind} {text}"


def _no_rows(spark: Any) -> Any:
    return spark.range(0).select()


def _no_fingerprint() -> str:
    raise AssertionError("a rest table past a cursor is read by ranges, never whole")
