"""Compiled transforms: `pipelines/<id>.transforms.json`, written by `hakiri compile`.

`hakiri compile transforms/<id>.py` runs the module's `transform(df)` once, on the author's
machine, over an empty frame of the pipeline's input columns, and writes the declarative
steps that DataFrame code amounts to. The loader makes those steps the pipeline's
`transforms`: the runtime never imports the module. `source` and `source_hash` are
provenance, so `hakiri compile --check` and `hakiri plan` can tell a compiled file that no
longer matches its module.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

from pydantic import Field

from hakiri.spec.base import PipelineId, SpecModel
from hakiri.spec.transforms import TransformStep

__all__ = [
    "COMPILED_SUFFIX",
    "TRANSFORMS_DIR",
    "CompiledTransforms",
    "compiled_path",
    "is_compiled_file",
    "source_hash",
]

COMPILED_SUFFIX = ".transforms.json"
TRANSFORMS_DIR = "transforms"
FORMAT_VERSION = 1


class CompiledTransforms(SpecModel):
    """One compiled transforms file. Only `plan` runs; the rest says where it came from."""

    schema_: str | None = Field(None, alias="$schema")
    format_version: Literal[1] = FORMAT_VERSION
    pipeline_id: PipelineId
    engine: str = Field(
        description="The DataFrame API the module was compiled with ('pyspark', over Spark Connect)."
    )
    engine_version: str = Field(description="That API's version (pyspark's).")
    source_lang: Literal["python"] = "python"
    source: str = Field(description="The module, relative to the project directory.")
    source_hash: str = Field(
        pattern=r"^sha256:[0-9a-f]{64}$", description="sha256 of the module's bytes."
    )
    plan: list[TransformStep] = Field(
        description="The pipeline's transforms: the same steps a manifest's `transforms` holds, "
        "each expression checked by the transform sandbox when it loads."
    )


def compiled_path(pipelines_dir: Path, pipeline_id: str) -> Path:
    return pipelines_dir / f"{pipeline_id}{COMPILED_SUFFIX}"


def is_compiled_file(path: Path) -> bool:
    return path.name.endswith(COMPILED_SUFFIX)


def source_hash(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()
