"""A throwaway PostgreSQL server for the test suite.

`TestPostgres().start()` runs initdb + pg_ctl from the system's PostgreSQL
server binaries in a fresh directory under /tmp, on a free loopback port, and
creates the database `hakiri_test`; `stop()` kills it and removes the directory.
With `HAKIRI_TEST_PG_URL` set, that server is used instead and nothing is started.

Missing binaries are an error, never a skip: a suite that silently skips its
database tests reports green for code that was never run.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from hakiri.spark.connect_server import pid_alive

__all__ = ["PG_URL_ENV", "PostgresUnavailable", "TestPostgres", "find_pg_bin_dir"]

PG_URL_ENV = "HAKIRI_TEST_PG_URL"
DATABASE = "hakiri_test"
SUPERUSER = "postgres"
DIR_PREFIX = "hakiri-pg-"
OWNER_FILE = "owner.pid"
# Debian keeps the server binaries here, off PATH (only wrappers like pg_ctlcluster are on it).
PG_LIB_DIR = Path("/usr/lib/postgresql")

_INSTALL_HINT = (
    "install the PostgreSQL server binaries (`sudo apt-get install -y postgresql`), "
    f"or point {PG_URL_ENV} at a PostgreSQL you can create schemas in, "
    "e.g. postgresql://postgres@127.0.0.1:5432/hakiri_test"
)


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server could be started or found for the tests."""


def find_pg_bin_dir(env: Mapping[str, str] = os.environ) -> Path:
    """The directory holding initdb and pg_ctl: PATH first, then the newest /usr/lib/postgresql/*/bin."""
    initdb = shutil.which("initdb", path=env.get("PATH"))
    if initdb and (Path(initdb).parent / "pg_ctl").exists():
        return Path(initdb).parent

    candidates = [
        d for d in PG_LIB_DIR.glob("*/bin") if (d / "initdb").exists() and (d / "pg_ctl").exists()
    ]
    if candidates:
        return max(candidates, key=_version_key)

    raise PostgresUnavailable(
        f"PostgreSQL server binaries (initdb, pg_ctl) not found in PATH or {PG_LIB_DIR}/*/bin; "
        f"hint: {_INSTALL_HINT}"
    )


