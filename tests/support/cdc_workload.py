"""A seeded random stream of transactions on three PostgreSQL tables, for cdc_mirror's tests
and benches.

    workload = Workload(pg_url, "shop", seed=7)
    workload.create()            # customers, orders, order_lines, with seed rows
    workload.run(200)            # 200 transactions, in this thread
    workload.start(rate=500)     # or in a thread of its own, ~500 row changes a second
    ...
    done = workload.stop()       # Counts(transactions=…, changes=…, kinds={…})

    workload.create(lanes=3)     # seed rows for three lanes (the counts are per lane)
    workload.start(rate=12_000, lanes=3)   # three threads, ~4,000 changes a second each

Every table has a bigint primary key `id`, an int `version` that every update of a row
increments, and `changed_at`, the clock_timestamp() of the row's last insert or update (the
bench reads the mirror's lag from it). `customers.profile` is STORAGE EXTERNAL and some
profiles are over 8 kB: an update that leaves such a profile alone leaves it out of the WAL
(pgoutput sends it as "unchanged").

Each transaction is one of `KINDS`, drawn by weight: inserts (an order with its lines in
one transaction), updates of small columns, of the large profile, of the primary key (an
order's key moves with its lines' order_id, in one transaction), a row updated twice in
one transaction, deletes (an order with its lines), and a line deleted and inserted again
under the same key. A customer whose profile is out of line never has its key changed:
the WAL leaves the profile out of such an update, and cdc_mirror refuses it (the row it
belongs to is the one the update deletes).

The choices come from `random.Random(seed)` and a model of the keys kept here, so a seed
makes the same statements in the same order; only the timing (and so `changed_at`)
differs. Commits are synchronous (synchronous_commit=on), whatever the server's default:
logical decoding reads flushed WAL only, and a test that has just committed expects the
next apply to see it.

A transaction goes to the server as one query: its statements, their parameters bound
here, joined by semicolons, which PostgreSQL runs as one transaction (the simple query
protocol; the connection is in autocommit): one round trip, not BEGIN, one per statement
and COMMIT (psycopg's pipeline mode was slower). Still, one connection commits one
transaction at a time, waiting on each: round-trip bound (a few thousand transactions a
second on two cores, its Python and its server backend each under one core busy).
For more, `start(lanes=N)` runs N lanes, each a thread with a connection of its own,
paced to rate/N. A lane is a workload of its own on the same three tables: its own
`random.Random` (lane 0's is `Random(seed)`, lane k's `Random(f"{seed}/lane {k}")`, so a
seed still makes the same statements per lane; only their interleaving differs), its own
model of the keys and its own range of ids (lane k's start at k * LANE_IDS + 1), so lanes
never touch, reference or lock each other's rows. Each lane needs seed rows of its own:
`create(lanes=N)` seeds N lanes (lane 0 exactly as `create()` does, then each other lane
the same numbers of rows in its range) in the one COPY per table, so a snapshot taken
before `start` holds them all; `start` refuses more lanes than were created. `stop()`
joins every lane and re-raises the first failure; `Counts` (and `snapshot()`) sum the
lanes, and `lanes[k].counts` holds lane k's. `run(n)` is lane 0 alone, in this thread.
The lanes share one Python process and its GIL: they overlap the round trips' waits, not
the Python, so on two cores the lanes, their backends and the rest share the CPU.
"""

from __future__ import annotations

import functools
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql

__all__ = ["KINDS", "LANE_IDS", "TABLES", "Counts", "Workload"]

TABLES = {
    "customers": "id bigint PRIMARY KEY, name text NOT NULL, email text, profile text, "
    "version int NOT NULL, changed_at timestamptz NOT NULL DEFAULT clock_timestamp()",
    "orders": "id bigint PRIMARY KEY, customer_id bigint NOT NULL, status text NOT NULL, "
    "total numeric(12,2) NOT NULL, version int NOT NULL, "
    "changed_at timestamptz NOT NULL DEFAULT clock_timestamp()",
    "order_lines": "id bigint PRIMARY KEY, order_id bigint NOT NULL, sku text NOT NULL, "
    "qty int NOT NULL, price numeric(10,2) NOT NULL, version int NOT NULL, "
    "changed_at timestamptz NOT NULL DEFAULT clock_timestamp()",
}

