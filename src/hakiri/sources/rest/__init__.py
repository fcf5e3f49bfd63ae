"""REST API sources: the HTTP layer.

    client.py    one GET with credentials, retries and waits (RestClient)
    paginate.py  paginators, and the walk over an endpoint's pages (walk_pages)
    select.py    JSON paths to records, next links and tokens (JsonPath)
    budget.py    a request rate shared by every process of a run (RateBudget)

Pure Python: no Spark here. The engine runs these inside its tasks.
"""
