"""What names a local Spark Connect server (its recipe's fingerprint), and which endpoint a
project runs on: no JVM, no server."""

from __future__ import annotations

from pathlib import Path

import pytest

import hakiri
from hakiri.errors import SparkSetupError
from hakiri.spark.connect_server import Recipe
from hakiri.spark.session import remote_of
from hakiri.spec.project import SparkSettings


def _recipe(tmp_path: Path, **changes: object) -> Recipe:
    jar = tmp_path / "postgresql.jar"
    if not jar.exists():
        jar.write_bytes(b"jar")
    fields: dict[str, object] = {
        "master": "local[*]",
        "jars": (str(jar),),
        "conf": (("spark.sql.shuffle.partitions", "4"),),
        "python": "/usr/bin/python3",
        "idle_timeout": 900.0,
        **changes,
    }
    return Recipe(**fields)  # type: ignore[arg-type]


def test_the_same_recipe_names_the_same_server(tmp_path: Path) -> None:
    assert _recipe(tmp_path).fingerprint() == _recipe(tmp_path).fingerprint()
    # How long it idles is not what it runs with: the same server.
    assert _recipe(tmp_path, idle_timeout=5.0).fingerprint() == _recipe(tmp_path).fingerprint()


@pytest.mark.parametrize(
    "changes",
    [
        {"master": "local[1]"},
        {"conf": (("spark.driver.memory", "2g"),)},
        {"python": "/opt/venv/bin/python"},
        {"jars": ()},
    ],
    ids=["master", "conf", "python", "jars"],
)
def test_other_settings_or_jars_name_another_server(tmp_path: Path, changes: dict) -> None:
    assert _recipe(tmp_path, **changes).fingerprint() != _recipe(tmp_path).fingerprint()


def test_the_settings_a_session_holds_do_not_name_the_server(tmp_path: Path) -> None:
    utc = _recipe(tmp_path, session_conf=(("spark.sql.session.timeZone", "UTC"),))
    tokyo = _recipe(tmp_path, session_conf=(("spark.sql.session.timeZone", "Asia/Tokyo"),))
    assert utc.fingerprint() == tokyo.fingerprint() == _recipe(tmp_path).fingerprint()


@pytest.mark.parametrize(
    ("key", "per_session"),
    [
        ("spark.sql.shuffle.partitions", True),
        ("spark.sql.session.timeZone", True),
        ("spark.sql.ansi.enabled", True),
        ("spark.sql.adaptive.enabled", True),
        ("spark.databricks.delta.snapshotPartitions", True),
        ("spark.sql.extensions", False),  # StaticSQLConf
        ("spark.sql.warehouse.dir", False),  # StaticSQLConf
        ("spark.sql.catalog.spark_catalog", False),  # a catalog: made once
        ("spark.sql.hive.metastore.version", False),
        ("spark.driver.memory", False),  # Spark's own, not SQL
        ("spark.scheduler.mode", False),
        ("spark.ui.enabled", False),
    ],
)
def test_which_settings_a_session_sets_itself(key: str, per_session: bool) -> None:
    from hakiri.spark.recipe import session_settable

    assert session_settable(key) is per_session


def test_a_server_with_more_jars_serves_a_recipe_of_fewer(tmp_path: Path) -> None:
    delta = tmp_path / "delta-spark.jar"
    delta.write_bytes(b"delta")
    jdbc = str(tmp_path / "postgresql.jar")
    extension = ("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
    catalog = ("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
    everything = _recipe(tmp_path, jars=(jdbc, str(delta)), conf=(catalog, extension))
    delta_only = _recipe(tmp_path, jars=(str(delta),), conf=(catalog, extension))
    plain = _recipe(tmp_path, jars=(jdbc,), conf=())
    assert everything.serves(delta_only) and everything.serves(plain)
    assert delta_only.serves(delta_only) and not delta_only.serves(everything)  # no driver
    assert not plain.serves(delta_only)  # neither Delta's jars nor its settings
    # Another value of a fixed setting, or one the recipe does not ask for: not served.
    bigger = _recipe(tmp_path, jars=(jdbc,), conf=(("spark.driver.memory", "8g"),))
    assert not bigger.serves(plain) and not plain.serves(bigger)
    assert not everything.serves(_recipe(tmp_path, master="local[1]", jars=(jdbc,), conf=()))
    # A driver the project has only because it was cached: a server without it serves it.
    at_hand = _recipe(
        tmp_path, jars=(jdbc, str(delta)), conf=(catalog, extension), optional_jars=(jdbc,)
    )
    assert delta_only.serves(at_hand)


def test_a_changed_jar_or_another_hakiri_names_another_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = _recipe(tmp_path).fingerprint()
    (tmp_path / "postgresql.jar").write_bytes(b"a newer driver")
    after = _recipe(tmp_path).fingerprint()
    assert after != before
    monkeypatch.setattr(hakiri, "__version__", "99.0.0")
    assert _recipe(tmp_path).fingerprint() != after


def test_a_recipe_survives_its_json(tmp_path: Path) -> None:
    import json
    from dataclasses import asdict

    recipe = _recipe(tmp_path)
    assert Recipe.from_json(json.dumps(asdict(recipe))) == recipe


def test_the_endpoint_comes_from_the_environment_first() -> None:
    settings = SparkSettings(remote="sc://cluster:15002")
    assert remote_of(settings, {}) == "sc://cluster:15002"
    assert remote_of(settings, {"HAKIRI_SPARK_REMOTE": "local"}) == "local"
    assert remote_of(settings, {"HAKIRI_SPARK_REMOTE": "in-process"}) is None


def test_the_local_server_is_the_default_and_in_process_opts_out() -> None:
    assert remote_of(SparkSettings(), {}) == "local"
    assert remote_of(SparkSettings(master="local[2]"), {}) == "local"
    # A cluster's master: a driver in the command, which gives the executors back at its end.
    assert remote_of(SparkSettings(master="spark://head:7077"), {}) is None
    assert remote_of(SparkSettings(master="spark://head:7077", remote="local"), {}) == "local"
    assert remote_of(SparkSettings(remote="in-process"), {}) is None
    with pytest.raises(ValueError, match="remote"):
        SparkSettings(remote="driver")


def test_an_endpoint_that_is_not_spark_connect_is_refused() -> None:
    with pytest.raises(SparkSetupError) as raised:
        remote_of(SparkSettings(), {"HAKIRI_SPARK_REMOTE": "http://cluster:15002"})
    assert "is not a Spark Connect endpoint" in raised.value.reason
    assert "sc://host:port" in (raised.value.hint or "")


def test_a_server_file_whose_pids_now_run_something_else_is_not_a_running_server(
    tmp_path: Path,
) -> None:
    import os

    from hakiri.spark.connect_server import ServerState, _owned_pids

    # As after a reboot: server.json names pids that other processes have now (this test's
    # own interpreter, and init). It is not a running server, and stopping it signals neither.
    stale = ServerState(
        directory=str(tmp_path),
        fingerprint="0123456789abcdef",
        supervisor_pid=os.getpid(),
        server_pid=1,
        port=15002,
        token="t",
        started_at=0.0,
        ready=True,
        hakiri_version=hakiri.__version__,
        master="local[*]",
    )
    assert not stale.alive()
    assert _owned_pids(stale) == []