_STATUSES = ("new", "paid", "packed", "shipped", "returned")
LANE_IDS = 10**12  # lane k's ids: k * LANE_IDS + 1 onwards


@dataclass
class Counts:
    """What the workload committed: transactions, row changes, transactions per kind."""

    transactions: int = 0
    changes: int = 0
    kinds: Counter[str] = field(default_factory=Counter)


class _Keys:
    """The live keys of a table: O(1) add, remove and a seeded random pick."""

    def __init__(self) -> None:
        self.items: list[int] = []
        self.at: dict[int, int] = {}

    def add(self, key: int) -> None:
        self.at[key] = len(self.items)
        self.items.append(key)

    def remove(self, key: int) -> None:
        index = self.at.pop(key)
        last = self.items.pop()
        if last != key:
            self.items[index], self.at[last] = last, index

    def pick(self, rng: random.Random) -> int:
        return self.items[rng.randrange(len(self.items))]

    def __len__(self) -> int:
        return len(self.items)

    def __contains__(self, key: object) -> bool:
        return key in self.at


class Workload:
    def __init__(self, url: str, schema: str, seed: int = 0) -> None:
        self.url, self.schema, self.seed = url, schema, seed
        self._lock = threading.Lock()  # the lanes' counts
        self.lanes = [_Lane(self, 0)]
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._failures: list[BaseException] = []

    # ------------------------------------------------------------------ setting up

    def create(
        self, customers: int = 200, orders: int = 400, lines_per_order: int = 2, lanes: int = 1
    ) -> None:
        """The three tables in `schema` (which must exist), with seed rows for `lanes` lanes,
        the numbers given for each: a tenth of the customers have a large profile."""
        assert lanes >= 1 and len(self.lanes) == 1, "one create, before any lane is added"
        self.lanes += [_Lane(self, k) for k in range(1, lanes)]
        with self._connect() as conn:
            for table, columns in TABLES.items():
                conn.execute(
                    sql.SQL("CREATE TABLE {} ({})").format(self._table(table), sql.SQL(columns))
                )
            conn.execute(
                sql.SQL("ALTER TABLE {} ALTER COLUMN profile SET STORAGE EXTERNAL").format(
                    self._table("customers")
                )
            )
            rows: dict[str, list[tuple[Any, ...]]] = {t: [] for t in TABLES}
            for lane in self.lanes:
                for _ in range(customers):
                    rows["customers"].append(lane._customer(big=lane.rng.random() < 0.1))
                for _ in range(orders):
                    order = lane._order()
                    rows["orders"].append(order)
                    for _ in range(lines_per_order):
                        rows["order_lines"].append(lane._line(order[0]))
            for table, values in rows.items():
                names = [n for n in _names(table) if n != "changed_at"]
                statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
                    self._table(table), sql.SQL(", ").join(map(sql.Identifier, names))
                )
                with conn.cursor().copy(statement) as copy:
                    for row in values:
                        copy.write_row(row)

    # ------------------------------------------------------------------ running

    def run(self, transactions: int, rate: float | None = None) -> Counts:
        """Commit `transactions` transactions now (lane 0's), paced to `rate` row changes a
        second (None: as fast as they go)."""
        self.lanes[0]._loop(rate, transactions)
        return self.snapshot()

    def start(self, rate: float | None = None, lanes: int = 1) -> Workload:
        """Commit transactions in `lanes` threads, a connection each, paced to `rate` row
        changes a second in all (rate/lanes each), until `stop`."""
        assert not self._threads, "already started"
        if not 1 <= lanes <= len(self.lanes):
            raise ValueError(
                f"start(lanes={lanes}): {len(self.lanes)} lane(s) have seed rows; "
                f"create(lanes={lanes}) makes them"
            )
        self._stop.clear()
        self._failures = []

        def loop(lane: _Lane) -> None:
            try:
                lane._loop(rate / lanes if rate else None, None)
            except BaseException as exc:
                with self._lock:
                    self._failures.append(exc)

        for lane in self.lanes[:lanes]:
            name = f"cdc-workload-{lane.number}"
            thread = threading.Thread(target=loop, args=(lane,), name=name, daemon=True)
            self._threads.append(thread)
            thread.start()
        return self

    def stop(self) -> Counts:
        """Stop the lanes after their current transactions; re-raise the first failure."""
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._threads = []
        if self._failures:
            raise self._failures[0]
        return self.snapshot()

    def snapshot(self) -> Counts:
        """What the lanes committed so far, summed."""
        with self._lock:
            total = Counts()
            for lane in self.lanes:
                total.transactions += lane.counts.transactions
                total.changes += lane.counts.changes
                total.kinds.update(lane.counts.kinds)
            return total

    def _table(self, table: str) -> sql.Identifier:
        return sql.Identifier(self.schema, table)

    def _connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self.url, autocommit=True, options="-c synchronous_commit=on")


