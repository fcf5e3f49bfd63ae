"""Inspecting sources is on `plan`'s hot path: importing the modules must pull in no heavy library."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("pyspark", "pyarrow", "deltalake", "psycopg")


def test_source_inspectors_import_no_heavy_module() -> None:
    code = (
        "import sys\n"
        "import hakiri.sources.files.inspect, hakiri.sources.files.reader, hakiri.sources.postgres.inspect\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert done.stdout.strip() == "[]"


def test_the_rest_sources_http_layer_imports_no_heavy_module() -> None:
    # It runs inside engine tasks and in `plan`'s inspections alike: pure Python and httpx.
    code = (
        "import sys\n"
        "import hakiri.sources.rest.client, hakiri.sources.rest.paginate\n"
        "import hakiri.sources.rest.select, hakiri.sources.rest.budget\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert done.stdout.strip() == "[]"
