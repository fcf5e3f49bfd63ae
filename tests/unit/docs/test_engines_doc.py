"""docs/engines.md's capability table is generated from `hakiri.spark.engines`: it must equal
a fresh rendering, and every capability must say what each engine does."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from hakiri.spark.engines import CAPABILITIES, ENGINES, markdown_table

REPO = Path(__file__).resolve().parents[3]


def _generator() -> ModuleType:
    path = REPO / "scripts" / "gen_engines.py"
    spec = importlib.util.spec_from_file_location("gen_engines", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = _generator()


def test_the_committed_table_matches_the_code() -> None:
    page = (REPO / "docs" / "engines.md").read_text(encoding="utf-8")
    assert page == gen.render(page), gen.STALE
    assert markdown_table() in page


def test_every_capability_is_described_for_every_engine() -> None:
    for capability in CAPABILITIES:
        assert set(capability.engines) == set(ENGINES), capability.name
        for engine, support in capability.engines.items():
            # A path of hakiri's own or a refusal must say which, and what to do instead.
            assert support.status == "works" or len(support.how) > 20, (capability.name, engine)
            assert f"`{capability.name}`" in markdown_table()