class _Lane:
    """One connection's share of the workload: its own choices, model of the keys and range
    of ids (see the module's docstring)."""

    def __init__(self, workload: Workload, number: int) -> None:
        self.workload, self.number = workload, number
        seed = workload.seed
        self.rng = random.Random(seed if number == 0 else f"{seed}/lane {number}")
        self.customers, self.orders, self.lines = _Keys(), _Keys(), _Keys()
        self.big: set[int] = set()  # customers whose profile is stored out of line
        self.lines_of: dict[int, list[int]] = {}  # order id -> its line ids
        self.order_of: dict[int, int] = {}  # line id -> its order id
        self.ids = range(number * LANE_IDS + 1, (number + 1) * LANE_IDS + 1)
        self.next_id = dict.fromkeys(TABLES, self.ids.start)
        self.counts = Counts()  # under the workload's lock

    def _loop(self, rate: float | None, limit: int | None) -> None:
        kinds = list(KINDS)
        weights = [KINDS[k][1] for k in kinds]
        started, changes, done = time.monotonic(), 0, 0
        stop, lock = self.workload._stop, self.workload._lock
        with self.workload._connect() as conn:
            cursor = psycopg.ClientCursor(conn)  # binds parameters here, for _Transaction
            while (limit is None or done < limit) and not stop.is_set():
                kind = self.rng.choices(kinds, weights)[0]
                if not self.customers:
                    kind = "new_customer"
                elif not self.orders or not self.lines:
                    kind = "new_order"
                tx = _Transaction(cursor)
                changed = KINDS[kind][0](self, tx)
                tx.commit(conn)
                done += 1
                changes += changed
                with lock:
                    self.counts.transactions += 1
                    self.counts.changes += changed
                    self.counts.kinds[kind] += 1
                if rate:
                    ahead = started + changes / rate - time.monotonic()
                    if ahead > 0:
                        stop.wait(ahead)

    # ------------------------------------------------------------------ the kinds of transaction

    def _new_order(self, tx: _Transaction) -> int:
        order = self._order()
        changed = self._insert(tx, "orders", order)
        for _ in range(self.rng.randint(1, 4)):
            changed += self._insert(tx, "order_lines", self._line(order[0]))
        return changed

    def _new_customer(self, tx: _Transaction) -> int:
        return self._insert(tx, "customers", self._customer(big=self.rng.random() < 0.3))

    def _order_status(self, tx: _Transaction) -> int:
        return self._update(tx, "orders", self.orders.pick(self.rng), status=self._status())

    def _order_twice(self, tx: _Transaction) -> int:
        order = self.orders.pick(self.rng)
        return self._update(tx, "orders", order, status=self._status()) + self._update(
            tx, "orders", order, total=self._money(5_000)
        )

    def _customer_email(self, tx: _Transaction) -> int:
        customer = self.customers.pick(self.rng)  # a large profile stays out of the WAL
        return self._update(tx, "customers", customer, email=self._email(customer))

    def _customer_profile(self, tx: _Transaction) -> int:
        customer = self.customers.pick(self.rng)
        big = self.rng.random() < 0.5
        (self.big.add if big else self.big.discard)(customer)
        return self._update(tx, "customers", customer, profile=self._profile(customer, big))

    def _line_qty(self, tx: _Transaction) -> int:
        line = self.lines.pick(self.rng)
        return self._update(tx, "order_lines", line, qty=self.rng.randint(1, 20))

    def _order_rekey(self, tx: _Transaction) -> int:
        old, new = self.orders.pick(self.rng), self._new_id("orders")
        changed = self._update(tx, "orders", old, id=new)
        self.orders.remove(old)
        self.orders.add(new)
        lines = self.lines_of.pop(old)
        self.lines_of[new] = lines
        for line in lines:
            self.order_of[line] = new
            changed += self._update(tx, "order_lines", line, order_id=new)
        return changed

    def _line_rekey(self, tx: _Transaction) -> int:
        old, new = self.lines.pick(self.rng), self._new_id("order_lines")
        changed = self._update(tx, "order_lines", old, id=new)
        order = self.order_of.pop(old)
        self.lines.remove(old)
        self.lines.add(new)
        self.order_of[new] = order
        siblings = self.lines_of[order]
        siblings[siblings.index(old)] = new
        return changed

    def _customer_rekey(self, tx: _Transaction) -> int:
        old = self.customers.pick(self.rng)
        if old in self.big:  # see the module's docstring
            return self._customer_email(tx)
        new = self._new_id("customers")
        self.customers.remove(old)
        self.customers.add(new)
        return self._update(tx, "customers", old, id=new)

    def _cancel_order(self, tx: _Transaction) -> int:
        order = self.orders.pick(self.rng)
        changed = self._delete(tx, "orders", order)
        for line in self.lines_of.pop(order):
            changed += self._delete(tx, "order_lines", line)
        return changed

    def _remove_line(self, tx: _Transaction) -> int:
        line = self.lines.pick(self.rng)
        self.lines_of[self.order_of[line]].remove(line)
        return self._delete(tx, "order_lines", line)

    def _remove_customer(self, tx: _Transaction) -> int:
        customer = self.customers.pick(self.rng)
        self.big.discard(customer)
        return self._delete(tx, "customers", customer)

    def _line_again(self, tx: _Transaction) -> int:
        """A line deleted and inserted again under its key, in one transaction."""
        line = self.lines.pick(self.rng)
        order = self.order_of[line]
        changed = self._delete(tx, "order_lines", line)
        self.lines_of[order].remove(line)
        return changed + self._insert(tx, "order_lines", self._line(order, line))

    # ------------------------------------------------------------------ rows and statements

    def _customer(self, big: bool) -> tuple[Any, ...]:
        key = self._new_id("customers")
        self.customers.add(key)
        if big:
            self.big.add(key)
        return (key, f"customer {key}", self._email(key), self._profile(key, big), 1)

    def _order(self) -> tuple[Any, ...]:
        key = self._new_id("orders")
        self.orders.add(key)
        self.lines_of[key] = []
        customer = self.customers.pick(self.rng) if self.customers else 0
        return (key, customer, self._status(), self._money(5_000), 1)

    def _line(self, order: int, key: int | None = None) -> tuple[Any, ...]:
        key = key or self._new_id("order_lines")
        self.lines.add(key)
        self.lines_of[order].append(key)
        self.order_of[key] = order
        sku = f"SKU-{self.rng.randint(1, 999):03d}"
        return (key, order, sku, self.rng.randint(1, 20), self._money(200), 1)

    def _new_id(self, table: str) -> int:
        key = self.next_id[table]
        self.next_id[table] = key + 1
        return key

    def _status(self) -> str:
        return self.rng.choice(_STATUSES)

    def _money(self, most: int) -> str:
        return f"{self.rng.randint(100, most * 100) / 100:.2f}"

    def _email(self, customer: int) -> str:
        return f"c{customer}.{self.rng.randint(1, 9999)}@example.com"

    def _profile(self, customer: int, big: bool) -> str | None:
        if not big:
            return self.rng.choice((None, f"likes {self._status()} things"))
        token = f"{customer}:{self.rng.getrandbits(64):016x} "
        return (token * 2_000)[: self.rng.randint(9_000, 30_000)]  # > 8 kB: out of line

    # Each statement changes one row (the model knows which keys exist), so each counts as
    # one change. Statements are composed once per shape: this loop is the bench's source.
    # They are bound here and sent with the rest of their transaction (see `_Transaction`).

    def _insert(self, tx: _Transaction, table: str, row: tuple[Any, ...]) -> int:
        tx.execute(self._statement("insert", table), row)
        return 1

    def _update(self, tx: _Transaction, table: str, key: int, **values: Any) -> int:
        tx.execute(self._statement("update", table, *values), [*values.values(), key])
        return 1

    def _delete(self, tx: _Transaction, table: str, key: int) -> int:
        self._keys(table).remove(key)
        if table == "order_lines":
            del self.order_of[key]
        tx.execute(self._statement("delete", table), [key])
        return 1

    def _statement(self, verb: str, table: str, *columns: str) -> bytes:
        return _statement(self.workload.schema, verb, table, *columns)

    def _keys(self, table: str) -> _Keys:
        return {"customers": self.customers, "orders": self.orders, "order_lines": self.lines}[
            table
        ]


