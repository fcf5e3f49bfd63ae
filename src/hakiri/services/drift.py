"""Drift for `status`, serve's API and serve's alerts: targets changed by hand since
hakiri last loaded them (`engine.drift` finds it; `plan` reports it too)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from hakiri.catalog.store import Catalog
from hakiri.engine.drift import target_drift
from hakiri.errors import HakiriError
from hakiri.spec.loader import Project
from hakiri.spec.pipeline import PipelineSpec

__all__ = ["DRIFT_ALERT", "alert_new_drift", "drift_reader"]

DRIFT_ALERT = "drift"


def drift_reader(
    project: Project, catalog: Catalog, env: Mapping[str, str]
) -> Callable[[PipelineSpec], list[dict[str, Any]] | dict[str, str]]:
    """A pipeline's drift as JSON: one document per changed target ([] for none), or
    `{"error": …}` when its targets cannot be inspected now."""

    def drift_of(spec: PipelineSpec) -> list[dict[str, Any]] | dict[str, str]:
        try:
            return [d.as_dict() for d in target_drift(project, spec, catalog, env)]
        except HakiriError as exc:
            return {"error": exc.reason}

    return drift_of


def alert_new_drift(
    project: Project, spec: PipelineSpec, catalog: Catalog, env: Mapping[str, str]
) -> list[str]:
    """serve: an alert per target whose drift changed since the last alert about it (so a
    drift is alerted once, across replicas); the messages alerted."""
    found = {d.table: d for d in target_drift(project, spec, catalog, env)}
    alerted = []
    for table, mark in catalog.target_marks(spec.id).items():
        drift = found.get(table)
        if drift is None:
            if mark.alerted is not None:  # undone by hand: the next drift is news again
                catalog.clear_drift_alerted(spec.id, table)
            continue
        if catalog.set_drift_alerted(spec.id, table, drift.fingerprint):
            message = drift.describe()
            catalog.add_alert("warning", DRIFT_ALERT, message, pipeline_id=spec.id)
            alerted.append(message)
    return alerted
