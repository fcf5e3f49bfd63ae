"""hakiri.toml: project settings, named connections and inline pipelines."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import Field, model_validator

from hakiri.spec.base import Duration, SpecModel
from hakiri.spec.pipeline import PipelineSpec
from hakiri.spec.sync import SyncSettings
from hakiri.spec.views import ViewSpec


class ProjectMeta(SpecModel):
    name: str = Field(min_length=1)
    version: str = "0.1.0"


class CatalogSettings(SpecModel):
    url: str | None = Field(
        None,
        description="SQLAlchemy-style URL of the control-plane catalog; default sqlite at .hakiri/state.sqlite. "
        "HAKIRI_CATALOG_URL overrides it.",
    )


class ContextSettings(SpecModel):
    path: str = Field(
        ".hakiri/context", description="Where the local Delta Lake context store lives."
    )
    default_destination: str = Field(
        "context",
        description="'context', or the name of a connection, for pipelines that name no destination.",
    )


class SparkSettings(SpecModel):
    master: str = Field(
        "local[*]",
        description="Any spark.master URL: local[*], spark://host:7077, k8s://..., yarn.",
    )
    conf: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="Extra Spark configuration."
    )
    jars: list[str] = Field(
        default_factory=list, description="Jars for Spark, e.g. the PostgreSQL JDBC driver."
    )
    engine: Literal["spark", "sail"] = Field(
        "spark",
        description="The engine behind the PySpark API: 'spark' (Apache Spark, a warm local "
        "Spark Connect server or a driver in the command, see remote) or 'sail' (Sail, a Spark "
        "Connect server in Rust run inside the hakiri process; no Java). A remote set here or "
        "in HAKIRI_SPARK_REMOTE wins over it. HAKIRI_SPARK_ENGINE overrides it.",
    )
    remote: str | None = Field(
        None,
        pattern=r"^(local|in-process|sc://.+)$",
        description="Where Spark runs, over Spark Connect: 'local' for hakiri's own local "
        "server, which outlives the command and is reused by the next one; an endpoint such "
        "as 'sc://host:15002/;token=...'; or 'in-process' for a Spark driver inside the "
        "command (no Spark Connect). Unset: 'local' when master is local[...], 'in-process' "
        "for a cluster master (a server that outlives the command would hold the cluster's "
        "executors). HAKIRI_SPARK_REMOTE overrides it.",
    )
    idle_timeout: Duration = Field(
        "15m",
        description="How long hakiri's local Spark Connect server (remote = 'local') stays up "
        "after the last command let go of it.",
    )


class ServeSettings(SpecModel):
    """`hakiri serve`: where the API listens and how the reconciler shares work."""

    host: str = Field(
        "127.0.0.1",
        description="Address the HTTP API binds to; loopback by default. --host overrides it.",
    )
    port: int = Field(8765, ge=0, le=65535, description="HTTP API port; --port overrides it.")
    max_parallel_chunks: int = Field(
        4,
        ge=1,
        le=256,
        description="Chunks in flight at once in this serve process, across all pipelines.",
    )
    lease_ttl: Duration = Field(
        "30s",
        description="How long a pipeline lease or chunk claim of a serve process lives without "
        "a heartbeat: after a replica dies, another takes its work over within this time.",
    )
    drain_timeout: Duration = Field(
        "60s",
        description="On SIGTERM, how long in-flight chunks may take to finish before serve exits.",
    )
    watch_interval: Duration = Field(
        "2s", description="How often serve looks for edited, added or removed manifests."
    )
    drift_interval: Duration = Field(
        "60s",
        description="How often serve looks for managed targets changed by hand since hakiri "
        "last loaded them (drift); each change is alerted once.",
    )
    query_max_rows: int = Field(
        10_000,
        ge=1,
        le=1_000_000,
        description="The most rows POST /v1/query answers with; a larger result is cut there "
        "and says so (`truncated`).",
    )
    query_timeout: Duration = Field(
        "30s",
        description="How long one POST /v1/query may run (reading its rows included) before it "
        "is stopped and answered 504.",
    )


class PostgresConnection(SpecModel):
    """A named PostgreSQL connection: a URL, or host/port/database/user/password."""

    type: Literal["postgres"]
    url: str | None = None
    host: str | None = None
    port: int = Field(5432, ge=1, le=65535)
    database: str | None = None
    user: str | None = None
    password: str | None = Field(
        None, description="Use ${VAR}; never write a password into a manifest."
    )

    @model_validator(mode="after")
    def _url_or_parts(self) -> Self:
        if self.url is None and (self.host is None or self.database is None):
            raise ValueError("a postgres connection needs `url`, or `host` and `database`")
        if self.url is not None and (self.host is not None or self.database is not None):
            raise ValueError("give either `url` or `host`/`database`, not both")
        return self


Connection = Annotated[PostgresConnection, Field(discriminator="type")]


class ProjectFile(SpecModel):
    """The whole of hakiri.toml."""

    project: ProjectMeta
    catalog: CatalogSettings = Field(default_factory=CatalogSettings)
    context: ContextSettings = Field(default_factory=ContextSettings)
    sync: SyncSettings | None = Field(
        None, description="Publish the context store to an S3-compatible bucket (`hakiri sync`)."
    )
    spark: SparkSettings = Field(default_factory=SparkSettings)
    serve: ServeSettings = Field(default_factory=ServeSettings)
    connections: dict[str, Connection] = Field(default_factory=dict)
    pipeline: list[PipelineSpec] = Field(
        default_factory=list, description="Inline pipelines ([[pipeline]])."
    )
    view: list[ViewSpec] = Field(
        default_factory=list,
        description="Inline views ([[view]]): named read-only SQL over the context store.",
    )