def _version_key(bin_dir: Path) -> tuple[int, ...]:
    # "15" > "9.6" numerically, not as strings.
    return tuple(int(part) for part in re.findall(r"\d+", bin_dir.parent.name)) or (0,)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TestPostgres:
    """One PostgreSQL server for one test session (or the one named by HAKIRI_TEST_PG_URL)."""

    __test__ = False  # a helper, not a test class, despite the name

    def __init__(self, env: Mapping[str, str] = os.environ, *, wal_level: str = "logical") -> None:
        self._env = env
        self.wal_level = wal_level  # 'replica': a server without logical decoding
        self.external = bool(env.get(PG_URL_ENV))
        self.url: str = env.get(PG_URL_ENV, "")
        self.port: int | None = None
        self.base_dir: Path | None = None
        self.bin_dir: Path | None = None
        self.startup_seconds: float = 0.0
        self._options = ""  # the server's command-line options, for `resume`

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> TestPostgres:
        """Start the server (no-op with HAKIRI_TEST_PG_URL). Raises PostgresUnavailable on failure."""
        if self.external or self.base_dir is not None:
            return self
        began = time.monotonic()
        self.bin_dir = find_pg_bin_dir(self._env)
        self._reap_orphans()
        self.base_dir = Path(tempfile.mkdtemp(prefix=DIR_PREFIX, dir="/tmp"))
        try:
            (self.base_dir / OWNER_FILE).write_text(str(os.getpid()))
            if os.geteuid() == 0:
                # PostgreSQL refuses to run as root; the server's files must belong to its user.
                user = self._os_user()
                os.chown(self.base_dir, user.pw_uid, user.pw_gid)
            self._initdb()
            self._start_on_free_port()
            self._create_database()
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def stop(self) -> None:
        """Kill the server and remove its directory. Safe to call twice."""
        if self.external or self.base_dir is None:
            return
        base, self.base_dir = self.base_dir, None
        data = base / "data"
        self._kill(data)
        shutil.rmtree(base, ignore_errors=True)

    def halt(self) -> None:
        """Stop the server as an outage would (fast shutdown: sessions cut), keeping its data."""
        assert self.bin_dir is not None and self.base_dir is not None
        self._run(
            [self.bin_dir / "pg_ctl", "stop", "-D", self.base_dir / "data", "-m", "fast", "-w"],
            what="pg_ctl stop",
        )

    def resume(self) -> None:
        """Start a halted server again, on the same port with the same data."""
        assert self.bin_dir is not None and self.base_dir is not None
        data, log = self.base_dir / "data", self.base_dir / "server.log"
        self._run(
            [self.bin_dir / "pg_ctl", "start", "-D", data, "-l", log, "-w", "-t", "60",
             "-o", self._options],
            what="pg_ctl start",
        )  # fmt: skip

    def __enter__(self) -> TestPostgres:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- steps -------------------------------------------------------------

    def _os_user(self) -> pwd.struct_passwd:
        try:
            return pwd.getpwnam(SUPERUSER)
        except KeyError:
            raise PostgresUnavailable(
                f"running as root but there is no `{SUPERUSER}` OS user to run PostgreSQL as; "
                f"hint: {_INSTALL_HINT} (the package creates the user)"
            ) from None

    def _initdb(self) -> None:
        assert self.bin_dir is not None and self.base_dir is not None
        self._run(
            [
                self.bin_dir / "initdb",
                "-D", self.base_dir / "data",
                "-A", "trust",
                "-U", SUPERUSER,
                "--encoding", "UTF8",
                "--no-locale",
                # a throwaway cluster does not need its files fsynced
                "--no-sync",
            ],
            what="initdb",
        )  # fmt: skip

    def _start_on_free_port(self, attempts: int = 3) -> None:
        assert self.bin_dir is not None and self.base_dir is not None
        log = self.base_dir / "server.log"
        for attempt in range(1, attempts + 1):
            port = _free_port()
            options = (
                f"-c listen_addresses=127.0.0.1 -p {port} -k {self.base_dir} "
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                # change data capture tests decode logical replication slots
                f"-c wal_level={self.wal_level} -c max_replication_slots=20 -c max_wal_senders=20"
            )
            pg_ctl = self.bin_dir / "pg_ctl"
            data = self.base_dir / "data"
            started = self._run(
                [pg_ctl, "start", "-D", data, "-l", log, "-w", "-t", "60", "-o", options],
                check=False,
            )
            if started.returncode == 0:
                self._options = options
                self.port = port
                self.url = f"postgresql://{SUPERUSER}@127.0.0.1:{port}/{DATABASE}"
                return
            # Another process may have taken the port between our probe and the bind.
            if attempt == attempts or "could not bind" not in self._log_tail(log):
                raise PostgresUnavailable(
                    f"pg_ctl start failed (exit {started.returncode}): {started.stdout.strip()}\n"
                    f"--- {log} ---\n{self._log_tail(log)}\nhint: {_INSTALL_HINT}"
                )

    def _create_database(self) -> None:
        import psycopg
        from psycopg import sql

        assert self.port is not None
        admin = f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/postgres"
        with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))

    # -- helpers -----------------------------------------------------------

    def _kill(self, data: Path) -> None:
        if self.bin_dir is None or not (data / "postmaster.pid").exists():
            return
        # `immediate` skips the shutdown checkpoint: nothing here is worth keeping.
        stop: list[str | Path] = [
            self.bin_dir / "pg_ctl",
            "stop",
            "-D",
            data,
            "-m",
            "immediate",
            "-w",
            "-t",
            "30",
        ]
        self._run(stop, check=False)

    def _run(
        self, argv: list[str | Path], *, check: bool = True, what: str = ""
    ) -> subprocess.CompletedProcess[str]:
        command = [str(a) for a in argv]
        if os.geteuid() == 0:
            command = ["runuser", "-u", SUPERUSER, "--", *command]
        done = subprocess.run(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            stdin=subprocess.DEVNULL,
            # As root our cwd is often /root, which the postgres user may not enter;
            # initdb and pg_ctl warn or fail when they cannot.
            cwd="/",
            # English messages: _start_on_free_port looks for "could not bind".
            env={**os.environ, "LC_ALL": "C"},
            timeout=120,
        )
        if check and done.returncode != 0:
            raise PostgresUnavailable(
                f"{what or command[0]} failed (exit {done.returncode}):\n"
                f"{done.stdout.strip()}\nhint: {_INSTALL_HINT}"
            )
        return done

    @staticmethod
    def _log_tail(log: Path, lines: int = 30) -> str:
        try:
            return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"

    def _reap_orphans(self) -> None:
        """Stop servers left behind by test sessions that died without cleaning up (kill -9, os._exit)."""
        assert self.bin_dir is not None
        for base in Path("/tmp").glob(f"{DIR_PREFIX}*"):
            try:
                owner = int((base / OWNER_FILE).read_text().strip())
            except (OSError, ValueError):
                continue
            if pid_alive(owner):
                continue
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                self._kill(base / "data")
            shutil.rmtree(base, ignore_errors=True)
