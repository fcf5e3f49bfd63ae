"""Files an engine cannot be handed as they are load the same on every engine: a file in
latin-1 (Sail takes every file as UTF-8: it reads a UTF-8 copy) and a file whose name holds
glob characters and a ':' (Sail has no escape for a glob, Hadoop takes 'a:' for a scheme:
the engine reads a plain-named link)."""

from __future__ import annotations

from pathlib import Path

from deltalake import DeltaTable

from tests.support.project import Project


def test_a_latin1_file_and_a_glob_named_one_load_alike_on_every_engine(
    tmp_path: Path, spark
) -> None:
    project = Project(tmp_path, "", "")
    project.write(
        "hakiri.toml",
        """
        [project]
        name = "neutral-files"

        [[pipeline]]
        id = "p"
        source = { connector = "files", config = { path = "data/*.csv", encoding = "latin-1" } }
        tables = ["t"]
        load = { mode = "append" }
        """,
    )
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.csv").write_bytes("id,ville\n1,Besançon\n".encode("latin-1"))
    (tmp_path / "data" / "b[1] 12:00.csv").write_bytes("id,ville\n2,Köln\n".encode("latin-1"))

    result = project.cli("apply")

    assert result.exit_code == 0, result.output
    table = DeltaTable(str(tmp_path / ".hakiri" / "context" / "t")).to_pyarrow_table()
    assert sorted(zip(table["id"].to_pylist(), table["ville"].to_pylist(), strict=True)) == [
        (1, "Besançon"),
        (2, "Köln"),
    ]
