#!/usr/bin/env python3
"""Write docs/reference.md, the manifest reference, from the committed JSON Schemas.

    python scripts/gen_reference.py           # (re)write docs/reference.md
    python scripts/gen_reference.py --check   # exit 1 when docs/reference.md is out of date

The schemas (schemas/project.json, schemas/pipeline.json) are generated from the
pydantic models by `hakiri schema export`; this script turns them into one table
per object. Sections follow the schemas: the two roots first, then every object
in the order a reader meets it (depth first, in property order); objects no
property refers to come last, sorted by name. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "schemas"
OUTPUT = ROOT / "docs" / "reference.md"
STALE = "docs/reference.md is out of date: run python scripts/gen_reference.py"

Schema = dict[str, Any]

# (anchor, heading, schema file, what it describes) for the two documents a project has.
ROOTS = (
    ("project-file", "hakiri.toml", "project.json", "the project file, `hakiri.toml`"),
    (
        "pipeline",
        "Pipeline",
        "pipeline.json",
        "one pipeline: a `[[pipeline]]` block in hakiri.toml, or a whole "
        "`pipelines/<id>.toml` or `pipelines/<id>.json` file (`$schema` is for JSON files only)",
    ),
)
# JSON Schema keyword -> how a constraint reads in the description column.
LIMITS = (
    ("minimum", ">= {}"),
    ("exclusiveMinimum", "> {}"),
    ("maximum", "<= {}"),
    ("exclusiveMaximum", "< {}"),
    ("minLength", "at least {} character(s)"),  # 1 reads "not empty", see _plural
    ("maxLength", "at most {} character(s)"),
    ("minItems", "at least {} item(s)"),
    ("minProperties", "at least {} entr(ies)"),
    ("pattern", "matches `{}`"),
)


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _refs(node: Any) -> list[str]:
    """Every $def named under `node`, in document order (discriminator mappings repeat oneOf: skipped)."""
    if isinstance(node, list):
        return [name for item in node for name in _refs(item)]
    if not isinstance(node, dict):
        return []
    found = [_ref_name(node["$ref"])] if "$ref" in node else []
    for key, value in node.items():
        if key != "discriminator":
            found += _refs(value)
    return found


def _prose(text: str) -> str:
    """Text from the models as one line; outside `code`, no HTML tag or emphasis by accident."""
    parts = " ".join(text.split()).split("`")
    for i in range(0, len(parts), 2):  # even parts are outside code spans
        for char in "*_<>":
            parts[i] = parts[i].replace(char, "\\" + char)
    return "`".join(parts)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _literal(value: Any) -> str:
    return f"`{json.dumps(value, ensure_ascii=False)}`"


def _plural(template: str, value: Any) -> str:
    if template.endswith("character(s)") and template.startswith("at least") and value == 1:
        return "not empty"
    text = template.format(value)
    if value == 1:
        return text.replace("(s)", "").replace("(ies)", "y")
    return text.replace("(s)", "s").replace("(ies)", "ies")


class Reference:
    def __init__(self, project: Schema, pipeline: Schema) -> None:
        documents = {"project.json": project, "pipeline.json": pipeline}
        self.defs: dict[str, Schema] = {}
        for document in documents.values():
            self.defs.update(document.get("$defs", {}))
        # A $def that is one of the roots (PipelineSpec inside project.json) links to that root.
        self.anchor = {name: name.lower() for name in self.defs}
        self.heading = {name.lower(): name for name in self.defs}
        self.sections: list[tuple[str, str, Schema]] = []
        for anchor, heading, file, _ in ROOTS:
            schema = documents[file]
            self.anchor[schema.get("title", heading)] = self.anchor[heading] = anchor
            self.heading[anchor] = heading
            self.sections.append((anchor, heading, schema))
        self.tags = self._discriminator_tags()
        self.used_in: dict[str, dict[str, list[str]]] = {}  # anchor -> parent link -> keys
        self._order()

    # ------------------------------------------------------------ structure

    def _is_object(self, name: str) -> bool:
        return "properties" in self.defs.get(name, {})

    def _discriminator_tags(self) -> dict[str, str]:
        """$def name -> the `key = "value"` that selects it in a discriminated union."""
        tags: dict[str, str] = {}

        def visit(node: Any) -> None:
            if isinstance(node, list):
                for item in node:
                    visit(item)
            elif isinstance(node, dict):
                disc = node.get("discriminator")
                if isinstance(disc, dict):
                    for value, ref in disc.get("mapping", {}).items():
                        tags[_ref_name(ref)] = f'{disc["propertyName"]} = "{value}"'
                for value in node.values():
                    visit(value)

        visit([section[2] for section in self.sections])
        return tags

    def _order(self) -> None:
        """Depth first from the roots, in property order; then objects nothing refers to."""
        seen = {anchor for anchor, _, _ in self.sections}
        ordered: list[tuple[str, str, Schema]] = []

        def visit(heading: str, schema: Schema) -> None:
            for key, prop in schema.get("properties", {}).items():
                for name in _refs(prop):
                    if not self._is_object(name):
                        continue
                    parents = self.used_in.setdefault(self.anchor[name], {})
                    keys = parents.setdefault(self.link(heading), [])
                    if key not in keys:
                        keys.append(key)
                    if self.anchor[name] not in seen:
                        seen.add(self.anchor[name])
                        ordered.append((self.anchor[name], name, self.defs[name]))
                        visit(name, self.defs[name])

        for anchor, heading, schema in self.sections:
            ordered.append((anchor, heading, schema))
            visit(heading, schema)
        rest = sorted(n for n in self.defs if self._is_object(n) and self.anchor[n] not in seen)
        ordered += [(self.anchor[n], n, self.defs[n]) for n in rest]
        self.sections = ordered

    # ------------------------------------------------------------ one value

    def link(self, name: str) -> str:
        anchor = self.anchor[name]
        return f"[{self.heading[anchor]}](#{anchor})"

    def type_of(self, schema: Schema) -> str:
        if "$ref" in schema:
            name = _ref_name(schema["$ref"])
            # Enums and other plain values are written out where they are used.
            return self.link(name) if self._is_object(name) else self.type_of(self.defs[name])
        if "const" in schema:
            return _literal(schema["const"])
        if "enum" in schema:
            return "one of " + " | ".join(_literal(v) for v in schema["enum"])
        branches = [
            b for b in schema.get("oneOf", schema.get("anyOf", [])) if b != {"type": "null"}
        ]
        if branches and "discriminator" in schema:
            return "one of " + ", ".join(self._variant(b) for b in branches)
        if branches:
            return " or ".join(self.type_of(b) for b in branches)
        kind = schema.get("type")
        if kind == "array":
            items = self.type_of(schema.get("items", {}))
            return f"list of ({items})" if " or " in items else f"list of {items}"
        if kind == "object":
            values = schema.get("additionalProperties")
            return f"object (any key -> {self.type_of(values)})" if values else "object"
        if isinstance(kind, list):
            return " or ".join(kind)
        return kind or "any value"

    def _variant(self, schema: Schema) -> str:
        shown = self.type_of(schema)
        tag = self.tags.get(_ref_name(schema.get("$ref", "")))
        return f"{shown} (`{tag}`)" if tag else shown

    def description(self, schema: Schema) -> str:
        branches = [b for b in schema.get("anyOf", []) if b != {"type": "null"}]
        text = schema.get("description") or next(
            (b["description"] for b in branches if "description" in b), ""
        )
        text = text or schema.get("items", {}).get("description", "")
        if not text and "$ref" in schema:  # `load = LoadSpec`: say what the object is
            text = self.defs.get(_ref_name(schema["$ref"]), {}).get("description", "")
            text = text.split("\n\n")[0]
        text = _prose(text)
        limits = self._limits(schema)
        if len(branches) == 1:
            limits += self._limits(branches[0])
        else:
            for branch in branches:
                if found := self._limits(branch):
                    limits.append(f"as {self.type_of(branch)}: {', '.join(found)}")
        if limits:
            if text and not text.endswith((".", ")")):
                text += "."
            text = f"{text} *Constraints: {'; '.join(limits)}.*".strip()
        return text

    @staticmethod
    def _limits(schema: Schema) -> list[str]:
        return [_plural(t, schema[k]) for k, t in LIMITS if k in schema]

    # ------------------------------------------------------------ the document

    def section(self, anchor: str, heading: str, schema: Schema) -> list[str]:
        lines = [f'<a id="{anchor}"></a>', "", f"## {heading}", ""]
        about = next((r[3] for r in ROOTS if r[0] == anchor), None)
        text = f"The keys of {about}." if about else schema.get("description", "")
        if text:
            lines += [text if about else _prose(text), ""]
        if tag := self.tags.get(heading):
            lines += [f"Selected by `{tag}`.", ""]
        if parents := self.used_in.get(anchor):
            where = [
                f"{link} " + ", ".join(f"`{k}`" for k in keys) for link, keys in parents.items()
            ]
            lines += ["Used in: " + "; ".join(where) + ".", ""]
        lines += [
            "| key | type | required | default | description |",
            "|---|---|---|---|---|",
        ]
        required = set(schema.get("required", []))
        for key, prop in schema.get("properties", {}).items():
            default = _literal(prop["default"]) if prop.get("default") is not None else ""
            row = (
                f"`{key}`",
                self.type_of(prop),
                "yes" if key in required else "no",
                default,
                self.description(prop),
            )
            lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
        rules = [
            r["then"]["x-message"]
            for r in schema.get("allOf", [])
            if "x-message" in r.get("then", {})
        ]
        if rules:
            lines += ["", "Rules checked when the manifest is read:", ""]
            lines += [f"- {rule}" for rule in rules]
        return [*lines, ""]

    def render(self) -> str:
        lines = [
            "<!-- Generated by scripts/gen_reference.py from schemas/project.json and "
            "schemas/pipeline.json. Do not edit by hand: change the models in src/hakiri/spec/, "
            "run `hakiri schema export`, then `python scripts/gen_reference.py`. -->",
            "",
            "# Manifest reference",
            "",
            "Every key hakiri reads from `hakiri.toml` and from pipeline files, generated "
            "from the JSON Schemas in `schemas/` (themselves generated from the models, so "
            "this page cannot drift from what `hakiri validate` accepts). Keys are "
            "snake_case and an unknown key is an error. *required* says whether the key "
            "must be written; an empty *default* means the key is unset unless you give "
            'it. A type written *one of A (`key = "value"`), B (…)* is a choice: the '
            "value of that key says which object it is. "
            "What the keys do, with examples: [manifest.md](manifest.md).",
            "",
            "## Contents",
            "",
        ]
        lines += [f"- [{heading}](#{anchor})" for anchor, heading, _ in self.sections]
        lines.append("")
        for anchor, heading, schema in self.sections:
            lines += self.section(anchor, heading, schema)
        return "\n".join(lines).rstrip("\n") + "\n"


def load_schemas(directory: Path = SCHEMAS) -> tuple[Schema, Schema]:
    read = lambda name: json.loads((directory / name).read_text(encoding="utf-8"))  # noqa: E731
    return read("project.json"), read("pipeline.json")


def render(project: Schema, pipeline: Schema) -> str:
    """The text of docs/reference.md for these two schemas."""
    return Reference(project, pipeline).render()


def main(argv: list[str] | None = None, output: Path = OUTPUT) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is out of date")
    args = parser.parse_args(argv)
    text = render(*load_schemas())
    current = output.read_text(encoding="utf-8") if output.exists() else None
    if args.check:
        if current != text:
            print(STALE, file=sys.stderr)
            return 1
        return 0
    if current != text:
        output.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
