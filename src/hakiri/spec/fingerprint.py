"""A pipeline's normalized form and its hash: what `plan` compares and the catalog stores.

Normalizing through the model makes cosmetic differences (comments, TOML vs JSON,
key order, a key written out at its default) compare equal, so moving a pipeline
between formats is a no-op for `plan`. Placeholders stay unexpanded.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import ValidationError

from hakiri.spec.pipeline import PipelineSpec


def normalized_spec(spec: PipelineSpec) -> dict[str, Any]:
    return spec.model_dump(mode="json", by_alias=True)


def spec_hash(spec: PipelineSpec) -> str:
    return normalized_hash(normalized_spec(spec))


def normalized_hash(normalized: dict[str, Any]) -> str:
    canonical = json.dumps(normalized, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def read_today(applied: dict[str, Any]) -> dict[str, Any]:
    """A spec an earlier apply stored, normalized by today's models: a key hakiri added since
    then reads as its default on both sides, so an upgrade alone shows no change. A stored
    spec today's models refuse is compared as it was stored."""
    try:
        return normalized_spec(PipelineSpec.model_validate(applied))
    except ValidationError:
        return applied
