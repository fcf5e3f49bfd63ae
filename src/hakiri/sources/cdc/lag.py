"""Where a cdc_mirror pipeline stands against its source's WAL (`plan`, `hakiri cdc lag`), and
what a source that follows a change stream offers (`ChangeStream`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from hakiri.spec.sizes import byte_size

if TYPE_CHECKING:
    from hakiri.catalog.store import Catalog

__all__ = ["CdcLag", "ChangeStream"]


class CdcLag(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    """Where a cdc_mirror pipeline stands against its source's WAL."""

    slot: str
    slot_exists: bool
    applied_to: str | None = Field(
        None, description="The WAL position every table of the pipeline has applied (X/X)."
    )
    behind_bytes: int | None = Field(
        None, description="WAL the server flushed past that position (all its databases')."
    )
    behind_seconds: float | None = Field(
        None,
        description="How long ago that position was the server's flush position: no change "
        "older than this is missing from the targets.",
    )
    retained_bytes: int | None = Field(
        None, description="WAL the server keeps for the slot (from its restart position)."
    )
    max_lag_bytes: int | None = Field(None, description="config.cdc.max_lag_bytes, if set.")
    pending_changes: int | None = Field(
        None,
        description="plan: row changes of the pipeline's tables not applied yet (decoded by "
        "the server; null while an apply reads the slot, and outside plan).",
    )

    @property
    def over_limit(self) -> bool:
        return (
            self.max_lag_bytes is not None
            and self.retained_bytes is not None
            and self.retained_bytes > self.max_lag_bytes
        )

    def describe(self) -> str:
        if not self.slot_exists:
            return f"slot {self.slot} does not exist yet: the first apply creates it"
        if self.applied_to is None:
            return f"slot {self.slot}: the snapshot is not loaded yet"
        seconds = f", {self.behind_seconds:.0f} s" if self.behind_seconds is not None else ""
        pending = (
            f"; {self.pending_changes} change(s) pending"
            if self.pending_changes is not None
            else ""
        )
        return (
            f"slot {self.slot}: applied to {self.applied_to}, {byte_size(self.behind_bytes)} of WAL "
            f"behind{seconds}; {byte_size(self.retained_bytes)} retained{pending}"
        )


@runtime_checkable
class ChangeStream(Protocol):
    """A source that follows a database's change stream through a replication slot
    (`hakiri cdc lag|drop-slot`, the lag in `status` and `plan`)."""

    slot: str

    def lag(self, catalog: Catalog, *, count_pending: bool = False) -> CdcLag: ...

    def drop_slot(self, under: Callable[[Callable[[], bool]], bool]) -> bool:
        """Drop the slot (False: there was none); `under` runs the drop while the pipeline's
        lease is held. Raises HakiriError while a server process reads the slot."""
        ...
