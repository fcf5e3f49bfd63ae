"""The control-plane catalog: pipelines, runs, cursors, batches, leases, schema log, alerts.

SQLAlchemy Core over SQLite (default, one file in the project) or PostgreSQL
(several replicas). `schema.py` declares the tables, `migrations/` builds them
(Alembic, driven by `migrate.py`), `store.py` is the API (`Catalog`), with batch
claims and pipeline leases in `leases.py` and every dialect difference in `db.py`.
"""