class _Transaction:
    """A transaction's statements, bound here and sent together as one simple-protocol
    query: PostgreSQL runs a query of several statements as one transaction (the connection
    is in autocommit), so a transaction costs one round trip, not BEGIN, one per statement
    and COMMIT."""

    def __init__(self, cursor: psycopg.ClientCursor[Any]) -> None:
        self.cursor = cursor
        self.statements: list[str] = []

    def execute(self, statement: bytes, params: Sequence[Any]) -> None:
        self.statements.append(self.cursor.mogrify(statement, params))

    def commit(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute("; ".join(self.statements).encode(), prepare=False)


@functools.cache  # a few statements per table and schema, shared by the lanes
def _statement(schema: str, verb: str, table: str, *columns: str) -> bytes:
    target = sql.Identifier(schema, table)
    if verb == "insert":
        names = [n for n in _names(table) if n != "changed_at"]
        statement = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
            target,
            sql.SQL(", ").join(map(sql.Identifier, names)),
            sql.SQL(", ").join(sql.Placeholder() * len(names)),
        )
    elif verb == "update":
        statement = sql.SQL(
            "UPDATE {} SET {}, version = version + 1, changed_at = clock_timestamp() WHERE id = %s"
        ).format(
            target,
            sql.SQL(", ").join(sql.SQL("{} = %s").format(sql.Identifier(c)) for c in columns),
        )
    else:
        statement = sql.SQL("DELETE FROM {} WHERE id = %s").format(target)
    return statement.as_bytes(None)


