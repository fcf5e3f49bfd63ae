"""The two places a diff sums rows: a PostgreSQL relation (in its server) and an engine
DataFrame (in the engine). Each reads only sums, keys with row hashes of small segments,
and the values of a few sampled keys; `Moved` counts what crossed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from psycopg import sql

from hakiri.errors import HakiriError
from hakiri.quality.diff.bisect import Key, Moved, Sums
from hakiri.quality.diff.canon import (
    KEY_HASH,
    ROW_HASH,
    key_hash,
    key_text_name,
    pg_hashed,
    pg_texts,
    pg_where,
    spark_hashes,
    spark_texts,
)

if TYPE_CHECKING:
    import psycopg
    from pyspark.sql import DataFrame

__all__ = ["PostgresSide", "Sample", "SparkSide"]

# A sampled row: per column, (canonical text, the value as the system shows it).
Sample = dict[str, tuple[str | None, str | None]]


class PostgresSide:
    """Rows of one relation, summed by the PostgreSQL server that holds them."""

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        relation: sql.Composable,
        types: dict[str, str],
        columns: Sequence[str],
        key: Sequence[str],
        where: Sequence[sql.Composable] = (),
        *,
        native: bool = False,
        what: str = "the table",
    ) -> None:
        self.conn, self.relation, self.types, self.what = conn, relation, types, what
        self.columns, self.key = list(columns), list(key)
        self.where, self.native = list(where), native
        self.moved = Moved()

    def _hashed(self) -> sql.Composed:
        return pg_hashed(
            self.types, self.columns, self.key, self.relation, self.where, native=self.native
        )

    def count(self) -> int:
        query = sql.SQL("SELECT count(*) FROM {}{}").format(self.relation, pg_where(self.where))
        [(rows,)] = self._run(query)
        self.moved.add(rows=0, size=8)
        return int(rows)

    def _run(self, query: sql.Composable, params: dict[str, Any] | None = None) -> list[Any]:
        """The query's rows; a failure is this relation's, in one line."""
        import psycopg

        try:
            return self.conn.execute(query, params).fetchall()
        except psycopg.OperationalError as exc:
            raise HakiriError(
                f"diff lost its connection to {self.what}: {_first_line(exc)}",
                "check that the server is up, then run `hakiri diff` again",
            ) from None
        except psycopg.Error as exc:
            raise HakiriError(
                f"PostgreSQL refused to sum the rows of {self.what}: {_first_line(exc)}",
                "a --where condition PostgreSQL lacks a function of? rewrite it; otherwise "
                "compare one table with --table and report the column's type",
            ) from None

    def segments(self, width: int, within: Sequence[str]) -> dict[str, Sums]:
        query = sql.SQL(
            "SELECT substr({kh}, 1, %(width)s) AS p, count(*), "
            "sum(('x' || substr({rh}, 1, 8))::bit(32)::bigint), "
            "sum(('x' || substr({rh}, 9, 8))::bit(32)::bigint) "
            "FROM ({hashed}) AS h {within} GROUP BY 1"
        ).format(
            kh=sql.Identifier(KEY_HASH),
            rh=sql.Identifier(ROW_HASH),
            hashed=self._hashed(),
            within=_pg_within(within),
        )
        found = {
            p: Sums(int(n), int(low), int(high))
            for p, n, low, high in self._run(query, _params(width, within))
        }
        self.moved.add(segments=len(found), size=len(found) * (width + 24))
        return found

    def rows(self, within: Sequence[str]) -> dict[Key, str]:
        keys = sql.SQL(", ").join(sql.Identifier(key_text_name(i)) for i in range(len(self.key)))
        query = sql.SQL(
            "SELECT {keys}, string_agg({rh}, ',' ORDER BY {rh}) FROM ({hashed}) AS h {within} "
            "GROUP BY {keys}"
        ).format(
            keys=keys, rh=sql.Identifier(ROW_HASH), hashed=self._hashed(), within=_pg_within(within)
        )
        found = {tuple(r[:-1]): r[-1] for r in self._run(query, _params(0, within))}
        self.moved.add(rows=len(found), size=sum(_size(k) + 32 for k in found))
        return found

    def _key_is(self, position: int, text: sql.Composable, value: str | None) -> sql.Composable:
        """The row's key column `position` is the one whose text is `value`; natively, the
        column compared with the text as a literal of its type, so an index can serve."""
        if value is None:
            return sql.SQL("{} IS NULL").format(text)
        if self.native:
            return sql.SQL("{} = {}").format(sql.Identifier(self.key[position]), sql.Literal(value))
        return sql.SQL("{} = {}").format(text, sql.Literal(value))

    def sample(self, keys: Sequence[Key]) -> dict[Key, Sample]:
        if not keys:
            return {}
        texts = pg_texts(self.types, self.columns)
        shown = [sql.SQL("{}, {}::text").format(texts[c], sql.Identifier(c)) for c in self.columns]
        if self.native:  # the keys are as rows() read them: each side's own text
            key_texts: list[sql.Composable] = [
                sql.SQL("{}::text").format(sql.Identifier(k)) for k in self.key
            ]
        else:
            key_texts = [texts[k] for k in self.key]
        wanted = sql.SQL(" OR ").join(
            sql.SQL("({})").format(
                sql.SQL(" AND ").join(
                    self._key_is(i, t, v)
                    for i, (t, v) in enumerate(zip(key_texts, one, strict=True))
                )
            )
            for one in keys
        )
        query = sql.SQL("SELECT {keys}, {shown} FROM {relation} WHERE {wanted}").format(
            keys=sql.SQL(", ").join(key_texts),
            shown=sql.SQL(", ").join(shown),
            relation=self.relation,
            wanted=wanted,
        )
        found: dict[Key, Sample] = {}
        width = len(self.key)
        for row in self._run(query):
            values = row[width:]
            found[tuple(row[:width])] = {
                c: (values[2 * i], values[2 * i + 1]) for i, c in enumerate(self.columns)
            }
        self.moved.add(rows=len(found), size=sum(_size(k) for k in found))
        return found


def _pg_within(within: Sequence[str]) -> sql.Composable:
    if not within:
        return sql.SQL("")
    return sql.SQL("WHERE substr({}, 1, %(prefix)s) = ANY(%(within)s)").format(
        sql.Identifier(KEY_HASH)
    )


def _params(width: int, within: Sequence[str]) -> dict[str, Any]:
    return {"width": width, "prefix": len(within[0]) if within else 0, "within": list(within)}


class SparkSide:
    """Rows of a DataFrame, summed by the engine."""

    def __init__(
        self, frame: DataFrame, columns: Sequence[str], key: Sequence[str], where: str | None = None
    ) -> None:
        from pyspark.sql import functions as F

        if where:
            frame = frame.where(F.expr(where))
        self.frame, self.columns, self.key = frame, list(columns), list(key)
        self.hashed = frame.select(*spark_hashes(frame, self.columns, self.key))
        self.moved = Moved()

    def count(self) -> int:
        rows = self.frame.count()
        self.moved.add(size=8)
        return rows

    def _within(self, within: Sequence[str]) -> DataFrame:
        from pyspark.sql import functions as F

        if not within:
            return self.hashed
        prefix = F.substring(F.col(KEY_HASH), 1, len(within[0]))
        return self.hashed.where(prefix.isin(list(within)))

    def segments(self, width: int, within: Sequence[str]) -> dict[str, Sums]:
        from pyspark.sql import functions as F

        def part(start: int) -> Any:
            return F.conv(F.substring(F.col(ROW_HASH), start, 8), 16, 10).cast("bigint")

        summed = (
            self._within(within)
            .groupBy(F.substring(F.col(KEY_HASH), 1, width).alias("p"))
            .agg(F.count(F.lit(1)).alias("n"), F.sum(part(1)).alias("lo"), F.sum(part(9)))
        )
        found = {r[0]: Sums(int(r[1]), int(r[2]), int(r[3])) for r in summed.collect()}
        self.moved.add(segments=len(found), size=len(found) * (width + 24))
        return found

    def rows(self, within: Sequence[str]) -> dict[Key, str]:
        from pyspark.sql import functions as F

        keys = [F.col(key_text_name(i)) for i in range(len(self.key))]
        grouped = (
            self._within(within)
            .groupBy(*keys)
            .agg(F.concat_ws(",", F.sort_array(F.collect_list(F.col(ROW_HASH)))).alias("rh"))
        )
        found = {tuple(r[:-1]): r[-1] for r in grouped.collect()}
        self.moved.add(rows=len(found), size=sum(_size(k) + 32 for k in found))
        return found

    def sample(self, keys: Sequence[Key]) -> dict[Key, Sample]:
        from pyspark.sql import functions as F

        if not keys:
            return {}
        texts = spark_texts(self.frame, self.columns)
        picked = self.frame.select(
            *spark_hashes(self.frame, self.columns, self.key),
            *[t.alias(f"_hakiri_diff_t{i}") for i, t in enumerate(texts.values())],
            *[
                _shown(self.frame, c).alias(f"_hakiri_diff_v{i}")
                for i, c in enumerate(self.columns)
            ],
        ).where(F.col(KEY_HASH).isin([key_hash(k) for k in keys]))
        found: dict[Key, Sample] = {}
        width = len(self.key)
        for row in picked.collect():
            found[tuple(row[:width])] = {
                c: (row[f"_hakiri_diff_t{i}"], row[f"_hakiri_diff_v{i}"])
                for i, c in enumerate(self.columns)
            }
        self.moved.add(rows=len(found), size=sum(_size(k) for k in found))
        return found


def _shown(frame: DataFrame, name: str) -> Any:
    """A column's value as text for a person (bytes in hex: not every engine casts them)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    column = F.col("`" + name.replace("`", "``") + "`")
    if isinstance(frame.schema[name].dataType, T.BinaryType):
        return F.lower(F.hex(column))
    return column.cast("string")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _size(key: Key) -> int:
    return sum(len(v or "") for v in key)
