from hakiri.spec.locate import index_json, index_toml

TOML = '''# comment
[project]
name = "x"

[[pipeline]]
id = "a"
source = { connector = "files", config = { path = "d/*.csv" } }
tables = [
  "orders",
  { name = "customers", target = "c" },
]
[pipeline.load]
mode = "upsert"
note = """multi
line ] [x] mode = 1
"""

[[pipeline]]
id = "b"
load.mode = "append"
[[pipeline.validate.rules]]
type = "not_null"
'''


def test_toml_lines_for_tables_arrays_and_inline_tables() -> None:
    index = index_toml(TOML)
    assert index.line_of(("project", "name")) == 3
    assert index.line_of(("pipeline", 0, "id")) == 6
    assert index.line_of(("pipeline", 0, "source", "config", "path")) == 7
    assert index.line_of(("pipeline", 0, "tables", 1, "target")) == 10
    assert index.line_of(("pipeline", 0, "load", "mode")) == 13
    assert index.line_of(("pipeline", 1, "id")) == 19
    assert index.line_of(("pipeline", 1, "load", "mode")) == 20
    assert index.line_of(("pipeline", 1, "validate", "rules", 0, "type")) == 22


def test_unknown_path_falls_back_to_the_nearest_recorded_parent() -> None:
    index = index_toml(TOML)
    assert index.line_of(("pipeline", 1, "no_such_key")) == 18
    assert index.line_of(("pipeline", 0, "source", "config", "nope")) == 7


def test_json_lines() -> None:
    text = '{\n "id": "a",\n "load": {\n  "mode": "upsert"\n },\n "tables": ["x",\n {"name": "y \\" }"}]\n}'
    index = index_json(text)
    assert index.line_of(("id",)) == 2
    assert index.line_of(("load", "mode")) == 4
    assert index.line_of(("tables", 0)) == 6
    assert index.line_of(("tables", 1, "name")) == 7
