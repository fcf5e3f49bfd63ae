"""`connector = "rest"`: any JSON HTTP API, described table by table.

    [pipeline.source.config]
    base_url = "https://shop.example.com/api/"
    auth = { type = "bearer", secret = "SHOP_TOKEN" }
    paginator = { type = "next_token", token = "next_cursor", param = "cursor" }

    [pipeline.source.config.endpoints.orders]
    path = "orders"
    params = { status = "any", updated_since = "{cursor}" }
    records = "$.orders"
    primary_key = ["id"]
    columns = { id = "bigint", total = "decimal(12,2)", email = { path = "customer.email" } }

    [pipeline.source.config.endpoints.order_lines]
    parent = "orders"
    path = "orders/{id}/lines"
    parent_columns = { order_id = "id" }

    [pipeline.source.config.endpoints.refunds]
    path = "stores/{store}/refunds"
    for_each = [{ store = "eu" }, { store = "us" }]

Each name of the pipeline's `tables` is an endpoint here. The models say what is legal;
`sources.rest.source` reads it.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Self

from pydantic import Discriminator, Field, Tag, model_validator

from hakiri.spec.base import Name, SpecModel
from hakiri.spec.transforms import SparkType

__all__ = [
    "CURSOR_END",
    "CURSOR_START",
    "RestAuth",
    "RestColumn",
    "RestConfig",
    "RestEndpoint",
    "RestPaginator",
    "template_fields",
]

# The placeholders of an endpoint's params that the cursor range fills in.
CURSOR_START = "{cursor}"
CURSOR_END = "{cursor_end}"
_FIELD = re.compile(r"\{([^{}]+)\}")

SecretName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
JsonPathText = Annotated[str, Field(min_length=1, description="A JSON path: `data.items`, `$`.")]


def template_fields(text: str) -> list[str]:
    """The `{field}` names of a path template, in order."""
    return _FIELD.findall(text)


# ---------------------------------------------------------------- auth


class BearerAuth(SpecModel):
    type: Literal["bearer"]
    secret: SecretName = Field(description="The variable holding the token (never printed).")


class ApiKeyAuth(SpecModel):
    type: Literal["api_key"]
    secret: SecretName = Field(description="The variable holding the key (never printed).")
    name: str = Field("X-API-Key", min_length=1, description="The header or query parameter.")
    location: Literal["header", "query"] = Field("header", alias="in")


class BasicAuth(SpecModel):
    type: Literal["basic"]
    username: str = Field(min_length=1)
    secret: SecretName = Field(description="The variable holding the password (never printed).")


RestAuth = Annotated[BearerAuth | ApiKeyAuth | BasicAuth, Field(discriminator="type")]

# ---------------------------------------------------------------- paginators


class LinkHeaderPages(SpecModel):
    """The Link header's rel="next" URL (GitHub, GitLab)."""

    type: Literal["link_header"]


class NextUrlPages(SpecModel):
    """A next-page URL in the body."""

    type: Literal["next_url"]
    path: JsonPathText = Field("next", description="Where the body holds the next page's URL.")


class NextTokenPages(SpecModel):
    """An opaque token in the body, sent back as a query parameter."""

    type: Literal["next_token"]
    token: JsonPathText = Field("next_cursor", description="Where the body holds the token.")
    param: str = Field("cursor", min_length=1, description="The parameter that sends it back.")


class OffsetPages(SpecModel):
    type: Literal["offset"]
    limit: int = Field(100, ge=1)
    offset_param: str = Field("offset", min_length=1)
    limit_param: str = Field("limit", min_length=1)
    total: JsonPathText | None = Field(None, description="Where the body says how many records.")


class PageNumberPages(SpecModel):
    type: Literal["page_number"]
    param: str = Field("page", min_length=1)
    first: int = Field(1, ge=0)
    size: int | None = Field(None, ge=1, description="Records per page, sent as `size_param`.")
    size_param: str = Field("per_page", min_length=1)
    total_pages: JsonPathText | None = None


class SinglePage(SpecModel):
    """The endpoint answers everything in one response."""

    type: Literal["single_page"]


RestPaginator = Annotated[
    LinkHeaderPages | NextUrlPages | NextTokenPages | OffsetPages | PageNumberPages | SinglePage,
    Field(discriminator="type"),
]

# ---------------------------------------------------------------- endpoints


class RestColumn(SpecModel):
    path: JsonPathText | None = Field(None, description="Where in a record; the column's name.")
    type: SparkType = Field("string", description="Spark SQL type.")


def _column_form(value: Any) -> str:
    return "type" if isinstance(value, str) else "column"


# A declared column: its type alone, or where it is and its type. One form is checked, so a
# misspelt type inside {path, type} is reported once, at `type`.
DeclaredColumn = Annotated[
    Annotated[SparkType, Tag("type")] | Annotated[RestColumn, Tag("column")],
    Discriminator(_column_form),
]


