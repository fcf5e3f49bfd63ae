"""Which catalog a project uses: HAKIRI_CATALOG_URL, else [catalog] url, else .hakiri/state.sqlite."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

CATALOG_ENV = "HAKIRI_CATALOG_URL"
DEFAULT_SQLITE = Path(".hakiri") / "state.sqlite"


def catalog_url(project_root: Path, configured: str | None, env: Mapping[str, str]) -> str:
    """A SQLAlchemy URL. postgresql:// URLs are routed to psycopg 3 (postgresql+psycopg://)."""
    url = (
        env.get(CATALOG_ENV)
        or configured
        or f"sqlite:///{(project_root / DEFAULT_SQLITE).resolve()}"
    )
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url
