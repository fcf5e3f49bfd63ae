"""The parts of the fault-injection campaign (bench/fault_campaign.py runs it).

    steps.py        the step kinds, their weights and quotas, and the seeded step lists
    environment.py  what every run shares: PostgreSQL, the proxy in front of it, Spark
    harness.py      one run's project, its source changes, applies under faults, its target
    runs.py         a step list run against the model, its first difference, and shrinking
    reports.py      a difference's report, repro files, the campaign's summary

Imported by the entry point after it has put the repository root and `src` on sys.path
(for `tests.support` and `hakiri`).
"""