def _names(table: str) -> list[str]:
    return [c.split()[0] for c in TABLES[table].split(", ")]


# name: (the transaction, its weight)
KINDS: dict[str, tuple[Callable[[_Lane, _Transaction], int], int]] = {
    "new_order": (_Lane._new_order, 18),
    "new_customer": (_Lane._new_customer, 5),
    "order_status": (_Lane._order_status, 16),
    "order_twice": (_Lane._order_twice, 4),
    "customer_email": (_Lane._customer_email, 12),
    "customer_profile": (_Lane._customer_profile, 4),
    "line_qty": (_Lane._line_qty, 12),
    "order_rekey": (_Lane._order_rekey, 4),
    "line_rekey": (_Lane._line_rekey, 3),
    "customer_rekey": (_Lane._customer_rekey, 2),
    "cancel_order": (_Lane._cancel_order, 9),
    "remove_line": (_Lane._remove_line, 4),
    "remove_customer": (_Lane._remove_customer, 2),
    "line_again": (_Lane._line_again, 3),
}


def drop_mirror(pg_url: str, slot: str, publication: str, *schemas: str) -> None:
    """After a cdc test: its slot (ending first a session still reading it: a killed
    apply's engine task can outlive the apply for a few seconds), its publication and the
    `schemas` it made. A slot keeps the server's WAL for as long as it exists."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for _ in range(50):
            row = conn.execute(
                "SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s", (slot,)
            ).fetchone()
            if row is None:
                break
            if row[0] is not None:
                conn.execute("SELECT pg_terminate_backend(%s)", (row[0],))
                time.sleep(0.2)
                continue
            try:
                conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
                break
            except psycopg.errors.ObjectInUse:
                time.sleep(0.2)
        conn.execute(sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(publication)))
        for schema in schemas:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
