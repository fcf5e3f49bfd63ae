"""Row rules, quarantine, dataset validators, anomalies and alerts, through `hakiri apply` into a real
PostgreSQL: asserted on the target's rows, the quarantine table, the run record and the exit code."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from psycopg import sql

from tests.support.project import Project, postgres_project

NOW = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_project(root: Path, pg_url: str, schema: str, pipeline: str, source: str) -> Project:
    return postgres_project(root, pg_url, schema, source=source, body=pipeline)


def run_of(project: Project) -> dict:
    runs = json.loads(project.cli("runs", "p", "--json").stdout)
    return runs[0]


def quarantine(project: Project, table: str = "t_quarantine") -> list[tuple]:
    return project.query(
        sql.SQL(
            "SELECT rule_id, on_fail, dropped, row->>'id', replayed_by FROM {} ORDER BY id"
        ).format(sql.Identifier(project.schema, table))
    )


def table_exists(project: Project, table: str) -> bool:
    return bool(project.query("SELECT to_regclass(%s)", f'"{project.schema}"."{table}"')[0][0])


# ------------------------------------------------------------------ row rules

PEOPLE = "id,email,age,name,code,ref\n"
GOOD_1 = "1,ada@example.org,36,Ada,A-1,5f0c2b1e-8d3a-4c55-9a0e-2b9d6f1c7a10\n"
GOOD_2 = "2,grace@example.org,45,Grace,G-2,0e6a4c2f-1b7d-4e9a-8c3b-5d2f7a9e1c40\n"
BAD_3 = "3,not-an-email,200,,TOO-LONG-CODE,nope\n"
PEOPLE_SOURCE = (
    '{ path = "data/*.csv", columns = { id = "bigint", email = "string", age = "string", '
    'name = "string", code = "string", ref = "string" } }'
)
RULES = {
    "not_null": ('{ type = "not_null", column = "name"', "not_null:name"),
    "regex": ('{ type = "regex", column = "email", pattern = "^[^@]+@[^@]+$"', "regex:email"),
    "range": ('{ type = "range", column = "age", min = 0, max = 150', "range:age"),
    "max_length": ('{ type = "max_length", column = "code", max = 8', "max_length:code"),
    "field_type": ('{ type = "field_type", column = "ref", expected = "uuid"', "field_type:ref"),
}


@pytest.fixture
def people(tmp_path: Path, pg_url: str, pg_schema: str, spark):
    def build(rule: str, on_fail: str, quarantine: bool = True) -> Project:
        text, _ = RULES[rule]
        project = make_project(
            tmp_path,
            pg_url,
            pg_schema,
            f"""
            load = {{ mode = "append" }}
            validate = {{ rules = [{text}, on_fail = "{on_fail}" }}] }}
            quarantine = {{ enabled = {str(quarantine).lower()} }}
            """,
            PEOPLE_SOURCE,
        )
        project.write("data/people.csv", PEOPLE + GOOD_1 + GOOD_2 + BAD_3)
        return project

    return build


@pytest.mark.parametrize("rule", sorted(RULES))
def test_abort_fails_the_run_and_leaves_nothing_staged(people, rule: str) -> None:
    project = people(rule, "abort")
    result = project.cli("apply")
    assert result.exit_code == 1
    rule_id = RULES[rule][1]
    assert f"rule {rule_id} (abort) failed" in result.stderr
    assert '"id": 3' in result.stderr.replace('"id":3', '"id": 3')  # the first violating row
    assert "Traceback" not in result.stderr
    assert not table_exists(project, "t")
    assert not table_exists(project, "t_quarantine")
    staging = project.query(
        "SELECT count(*) FROM pg_tables WHERE schemaname = %s AND tablename LIKE '\\_hakiri\\_stg%%'",
        project.schema,
    )
    assert staging == [(0,)]
    run = run_of(project)
    assert (run["status"], run["error_kind"]) == ("failed", "RuleViolation")


@pytest.mark.parametrize("rule", sorted(RULES))
def test_warn_keeps_the_row_counts_it_and_quarantines_it(people, rule: str) -> None:
    project = people(rule, "warn")
    result = project.cli("apply")
    assert result.exit_code == 0, result.stderr
    rule_id = RULES[rule][1]
    assert [r[0] for r in project.rows("t")] == [1, 2, 3]
    assert quarantine(project) == [(rule_id, "warn", False, "3", None)]
    run = run_of(project)
    assert run["status"] == "success"
    assert run["quality"]["rules"] == {rule_id: 1}
    assert run["quality"]["quarantined"] == 1
    assert f"rule {rule_id}: 1 rows broke it" in result.stderr


@pytest.mark.parametrize("rule", sorted(RULES))
def test_skip_drops_the_row_and_quarantines_it(people, rule: str) -> None:
    project = people(rule, "skip")
    result = project.cli("apply")
    assert result.exit_code == 0, result.stderr
    rule_id = RULES[rule][1]
    assert [r[0] for r in project.rows("t")] == [1, 2]
    assert quarantine(project) == [(rule_id, "skip", True, "3", None)]
    run = run_of(project)
    assert (run["status"], run["row_count"], run["quality"]["rules"]) == (
        "success",
        2,
        {rule_id: 1},
    )


def test_without_a_quarantine_skip_still_drops_and_nothing_is_kept(people) -> None:
    project = people("regex", "skip", quarantine=False)
    assert project.cli("apply").exit_code == 0
    assert [r[0] for r in project.rows("t")] == [1, 2]
    assert not table_exists(project, "t_quarantine")
    assert run_of(project)["quality"]["rules"] == {"regex:email": 1}


def test_a_row_breaking_a_warn_and_a_skip_rule_is_dropped_once_with_two_records(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = make_project(
        tmp_path,
        pg_url,
        pg_schema,
        """
        load = { mode = "append" }
        quarantine = { enabled = true, table = "dlq" }
        [pipeline.validate]
        rules = [
          { type = "range", column = "age", max = 150, on_fail = "warn" },
          { type = "regex", column = "email", pattern = "@", on_fail = "skip" },
          { type = "not_null", column = "id", on_fail = "abort" },
        ]
        """,
        PEOPLE_SOURCE,
    )
    project.write("data/people.csv", PEOPLE + GOOD_1 + GOOD_2 + BAD_3)
    result = project.cli("apply")
    assert result.exit_code == 0, result.stderr
    assert [r[0] for r in project.rows("t")] == [1, 2]
    assert quarantine(project, "dlq") == [
        ("range:age", "warn", True, "3", None),
        ("regex:email", "skip", True, "3", None),
    ]
    assert run_of(project)["quality"]["rules"] == {
        "range:age": 1,
        "regex:email": 1,
        "not_null:id": 0,
    }


def test_a_rolled_back_load_leaves_no_quarantine_rows(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    # The target exists with a column type the rows cannot go into: the load fails and rolls back.
    project = make_project(
        tmp_path,
        pg_url,
        pg_schema,
        """
        load = { mode = "append" }
        validate = { rules = [{ type = "regex", column = "email", pattern = "@", on_fail = "skip" }] }
        quarantine = { enabled = true }
        """,
        PEOPLE_SOURCE,
    )
    project.write("data/people.csv", PEOPLE + GOOD_1 + BAD_3)
    project.query(
        sql.SQL(
            "CREATE TABLE {} (id bigint, email text, age date, name text, code text, ref text)"
        ).format(sql.Identifier(project.schema, "t"))
    )
    result = project.cli("apply")
    assert result.exit_code == 1
    assert project.rows("t") == []
    assert not table_exists(project, "t_quarantine") or quarantine(project) == []


# ------------------------------------------------------------------ dataset validators

ORDERS = "id,customer_id,created_at,country\n"
ORDERS_SOURCE = (
    '{ path = "data/*.csv", columns = { id = "bigint", customer_id = "bigint", '
    'created_at = "timestamp", country = "string" } }'
)
GOOD_ORDERS = f"1,1,{NOW},DE\n2,2,{NOW},FR\n"
VALIDATORS = {
    "row_count": ('{ type = "row_count", min = 2', f"3,1,{NOW},DE\n"),
    "freshness": (
        '{ type = "freshness", column = "created_at", within_hours = 24',
        "3,1,2020-01-01T00:00:00Z,DE\n4,2,2020-01-02T00:00:00Z,FR\n",
    ),
    "fk_integrity": (
        '{ type = "fk_integrity", column = "customer_id", ref_table = "customers", ref_column = "id"',
        f"3,9,{NOW},DE\n4,2,{NOW},FR\n",
    ),
    "cardinality": (
        '{ type = "cardinality", column = "country", min_distinct = 2',
        f"3,1,{NOW},DE\n4,2,{NOW},DE\n",
    ),
    "duplicate_key": (
        '{ type = "duplicate_key", columns = ["id"]',
        f"3,1,{NOW},DE\n3,2,{NOW},FR\n",
    ),
}


@pytest.fixture
def orders(tmp_path: Path, pg_url: str, pg_schema: str, spark):
    def build(kind: str, on_fail: str) -> Project:
        text, _ = VALIDATORS[kind]
        project = make_project(
            tmp_path,
            pg_url,
            pg_schema,
            f"""
            load = {{ mode = "append" }}
            validate = {{ dataset = [{text}, on_fail = "{on_fail}" }}] }}
            """,
            ORDERS_SOURCE,
        )
        project.query(
            sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY)").format(
                sql.Identifier(project.schema, "customers")
            )
        )
        project.query(
            sql.SQL("INSERT INTO {} VALUES (1), (2)").format(
                sql.Identifier(project.schema, "customers")
            )
        )
        project.write("data/a.csv", ORDERS + GOOD_ORDERS)
        first = project.cli("apply")
        assert first.exit_code == 0, first.stderr  # the good file passes every validator
        project.write("data/b.csv", ORDERS + VALIDATORS[kind][1])
        return project

    return build


def fingerprint(project: Project) -> str:
    return project.query(
        sql.SQL("SELECT md5(string_agg(t::text, '|' ORDER BY t::text)) FROM {} t").format(
            sql.Identifier(project.schema, "t")
        )
    )[0][0]


@pytest.mark.parametrize("kind", sorted(VALIDATORS))
def test_a_failing_abort_validator_leaves_the_target_byte_for_byte_unchanged(
    orders, kind: str
) -> None:
    project = orders(kind, "abort")
    before = fingerprint(project)
    result = project.cli("apply")
    assert result.exit_code == 1
    assert f"validator {kind}" in result.stderr
    assert "nothing was loaded" in result.stderr
    assert fingerprint(project) == before
    assert [r[0] for r in project.rows("t")] == [1, 2]
    run = run_of(project)
    assert (run["status"], run["error_kind"]) == ("failed", "ValidationFailed")


@pytest.mark.parametrize("kind", sorted(VALIDATORS))
def test_a_failing_warn_validator_loads_and_records_a_warning(orders, kind: str) -> None:
    project = orders(kind, "warn")
    result = project.cli("apply")
    assert result.exit_code == 0, result.stderr
    assert len(project.rows("t")) == 2 + VALIDATORS[kind][1].count("\n")
    run = run_of(project)
    assert run["status"] == "success"
    [probe] = run["quality"]["validators"]
    assert (probe["ok"], probe["on_fail"]) == (False, "warn")
    assert run["quality"]["warnings"] == [f"validator {probe['message']}"]
    alerts = json.loads(project.cli("alerts", "--json").stdout)
    assert [(a["kind"], a["severity"], a["run_id"]) for a in alerts] == [
        ("validator", "warning", run["run_id"])
    ]


def test_passing_validators_are_recorded_on_the_run(orders) -> None:
    project = orders("cardinality", "abort")
    project.write("data/b.csv", ORDERS + f"3,1,{NOW},DE\n4,2,{NOW},IT\n")
    assert project.cli("apply").exit_code == 0
    run = run_of(project)
    assert [(p["check"], p["ok"], p["observed"]) for p in run["quality"]["validators"]] == [
        ("cardinality:country", True, 2)
    ]
    assert json.loads(project.cli("alerts", "--json").stdout) == []


# ------------------------------------------------------------------ anomaly and alerts


def test_row_count_anomaly_is_skipped_then_silent_then_fires(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = make_project(
        tmp_path,
        pg_url,
        pg_schema,
        """
        load = { mode = "append", expected_row_count_delta = 50, window_runs = 7 }
        """,
        '{ path = "data/*.csv", columns = { id = "bigint" } }',
    )
    next_id = iter(range(1, 10_000))

    def load(n: int, name: str) -> list[dict]:
        project.write(f"data/{name}.csv", "id\n" + "".join(f"{next(next_id)}\n" for _ in range(n)))
        result = project.cli("apply")
        assert result.exit_code == 0, result.stderr
        return json.loads(project.cli("alerts", "--json").stdout)

    assert load(10, "a") == []
    assert load(10, "b") == []
    assert load(100, "c") == []  # two prior runs only: the check is skipped
    assert load(40, "d") == []  # mean of (100, 10, 10) is 40: inside ±50%
    alerts = load(200, "e")  # mean of (40, 100, 10, 10) is 40: 200 is outside 20-60
    assert [(a["kind"], a["severity"]) for a in alerts] == [("anomaly", "warning")]
    assert "loaded 200 rows" in alerts[0]["message"]
    run = run_of(project)
    assert run["status"] == "success" and alerts[0]["run_id"] == run["run_id"]
    assert any("anomaly" in w for w in run["quality"]["warnings"])
    text = project.cli("alerts", "--since", "1h")
    assert "anomaly" in text.stdout and "loaded 200 rows" in text.stdout
    assert json.loads(project.cli("alerts", "--since", "2999-01-01", "--json").stdout) == []


def test_an_empty_source_with_on_miss_alert_raises_an_alert(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = make_project(
        tmp_path,
        pg_url,
        pg_schema,
        'load = { mode = "append" }',
        '{ path = "data/*.csv", on_miss = "alert" }',
    )
    result = project.cli("apply")
    assert result.exit_code == 0, result.stderr
    alerts = json.loads(project.cli("alerts", "--json").stdout)
    [alert] = [a for a in alerts if a["kind"] == "empty_source"]
    assert alert["pipeline_id"] == "p" and "no file matches" in alert["message"]
    # on_miss = "alert" alerts on every apply that finds nothing; the path never matching at
    # all is a warning of its own, raised once
    assert project.cli("apply").exit_code == 0
    alerts = json.loads(project.cli("alerts", "--json").stdout)
    assert [a["kind"] for a in alerts].count("empty_source") == 2
    assert [a["kind"] for a in alerts].count("never_matched") == 1


def test_alerts_since_rejects_nonsense(tmp_path: Path, pg_url: str, pg_schema: str) -> None:
    project = make_project(tmp_path, pg_url, pg_schema, "", '{ path = "data/*.csv" }')
    result = project.cli("alerts", "--since", "yesterday-ish")
    assert result.exit_code == 1
    assert "neither a duration nor a date" in result.stderr


# ------------------------------------------------------------------ errors and replay


def test_errors_shows_quarantined_rows_and_replay_loads_those_that_now_pass(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    manifest = """
        load = {{ mode = "append" }}
        quarantine = {{ enabled = true }}
        validate = {{ rules = [
          {{ type = "regex", column = "email", pattern = "{pattern}", on_fail = "skip" }},
          {{ type = "not_null", column = "name", on_fail = "{name_rule}" }},
        ] }}
    """
    project = make_project(
        tmp_path,
        pg_url,
        pg_schema,
        manifest.format(pattern="@example[.]org$", name_rule="skip"),
        PEOPLE_SOURCE,
    )
    project.write(
        "data/people.csv",
        PEOPLE
        + GOOD_1
        + "3,c@example.com,20,Cy,C-3,\n"
        + "4,d@example.com,30,,D-4,\n"  # also breaks not_null: stays quarantined on replay
        + "5,not-an-email,40,Eve,E-5,\n",
    )
    assert project.cli("apply").exit_code == 0
    assert [r[0] for r in project.rows("t")] == [1]
    run_id = run_of(project)["run_id"]

    shown = json.loads(project.cli("errors", "p", "--run", run_id[:12], "--json").stdout)
    assert shown["run_id"] == run_id
    assert shown["tables"] == [f"{project.schema}.t_quarantine"]
    assert sorted((r["row"]["id"], r["rule_id"], r["dropped"]) for r in shown["rows"]) == [
        (3, "regex:email", True),
        (4, "not_null:name", True),
        (4, "regex:email", True),
        (5, "regex:email", True),
    ]
    text = project.cli("errors", "p")
    assert text.exit_code == 0 and "regex:email" in text.stdout and "not-an-email" in text.stdout

    # The rule was too strict: loosen it, then replay the run's dropped rows. The name rule is now
    # abort, which a replay applies as skip: row 4 stays quarantined instead of failing the replay.
    project.write(
        "hakiri.toml",
        (project.root / "hakiri.toml")
        .read_text()
        .replace("@example[.]org$", "@example[.]")
        .replace('column = "name", on_fail = "skip"', 'column = "name", on_fail = "abort"'),
    )
    assert 'column = "name", on_fail = "abort"' in (project.root / "hakiri.toml").read_text()
    replayed = project.cli("replay", "p", "--run", run_id[:12])  # a prefix, as `runs` prints it
    assert replayed.exit_code == 0, replayed.stderr
    assert "replayed 1 rows" in replayed.stdout
    assert "2 rows still break a rule" in replayed.stderr  # 4 (no name) and 5 (no @)
    assert [r[0] for r in project.rows("t")] == [1, 3]
    marks = {r[3]: r[4] for r in quarantine(project)}
    replay_run = run_of(project)
    assert marks["3"] == replay_run["run_id"] and marks["4"] is None and marks["5"] is None
    assert replay_run["quality"]["replay_of"] == run_id

    again = project.cli("replay", "p", "--run", run_id)
    assert again.exit_code == 0 and "replayed 0 rows" in again.stdout
    assert [r[0] for r in project.rows("t")] == [1, 3]


def test_replay_and_errors_explain_what_is_missing(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = make_project(
        tmp_path, pg_url, pg_schema, 'load = { mode = "append" }', '{ path = "data/*.csv" }'
    )
    result = project.cli("errors", "p")
    assert result.exit_code == 1 and "has no quarantine" in result.stderr
    result = project.cli("replay", "p", "--run", "nope")
    assert result.exit_code == 1 and "has no quarantine" in result.stderr
    result = project.cli("errors", "nope")
    assert result.exit_code == 1 and "no pipeline `nope`" in result.stderr
