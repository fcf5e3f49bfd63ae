"""What a local Spark Connect server is started with (its *recipe*), which part of it names the
server, and which running server may serve another recipe.

A project's Spark settings are of two kinds, and only one of them needs a server of its own:

- **Fixed when the JVM starts**: the master, the jars, the Python its workers run, hakiri's and
  PySpark's versions and code, and every setting that is not a session's: Spark's own
  (`spark.driver.*`, `spark.executor.*`, `spark.ui.*`, `spark.scheduler.mode`, ...) and the SQL
  settings Spark calls *static* (`StaticSQLConf`: `spark.sql.extensions`,
  `spark.sql.warehouse.dir`, `spark.sql.catalogImplementation`, ...), the catalogs
  (`spark.sql.catalog.*`, instantiated once) and Hive's (`spark.sql.hive.*`). These make the
  recipe's fingerprint: a server is named by them.
- **A session's own** (`session_conf`): every other `spark.sql.*` setting (shuffle
  partitions, the session time zone, ANSI mode, adaptive execution, Parquet and CSV options,
  ...) and Delta's `spark.databricks.delta.*` SQL settings. Spark Connect keeps a SQL
  configuration per session id, so a command sets these on its own session after connecting
  (`session.configure_session`) and two projects that differ only there share one server,
  each seeing its own values. The server starts without them: a setting one project gives
  must not become another's default.

This is Spark's own rule (`RuntimeConfig.isModifiable`: a registered SQL setting that is not
static); it is decided here without a server, from `STATIC_SQL_CONFS` (Spark 4's
`StaticSQLConf`), and a test holds it against a running server's answer. A key Spark refuses
to set on a session after all (`CANNOT_MODIFY_CONFIG`) is checked against the server's value
by `configure_session`: the command stops with one line naming it rather than running with
another value.

A running server of another recipe serves this one when it differs only by *more*: the same
master, Python, versions and code, the same fixed settings, and its jars a superset of the
ones wanted (with the settings those jars bring: Delta's SQL extension and catalog). The
PostgreSQL driver of a project that uses no PostgreSQL is in its recipe only because it was
cached (`optional_jars`): a server started before it was cached serves that project too. Extra
jars on the class path do nothing until used; a project without Delta runs on a server with
it as serve's engine always has (it starts with every jar it can have). A server that lacks a
jar, or runs with another value of a fixed setting, is never shared.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hakiri.errors import SparkSetupError

__all__ = [
    "STATIC_SQL_CONFS",
    "Recipe",
    "configure_session",
    "recipe_of",
    "session_settable",
    "split_conf",
    "stamp",
]

# org.apache.spark.sql.internal.StaticSQLConf (Spark 4.x): set when the JVM starts, or never.
STATIC_SQL_CONFS = frozenset(
    {
        "spark.sql.broadcastExchange.maxThreadThreshold",
        "spark.sql.cache.serializer",
        "spark.sql.catalogImplementation",
        "spark.sql.codegen.cache.maxEntries",
        "spark.sql.codegen.comments",
        "spark.sql.debug",
        "spark.sql.defaultUrlStreamHandlerFactory.enabled",
        "spark.sql.event.truncate.length",
        "spark.sql.extensions",
        "spark.sql.filesourceTableRelationCacheSize",
        "spark.sql.globalTempDatabase",
        "spark.sql.legacy.sessionInitWithConfigDefaults",
        "spark.sql.metadataCacheTTLSeconds",
        "spark.sql.queryExecutionListeners",
        "spark.sql.resultQueryStage.maxThreadThreshold",
        "spark.sql.shuffleExchange.maxThreadThreshold",
        "spark.sql.sources.disabledJdbcConnProviderList",
        "spark.sql.sources.schemaStringLengthThreshold",
        "spark.sql.streaming.streamingQueryListeners",
        "spark.sql.streaming.ui.enabled",
        "spark.sql.streaming.ui.enabledCustomMetricList",
        "spark.sql.streaming.ui.retainedProgressUpdates",
        "spark.sql.streaming.ui.retainedQueries",
        "spark.sql.subquery.maxThreadThreshold",
        "spark.sql.ui.retainedExecutions",
        "spark.sql.warehouse.dir",
    }
)
_FIXED_SQL_PREFIXES = ("spark.sql.catalog.", "spark.sql.hive.")
_SESSION_PREFIXES = ("spark.sql.", "spark.databricks.delta.")
# Fixed settings a server may have and a recipe not ask for: they come with jars (Delta's).
_CAME_WITH_JARS = ("spark.sql.extensions", "spark.sql.catalog.")


def session_settable(key: str) -> bool:
    """May a Spark Connect session set `key` for itself (Spark's `isModifiable`)?"""
    return (
        key.startswith(_SESSION_PREFIXES)
        and key not in STATIC_SQL_CONFS
        and not key.startswith(_FIXED_SQL_PREFIXES)
    )


def split_conf(conf: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(the settings fixed when the server starts, the ones each session sets itself)."""
    fixed = {k: v for k, v in conf.items() if not session_settable(k)}
    return fixed, {k: v for k, v in conf.items() if session_settable(k)}


def stamp() -> str:
    """hakiri's version and code, and PySpark's: a server runs them (its Python workers run
    hakiri's modules), so a server of another stamp serves no command of this one."""
    import pyspark

    from hakiri import __version__

    return f"{__version__}\0{_code_stamp()}\0{pyspark.__version__}"


def _code_stamp() -> str:
    """The newest modification time of hakiri's own modules: the server's Python workers run
    them (the COPY writer's tasks), so an edited tree (an editable install keeps its version)
    gets a server of its own instead of one still running the code from before the edit."""
    package = Path(__file__).resolve().parents[1]
    return str(max((p.stat().st_mtime_ns for p in package.rglob("*.py")), default=0))


@dataclass(frozen=True)
class Recipe:
    """What a local server is started with; the fixed part's fingerprint names the server."""

    master: str
    jars: tuple[str, ...]
    conf: tuple[tuple[str, str], ...]  # sorted (key, value) pairs fixed at the JVM's start
    python: str
    idle_timeout: float  # seconds; not part of the fingerprint
    # sorted (key, value) pairs each session sets itself; not part of the fingerprint
    session_conf: tuple[tuple[str, str], ...] = ()
    # jars taken because they were at hand, not needed (the PostgreSQL driver of a project
    # that uses no PostgreSQL, when it is cached): a server without them serves the recipe
    optional_jars: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, text: str) -> Recipe:
        data = json.loads(text)
        return cls(
            master=str(data["master"]),
            jars=tuple(data["jars"]),
            conf=tuple((str(k), str(v)) for k, v in data["conf"]),
            python=str(data["python"]),
            idle_timeout=float(data["idle_timeout"]),
            session_conf=tuple((str(k), str(v)) for k, v in data.get("session_conf", ())),
            optional_jars=tuple(data.get("optional_jars", ())),
        )

    def to_json(self) -> str:
        """`recipe.json`: the recipe and the stamp of the hakiri that started the server."""
        return json.dumps({**asdict(self), "stamp": stamp()})

    def fingerprint(self) -> str:
        digest = hashlib.sha256()
        for part in (stamp(), self.python, self.master):
            digest.update(f"{part}\0".encode())
        for key, value in self.conf:
            digest.update(f"{key}={value}\0".encode())
        for jar in self.jars:
            try:
                stat = os.stat(jar)
                digest.update(f"{jar}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
            except OSError:
                digest.update(f"{jar}\0missing\0".encode())
        return digest.hexdigest()[:16]

    def serves(self, wanted: Recipe) -> bool:
        """Can a server started with this recipe (by this hakiri: same stamp) run `wanted`'s
        commands? The same master and Python, every fixed setting wanted at the same value
        (Delta's extensions: a superset is fine), no other fixed setting than the ones jars
        bring, and every jar wanted (but the optional ones) on its class path."""
        if (self.master, self.python) != (wanted.master, wanted.python):
            return False
        if not set(wanted.jars) - set(wanted.optional_jars) <= set(self.jars):
            return False
        have, want = dict(self.conf), dict(wanted.conf)
        for key, value in want.items():
            if key == "spark.sql.extensions":
                if not _names(value) <= _names(have.get(key, "")):
                    return False
            elif have.get(key) != value:
                return False
        return all(key.startswith(_CAME_WITH_JARS) for key in have.keys() - want.keys())


def configure_session(session: Any, wanted: Mapping[str, str], where: str) -> None:
    """Set `wanted` on a Spark Connect session: the settings a session holds for itself (on
    hakiri's local server, `Recipe.session_conf`), or all of hakiri's on a server hakiri did
    not start (an endpoint, Sail). A static setting a session cannot change must already have the value
    hakiri needs on the server; if it has not, SparkSetupError names the server-side fix.
    The settings are kept with the session, for `isolated_session` to give its sessions too."""
    problems = []
    applied = {}
    for key, value in wanted.items():
        try:
            session.conf.set(key, value)
            applied[key] = value
        except Exception as exc:
            if "CANNOT_MODIFY" not in str(exc) and "static" not in str(exc).lower():
                raise
            current = _server_value(session, key)
            if not _satisfies(key, current, value):
                problems.append((key, value, current))
    session._hakiri_sql_conf = applied  # type: ignore[attr-defined]
    if problems:
        key, value, current = problems[0]
        others = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise SparkSetupError(
            f"the Spark server at {where} runs with {key}={current or '(unset)'}, and hakiri "
            f"needs {value}: a setting only the server's start can change{others}",
            "start the Spark Connect server with "
            + " ".join(f"--conf {k}={v}" for k, v, _ in problems),
        )


def _server_value(session: Any, key: str) -> str:
    """A setting's value on the server: the one it was started with, else its default."""
    try:
        return str(session.conf.get(key) or "")
    except Exception:  # no value and no default
        return ""


def _satisfies(key: str, current: str, wanted: str) -> bool:
    """Does a static setting's server value serve hakiri (extensions: a superset is fine)?"""
    if key == "spark.sql.extensions":
        return _names(wanted) <= _names(current)
    return current.strip() == wanted.strip()


def recipe_of(directory: Path, current: str) -> Recipe | None:
    """The recipe a server directory's server was started with, if a hakiri of stamp
    `current` (this one's `stamp()`) started it."""
    try:
        text = (directory / "recipe.json").read_text(encoding="utf-8")
        if json.loads(text).get("stamp") != current:
            return None
        return Recipe.from_json(text)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _names(value: str) -> set[str]:
    return {name.strip() for name in value.split(",") if name.strip()}
