"""One run's project: its source changes, its applies under faults, its target read back.

Most applies run in this process through the real CLI (Typer's CliRunner) on one warm
SparkSession; a SIGKILL step runs `python -m hakiri.cli.main apply` in a process group of
its own and kills the group (and any Python worker that left it). The context store of a
run is a tmpfs of its own (mounted here, which needs root), for the disk-full fault.

The faults: `refuse` closes the proxy's listening socket for one apply (PostgreSQL
destination) or remounts the context store read-only; `kill` SIGKILLs a subprocess apply
either at a uniform instant of its calibrated duration or after its first batch claim, at a
uniform instant of the rest; `cut` resets every proxied connection at a uniform instant, or
within 50 ms of the k-th connection the apply opens; `disk_full` fills the store's 8 MiB
tmpfs with a ballast file for one apply. After a fault the model allows any state a run
could have been cut off in (see load_model.py); after a plain apply, exactly one.
"""

from __future__ import annotations

import contextlib
import errno
import faulthandler
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.support.load_model import (
    COLUMNS,
    FileVersion,
    Row,
    canonical_history,
    canonical_rows,
)
from tests.support.load_modes import load_toml

from .steps import Step

if TYPE_CHECKING:
    from .environment import Environment

# The repository: a subprocess apply imports hakiri (src) and tests.support from it.
REPO = Path(__file__).resolve().parents[2]
STORE_SIZE = "8m"
HANG_SECONDS = 240  # an apply that takes longer is reported as a hang (threads dumped)
APPLY_WATCHDOG = 900  # an in-process apply still running then ends the campaign
SUBPROCESS_TIMEOUT = 600


# ============================================================================ results


@dataclass
class ApplyOutcome:
    rc: int | None  # None: killed
    stderr: str = ""
    seconds: float = 0.0
    landed: str | None = None  # kill: during_batch | outside_batch | after_exit
    cut: int | None = None  # cut: connections reset (None: the cut came after the apply)
    exception: str | None = None
    skipped_fault: bool = False
    note: str | None = None


# ============================================================================ the store's tmpfs


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True, text=True)


