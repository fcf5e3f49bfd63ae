"""JSON Schemas generated from the models: the contract editors, agents and CI check against.

`schemas/pipeline.json` describes one pipeline file, `schemas/view.json` one view file
(`views/*.json`); `schemas/project.json` describes hakiri.toml. They are committed, and a
test fails when they drift.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from hakiri.spec.load import mode_names, required_keys
from hakiri.spec.pipeline import PipelineSpec
from hakiri.spec.project import ProjectFile
from hakiri.spec.sources import BUILT_IN, registered_source_configs
from hakiri.spec.views import ViewSpec

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _add_load_mode_rules(schema: dict[str, Any], modes: tuple[str, ...]) -> None:
    # The modes a manifest may name: the built-in ones and any registered (`spec.modes`).
    schema["$defs"]["LoadMode"]["enum"] = list(modes)
    # pydantic enforces these in LoadSpec; if/then makes editors flag them too.
    load = schema["$defs"]["LoadSpec"]
    load["allOf"] = [
        {
            "if": {"properties": {"mode": {"const": mode}}, "required": ["mode"]},
            "then": {
                "required": [key],
                "x-message": f"load mode '{mode}' requires `{key}`: {why}",
            },
        }
        for mode, (key, why) in required_keys().items()
    ]


def _add_source_connectors(schema: dict[str, Any], connectors: tuple[str, ...]) -> None:
    """The source union by connector name: the built-in ones, then any registered
    (`spec.sources`), each with its config model's schema."""
    defs = schema["$defs"]
    defs.pop("RegisteredSource", None)
    union = (
        schema["properties"]["source"]
        if "source" in schema.get("properties", {})
        else defs["PipelineSpec"]["properties"]["source"]
    )
    mapping = {name: ref["$ref"] for name, ref in zip(BUILT_IN, union["oneOf"], strict=False)}
    configs = registered_source_configs()
    for name in connectors:
        model = configs[name]
        config = model.model_json_schema(by_alias=True, ref_template="#/$defs/{model}")
        defs.update(config.pop("$defs", {}))
        defs[model.__name__] = config
        defs[f"Source_{name}"] = {
            "additionalProperties": False,
            "properties": {
                "connector": {"const": name, "type": "string"},
                "config": {"$ref": f"#/$defs/{model.__name__}"},
            },
            "required": ["connector", "config"],
            "title": f"Source {name}",
            "type": "object",
        }
        mapping[name] = f"#/$defs/Source_{name}"
    title = union.get("title", "Source")
    union.clear()
    union["discriminator"] = {"mapping": dict(sorted(mapping.items())), "propertyName": "connector"}
    union["oneOf"] = [{"$ref": ref} for ref in mapping.values()]
    union["title"] = title


def _registered() -> tuple[str, ...]:
    return tuple(sorted(registered_source_configs()))


def pipeline_schema() -> dict[str, Any]:
    return _pipeline_schema(tuple(mode_names()), _registered())


def project_schema() -> dict[str, Any]:
    return _project_schema(tuple(mode_names()), _registered())


@cache
def _pipeline_schema(modes: tuple[str, ...], connectors: tuple[str, ...]) -> dict[str, Any]:
    schema = PipelineSpec.model_json_schema(by_alias=True)
    _add_load_mode_rules(schema, modes)
    _add_source_connectors(schema, connectors)
    schema["properties"] = {
        "$schema": {
            "type": "string",
            "description": "Path or URL of this JSON Schema (for editors).",
        },
        **schema["properties"],
    }
    return {"$schema": DIALECT, "$id": "https://hakiri.dev/schemas/v1/pipeline.json", **schema}


@cache
def view_schema() -> dict[str, Any]:
    schema = ViewSpec.model_json_schema(by_alias=True)
    schema["properties"] = {
        "$schema": {
            "type": "string",
            "description": "Path or URL of this JSON Schema (for editors).",
        },
        **schema["properties"],
    }
    return {"$schema": DIALECT, "$id": "https://hakiri.dev/schemas/v1/view.json", **schema}


@cache
def _project_schema(modes: tuple[str, ...], connectors: tuple[str, ...]) -> dict[str, Any]:
    schema = ProjectFile.model_json_schema(by_alias=True)
    _add_load_mode_rules(schema, modes)
    _add_source_connectors(schema, connectors)
    return {"$schema": DIALECT, "$id": "https://hakiri.dev/schemas/v1/project.json", **schema}


def compiled_transforms_schema() -> dict[str, Any]:
    """`pipelines/<id>.transforms.json`, as `hakiri compile` writes it."""
    from hakiri.spec.compiled import CompiledTransforms

    schema = CompiledTransforms.model_json_schema(by_alias=True)
    return {"$schema": DIALECT, "$id": "https://hakiri.dev/schemas/v1/transforms.json", **schema}


def render_schemas() -> dict[str, str]:
    """File name -> exact text of the manifest schemas (the plan schema is added by the services layer)."""
    return {
        name: render(schema)
        for name, schema in (
            ("pipeline.json", pipeline_schema()),
            ("project.json", project_schema()),
            ("transforms.json", compiled_transforms_schema()),
            ("view.json", view_schema()),
        )
    }


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
