"""`hakiri compile`: transforms written with PySpark's DataFrame API load what the hand-written
steps they stand for load, on every engine; a module edited since it was compiled is stale for
`compile --check` and `plan`; what cannot be compiled is refused with its line."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from deltalake import DeltaTable
from typer.testing import CliRunner, Result

from hakiri.cli.main import app

MANIFEST = """
[project]
name = "shop"

[[pipeline]]
id = "customers"
source = {{ connector = "files", config = {{ path = "data/customers/*.csv", columns = {{ customer_id = "bigint", segment = "string" }} }} }}
tables = ["customers"]
load = {{ mode = "truncate" }}

[[pipeline]]
id = "orders"
source = {{ connector = "files", config = {{ path = "data/orders/*.csv", columns = {{ order_id = "bigint", customer_id = "bigint", email = "string", amount = "string", status = "string", placed_at = "string" }} }} }}
tables = ["orders"]
load = {{ mode = "upsert", upsert_key = ["order_id"] }}
{transforms}
"""

# The steps a data engineer would write by hand for what ORDERS_MODULE does.
HAND_WRITTEN = """
transforms = [
  { op = "cast", columns = { amount = "decimal(12,2)" } },
  { op = "filter", expr = "status <> 'test' AND amount > 0" },
  { op = "with_columns", columns = { email = "lower(trim(email))" } },
  { op = "with_columns", columns = { size = "CASE WHEN amount >= 100 THEN 'large' WHEN amount >= 10 THEN 'medium' ELSE 'small' END", month = "date_trunc('month', to_timestamp(placed_at))", year = "year(to_date(placed_at))" } },
  { op = "with_columns", columns = { domain = "regexp_replace(email, '^.*@', '')", code = "concat_ws('-', upper(status), CAST(order_id AS string))" } },
  { op = "rename", columns = { status = "state" } },
  { op = "drop", columns = ["placed_at"] },
  { op = "dedupe", keys = ["order_id"] },
  { op = "join", table = "customers", on = ["customer_id"], how = "left", columns = ["customer_id", "segment"] },
  { op = "with_columns", columns = { segment = "coalesce(segment, 'unknown')" } },
  { op = "select", columns = ["order_id", "customer_id", "email", "domain", "code", "amount", "size", "month", "year", "state", "segment"] },
]
"""

ORDERS_MODULE = """
from pyspark.sql import functions as F

from hakiri.compile import context_table


def transform(df):
    orders = (
        df.withColumn("amount", F.col("amount").cast("decimal(12,2)"))
        .filter((F.col("status") != "test") & (F.col("amount") > 0))
        .withColumn("email", F.lower(F.trim("email")))
        .withColumn(
            "size",
            F.when(F.col("amount") >= 100, "large")
            .when(F.col("amount") >= 10, F.lit("medium"))
            .otherwise("small"),
        )
        .withColumn("month", F.date_trunc("month", F.to_timestamp("placed_at")))
        .withColumn("year", F.year(F.to_date("placed_at")))
        .withColumn("domain", F.regexp_replace("email", r"^.*@", ""))
        .withColumn("code", F.concat_ws("-", F.upper("status"), F.col("order_id").cast("string")))
        .withColumnRenamed("status", "state")
        .drop("placed_at")
        .dropDuplicates(["order_id"])
    )
    customers = context_table("customers").select("customer_id", "segment")
    return orders.join(customers, "customer_id", "left").select(
        "order_id", "customer_id", "email", "domain", "code", "amount", "size", "month",
        "year", "state", F.coalesce("segment", F.lit("unknown")).alias("segment"),
    )