def _umount(path: Path) -> None:
    done = subprocess.run(["umount", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, text=True)


def _mounted(path: Path) -> bool:
    target = str(path.resolve())
    with open("/proc/mounts") as mounts:
        return any(line.split()[1] == target for line in mounts)


# ============================================================================ one run's project


class Harness:
    """One project, one pipeline `p`, one target table `t`: source changes, applies under
    faults, and the target read back."""

    def __init__(self, env: Environment, combo: tuple[str, str, str], label: str) -> None:
        self.env, self.combo, self.label = env, combo, label
        self.dest, self.mode, self.source = combo
        self.root = env.work / f"run-{label}"
        self.store = self.root / "store"
        suffix = uuid.uuid4().hex[:10]
        self.schema = f"cmp_{suffix}"
        self.source_schema = f"src_{suffix}"
        self.files: dict[str, FileVersion] = {}
        self.table: dict[int, Row] = {}
        self.mounted = False
        self.connections = 4.0  # PostgreSQL connections an apply with work opens (learnt)

    # -- lifecycle ------------------------------------------------------------

    def setup(self) -> None:
        if self.root.exists():
            shutil.rmtree(self.root)
        (self.root / "data").mkdir(parents=True)
        self.store.mkdir()
        if self.dest == "context":
            _mount("-t", "tmpfs", "-o", f"size={STORE_SIZE}", "tmpfs", str(self.store))
            self.mounted = True
        from psycopg import sql

        admin = self.env.admin
        if self.dest == "postgres":
            admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self.schema)))
        if self.source == "table":
            admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self.source_schema)))
            admin.execute(
                sql.SQL(
                    "CREATE TABLE {} (id bigint PRIMARY KEY, seq bigint NOT NULL, name text, "
                    "amount numeric(10,2), day date)"
                ).format(sql.Identifier(self.source_schema, "src"))
            )
        (self.root / "hakiri.toml").write_text(self._manifest())

    def teardown(self, keep: bool) -> None:
        from psycopg import sql

        for schema in (self.schema, self.source_schema):
            with contextlib.suppress(Exception):
                self.env.admin.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )
        if self.mounted:
            if keep:  # keep the Delta table for inspection: copy it off the tmpfs
                with contextlib.suppress(Exception):
                    shutil.copytree(self.store, self.root / "store-copy", dirs_exist_ok=True)
            for _ in range(5):  # the tmpfs, and a read-only bind over it a crash left behind
                if not _mounted(self.store):
                    break
                _umount(self.store)
            self.mounted = False
        if not keep:
            shutil.rmtree(self.root, ignore_errors=True)

    def _manifest(self) -> str:
        columns = '{ id = "bigint", seq = "bigint", name = "string", amount = "decimal(10,2)", day = "date" }'
        if self.source == "files":
            source = f'{{ connector = "files", config = {{ path = "data/*.csv", comment = "#", columns = {columns} }} }}'
            tables = '[{ name = "t" }]'
        else:
            source = f'{{ connector = "postgres", config = {{ connection = "wh", schema = "{self.source_schema}" }} }}'
            cursor = ', incremental = "seq"' if self.mode in ("append", "upsert") else ""
            tables = f'[{{ name = "src", target = "t"{cursor} }}]'
        destination = (
            f'{{ connector = "postgres", config = {{ connection = "wh", schema = "{self.schema}" }} }}'
            if self.dest == "postgres"
            else '{ connector = "context" }'
        )
        load = load_toml(self.mode, self.source)
        return textwrap.dedent(f"""\
            [project]
            name = "campaign"

            [spark]
            master = "local[1]"
            # The SIGKILL steps' short-lived JVMs (in-process applies reuse the warm session).
            conf = {{ "spark.driver.extraJavaOptions" = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC", "spark.ui.enabled" = "false" }}

            [context]
            path = "{self.store}"

            [connections.wh]
            type = "postgres"
            url = "postgresql://postgres@127.0.0.1:{self.env.proxy.port}/hakiri_test"

            [[pipeline]]
            id = "p"
            source = {source}
            tables = {tables}
            destination = {destination}
            load = {load}
            """)

    # -- the source -------------------------------------------------------------

    def view(self) -> dict[Any, Any]:
        return dict(self.files) if self.source == "files" else dict(self.table)

    def mutate(self, step: Step) -> None:
        if step.kind == "delete_file":
            assert step.path is not None
            (self.root / step.path).unlink(missing_ok=True)
            self.files.pop(step.path, None)
            return
        if step.version is not None:
            assert step.path is not None
            path = self.root / step.path
            path.write_text(step.version.text())
            os.utime(path, (step.version.mtime, step.version.mtime))
            self.files[step.path] = step.version
            return
        from psycopg import sql

        src = sql.Identifier(self.source_schema, "src")
        admin = self.env.admin
        if step.kind == "insert_rows":
            for row in step.rows:
                inserted = admin.execute(
                    sql.SQL(
                        "INSERT INTO {} VALUES (%s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING RETURNING id"
                    ).format(src),
                    row,
                ).fetchone()
                if inserted:
                    self.table[row[0]] = row
        elif step.kind == "update_rows":
            for row in step.rows:
                updated = admin.execute(
                    sql.SQL(
                        "UPDATE {} SET seq = %s, name = %s, amount = %s, day = %s WHERE id = %s RETURNING id"
                    ).format(src),
                    (*row[1:], row[0]),
                ).fetchone()
                if updated:
                    self.table[row[0]] = row
        elif step.kind == "delete_rows":
            for key in step.ids:
                admin.execute(sql.SQL("DELETE FROM {} WHERE id = %s").format(src), (key,))
                self.table.pop(key, None)
        else:
            raise ValueError(step.kind)

    # -- the target -------------------------------------------------------------

    def target(self) -> tuple[Any, list[str]]:
        """The target in the model's form, and (scd2) problems of its validity columns."""
        scd2 = self.mode == "scd2"
        columns = [*COLUMNS, *(("valid_from", "valid_to", "is_current") if scd2 else ())]
        records = (
            self._pg_records(columns) if self.dest == "postgres" else self._delta_records(columns)
        )
        if scd2:
            return canonical_history(records)
        return canonical_rows(records), []

    def _pg_records(self, columns: list[str]) -> list[dict[str, Any]]:
        from psycopg import sql

        admin = self.env.admin
        exists = admin.execute("SELECT to_regclass(%s)", [f'"{self.schema}"."t"']).fetchone()
        if not exists or exists[0] is None:
            return []
        cursor = admin.execute(
            sql.SQL("SELECT {} FROM {}").format(
                sql.SQL(", ").join(map(sql.Identifier, columns)), sql.Identifier(self.schema, "t")
            )
        )
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]

    def _delta_records(self, columns: list[str]) -> list[dict[str, Any]]:
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        path = self.store / "t"
        if not (path / "_delta_log").is_dir():
            return []
        try:
            return DeltaTable(str(path)).to_pyarrow_table(columns=columns).to_pylist()
        except TableNotFoundError:
            return []

    # -- applies ------------------------------------------------------------------

    def apply(self, step: Step) -> ApplyOutcome:
        if step.kind == "kill":
            return self.apply_subprocess(step)
        if step.kind == "cut":
            return self._apply_with_cut(step)
        if step.kind == "refuse":
            return self._apply_refused()
        if step.kind == "disk_full":
            return self._apply_disk_full()
        return self.apply_inprocess()

    def apply_inprocess(self) -> ApplyOutcome:
        from typer.testing import CliRunner

        from hakiri.cli.main import app

        started = time.monotonic()
        accepted = self.env.proxy.accepted
        hang_log = open(self.root / "hang.log", "w")  # noqa: SIM115 (faulthandler writes to it)
        faulthandler.dump_traceback_later(HANG_SECONDS, exit=False, file=hang_log)
        watchdog = threading.Timer(APPLY_WATCHDOG, self._give_up)
        watchdog.daemon = True
        watchdog.start()
        try:
            result = CliRunner().invoke(app, ["apply", "--project", str(self.root)])
        finally:
            faulthandler.cancel_dump_traceback_later()
            watchdog.cancel()
            hang_log.close()
        seconds = time.monotonic() - started
        opened = self.env.proxy.accepted - accepted
        if opened > 1 and result.exit_code == 0:
            self.connections = 0.5 * self.connections + 0.5 * opened
        exception = None
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            import traceback

            exception = "".join(
                traceback.format_exception(
                    type(result.exception), result.exception, result.exception.__traceback__
                )
            )
        return ApplyOutcome(result.exit_code, result.stderr, seconds, exception=exception)

    def _give_up(self) -> None:
        """An in-process apply that never returns: dump every thread, clean up, exit."""
        print(f"\ncampaign: an apply of {self.root} hangs; giving up", file=sys.stderr, flush=True)
        faulthandler.dump_traceback(file=sys.stderr)
        with contextlib.suppress(Exception):
            self.teardown(keep=True)
        with contextlib.suppress(Exception):
            self.env.close()
        os._exit(3)

    def _apply_refused(self) -> ApplyOutcome:
        if self.dest == "postgres":
            self.env.proxy.refuse()
            try:
                return self.apply_inprocess()
            finally:
                self.env.proxy.accept()
        # The context store "refuses" as a read-only file system: a read-only bind mount
        # over it for one apply (a bind can be made read-only even while a file under the
        # store is still open for writing, which a remount of the tmpfs itself refuses).
        store = str(self.store)
        bound = subprocess.run(["mount", "--bind", store, store], capture_output=True, text=True)
        readonly = bound.returncode == 0 and (
            subprocess.run(
                ["mount", "-o", "remount,bind,ro", store], capture_output=True, text=True
            ).returncode
            == 0
        )
        try:
            if not readonly:
                outcome = self.apply_inprocess()
                outcome.skipped_fault = True
                outcome.note = f"no read-only bind mount: {bound.stderr.strip()}"
                return outcome
            return self.apply_inprocess()
        finally:
            if bound.returncode == 0:
                subprocess.run(["umount", store], check=True, capture_output=True)

    def _open_in_store(self) -> list[str]:
        """Files under the store some process holds open (why a remount may be refused)."""
        found = []
        for fd in Path("/proc").glob("[0-9]*/fd/*"):
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith(str(self.store)):
                    found.append(f"{fd.parts[2]}:{target}")
        return found[:5]

    def _apply_disk_full(self) -> ApplyOutcome:
        ballast = self.store / ".ballast"
        with open(ballast, "wb") as sink:
            block = b"\0" * (1 << 16)
            try:
                while True:
                    sink.write(block)
                    sink.flush()
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
        # byte-sized leftovers too, so not even a small file fits
        with contextlib.suppress(OSError), open(ballast, "ab", buffering=0) as sink:
            while sink.write(b"\0" * 512):
                pass
        try:
            outcome = self.apply_inprocess()
        finally:
            ballast.unlink()
        held = self._open_in_store()
        if held:  # a file the failed write left open: its space is not given back
            outcome.note = f"still open under the store: {held}"
        return outcome

    def _apply_with_cut(self, step: Step) -> ApplyOutcome:
        proxy = self.env.proxy
        window = self.env.inproc_seconds[self.dest]
        stop = threading.Event()
        cut: list[int] = []

        base = proxy.accepted

        def cutter() -> None:
            if step.strategy == "on_connection":
                # The k-th connection this apply opens, k uniform over the connections an
                # apply of this run opens, cut within 50 ms of it.
                n = max(1, round(self.connections))
                k = 1 + min(n - 1, int(step.u * n))
                while not stop.is_set() and not proxy.wait_for_accepted(base + k, 0.05):
                    pass
                delay = (step.u * n % 1) * 0.05
            else:
                delay = step.u * window
            if stop.wait(delay):
                return
            cut.append(proxy.cut())

        thread = threading.Thread(target=cutter, name="campaign-cutter", daemon=True)
        thread.start()
        try:
            outcome = self.apply_inprocess()
        finally:
            stop.set()
            thread.join()
        outcome.cut = cut[0] if cut else None
        return outcome

    def apply_subprocess(self, step: Step) -> ApplyOutcome:
        """`hakiri apply` in a process group of its own, SIGKILLed at a random instant."""
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)]),
            "HAKIRI_COPY_MIN_RUN_BYTES": "0",
            "HAKIRI_CAMPAIGN_TOKEN": self.env.token,
        }
        stderr_path = self.root / "subprocess.stderr"
        started = time.monotonic()
        with open(stderr_path, "w") as stderr:
            proc = subprocess.Popen(
                [sys.executable, "-m", "hakiri.cli.main", "apply", "--project", str(self.root)],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,
                cwd=self.root,
            )
            try:
                delay = self._kill_delay(step, proc)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=max(0.0, delay))
                landed = None
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    rc = None
                else:
                    rc = proc.returncode
                    landed = "after_exit"
            finally:
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                self._reap_stragglers()
        seconds = time.monotonic() - started
        if rc is None:
            landed = "during_batch" if self._processing_batches() else "outside_batch"
        else:
            self.env.learn(self.env.sub_seconds, self.dest, seconds)
        return ApplyOutcome(rc, stderr_path.read_text(errors="replace"), seconds, landed=landed)

    def _kill_delay(self, step: Step, proc: subprocess.Popen[Any]) -> float:
        """Seconds to wait before the SIGKILL (counted from now)."""
        if step.strategy != "in_load":
            return step.u * self.env.sub_seconds[self.dest]
        # Wait for a batch to be claimed, then land somewhere in the rest of the apply (Spark
        # starts inside the first batch: the claim comes before the JVM does).
        started = time.monotonic()
        whole = self.env.sub_seconds[self.dest]
        while time.monotonic() < started + 3 * whole and proc.poll() is None:
            if self._processing_batches():
                break
            time.sleep(0.05)
        left = whole - (time.monotonic() - started)
        return step.u * max(left, self.env.inproc_seconds[self.dest])

    def _processing_batches(self) -> int:
        path = self.root / ".hakiri" / "state.sqlite"
        if not path.exists():
            return 0
        try:
            with contextlib.closing(
                sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)
            ) as db:
                return int(
                    db.execute(
                        "SELECT count(*) FROM batches WHERE status = 'processing'"
                    ).fetchone()[0]
                )
        except sqlite3.Error:
            return 0

    def _reap_stragglers(self) -> None:
        """Kill what the apply started and that left its process group (PySpark's daemon calls
        setpgid): every process whose environment carries this campaign's token."""
        marker = f"HAKIRI_CAMPAIGN_TOKEN={self.env.token}".encode()
        for _ in range(20):
            found = []
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit() or int(entry.name) == os.getpid():
                    continue
                try:
                    environ = (entry / "environ").read_bytes()
                except OSError:
                    continue
                if marker in environ.split(b"\0"):
                    found.append(int(entry.name))
            if not found:
                return
            for pid in found:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)
