"""The metrics a run records through OpenTelemetry's metrics API (meter `hakiri`)."""

from __future__ import annotations

from hakiri.observability.providers import meter

__all__ = ["RunMetrics"]


class RunMetrics:
    """One pipeline's instruments: rows as each chunk commits, the duration as the run ends.

    Made per run from hakiri's current meter (the meter returns the instruments it has
    already registered under these names)."""

    def __init__(self, pipeline_id: str) -> None:
        instruments = meter()
        self._pipeline = {"hakiri.pipeline_id": pipeline_id}
        self._rows_loaded = instruments.create_counter(
            "hakiri.rows.loaded", unit="{row}", description="rows inserted or updated in targets"
        )
        self._rows_quarantined = instruments.create_counter(
            "hakiri.rows.quarantined",
            unit="{row}",
            description="rule-violating rows written to quarantine tables",
        )
        self._run_duration = instruments.create_histogram(
            "hakiri.run.duration", unit="s", description="duration of a loading run"
        )
        self._chunk_lag = instruments.create_histogram(
            "hakiri.chunk.lag",
            unit="s",
            description="from a chunk's planning (its row in the catalog) to its commit",
        )

    def cdc_lag(self, seconds: float | None, retained_bytes: int | None) -> None:
        """A cdc_mirror pipeline's lag behind its source's WAL, as its run ends."""
        instruments = meter()
        if seconds is not None:
            instruments.create_gauge(
                "hakiri.cdc.lag",
                unit="s",
                description="how old the newest change a cdc_mirror target may lack is",
            ).set(seconds, self._pipeline)
        if retained_bytes is not None:
            instruments.create_gauge(
                "hakiri.cdc.retained",
                unit="By",
                description="WAL the source server keeps for a cdc_mirror pipeline's slot",
            ).set(retained_bytes, self._pipeline)

    def chunk_committed(self, rows: int, quarantined: int, lag_seconds: float | None) -> None:
        self._rows_loaded.add(rows, self._pipeline)
        self._rows_quarantined.add(quarantined, self._pipeline)
        if lag_seconds is not None:
            self._chunk_lag.record(lag_seconds, self._pipeline)

    def run_finished(self, seconds: float, status: str) -> None:
        self._run_duration.record(seconds, {**self._pipeline, "hakiri.status": status})
