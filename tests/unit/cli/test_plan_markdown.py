"""`plan --format markdown`'s renderer on a hand-built PlanDocument: what a reviewer reads in
the pull request, rendered to HTML as GitHub would (a CommonMark parser with GFM tables)."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

from hakiri.cli.plan_markdown import COLUMNS, LIST_LIMIT, code, plan_markdown, text
from hakiri.planner.model import (
    Action,
    BatchRef,
    CatalogInfo,
    ChangePreview,
    Column,
    DeletePreview,
    EnqueueStep,
    FieldChange,
    LoadStep,
    PendingWork,
    PipelinePlan,
    PlanDocument,
    RetireStep,
    Summary,
    TargetChange,
    TypeWidening,
)


def document(**changes) -> PlanDocument:
    files = [f"data/orders/day-{i:03}.csv" for i in range(LIST_LIMIT + 5)]
    pipelines = [
        PipelinePlan(
            id="orders",
            action=Action.CHANGE,
            source="files",
            destination="postgres",
            mode="upsert",
            diff=[
                FieldChange(path="schedule", kind="changed", before=None, after="every 1h"),
                FieldChange(path="validate.rules[0].pattern", kind="added", after="a|b"),
            ],
            targets=[
                TargetChange(
                    table="orders",
                    target="public.orders",
                    kind="postgres",
                    exists=True,
                    create=False,
                    add_columns=[Column(name="coupon", type="text")],
                    widen_columns=[TypeWidening(name="qty", from_type="integer", to_type="bigint")],
                )
            ],
            pending=[
                PendingWork(
                    table="orders",
                    new_files=files,
                    bytes=3 * 1024 * 1024,
                    new_batches=len(files),
                    changes=ChangePreview(
                        batch="file:orders:1",
                        insert=1200,
                        update=340,
                        delete=12,
                        unchanged=8448,
                        verb="delete",
                    ),
                )
            ],
            steps=[
                EnqueueStep(
                    table="orders",
                    batches=[
                        BatchRef(id=f"file:orders:{i}", table="orders", kind="file", file=f)
                        for i, f in enumerate(files)
                    ],
                ),
                LoadStep(batches=[f"file:orders:{i}" for i in range(len(files))], parallelism=2),
            ],
            warnings=["a truncate locks | the table\nfor the whole load"],
        ),
        PipelinePlan(
            id="customers",
            action=Action.LOAD,
            source="postgres",
            destination="postgres",
            mode="scd2",
            pending=[
                PendingWork(
                    table="customers",
                    new_batches=1,
                    estimated_rows=1200,
                    deletes=DeletePreview(
                        batch="snapshot:customers:1",
                        verb="close",
                        rows=7,
                        of=10,
                        max_fraction=0.2,
                        refused=True,
                    ),
                )
            ],
        ),
        PipelinePlan(
            id="events",
            action=Action.ADD,
            source="files",
            destination="context",
            mode="append",
            errors=["cannot read data/events: *permission* denied <root>"],
        ),
        PipelinePlan(id="legacy", action=Action.RETIRE, steps=[RetireStep()]),
        PipelinePlan(id="quiet", action=Action.NO_OP, source="files", mode="append"),
    ]
    values = {
        "project": "shop",
        "catalog": CatalogInfo(url="postgresql://hakiri:***@db/catalog", initialized=True),
        "summary": Summary(add=1, change=1, load=1, no_op=1, retire=1, errors=1, pending=2),
        "pipelines": pipelines,
        "hints": ["`hakiri plan --count-changes` counts rows to insert/update/delete"],
    }
    return PlanDocument(**{**values, **changes})


def html(markdown: str) -> str:
    return MarkdownIt("commonmark").enable("table").render(markdown)


def rows(markdown: str) -> dict[str, list[str]]:
    """The table's body rows by pipeline id, each as its cells' inner HTML."""
    body = html(markdown).split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    found = {}
    for row in re.findall(r"<tr>(.*?)</tr>", body, re.S):
        cells = re.findall(r"<td>(.*?)</td>", row, re.S)
        found[re.sub(r"</?code>", "", cells[0])] = cells
    return found


def test_the_summary_line_counts_actions_pipelines_and_the_data_to_load() -> None:
    markdown = plan_markdown(document())
    assert markdown.splitlines()[2] == (
        "**Plan:** 1 to add, 1 to change, 1 to retire · 5 pipelines · 1 unchanged"
        " · data to load: 25 files, 3.0 MiB, ~1,200 rows · **1 error**"
    )


def test_one_row_per_pipeline_with_every_column_even_when_cells_hold_pipes_and_newlines() -> None:
    markdown = plan_markdown(document())
    headers = re.findall(r"<th>(.*?)</th>", html(markdown))
    assert headers == list(COLUMNS)
    found = rows(markdown)
    assert list(found) == ["orders", "customers", "events", "legacy", "quiet"]
    assert all(len(cells) == len(COLUMNS) for cells in found.values())
    assert [cells[1] for cells in found.values()] == [
        "<strong>change</strong>",
        "load",
        "add",
        "<strong>retire</strong>",
        "no-op",
    ]


def test_the_cells_say_what_changes_in_the_spec_the_schema_and_the_data() -> None:
    orders = rows(plan_markdown(document()))["orders"]
    assert orders[2] == "<code>upsert</code>"
    assert orders[3] == "2: <code>schedule</code>, <code>validate.rules[0].pattern</code>"
    assert orders[4] == "<code>public.orders</code>: 1 column added, 1 column widened"
    assert orders[5] == "<code>orders</code>: 25 new files, 3.0 MiB"
    assert (
        orders[6] == "<code>orders</code>: +1,200 insert, ~340 update, -12 delete, 8,448 unchanged"
    )
    assert orders[7:] == ["1", "—"]


def test_counted_deletes_over_the_guard_are_marked_refused() -> None:
    customers = rows(plan_markdown(document()))["customers"]
    assert customers[5] == "<code>customers</code>: 1 new batch, ~1,200 rows"
    assert customers[6] == "<code>customers</code>: close 7 of 10 (70%) <strong>refused</strong>"


def test_warnings_and_errors_are_listed_unfolded_and_escaped() -> None:
    markdown = plan_markdown(document())
    rendered = html(markdown)
    assert rows(markdown)["events"][8] == "<strong>1</strong>"
    errors = rendered.split("<strong>Errors</strong>", 1)[1].split("</ul>", 1)[0]
    assert (
        "<li><code>events</code>: cannot read data/events: *permission* denied &lt;root&gt;</li>"
        in errors
    )
    warnings = rendered.split("<strong>Warnings</strong>", 1)[1].split("</ul>", 1)[0]
    assert "a truncate locks | the table<br>for the whole load" in warnings
    assert "<blockquote>\n<p>hint: `hakiri plan --count-changes` counts" in rendered


def test_details_fold_the_text_plan_and_the_steps_with_long_lists_cut() -> None:
    markdown = plan_markdown(document())
    orders = markdown.split("<details><summary>orders — change: files → postgres (upsert)", 1)[1]
    orders = orders.split("</details>", 1)[0]
    assert '~ schedule: null -> "every 1h"' in orders
    assert "+ column public.orders.coupon text" in orders
    assert "~ widen public.orders.qty integer -> bigint" in orders
    assert f"    + data/orders/day-{LIST_LIMIT - 1:03}.csv" in orders
    assert f"day-{LIST_LIMIT:03}.csv" not in orders
    assert "… and 5 more new file(s)" in orders
    assert "1. enqueue 25 batches of orders:" in orders and "… and 5 more batch(es)" in orders
    assert "2. load 25 batches, 2 at a time" in orders
    assert "<details><summary>quiet — no-op: files (append)" in markdown
    assert "<details><summary>legacy — retire</summary>" in markdown
    assert "Nothing to change, nothing to load." in markdown


def test_the_same_plan_gives_the_same_bytes() -> None:
    once = plan_markdown(document())
    again = plan_markdown(PlanDocument.model_validate_json(document().model_dump_json()))
    assert once == again and once.endswith("\n") and not once.endswith("\n\n")


def test_an_empty_catalog_and_a_plan_without_data_say_so() -> None:
    markdown = plan_markdown(
        document(
            catalog=CatalogInfo(url="sqlite:///x", initialized=False),
            summary=Summary(),
            pipelines=[],
            hints=[],
        )
    )
    assert (
        "**Plan:** 0 to add, 0 to change, 0 to retire · 0 pipelines · no data to load" in markdown
    )
    assert "The catalog does not exist yet: every pipeline is new." in markdown
    assert "<table>" not in html(markdown)


def test_text_and_code_spans_hold_any_characters() -> None:
    assert text("a|b\nc *d* <e> `f` _g_ [h](i) ~~j~~ &amp;") == (
        r"a\|b<br>c \*d\* \<e\> \`f\` \_g\_ \[h\](i) \~\~j\~\~ \&amp;"
    )
    assert html(text("*d* <e> &amp;")) == "<p>*d* &lt;e&gt; &amp;amp;</p>\n"
    assert code("a`b") == "``a`b``"
    assert code("`a") == "`` `a ``"
    assert code("x|y", cell=True) == r"`x\|y`"
    assert "<td><code>x|y</code></td>" in html(f"| a |\n|---|\n| {code('x|y', cell=True)} |\n")


def test_views_are_a_table_of_their_changes_with_each_replace_s_diff_folded() -> None:
    from hakiri.planner.model import ViewAction, ViewPlan

    views = [
        ViewPlan(name="a|b", action=ViewAction.CREATE, reads=["orders"], sql="SELECT 1", version=1),
        ViewPlan(
            name="spend",
            action=ViewAction.REPLACE,
            reads=["customer_orders"],
            version=2,
            sql_diff=["--- spend (version 1, applied)", "+++ spend (manifests)", "+WHERE x > 0"],
            warnings=["view spend reads column t.x, which table t (pipeline t) does not have"],
        ),
        ViewPlan(name="old", action=ViewAction.DROP, reads=["spend"], version=4),
        ViewPlan(name="same", action=ViewAction.NO_OP, reads=["orders"], version=1),
    ]
    summary = Summary(view_create=1, view_replace=1, view_drop=1, view_no_op=1)
    rendered = plan_markdown(
        PlanDocument(
            project="shop",
            catalog=CatalogInfo(url="sqlite:///x", initialized=True),
            summary=summary,
            pipelines=[],
            views=views,
        )
    )
    assert "views: 1 to create, 1 to replace, 1 to drop" in rendered.splitlines()[2]
    html = MarkdownIt("commonmark").enable("table").render(rendered)
    rows = re.findall(r"<tr>\s*<td>(.*?)</td>\s*<td>(.*?)</td>\s*<td>(.*?)</td>", html, re.S)
    assert rows == [
        ("<code>a|b</code>", "create", "1"),
        ("<code>spend</code>", "replace", "1 → 2"),
        ("<code>old</code>", "<strong>drop</strong>", "4"),
    ]
    assert "<strong>Views</strong> (1 unchanged)" in html
    assert '<pre><code class="language-diff">--- spend (version 1, applied)' in html
    assert "+WHERE x &gt; 0" in html
    assert "<code>view spend</code>: view spend reads column t.x" in html
