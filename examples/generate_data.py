"""Regenerate the example project's sample data in data/, deterministically (fixed seed).

    python examples/generate_data.py

orders: two daily CSV exports (a few negative amounts, which the range rule
quarantines); customers: one CSV (a few malformed emails, which the regex rule
warns about); events: JSON Lines (a few ids that are not UUIDs, which are skipped).
"""

from __future__ import annotations

import csv
import json
import random
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "data"
SEED = 20261125
CUSTOMERS = 500
ORDERS_PER_DAY = 1000
EVENTS = 3000
START = datetime(2026, 11, 1, tzinfo=UTC)


def _write_csv(path: Path, header: list[str], rows: list[list[object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def main() -> None:
    rng = random.Random(SEED)
    countries = ["DE", "FR", "JP", "US", "BR", "IN", "NG", "SE"]
    customers = []
    for cid in range(1, CUSTOMERS + 1):
        email = (
            f"customer{cid}@example.com" if rng.random() > 0.02 else f"customer{cid}.example.com"
        )
        signed_up = START - timedelta(days=rng.randint(1, 900), seconds=rng.randint(0, 86399))
        customers.append(
            [cid, f"Customer {cid}", email, rng.choice(countries), signed_up.isoformat()]
        )
    _write_csv(
        ROOT / "customers" / "customers.csv",
        ["customer_id", "name", "email", "country", "signed_up_at"],
        customers,
    )

    order_id = 100000
    for day in range(2):
        rows = []
        for _ in range(ORDERS_PER_DAY):
            order_id += 1
            amount = (
                round(rng.uniform(5, 400), 2)
                if rng.random() > 0.01
                else -round(rng.uniform(1, 50), 2)
            )
            at = START + timedelta(days=day, seconds=rng.randint(0, 86399))
            rows.append(
                [
                    order_id,
                    rng.randint(1, CUSTOMERS),
                    amount,
                    rng.choice(["paid", "shipped", "refunded"]),
                    at.isoformat(),
                ]
            )
        _write_csv(
            ROOT / "orders" / f"orders-2026-11-{day + 1:02d}.csv",
            ["order_id", "customer_id", "amount", "status", "ordered_at"],
            rows,
        )

    events_path = ROOT / "events" / "events-2026-11-01.jsonl"
    events_path.parent.mkdir(parents=True, exist_ok=True)
    with events_path.open("w", encoding="utf-8") as handle:
        for n in range(EVENTS):
            event_id = (
                str(uuid.UUID(int=rng.getrandbits(128), version=4))
                if rng.random() > 0.01
                else f"evt-{n}"
            )
            event = {
                "event_id": event_id,
                "customer_id": rng.randint(1, CUSTOMERS),
                "kind": rng.choice(["view", "click", "add_to_cart", "checkout"]),
                "at": (START + timedelta(seconds=rng.randint(0, 2 * 86400))).isoformat(),
            }
            handle.write(json.dumps(event) + "\n")


if __name__ == "__main__":
    main()
