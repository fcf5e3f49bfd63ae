"""The one base every manifest model shares, and small reusable field types."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


# Unknown keys are errors everywhere: a typo must never be silently ignored.
class SpecModel(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


PIPELINE_ID_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
DURATION_PATTERN = r"^[1-9][0-9]*(s|m|h|d)$"
_DURATION_RE = re.compile(DURATION_PATTERN)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}

PipelineId = Annotated[
    str,
    Field(
        pattern=PIPELINE_ID_PATTERN,
        description="Stable pipeline id: lower case letters, digits, '-' and '_', at most 63 characters.",
    ),
]
Duration = Annotated[
    str,
    Field(pattern=DURATION_PATTERN, description="A duration such as '30s', '15m', '6h' or '30d'."),
]
# A column, table or schema name as it appears in a source or destination. Any
# characters are allowed (they are always quoted); length is checked at plan time
# against the destination's limit rather than here.
Name = Annotated[str, Field(min_length=1)]


def duration_seconds(text: str) -> int:
    """'15m' -> 900. Raises ValueError on anything that is not <n>s|m|h|d."""
    match = _DURATION_RE.match(text)
    if not match:
        raise ValueError(f"not a duration: {text!r} (expected e.g. '30s', '15m', '6h', '30d')")
    return int(text[:-1]) * _UNIT_SECONDS[text[-1]]


def split_qualified(name: str) -> tuple[str | None, str]:
    """'schema.table' -> ('schema', 'table'); 'table' -> (None, 'table'). Splits on the first dot."""
    schema, dot, rest = name.partition(".")
    return (schema, rest) if dot else (None, name)
