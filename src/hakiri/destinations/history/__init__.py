"""The modes that remove or rewrite rows a snapshot no longer has (scd2, upsert's delete
detection, replace_window), written once as sqlglot expressions and rendered for each
destination's SQL: `scd2`, `deletes`, `window`, the key checks in `keys`, the shared pieces
and the one place dialects differ in `render`, temporary views on Spark in `views`.

Each destination keeps only its write: PostgreSQL runs the rendered SELECTs then DELETE,
INSERT or UPDATE in its commit transaction (`postgres/history.py`); the context store runs
them on Spark over temporary views and writes one Delta MERGE (`context/history.py`).
"""
