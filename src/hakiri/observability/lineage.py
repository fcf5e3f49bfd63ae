"""OpenLineage run events: START, COMPLETE and FAIL of one pipeline run, through the
openlineage-python client.

On when the environment asks for it, off (no client built, nothing imported) otherwise:

    OPENLINEAGE_URL          HTTP: POST to $OPENLINEAGE_URL/$OPENLINEAGE_ENDPOINT (default
                             api/v1/lineage), with OPENLINEAGE_API_KEY as a bearer token:
                             the client's own variables, read from the run's environment
    OPENLINEAGE_CONFIG,      the client's own configuration (an openlineage.yml, or
    OPENLINEAGE__*           OPENLINEAGE__TRANSPORT__TYPE=file|console|kafka|...), as the
                             client resolves it
    OPENLINEAGE_DISABLED     `true`: off, whatever else is set
    OPENLINEAGE_NAMESPACE    the job's namespace (default `hakiri`)

Lineage is a by-product: an event that cannot be sent never fails a load. The first
failure of a run says so in one line on stderr; later ones are quiet.

What goes in the events is plain data (`LineageDataset`), built by the engine: this module
knows nothing of pipelines.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "DEFAULT_NAMESPACE",
    "InputField",
    "LineageDataset",
    "RunLineage",
    "lineage_from_env",
    "lineage_run_id",
]

DEFAULT_NAMESPACE = "hakiri"
_DEFAULT_ENDPOINT = "api/v1/lineage"  # the client's default
# Seconds per POST, and retries on a refused connection or a 5xx: the client's default
# (5 retries with backoff, 5 s each) would hold a run for half a minute per event.
_HTTP_TIMEOUT = 5.0
_HTTP_RETRY = {"total": 2, "connect": 2, "read": 2, "backoff_factor": 0.2}
# Not a hakiri run id's UUID: a namespace for the ones derived from other run ids.
_RUN_ID_NAMESPACE = uuid.UUID("5a1e6b0c-3a57-4f0e-9d2c-6b8f2d1e4a11")


@dataclass(frozen=True)
class InputField:
    """One column of an input dataset an output column derives from."""

    namespace: str
    name: str
    field: str


@dataclass(frozen=True)
class LineageDataset:
    """A dataset as an event names it (https://openlineage.io/docs/spec/naming), with what is
    known of it: its columns (name, type), the rows a run wrote, where each column comes from."""

    namespace: str
    name: str
    fields: tuple[tuple[str, str | None], ...] | None = None
    row_count: int | None = None
    column_lineage: Mapping[str, tuple[InputField, ...]] = field(default_factory=dict)


def lineage_run_id(run_id: str) -> str:
    """OpenLineage's runId (a UUID) for a hakiri run id: the same UUID when it is one, else
    one derived from it, so each event of a run carries the same."""
    try:
        return str(uuid.UUID(run_id))
    except ValueError:
        return str(uuid.uuid5(_RUN_ID_NAMESPACE, run_id))


def lineage_from_env(env: Mapping[str, str]) -> RunLineage | None:
    """The events' sender this environment configures, or None (lineage is off)."""
    if env.get("OPENLINEAGE_DISABLED", "").strip().lower() == "true":
        return None
    url = env.get("OPENLINEAGE_URL", "").strip()
    native = env.get("OPENLINEAGE_CONFIG") or any(k.startswith("OPENLINEAGE__") for k in env)
    if not url and not native:
        return None
    namespace = env.get("OPENLINEAGE_NAMESPACE", "").strip() or DEFAULT_NAMESPACE
    if url:
        endpoint = env.get("OPENLINEAGE_ENDPOINT", "").strip() or _DEFAULT_ENDPOINT
        where = f"{url.rstrip('/')}/{endpoint.lstrip('/')}"
    else:
        where = env.get("OPENLINEAGE_CONFIG") or "the OPENLINEAGE__TRANSPORT__* transport"
    return RunLineage(namespace, where, _client_factory(env, url))


def _client_factory(env: Mapping[str, str], url: str) -> Any:
    def build() -> Any:
        from openlineage.client import OpenLineageClient

        if not url:  # the client's own configuration: a YAML file or OPENLINEAGE__ variables
            return OpenLineageClient()
        from openlineage.client.transport.http import HttpConfig, HttpTransport

        config: dict[str, Any] = {
            "url": url,
            "endpoint": env.get("OPENLINEAGE_ENDPOINT", "").strip() or _DEFAULT_ENDPOINT,
            "timeout": _HTTP_TIMEOUT,
            "retry": _HTTP_RETRY,
        }
        if api_key := env.get("OPENLINEAGE_API_KEY"):
            config["auth"] = {"type": "api_key", "apiKey": api_key}
        return OpenLineageClient(transport=HttpTransport(HttpConfig.from_dict(config)))

    return build


class RunLineage:
    """Sends the events of pipeline runs as job `job` in `namespace`; the client is built on
    the first event (a client that cannot be built is one more failure to send)."""

    def __init__(self, namespace: str, where: str, build: Any) -> None:
        self.namespace, self.where = namespace, where
        self._build = build
        self._client: Any = None
        self._warned = False

    def start(
        self,
        run_id: str,
        job: str,
        inputs: Sequence[LineageDataset],
        outputs: Sequence[LineageDataset],
    ) -> None:
        self._send("START", run_id, job, inputs, outputs)

    def complete(
        self,
        run_id: str,
        job: str,
        inputs: Sequence[LineageDataset],
        outputs: Sequence[LineageDataset],
    ) -> None:
        self._send("COMPLETE", run_id, job, inputs, outputs)

    def fail(
        self,
        run_id: str,
        job: str,
        inputs: Sequence[LineageDataset],
        outputs: Sequence[LineageDataset],
        message: str,
    ) -> None:
        self._send("FAIL", run_id, job, inputs, outputs, message)

    def _send(
        self,
        state: str,
        run_id: str,
        job: str,
        inputs: Sequence[LineageDataset],
        outputs: Sequence[LineageDataset],
        error: str | None = None,
    ) -> None:
        try:
            if self._client is None:
                self._client = self._build()
            self._client.emit(_event(state, run_id, self.namespace, job, inputs, outputs, error))
        except Exception as exc:  # lineage never fails a load
            self._warn(exc)

    def _warn(self, exc: Exception) -> None:
        if self._warned:
            return
        self._warned = True
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        sys.stderr.write(
            f"warning: could not send OpenLineage events to {self.where} ({why}); "
            "the run goes on without lineage\n"
        )


def _event(
    state: str,
    run_id: str,
    namespace: str,
    job: str,
    inputs: Sequence[LineageDataset],
    outputs: Sequence[LineageDataset],
    error: str | None,
) -> Any:
    from openlineage.client.event_v2 import (
        InputDataset,
        Job,
        OutputDataset,
        Run,
        RunEvent,
        RunState,
    )
    from openlineage.client.facet_v2 import error_message_run, job_type_job

    run_facets: dict[str, Any] = {}
    if error is not None:
        run_facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
            message=error, programmingLanguage="python"
        )
    job_facets = {
        "jobType": job_type_job.JobTypeJobFacet(
            processingType="BATCH", integration="HAKIRI", jobType="PIPELINE"
        )
    }
    return RunEvent(
        eventType=RunState[state],
        eventTime=datetime.now(UTC).isoformat(),
        run=Run(runId=lineage_run_id(run_id), facets=run_facets),
        job=Job(namespace=namespace, name=job, facets=job_facets),
        inputs=[
            InputDataset(namespace=d.namespace, name=d.name, facets=_dataset_facets(d))
            for d in inputs
        ],
        outputs=[
            OutputDataset(
                namespace=d.namespace,
                name=d.name,
                facets=_dataset_facets(d),
                outputFacets=_output_facets(d),
            )
            for d in outputs
        ],
    )


def _dataset_facets(dataset: LineageDataset) -> dict[str, Any]:
    from openlineage.client.facet_v2 import column_lineage_dataset, schema_dataset

    facets: dict[str, Any] = {}
    if dataset.fields is not None:
        facets["schema"] = schema_dataset.SchemaDatasetFacet(
            fields=[
                schema_dataset.SchemaDatasetFacetFields(name=name, type=kind)
                for name, kind in dataset.fields
            ]
        )
    if dataset.column_lineage:
        facets["columnLineage"] = column_lineage_dataset.ColumnLineageDatasetFacet(
            fields={
                column: column_lineage_dataset.Fields(
                    inputFields=[
                        column_lineage_dataset.InputField(
                            namespace=i.namespace, name=i.name, field=i.field
                        )
                        for i in sources
                    ]
                )
                for column, sources in dataset.column_lineage.items()
            }
        )
    return facets


def _output_facets(dataset: LineageDataset) -> dict[str, Any]:
    from openlineage.client.facet_v2 import output_statistics_output_dataset

    if dataset.row_count is None:
        return {}
    return {
        "outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
            rowCount=dataset.row_count
        )
    }
