from hakiri.spec.load import LoadSpec
from hakiri.spec.pipeline import PipelineSpec
from hakiri.spec.rules import check_load_against_columns, lint_pipeline


def _pipeline(**load: object) -> PipelineSpec:
    return PipelineSpec.model_validate(
        {
            "id": "p",
            "source": {"connector": "files", "config": {"path": "x.csv"}},
            "tables": ["t"],
            "load": load,
        }
    )


def test_truncate_on_one_table_pipeline_recommends_blue_green() -> None:
    [finding] = lint_pipeline(_pipeline(mode="truncate"))
    assert finding.path == ("load", "mode")
    assert "blue_green" in (finding.hint or "")
    assert lint_pipeline(_pipeline(mode="blue_green")) == []


def test_upsert_keys_must_exist_in_the_target() -> None:
    [finding] = check_load_against_columns(
        LoadSpec(mode="upsert", upsert_key=["id", "region"]), ["id", "name"]
    )
    assert "region" in finding.message and "id, name" in (finding.hint or "")


def test_upsert_key_covering_every_column_is_an_error() -> None:
    [finding] = check_load_against_columns(
        LoadSpec(mode="upsert", upsert_key=["id", "name"]), ["id", "name"]
    )
    assert "nothing to update" in finding.message


def test_watermark_column_must_exist_in_the_target() -> None:
    load = LoadSpec(mode="incremental_watermark", watermark_column="updated_at")
    [finding] = check_load_against_columns(load, ["id", "created_at"])
    assert finding.path == ("load", "watermark_column")
    assert check_load_against_columns(load, ["id", "updated_at"]) == []


def test_valid_upsert_has_no_findings() -> None:
    assert (
        check_load_against_columns(LoadSpec(mode="upsert", upsert_key=["id"]), ["id", "name"]) == []
    )
