"""The source connectors a manifest may name: the built-in ones, whose config models are
declared in `spec.pipeline`, `spec.rest` and `spec.shopify`, then any registered at run time
(a connector added from outside hakiri registers its config model here through
`sources.kinds.register`).

A registered connector's `source = { connector = "…", config = {…} }` is validated with its
model, like a built-in one's, and `spec.schema_export` adds it to the JSON Schemas.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationInfo, field_validator

from hakiri.spec.base import SpecModel

__all__ = [
    "BUILT_IN",
    "REGISTERED",
    "RegisteredSource",
    "connector_tag",
    "register_source_config",
    "registered_source_configs",
    "unregister_source_config",
]

BUILT_IN = ("files", "postgres", "github", "rest", "shopify")
# The tag of the union branch every registered connector validates through.
REGISTERED = "registered"

_CONFIGS: dict[str, type[SpecModel]] = {}


def register_source_config(name: str, model: type[SpecModel]) -> None:
    if name in BUILT_IN:
        raise ValueError(f"connector {name!r} is built in")
    _CONFIGS[name] = model


def unregister_source_config(name: str) -> None:
    _CONFIGS.pop(name, None)


def registered_source_configs() -> dict[str, type[SpecModel]]:
    """name -> config model of each connector registered beyond the built-in ones."""
    return dict(_CONFIGS)


def connector_tag(value: Any) -> str | None:
    """Which branch of the source union validates `value`: a built-in connector's own, the
    registered one, or the unknown name itself (refused, naming the connectors)."""
    connector = (
        value.get("connector") if isinstance(value, dict) else getattr(value, "connector", None)
    )
    if isinstance(connector, str) and connector in _CONFIGS:
        return REGISTERED
    return connector if isinstance(connector, str) else None


class RegisteredSource(SpecModel):
    """`source = { connector = "<registered>", config = {…} }`."""

    connector: str
    config: Any

    @field_validator("config", mode="before")
    @classmethod
    def _with_its_model(cls, value: Any, info: ValidationInfo) -> Any:
        model = _CONFIGS.get(str(info.data.get("connector")))
        if model is None or isinstance(value, model):
            return value
        return model.model_validate(value)
