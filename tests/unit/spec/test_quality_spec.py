"""Data-quality declarations that the models refuse when the manifest loads."""

from __future__ import annotations

import pytest


def test_two_rules_with_one_id_are_refused_at_parse_time() -> None:
    from pydantic import ValidationError

    from hakiri.spec.quality import ValidateSpec

    rule = {"type": "regex", "column": "v", "pattern": "a"}
    ValidateSpec.model_validate({"rules": [rule, {**rule, "id": "second"}]})
    with pytest.raises(ValidationError, match="two row rules have the id 'regex:v'"):
        ValidateSpec.model_validate({"rules": [rule, {**rule, "pattern": "b"}]})
