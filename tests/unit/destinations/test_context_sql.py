"""The SQL hakiri writes for Delta on Spark (it runs the same in-process and over Spark
Connect): ADD COLUMNS DDL from a Delta schema, and MERGE INTO clause by clause."""

from __future__ import annotations

from pathlib import Path

from hakiri.destinations.context.evolve import _field_ddl
from hakiri.destinations.context.merge import DeltaMerge, delta_table_sql


def test_add_columns_ddl_quotes_every_name_and_nests_types() -> None:
    fields = [
        {"name": "a.b", "type": "long", "nullable": True, "metadata": {}},
        {
            "name": "s",
            "type": {
                "type": "struct",
                "fields": [
                    {"name": "x`y", "type": "decimal(10,2)", "nullable": False, "metadata": {}},
                    {
                        "name": "m",
                        "type": {
                            "type": "map",
                            "keyType": "string",
                            "valueType": {
                                "type": "array",
                                "elementType": "timestamp_ntz",
                                "containsNull": True,
                            },
                            "valueContainsNull": True,
                        },
                        "nullable": True,
                        "metadata": {"comment": "it's"},
                    },
                ],
            },
            "nullable": True,
            "metadata": {},
        },
    ]

    ddl = ", ".join(_field_ddl(field, " ") for field in fields)

    assert ddl == (
        "`a.b` long, `s` STRUCT<`x``y`: decimal(10,2) NOT NULL, "
        "`m`: MAP<string, ARRAY<timestamp_ntz>> COMMENT 'it\\'s'>"
    )


def test_a_merge_is_built_clause_by_clause_in_order(tmp_path: Path) -> None:
    merge = (
        DeltaMerge(None, tmp_path / "t", None, "t.`id` = s.`id`")  # type: ignore[arg-type]
        .when_matched_delete(condition="s.op = 'delete'")
        .when_matched_update({"`v`": "s.`v`"})
        .when_not_matched_insert({"`id`": "s.`id`", "`v`": "s.`v`"})
        .when_not_matched_by_source_delete(condition="t.`day` >= '2026-01-01'")
    )

    assert merge.clauses == [
        "WHEN MATCHED AND (s.op = 'delete') THEN DELETE",
        "WHEN MATCHED THEN UPDATE SET `v` = s.`v`",
        "WHEN NOT MATCHED THEN INSERT (`id`, `v`) VALUES (s.`id`, s.`v`)",
        "WHEN NOT MATCHED BY SOURCE AND (t.`day` >= '2026-01-01') THEN DELETE",
    ]
    assert delta_table_sql(tmp_path / "t") == f"delta.`file://{tmp_path.resolve()}/t`"
