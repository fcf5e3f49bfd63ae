"""The destinations one run writes to: one per target table, each with its commit lock, and the
`LoadRequest` that tells a destination what to do with one batch."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from hakiri.catalog.records import Batch
from hakiri.destinations.base import Destination, LoadRequest
from hakiri.engine.run_quality import quarantine_table
from hakiri.hooks.runner import run_sql_hooks, sql_hooks
from hakiri.spec.connections import Target, target_of
from hakiri.spec.loader import Project
from hakiri.spec.pipeline import PipelineSpec, TableSpec

__all__ = ["Targets"]


class Targets:
    def __init__(
        self,
        project: Project,
        spec: PipelineSpec,
        destination_for: Callable[[Target], Destination],
    ) -> None:
        self.project, self.spec, self.destination_for = project, spec, destination_for
        self._lock = threading.Lock()
        self._destinations: dict[Target, Destination] = {}  # one per target for the whole run
        self._commit_locks: dict[int, threading.Lock] = {}  # per destination: one commit at a time

    def target(self, table: TableSpec) -> Target:
        return target_of(self.project.settings, self.spec, table)

    def destination(self, target: Target) -> Destination:
        with self._lock:
            if target not in self._destinations:
                self._destinations[target] = self.destination_for(target)
                self._commit_locks[id(self._destinations[target])] = threading.Lock()
            return self._destinations[target]

    def commit_lock(self, destination: Destination) -> threading.Lock:
        """Held while the destination commits or changes its target's DDL."""
        return self._commit_locks[id(destination)]

    def target_request(self, table: TableSpec) -> LoadRequest:
        """A request naming `table`'s target and no batch (for what concerns the whole target)."""
        target = self.target(table)
        return LoadRequest(
            self.project.settings.project.name,
            self.spec.id,
            "",
            "",
            target.schema,
            target.table,
            self.spec.load,
        )

    def request(
        self, batch: Batch, run_id: str, run_bytes: int | None = None
    ) -> tuple[Destination, LoadRequest]:
        table = next(t for t in self.spec.table_specs() if t.name == batch.table_name)
        target = self.target(table)
        request = replace(
            self.target_request(table),
            run_id=run_id,
            batch_id=batch.batch_id,
            post_hook=self._in_swap_post_hook(target),
            validators=tuple(self.spec.validate_.staged),
            quarantine=quarantine_table(self.spec, table, target),
            run_bytes=run_bytes,
        )
        return self.destination(target), request

    def _in_swap_post_hook(self, target: Target) -> Callable[[Any], None] | None:
        """A mode whose SQL post hooks run inside its commit (blue_green: in the swap
        transaction, before the rename)."""
        hooks = sql_hooks(self.spec.hooks.post)
        if not self.spec.load.strategy.post_hook_in_commit or not hooks:
            return None
        schema = target.schema or "public"
        return lambda conn: run_sql_hooks(
            conn, "post", hooks, default_schema=schema, in_transaction=True
        )
