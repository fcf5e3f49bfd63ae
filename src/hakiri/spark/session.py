"""SparkSession factory, PostgreSQL JDBC driver resolution and JDBC URL conversion.

pyspark is imported inside `build_spark_session` only, so importing this module
stays cheap (the CLI's `--help` and `plan` must never start or even load Spark).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, quote, unquote

from hakiri.errors import SparkSetupError
from hakiri.spark.class_sharing import class_sharing_options
from hakiri.spark.delta import delta_jars, with_delta_conf
from hakiri.spark.engines import ENGINES, SAIL  # SAIL is also the remote of engine = "sail"
from hakiri.spark.errors import spark_errors
from hakiri.spark.jdbc import (
    JARS_ENV,
    JDBC_DRIVER_CLASS,
    JDBC_MAVEN_COORDINATE,
    NO_JDBC_DRIVER_HINT,
    SYSTEM_JDBC_JAR,
)
from hakiri.spark.jvm_output import jvm_output_to_log
from hakiri.spark.packages import (
    cached_packages,
    resolve_packages,
)
from hakiri.spark.recipe import configure_session
from hakiri.spec.interpolate import mask_url

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DataType

    from hakiri.spark.connect_server import ServerLease
    from hakiri.spark.recipe import Recipe
    from hakiri.spec.project import SparkSettings

__all__ = [
    "ENGINE_ENV",
    "IN_PROCESS",
    "SAIL",
    "JarResolution",
    "build_spark_session",
    "configure_session",
    "connect_session",
    "default_spark_conf",
    "engine_label",
    "engine_of",
    "is_connect",
    "isolated_session",
    "jdbc_url_from_postgres_url",
    "local_recipe",
    "parse_type",
    "remote_of",
    "resolve_jdbc_jars",
    "running_session",
    "session_for",
]

LOG4J2_PROPERTIES = Path(__file__).with_name("log4j2.properties")
IN_PROCESS = "in-process"  # `[spark] remote`: a Spark driver inside the command, no Spark Connect
ENGINE_ENV = "HAKIRI_SPARK_ENGINE"
_CONNECT_SWITCH = "SPARK_CONNECT_MODE_ENABLED"  # PySpark's: is_remote() reads it


@dataclass(frozen=True)
class JarResolution:
    """Where Spark gets the PostgreSQL JDBC driver from: local jar paths for `spark.jars`.

    `source` says which step of the resolution order matched: "config", "env",
    "system" or "maven" (hakiri's jar cache); `session_for` uses "none" (no jars)
    for a session started without a driver.
    """

    source: str
    jars: tuple[str, ...] = field(default=())

    def spark_conf(self) -> dict[str, str]:
        """The Spark settings that put this driver on the classpath."""
        return {"spark.jars": ",".join(self.jars)} if self.jars else {}


def resolve_jdbc_jars(
    configured: list[str] | None,
    env: Mapping[str, str] = os.environ,
    *,
    base_dir: Path | None = None,
    system_jar: Path | None = None,
    download: bool = True,
) -> JarResolution:
    """Find the PostgreSQL JDBC driver for Spark.

    Order: `configured` (the `[spark] jars` list of hakiri.toml; an empty list
    counts as not configured), then `HAKIRI_SPARK_JARS` (comma-separated paths),
    then /usr/share/java/postgresql.jar, then the Maven coordinates
    `JDBC_MAVEN_COORDINATE` from hakiri's jar cache, resolved (downloaded) into it
    the first time unless `download` is false or HAKIRI_SPARK_OFFLINE is set
    (`hakiri.spark.packages`).

    Relative configured paths are taken relative to `base_dir` (the project
    directory) when given. `system_jar` exists for tests.

    Raises SparkSetupError when a listed jar does not exist or nothing matches.
    """
    if configured:
        paths = _existing_jars(configured, "`[spark] jars` in hakiri.toml", base_dir)
        return JarResolution(source="config", jars=paths)

    from_env = [p.strip() for p in env.get(JARS_ENV, "").split(",") if p.strip()]
    if from_env:
        return JarResolution(source="env", jars=_existing_jars(from_env, JARS_ENV, None))

    system = SYSTEM_JDBC_JAR if system_jar is None else system_jar
    if system.is_file():
        return JarResolution(source="system", jars=(str(system),))

    if download:
        try:
            return JarResolution(
                source="maven", jars=resolve_packages([JDBC_MAVEN_COORDINATE], env)
            )
        except SparkSetupError as exc:
            raise SparkSetupError(
                f"no PostgreSQL JDBC driver jar found for Spark, and {exc.reason}",
                NO_JDBC_DRIVER_HINT,
            ) from None
    cached = cached_packages([JDBC_MAVEN_COORDINATE], env)
    if cached is not None:
        return JarResolution(source="maven", jars=cached)
    raise SparkSetupError("no PostgreSQL JDBC driver jar found for Spark", NO_JDBC_DRIVER_HINT)


def _existing_jars(paths: list[str], origin: str, base_dir: Path | None) -> tuple[str, ...]:
    resolved: list[str] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if base_dir is not None and not path.is_absolute():
            path = base_dir / path
        if not path.is_file():
            raise SparkSetupError(
                f"JDBC jar {str(path)!r} from {origin} does not exist",
                f"fix the path in {origin}, or remove it to fall back to {SYSTEM_JDBC_JAR} "
                "(Debian package libpostgresql-jdbc-java)",
            )
        # Spark resolves relative spark.jars against its own working directory,
        # which is not necessarily ours; absolute paths remove the doubt.
        resolved.append(str(path.resolve()))
    return tuple(resolved)


def default_spark_conf() -> dict[str, str]:
    """hakiri's Spark defaults; `build_spark_session(conf=...)` overrides any of them."""
    return {
        # A CLI run needs no web UI, and binding its port fails when several
        # sessions (tests, parallel runs) start on one machine.
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # Watermarks and timestamps must not depend on the host's time zone.
        "spark.sql.session.timeZone": "UTC",
        # delta-rs and most Parquet readers expect microseconds, not INT96.
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        # Batches are small to medium; the default of 200 mostly adds task overhead.
        "spark.sql.shuffle.partitions": "4",
        # Concurrent jobs (chunk workers, serve's pipelines) share the cores instead of queueing.
        "spark.scheduler.mode": "FAIR",
        # With pruning, a CSV row counts as malformed only if a column the query
        # uses is bad, so the rows `on_malformed = "drop"` counts and the rows it
        # drops could differ; parse every column, every time.
        "spark.sql.csv.parser.columnPruning.enabled": "false",
        # The COPY writer encodes Arrow batches: fewer, larger ones cost less per row.
        "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
    }


def build_spark_session(
    master: str = "local[*]",
    conf: Mapping[str, str | int | float | bool] | None = None,
    jars: list[str] | None = None,
    app_name: str = "hakiri",
) -> SparkSession:
    """Start (or reuse) a SparkSession with hakiri's defaults and quiet logging.

    `conf` overrides `default_spark_conf()`. `jars` (e.g. `JarResolution.jars`)
    are appended to any `spark.jars` in `conf`. The driver's log4j is pointed at
    the packaged log4j2.properties (errors only); a `spark.driver.extraJavaOptions`
    in `conf` is kept and our option is added to it.

    Static settings such as `spark.jars` only take effect when this call starts
    the JVM; if a session is already running in this process it is returned
    with its runtime SQL settings updated, as pyspark's `getOrCreate` does.
    """
    from pyspark.sql import SparkSession

    settings = default_spark_conf()
    settings.update({key: _conf_value(value) for key, value in (conf or {}).items()})

    if jars:
        existing = [j for j in settings.get("spark.jars", "").split(",") if j]
        settings["spark.jars"] = ",".join([*existing, *jars])

    # The driver JVM reads its log4j configuration at start-up, before any
    # setLogLevel call can run, so the start-up chatter has to be silenced here.
    log_option = shlex.quote(f"-Dlog4j2.configurationFile={LOG4J2_PROPERTIES.as_uri()}")
    user_options = settings.get("spark.driver.extraJavaOptions", "").strip()
    # The driver starts from an archive of Spark's classes when one was written (class_sharing).
    sharing = class_sharing_options(user_options)
    settings["spark.driver.extraJavaOptions"] = f"{log_option} {sharing} {user_options}".strip()

    # Python workers (the COPY writer's mapInArrow) must run an interpreter that has pyarrow,
    # psycopg and hakiri: this one, not whatever `python3` the PATH finds. pyspark takes it
    # from PYSPARK_PYTHON only (spark.pyspark.python is read by spark-submit, not here).
    os.environ.setdefault("PYSPARK_PYTHON", settings.get("spark.pyspark.python", sys.executable))
    # A driver in this process was asked for. PySpark's switch to Spark Connect, set in a
    # parent process that used Spark Connect (a test suite, a notebook) and inherited here,
    # would make this builder a Connect client without a URL instead.
    os.environ.pop(_CONNECT_SWITCH, None)
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    with jvm_output_to_log():  # the JVM's start-up warnings and log lines go to a file
        # log4j2.properties keeps the driver's log at errors only.
        return builder.getOrCreate()


def session_for(
    settings: SparkSettings,
    project_root: Path,
    *,
    require_jdbc: bool = False,
    delta: bool = False,
    env: Mapping[str, str] = os.environ,
    app_name: str = "hakiri",
) -> SparkSession:
    """The SparkSession for a project: `[spark]` master, conf and jars from hakiri.toml.

    Checks Java first (SparkSetupError naming the fix when it is missing or older
    than 17), then resolves the PostgreSQL JDBC driver as `resolve_jdbc_jars`
    does, with relative `[spark] jars` taken from `project_root`. A configured
    jar that does not exist is an error at once. Finding no driver at all is an
    error only with `require_jdbc`; otherwise Spark starts without it (pipelines
    that never touch PostgreSQL need none) and the first JDBC use fails with the
    same hint, via `hakiri.spark.errors`.

    With `delta` (the project writes the context store) the session also gets delta-spark: its
    jars (`delta_jars`) and Delta's SQL extension and catalog (`with_delta_conf`).

    A session already running in this process is reused, as `build_spark_session` does.
    """
    from hakiri.spark.java import require_java

    require_java(env)
    jars, conf = _engine_jars_and_conf(settings, project_root, require_jdbc, delta, env)
    with spark_errors("starting Spark", fallback=SparkSetupError):
        return build_spark_session(master=settings.master, conf=conf, jars=jars, app_name=app_name)


def running_session() -> SparkSession | None:
    """A session this process already has: the thread's active one, else the process's default
    (a Spark Connect session is active only in the thread that made it)."""
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is not None:
        return session
    try:
        return SparkSession.active()
    except Exception:  # none at all
        return None


def engine_of(settings: SparkSettings, env: Mapping[str, str] = os.environ) -> str:
    """The engine a project runs on: HAKIRI_SPARK_ENGINE, else `[spark] engine` ('spark' or
    'sail')."""
    given = env.get(ENGINE_ENV, "").strip().lower() or settings.engine
    if given not in ENGINES:
        raise SparkSetupError(
            f"{ENGINE_ENV}={given!r} is not an engine hakiri runs on",
            "use 'spark' (Apache Spark) or 'sail' (Sail, no Java)",
        )
    return given


def remote_of(settings: SparkSettings, env: Mapping[str, str] = os.environ) -> str | None:
    """The Spark Connect endpoint a project runs on: HAKIRI_SPARK_REMOTE, else `[spark] remote`,
    else the engine's own: 'sail' for Sail inside the command; for Apache Spark, hakiri's local
    server for a local master and a driver in the command for a cluster's (a server that
    outlives the command would keep the cluster's executors to itself).
    'local' for hakiri's local server; None for a driver inside the command ('in-process')."""
    from hakiri.spark.connect_server import REMOTE_ENV

    given = env.get(REMOTE_ENV, "").strip() or settings.remote
    if not given:
        if engine_of(settings, env) == SAIL:
            return SAIL
        given = "local" if settings.master.strip().startswith("local") else IN_PROCESS
    if given not in ("local", IN_PROCESS) and not given.startswith("sc://"):
        raise SparkSetupError(
            f"{REMOTE_ENV}={given!r} is not a Spark Connect endpoint",
            "use sc://host:port (with ;token=... if the server wants one), 'local' for "
            "hakiri's local server, or 'in-process' for a Spark driver inside the command",
        )
    return None if given == IN_PROCESS else given


def engine_label(settings: SparkSettings, env: Mapping[str, str] = os.environ) -> str:
    """The engine a project's commands start, as a progress line names it while they wait:
    `the Spark engine (local server)`, `the Sail engine`, `the Spark engine at sc://host:15002`,
    `the Spark engine (a driver in this command)`."""
    try:
        remote = remote_of(settings, env)
    except SparkSetupError:
        return "the engine"
    if remote == SAIL:
        return "the Sail engine"
    if remote == "local":
        return "the Spark engine (local server)"
    if remote is None:
        return "the Spark engine (a driver in this command)"
    return f"the Spark engine at {mask_url(remote).split(';')[0]}"


def connect_session(
    settings: SparkSettings,
    project_root: Path,
    remote: str,
    *,
    require_jdbc: bool = False,
    delta: bool = False,
    env: Mapping[str, str] = os.environ,
) -> tuple[SparkSession, ServerLease | None]:
    """A Spark Connect session: to `remote` (sc://...), or to hakiri's local server for this
    project's jars and settings (`remote` 'local'), started if it is not running, with the
    lease that keeps that server up while the command uses it."""
    from pyspark.sql import SparkSession

    from hakiri.spark.connect_server import connect_local
    from hakiri.spark.engines import mark_engine
    from hakiri.spark.java import require_java
    from hakiri.spark.liveness import guard_session, watch_for

    if remote == SAIL:
        return _sail_session(settings), None
    with spark_errors(f"connecting to Spark at {mask_url(remote)}", fallback=SparkSetupError):
        if remote != "local":  # an endpoint: its engine is the one the project names
            session = guard_session(SparkSession.builder.remote(remote).create(), watch_for(remote))
            configure_session(session, _session_conf(settings, delta), mask_url(remote))
            return mark_engine(session, engine_of(settings, env)), None
        require_java(env)
        recipe = local_recipe(
            settings, project_root, require_jdbc=require_jdbc, delta=delta, env=env
        )
        session, lease = connect_local(recipe, env, holder=str(project_root))
        try:  # the settings a session holds are not the server's: this command's own
            configure_session(session, dict(recipe.session_conf), "hakiri's local server")
        except BaseException:
            session.stop()
            lease.release()
            raise
        return session, lease


def local_recipe(
    settings: SparkSettings,
    project_root: Path,
    *,
    require_jdbc: bool = False,
    delta: bool = False,
    env: Mapping[str, str] = os.environ,
) -> Recipe:
    """What hakiri's local server for this project starts with (its fingerprint names it), and
    the settings each of the project's sessions sets on it (`hakiri.spark.recipe`)."""
    from hakiri.spark.recipe import Recipe, split_conf
    from hakiri.spec.base import duration_seconds

    jars, conf = _engine_jars_and_conf(settings, project_root, require_jdbc, delta, env)
    fixed, per_session = split_conf(conf)
    # A driver this project does not need, there because it is cached, does not bar a server.
    cached = set() if require_jdbc else set(cached_packages([JDBC_MAVEN_COORDINATE], env) or ())
    return Recipe(
        master=settings.master,
        jars=tuple(jars),
        conf=tuple(sorted(fixed.items())),
        python=conf.get("spark.pyspark.python", sys.executable),
        idle_timeout=float(duration_seconds(settings.idle_timeout)),
        session_conf=tuple(sorted(per_session.items())),
        optional_jars=tuple(j for j in jars if j in cached),
    )


def _sail_session(settings: SparkSettings) -> SparkSession:
    """A session on this process's Sail server, with hakiri's SQL settings and the user's."""
    from pyspark.sql import SparkSession

    from hakiri.spark.engines import mark_engine
    from hakiri.spark.liveness import guard_session, watch_for
    from hakiri.spark.sail import sail_endpoint
    from hakiri.spark.tally import mark_in_process

    endpoint = sail_endpoint()
    with spark_errors("connecting to Sail", fallback=SparkSetupError):
        builder = SparkSession.builder.remote(endpoint)
        # getOrCreate hands back whatever session the process already has: in a process
        # holding a session on Apache Spark (the suite's, serve's), that would be Spark,
        # marked Sail. A session of Sail's own then, leaving the other the default.
        mine = _current_is(endpoint)
        session = guard_session(
            builder.getOrCreate() if mine is not False else builder.create(), watch_for(endpoint)
        )
        # Settings other than spark.sql.* configure a JVM Sail does not have.
        wanted = {
            k: v for k, v in _session_conf(settings, False).items() if k.startswith("spark.sql.")
        }
        configure_session(session, wanted, "Sail")
    return mark_in_process(mark_engine(session, SAIL))


def _current_is(endpoint: str) -> bool | None:
    """Whether the process's current Spark Connect session talks to `endpoint` (None: there
    is none)."""
    from urllib.parse import urlsplit

    from pyspark.sql.connect.session import SparkSession as ConnectSession

    current = ConnectSession.getActiveSession() or ConnectSession._get_default_session()
    if current is None:
        return None
    try:
        return bool(current.client._builder.endpoint == urlsplit(endpoint).netloc)
    except AttributeError:  # a client of another make: not ours
        return False


# A session may set these for itself (Delta reads its own from the session, too); the rest of
# a project's settings configure the server, which a Spark Connect endpoint's owner starts.
_SESSION_PREFIXES = ("spark.sql.", "spark.databricks.delta.")


def _session_conf(settings: SparkSettings, delta: bool) -> dict[str, str]:
    """The settings hakiri's sessions run with, hakiri's defaults and then the user's
    `[spark] conf`: the ones a session can hold (for an endpoint hakiri did not start)."""
    conf: dict[str, str | int | float | bool] = {**default_spark_conf(), **settings.conf}
    if delta:
        conf = with_delta_conf(conf)
    return {k: _conf_value(v) for k, v in conf.items() if k.startswith(_SESSION_PREFIXES)}


def _engine_jars_and_conf(
    settings: SparkSettings,
    project_root: Path,
    require_jdbc: bool,
    delta: bool,
    env: Mapping[str, str],
) -> tuple[list[str], dict[str, str]]:
    """The jars (the PostgreSQL driver, delta-spark) and settings an engine for this project
    starts with: hakiri's defaults, then the user's `[spark] conf`."""
    configured = list(settings.jars) or None
    try:
        # Only a project that uses PostgreSQL may download the driver; others take it if cached.
        driver = resolve_jdbc_jars(configured, env, base_dir=project_root, download=require_jdbc)
    except SparkSetupError:
        explicit = configured or any(p.strip() for p in env.get(JARS_ENV, "").split(","))
        if require_jdbc or explicit:
            raise
        driver = JarResolution(source="none")
    conf: dict[str, str | int | float | bool] = {**default_spark_conf(), **settings.conf}
    jars = list(driver.jars)
    if delta:
        jars += delta_jars([*(configured or ()), *env.get(JARS_ENV, "").split(",")], env)
        conf = with_delta_conf(conf)
    given = [j for j in str(conf.pop("spark.jars", "")).split(",") if j]
    return [*given, *jars], {key: _conf_value(value) for key, value in conf.items()}


_ISOLATED = threading.local()  # this thread's (parent session, isolated session)
_ISOLATED_KEYS: set[str] = set()  # every setting isolated_session was ever asked for


def isolated_session(spark: SparkSession, settings: Mapping[str, str]) -> SparkSession:
    """A session of this thread's own on the same engine, with `settings` set and any other
    setting an earlier call set unset: for settings that one piece of work must see and
    concurrent ones must not, such as Delta's transaction identity (a MERGE reads it from
    the session only). Reused by the thread's later calls."""
    cached = getattr(_ISOLATED, "pair", None)
    if cached is not None and cached[0] is spark:
        session = cached[1]
    else:
        session = _new_session(spark)
        _ISOLATED.pair = (spark, session)
    for key in _ISOLATED_KEYS - settings.keys():
        session.conf.unset(key)
    for key, value in settings.items():
        session.conf.set(key, value)
    _ISOLATED_KEYS.update(settings)
    return session


def is_connect(spark: SparkSession) -> bool:
    """Is this a Spark Connect client session (not a driver in this process)?"""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def parse_type(spark: SparkSession, text: str) -> DataType:
    """`text`, a Spark SQL type or a schema in DDL, as a DataType parsed by `spark`'s engine.
    PySpark's own `DataType.fromDDL` asks, over Spark Connect, the thread's active session or
    the process's default one: not necessarily this one, and none at all in a worker thread
    of a process whose session another thread made."""
    if is_connect(spark):
        return spark._parse_ddl(text)  # type: ignore[attr-defined,no-any-return]
    from pyspark.sql.types import DataType

    return DataType.fromDDL(text)


_REMOTE_ISOLATED: list[SparkSession] = []  # Spark Connect sessions isolated_session opened
_REMOTE_LOCK = threading.Lock()


def _new_session(spark: SparkSession) -> SparkSession:
    from hakiri.spark.engines import engine_of_session, mark_engine
    from hakiri.spark.liveness import copy_guard
    from hakiri.spark.tally import mark_in_process, tallies_in_process

    if not is_connect(spark):  # a driver in this process: a session of the same SparkContext
        return spark.newSession()
    # Spark Connect: a client session of its own on the same server (not made the default
    # or active one, as the builder's create() would).
    session = type(spark)(connection=spark.client._builder)  # type: ignore[call-arg]
    copy_guard(spark, session)
    mark_engine(session, engine_of_session(spark))
    if tallies_in_process(spark):
        mark_in_process(session)
    inherited = getattr(spark, "_hakiri_sql_conf", {})
    session._hakiri_sql_conf = inherited  # type: ignore[attr-defined]
    for key, value in inherited.items():
        session.conf.set(key, value)
    with _REMOTE_LOCK:
        _REMOTE_ISOLATED.append(session)
    return session


def close_isolated_sessions() -> None:
    """Release the Spark Connect sessions `isolated_session` opened (before the command's own
    session stops): left to the garbage collector, a client's channel can hang the exit."""
    with _REMOTE_LOCK:
        sessions = list(_REMOTE_ISOLATED)
        _REMOTE_ISOLATED.clear()
    for session in sessions:
        with contextlib.suppress(Exception):
            session.stop()


def _conf_value(value: str | int | float | bool) -> str:
    # TOML booleans arrive as Python bools; Spark wants "true"/"false", not "True".
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# libpq parameter names whose pgjdbc counterpart is spelt differently.
_LIBPQ_TO_JDBC = {
    "application_name": "ApplicationName",
    "connect_timeout": "connectTimeout",
    "dbname": "database",
}


def jdbc_url_from_postgres_url(url: str) -> tuple[str, dict[str, str]]:
    """Turn a libpq-style URL into a pgjdbc URL plus connection properties.

    `postgresql://user:p%40ss@host:5432/db?sslmode=require` becomes
    `("jdbc:postgresql://host:5432/db", {"user": "user", "password": "p@ss",
    "sslmode": "require", "driver": "org.postgresql.Driver"})`.

    User and password are percent-decoded and returned as properties, never
    embedded in the JDBC URL, so the URL is safe to log. The scheme may be
    `postgresql`, `postgres` or SQLAlchemy's `postgresql+psycopg`. Several
    comma-separated hosts are kept (pgjdbc supports them too). Query parameters
    are passed on as properties, renaming the few libpq spells differently.

    Raises ValueError for other schemes and for URLs without a TCP host
    (pgjdbc cannot use Unix sockets).
    """
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in {"postgresql", "postgres", "postgresql+psycopg"}:
        raise ValueError(f"not a postgresql:// URL: {_redact(url)}")

    location, _, query = rest.split("#", 1)[0].partition("?")
    netloc, slash, path = location.partition("/")
    # rpartition: a password may contain '@' when it was not percent-encoded.
    userinfo, at, hosts = netloc.rpartition("@")
    if not at:
        userinfo, hosts = "", netloc

    props: dict[str, str] = {}
    if userinfo:
        user, has_password, password = userinfo.partition(":")
        if user:
            props["user"] = unquote(user)
        if has_password:
            props["password"] = unquote(password)

    for key, value in parse_qsl(query, keep_blank_values=True):
        if key in {"host", "hostaddr"}:
            raise ValueError(
                f"host given as a query parameter is not supported for JDBC: {_redact(url)}"
            )
        props[_LIBPQ_TO_JDBC.get(key, key)] = value

    database = unquote(path) if slash else ""
    database = props.pop("database", database)
    if not hosts or hosts.startswith("%2F") or hosts.startswith("%2f"):
        raise ValueError(
            f"JDBC needs a TCP host in the URL (Unix sockets are not supported): {_redact(url)}"
        )

    props.setdefault("driver", JDBC_DRIVER_CLASS)
    # pgjdbc URL-decodes the database name, so encode everything, '+' included.
    jdbc_url = f"jdbc:postgresql://{hosts}/{quote(database, safe='')}"
    return jdbc_url, props


def _redact(url: str) -> str:
    """The URL without its password, for error messages."""
    scheme, sep, rest = url.partition("://")
    netloc, slash, tail = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    if not sep or not at or ":" not in userinfo:
        return url
    user = userinfo.split(":", 1)[0]
    return f"{scheme}://{user}:***@{hosts}{slash}{tail}"
