"""REST API sources: the declarative `rest` connector, and `github` and `shopify`, presets of it.

    kind.py         the connectors as the rest of hakiri sees them (REST, GITHUB, SHOPIFY)
    source.py       the rest source: observe, plan ranges and walks, read (RestTableSource)
    github.py       GitHub's issues, pull requests and comments as a rest configuration
    shopify.py      a shop's orders, line items, customers and products as one
    columns.py      declared and inferred columns of an endpoint's records
    engine_read.py  an endpoint's walks read inside engine tasks (read_walks)
    ranges.py       cursor ranges as an API's time parameters
    client.py       one GET with credentials, retries and waits (RestClient)
    paginate.py     paginators, and the walk over an endpoint's pages (walk_pages)
    select.py       JSON paths to records, next links and tokens (JsonPath)
    budget.py       a request rate shared by every process of a run (RateBudget)

The HTTP layer (client, paginate, select, budget) is pure Python, no Spark: the engine
runs it inside its tasks.
"""
