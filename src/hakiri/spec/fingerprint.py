"""A pipeline's normalized form and its hash: what `plan` compares and the catalog stores.

Normalizing through the model makes cosmetic differences (comments, TOML vs JSON,
key order, a key written out at its default) compare equal, so moving a pipeline
between formats is a no-op for `plan`. Placeholders stay unexpanded.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hakiri.spec.pipeline import PipelineSpec


def normalized_spec(spec: PipelineSpec) -> dict[str, Any]:
    return spec.model_dump(mode="json", by_alias=True)


def spec_hash(spec: PipelineSpec) -> str:
    canonical = json.dumps(
        normalized_spec(spec), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()