class RestEndpoint(SpecModel):
    """One table: where its records are and what they become."""

    path: str = Field(
        min_length=1,
        description="Under base_url. A child endpoint names its parent's fields: "
        "'issues/{number}/comments'.",
    )
    params: dict[str, str] = Field(
        default_factory=dict,
        description="Query parameters. '{cursor}' and '{cursor_end}' are the range of the "
        "table's incremental cursor being read (omitted while there is none).",
    )
    records: JsonPathText = Field("$", description="Where a response holds the records.")
    primary_key: list[Name] = Field(
        default_factory=list,
        description="Columns that identify a record; one copy of a record repeated across "
        "pages is loaded.",
    )
    paginator: RestPaginator | None = Field(None, description="Overrides config.paginator.")
    columns: dict[Name, DeclaredColumn] | None = Field(
        None,
        description="Declared columns (name -> Spark SQL type, or {path, type}); inferred "
        "from the first page when absent.",
    )
    parent: Name | None = Field(
        None, description="The endpoint whose records this one is fetched for, once per record."
    )
    parent_columns: dict[Name, Name] = Field(
        default_factory=dict, description="Columns copied from the parent record: name -> field."
    )
    pages_per_batch: int = Field(
        50,
        ge=1,
        description="Tables without a cursor: pages committed together; a stopped backfill "
        "resumes after the last committed batch.",
    )
    for_each: list[dict[Name, str]] = Field(
        default_factory=list,
        description="Read the endpoint once per entry, side by side: an entry's values fill "
        "the path's fields ('repos/{repo}/issues' with [{repo = 'a/b'}, {repo = 'c/d'}]) "
        "and become text columns of its rows.",
    )

    @model_validator(mode="after")
    def _for_each_fields(self) -> Self:
        if not self.for_each:
            return self
        names = list(self.for_each[0])
        if self.parent is not None:
            raise ValueError(
                "an endpoint is read per parent record or per for_each entry, not both"
            )
        if any(set(entry) != set(names) for entry in self.for_each):
            raise ValueError(f"every for_each entry names the same fields ({', '.join(names)})")
        missing = [f for f in template_fields(self.path) if f not in names]
        if missing:
            raise ValueError(f"path '{self.path}' names {', '.join(missing)}, not in for_each")
        clash = [n for n in names if n in (self.columns or {})]
        if clash:
            raise ValueError(f"for_each field {', '.join(clash)} is also a declared column")
        return self

    @model_validator(mode="after")
    def _parent_fields(self) -> Self:
        fields = [] if self.for_each else template_fields(self.path)
        if self.parent is None and (fields or self.parent_columns):
            raise ValueError(
                f"path '{self.path}' or parent_columns names a parent's fields, and the "
                "endpoint has no `parent`"
            )
        if self.parent is not None and not template_fields(self.path):
            raise ValueError(
                f"child endpoint path '{self.path}' names none of its parent's fields "
                "(e.g. 'issues/{number}/comments')"
            )
        return self

    @property
    def for_each_fields(self) -> list[str]:
        """The fields each for_each entry gives, in the first entry's order: the columns its
        rows get after the declared ones."""
        return list(self.for_each[0]) if self.for_each else []

    def paths(self) -> list[tuple[str, dict[str, str]]]:
        """(path, values) of each read of the endpoint: its path, or one per for_each entry
        with the path's fields filled in as written and the entry's values (a child's path
        is filled per parent record, by the reader)."""
        if not self.for_each:
            return [(self.path, {})]
        fields = self.for_each_fields
        return [
            (_FIELD.sub(lambda m, e=entry: e[m.group(1)], self.path), {f: entry[f] for f in fields})
            for entry in self.for_each
        ]

    @property
    def cursor_params(self) -> bool:
        return any(CURSOR_START in value or CURSOR_END in value for value in self.params.values())


class RestConfig(SpecModel):
    base_url: Annotated[str, Field(pattern=r"^https?://")] = Field(
        description="The API's root; endpoint paths are under it."
    )
    auth: RestAuth | None = None
    headers: dict[str, str] = Field(default_factory=dict, description="Sent with every request.")
    paginator: RestPaginator = Field(
        default_factory=lambda: SinglePage(type="single_page"),
        description="How every endpoint pages, unless it says otherwise.",
    )
    timeout: float = Field(30.0, gt=0, description="Seconds to wait for a response.")
    endpoints: Annotated[dict[Name, RestEndpoint], Field(min_length=1)]

    @model_validator(mode="after")
    def _parents_exist(self) -> Self:
        for name, endpoint in self.endpoints.items():
            seen = [name]
            parent = endpoint.parent
            while parent is not None:
                if parent not in self.endpoints:
                    raise ValueError(f"endpoint `{name}` names parent `{parent}`, not an endpoint")
                if parent in seen:
                    raise ValueError(f"endpoints {' -> '.join([*seen, parent])} are a cycle")
                seen.append(parent)
                parent = self.endpoints[parent].parent
        return self

    def paginator_of(self, endpoint: RestEndpoint) -> RestPaginator:
        return endpoint.paginator or self.paginator