"""

CUSTOMERS_CSV = "customer_id,segment\n1,retail\n2,wholesale\n"
ORDERS_CSV = (
    "order_id,customer_id,email,amount,status,placed_at\n"
    "1,1, Ada@X.io ,10.50,paid,2024-03-05 10:00:00\n"
    "2,2,bob@y.io,250.00,paid,2024-04-01 09:30:00\n"
    "3,3,c@z.io,5.00,test,2024-04-02 00:00:00\n"
    "4,9,D@Q.IO,120.00,paid,2024-05-09 12:00:00\n"
    "4,9,D@Q.IO,120.00,paid,2024-05-09 12:00:00\n"
    "5,1,e@x.io,2.5,open,2024-12-31 23:59:59\n"
)


def _project(root: Path, transforms: str = "") -> Path:
    for relative, text in {
        "hakiri.toml": MANIFEST.format(transforms=transforms),
        "data/customers/c.csv": CUSTOMERS_CSV,
        "data/orders/o.csv": ORDERS_CSV,
    }.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def _cli(root: Path, *args: str) -> Result:
    return CliRunner().invoke(app, [*args, "--project", str(root)], catch_exceptions=False)


def _orders(root: Path) -> list[dict[str, object]]:
    table = DeltaTable(str(root / ".hakiri" / "context" / "orders")).to_pyarrow_table()
    rows = table.to_pylist()
    return sorted(rows, key=lambda r: r["order_id"])  # type: ignore[arg-type,return-value]


def _columns(root: Path) -> list[tuple[str, str]]:
    schema = DeltaTable(str(root / ".hakiri" / "context" / "orders")).schema()
    return [(f.name, str(f.type)) for f in schema.fields]


def test_a_compiled_module_loads_the_rows_its_hand_written_steps_load(
    tmp_path: Path, spark
) -> None:
    hand = _project(tmp_path / "hand", HAND_WRITTEN)
    compiled = _project(tmp_path / "compiled")
    (compiled / "transforms").mkdir()
    (compiled / "transforms" / "orders.py").write_text(textwrap.dedent(ORDERS_MODULE))

    for root in (hand, compiled):  # the context table the join reads
        result = _cli(root, "apply", "customers")
        assert result.exit_code == 0, result.stderr

    result = _cli(compiled, "compile")
    assert result.exit_code == 0, result.stderr
    assert "transforms/orders.py -> pipelines/orders.transforms.json" in result.stdout
    document = json.loads((compiled / "pipelines" / "orders.transforms.json").read_text())
    assert document["pipeline_id"] == "orders" and document["source"] == "transforms/orders.py"
    assert document["source_lang"] == "python" and document["engine"] == "pyspark"
    assert [s["op"] for s in document["plan"]][-3:] == ["join", "with_columns", "select"]

    validated = _cli(compiled, "validate")
    assert validated.exit_code == 0, validated.stderr
    for root in (hand, compiled):
        result = _cli(root, "apply", "orders")
        assert result.exit_code == 0, result.stderr

    rows = _orders(compiled)
    assert rows == _orders(hand)
    assert _columns(compiled) == _columns(hand)
    # test rows filtered, a duplicate dropped, an unknown customer kept by the left join
    assert [(r["order_id"], r["size"], r["segment"], r["code"]) for r in rows] == [
        (1, "medium", "retail", "PAID-1"),
        (2, "large", "wholesale", "PAID-2"),
        (4, "large", "unknown", "PAID-4"),
        (5, "small", "retail", "OPEN-5"),
    ]
    assert rows[0]["email"] == "ada@x.io" and rows[0]["domain"] == "x.io"


def test_an_edited_module_is_stale_for_check_and_plan_until_it_is_compiled_again(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path)
    module = root / "transforms" / "orders.py"
    module.parent.mkdir()
    module.write_text(
        "from pyspark.sql import functions as F\n\n\n"
        "def transform(df):\n"
        '    return df.withColumn("email", F.lower("email")).drop("placed_at")\n'
    )
    missing = _cli(root, "compile", "--check")
    assert missing.exit_code == 1
    assert "transforms/orders.py was never compiled" in missing.stderr

    assert _cli(root, "compile").exit_code == 0
    compiled = root / "pipelines" / "orders.transforms.json"
    written = compiled.read_text()
    current = _cli(root, "compile", "--check")
    assert current.exit_code == 0, current.stderr
    assert "current" in current.stdout

    module.write_text(module.read_text().replace("F.lower", "F.upper"))
    stale = _cli(root, "compile", "--check")
    assert stale.exit_code == 1
    assert "transforms/orders.py changed since it was compiled" in stale.stderr
    assert compiled.read_text() == written  # --check writes nothing
    plan = _cli(root, "plan", "orders")
    assert plan.exit_code == 0, plan.stderr
    assert "compiled transforms are stale" in plan.stdout
    assert "hakiri compile" in plan.stdout

    assert _cli(root, "compile").exit_code == 0
    assert "upper(`email`)" in compiled.read_text()
    assert _cli(root, "compile", "--check").exit_code == 0
    assert "stale" not in _cli(root, "plan", "orders").stdout


def test_a_change_of_the_compiled_steps_shows_in_plan_as_a_change_of_the_transforms(
    tmp_path: Path, spark
) -> None:
    root = _project(tmp_path)
    module = root / "transforms" / "orders.py"
    module.parent.mkdir()
    module.write_text("def transform(df):\n    return df.dropDuplicates(['order_id'])\n")
    assert _cli(root, "compile").exit_code == 0
    applied = _cli(root, "apply", "orders")
    assert applied.exit_code == 0, applied.stderr
    module.write_text("def transform(df):\n    return df.dropDuplicates(['order_id', 'email'])\n")
    assert _cli(root, "compile").exit_code == 0
    plan = _cli(root, "plan", "orders", "--json")
    assert plan.exit_code == 0, plan.stderr
    (pipeline,) = json.loads(plan.stdout)["pipelines"]
    assert pipeline["action"] == "change"
    assert [d["path"] for d in pipeline["diff"]] == ["transforms[0].keys"]


def test_a_udf_and_a_read_inside_transform_are_refused_with_their_line(tmp_path: Path) -> None:
    root = _project(tmp_path)
    module = root / "transforms" / "orders.py"
    module.parent.mkdir()
    module.write_text(
        "from pyspark.sql import functions as F\n"  # 1
        "from pyspark.sql.functions import udf\n"  # 2
        "\n"  # 3
        "\n"  # 4
        "def transform(df):\n"  # 5
        '    df = df.withColumn("email", F.lower("email"))\n'  # 6
        '    shout = udf(lambda s: s.upper(), "string")\n'  # 7
        '    return df.withColumn("email", shout("email"))\n'  # 8
    )
    result = _cli(root, "compile", "transforms/orders.py")
    assert result.exit_code == 1
    assert "UDF" in result.stderr and "(transforms/orders.py:7)" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (root / "pipelines" / "orders.transforms.json").exists()

    module.write_text(
        "def transform(df):\n"
        '    extra = df.sparkSession.read.csv("/etc/passwd")\n'
        "    return df.join(extra)\n"
    )
    result = _cli(root, "compile")
    assert result.exit_code == 1
    assert "spark.read" in result.stderr and "(transforms/orders.py:2)" in result.stderr
    assert not (root / "pipelines" / "orders.transforms.json").exists()


def test_what_the_sandbox_refuses_is_refused_at_compile_with_its_line(
    tmp_path: Path, spark
) -> None:
    root = _project(tmp_path)
    module = root / "transforms" / "orders.py"
    module.parent.mkdir()
    module.write_text(
        "from pyspark.sql import Window\n"  # 1
        "from pyspark.sql import functions as F\n"  # 2
        "\n"  # 3
        "\n"  # 4
        "def transform(df):\n"  # 5
        '    df = df.withColumn("n", F.length("email"))\n'  # 6
        "    return df.withColumns({\n"  # 7
        '        "at": F.expr("current_timestamp()"),\n'  # 8
        "    })\n"
    )
    result = _cli(root, "compile")
    assert result.exit_code == 1
    assert "current_timestamp" in result.stderr and "(transforms/orders.py:7)" in result.stderr
    module.write_text(
        "from pyspark.sql import Window\n"
        "from pyspark.sql import functions as F\n"
        "\n"
        "\n"
        "def transform(df):\n"
        '    w = Window.partitionBy("customer_id").orderBy("order_id")\n'
        '    return df.withColumn("n", F.row_number().over(w))\n'  # 7
    )
    result = _cli(root, "compile")
    assert result.exit_code == 1
    assert "window function" in result.stderr and "(transforms/orders.py:7)" in result.stderr
    assert not (root / "pipelines" / "orders.transforms.json").exists()


def test_validate_names_the_line_of_a_compiled_step_the_sandbox_refuses(tmp_path: Path) -> None:
    root = _project(tmp_path)
    compiled = root / "pipelines" / "orders.transforms.json"
    compiled.parent.mkdir()
    document = {
        "pipeline_id": "orders",
        "engine": "pyspark",
        "engine_version": "4.2.0",
        "source_lang": "python",
        "source": "transforms/orders.py",
        "source_hash": "sha256:" + "0" * 64,
        "plan": [{"op": "with_columns", "columns": {"x": "reflect('java.lang.Runtime', 'exit')"}}],
    }
    compiled.write_text(json.dumps(document, indent=2))
    result = _cli(root, "validate")
    assert result.exit_code == 1
    assert "reflect" in result.stderr and "orders.transforms.json:" in result.stderr

    compiled.write_text("{ not json")
    result = _cli(root, "validate")
    assert result.exit_code == 1
    assert "invalid JSON" in result.stderr and "orders.transforms.json:1" in result.stderr

    document["plan"] = [{"op": "drop", "columns": ["placed_at"]}]
    compiled.write_text(json.dumps(document))
    (root / "hakiri.toml").write_text(
        MANIFEST.format(transforms='transforms = [{ op = "drop", columns = ["email"] }]')
    )
    result = _cli(root, "validate")
    assert result.exit_code == 1
    assert "lists `transforms` and has compiled transforms" in result.stderr
    assert "hakiri.toml:" in result.stderr
