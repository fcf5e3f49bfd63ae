"""hakiri's local Spark Connect server: one warm engine that outlives the command.

A command that needs Spark connects to a Spark Connect server instead of starting a JVM of
its own. With `[spark] remote = "local"` (the default for a local master), that server is a
local one hakiri runs itself:

- It is named by the fixed part of a *recipe* (`hakiri.spark.recipe`): the master, the jars
  (the PostgreSQL driver, delta-spark), the settings fixed when the JVM starts, the Python its
  workers run, the hakiri and PySpark versions and the newest modification time of hakiri's
  modules (an edited tree's workers must not run old code). The settings a Spark Connect
  session can hold (`spark.sql.*` runtime settings such as the time zone or shuffle
  partitions) are not in it: each command sets them on its own session, so projects that
  differ only there share one server. A command uses the server of its fingerprint, or else
  a running one whose recipe serves it (`Recipe.serves`: the same in everything but more
  jars); a server with another fixed setting or fewer jars is never reused by mistake, and
  an unused one stops itself after its idle timeout.
- Its files live in `$HAKIRI_CACHE_DIR/engine/<fingerprint>/` (user-only): `server.json`
  (pids, port, token), `server.log` (the JVM's output), `start.lock` (one starter at a
  time, so two commands starting at once start one server), `users.lock` (every command
  using the server holds it shared) and `last-used` (touched when a command lets go).
- The server is a small supervisor process (`python -m hakiri.spark.connect_server DIR`)
  and its child, spark-submit's `SparkConnectServer` JVM, bound to 127.0.0.1 on a free port
  and requiring a random token. The supervisor stops the JVM when nobody holds `users.lock`
  and `last-used` is older than `[spark] idle_timeout`, on SIGTERM (`hakiri engine stop`),
  and the JVM stops when the supervisor dies. A command killed mid-run leaves the server
  running for the next one; what it was running on the server is abandoned there after
  `spark.connect.execute.manager.detachedTimeout`.
- The JVM starts from the class-data archive of its class path when there is one, and
  writes it at exit when there is not (`hakiri.spark.class_sharing`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from hakiri.errors import SparkSetupError
from hakiri.spark.class_sharing import (
    QUIET_JVM_LOG,
    archive_path,
    cache_root,
    class_sharing_options,
    spark_submit,
)
from hakiri.spark.recipe import Recipe, recipe_of, stamp

__all__ = [
    "REMOTE_ENV",
    "Holder",
    "Recipe",
    "ServerLease",
    "ServerState",
    "connect_local",
    "hold_local",
    "holders",
    "in_use",
    "pid_alive",
    "running_servers",
    "serving",
    "stop_server",
]

REMOTE_ENV = "HAKIRI_SPARK_REMOTE"
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
_TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
_START_TIMEOUT = 180.0  # seconds for a cold server to accept connections
_STOP_TIMEOUT = 30.0
_POLL = 0.1


@dataclass(frozen=True)
class ServerState:
    """`server.json`: a running server, written by its supervisor."""

    directory: str
    fingerprint: str
    supervisor_pid: int
    server_pid: int
    port: int
    token: str
    started_at: float
    ready: bool
    hakiri_version: str
    master: str

    @property
    def url(self) -> str:
        # "localhost" (not 127.0.0.1): the client then sends the token over a local channel
        # without TLS, which is what a loopback server without a certificate accepts.
        return f"sc://localhost:{self.port}/;token={self.token}"

    def alive(self) -> bool:
        """Both processes run, and are still this server's."""
        return len(_owned_pids(self)) == 2


class ServerLease:
    """A command's hold on a local server: `users.lock` held shared until `release`, and a file
    in `holders/` that says who holds it (for `hakiri engine stop` to name)."""

    def __init__(
        self, directory: Path, handle: IO[bytes], state: ServerState, holder: str = ""
    ) -> None:
        self.directory = directory
        self.state = state
        self._handle: IO[bytes] | None = handle
        self._holder_file: Path | None = _write_holder(directory, holder)

    def gone(self) -> str | None:
        """None while the server's processes run; else what happened to it, in a few words."""
        owned = _owned_pids(self.state)
        if self.state.server_pid not in owned:
            return f"its JVM (pid {self.state.server_pid}) is gone"
        if self.state.supervisor_pid not in owned:
            return f"its supervisor (pid {self.state.supervisor_pid}) is gone"
        return None

    def release(self) -> None:
        if self._handle is None:
            return
        _touch(self.directory / "last-used")
        if self._holder_file is not None:
            self._holder_file.unlink(missing_ok=True)
            self._holder_file = None
        self._handle.close()  # drops the shared lock
        self._handle = None


@dataclass(frozen=True)
class Holder:
    """A command holding a local server (`holders/<pid>-<n>.json`)."""

    pid: int
    command: str
    project: str
    since: float


def holders(state: ServerState) -> list[Holder]:
    """The commands that hold the server now (files of processes that died are skipped)."""
    found = []
    for path in sorted(Path(state.directory, "holders").glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            holder = Holder(
                int(data["pid"]), str(data["command"]), str(data["project"]), float(data["since"])
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if pid_alive(holder.pid):
            found.append(holder)
        else:
            path.unlink(missing_ok=True)
    return found


_HOLDS = iter(range(1, 1 << 62))  # a process may hold several leases (serve after a restart)


def _write_holder(directory: Path, project: str) -> Path | None:
    command = _command_line()
    path = directory / "holders" / f"{os.getpid()}-{next(_HOLDS)}.json"
    document = {"pid": os.getpid(), "command": command, "project": project, "since": time.time()}
    try:
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(document), encoding="utf-8")
    except OSError:
        return None
    return path


def _command_line() -> str:
    """This process as a user would name it: `hakiri apply`, `hakiri serve`, `pytest`."""
    if not sys.argv or not sys.argv[0]:
        return ""
    program = Path(sys.argv[0])
    name = "hakiri" if program.name == "hakiri" or "hakiri" in program.parts else program.name
    verb = next((a for a in sys.argv[1:] if not a.startswith("-")), "")
    return f"{name} {verb}".strip()


def engine_root(env: Mapping[str, str]) -> Path:
    return cache_root(env) / "engine"


def connect_local(
    recipe: Recipe, env: Mapping[str, str] = os.environ, *, holder: str = ""
) -> tuple[Any, ServerLease]:
    """A Spark Connect session to the local server of `recipe`, started if it is not running,
    and the lease that keeps it from idling out while this command uses it. `holder` (the
    project) is what `hakiri engine stop` names while the lease is held.

    The session retries a call for a bounded time, and not at all once the server's processes
    are gone (`spark.liveness`): a killed or stopped server fails the command in seconds."""
    from pyspark.sql import SparkSession

    from hakiri.spark.liveness import guard_session, watch_for

    lease = _lease(recipe, env, holder)
    try:
        # create(), not getOrCreate(): that returns whatever session this process made first,
        # even one on another (or a dead) server. (The generic builder also switches PySpark
        # in this process to Spark Connect, which `pyspark.sql.functions` needs.)
        session = SparkSession.builder.remote(lease.state.url).create()
    except Exception:
        lease.release()
        raise
    watch = watch_for(
        lease.state.url,
        probe=lease.gone,
        log=str(Path(lease.directory, "server.log")),
        local=True,
    )
    return guard_session(session, watch), lease


def hold_local(
    recipe: Recipe, env: Mapping[str, str] = os.environ, *, holder: str = ""
) -> ServerLease:
    """A hold on the local server of `recipe` (or one that serves it), started if none runs,
    without a session on it: for a command to have its engine starting while it does other
    work (`services.runtime.LazySpark.start_early`)."""
    return _lease(recipe, env, holder)


def _lease(recipe: Recipe, env: Mapping[str, str], holder: str = "") -> ServerLease:
    """A hold on a running server for `recipe`: its own (started now if it is not running),
    unless another running server serves it (`Recipe.serves`: it differs only by more jars)."""
    directory = engine_root(env) / recipe.fingerprint()
    if _read_state(directory) is None:  # not running: maybe another server serves it
        shared = _lease_another(recipe, env, holder, skip=directory)
        if shared is not None:
            return shared
    _private_dir(directory)
    with _locked(directory / "start.lock", fcntl.LOCK_EX):
        users = open(directory / "users.lock", "ab")  # noqa: SIM115 - held for the lease's life
        # Shared before the state is read: the supervisor stops the server only under an
        # exclusive lock, so a server this command found stays up until it lets go.
        fcntl.flock(users, fcntl.LOCK_SH)
        _touch(directory / "last-used")
        try:
            state = _read_state(directory)
            if state is None or not state.alive() or not state.ready:
                if state is not None:
                    _stop_pids(state)
                state = _start(directory, recipe, env)
        except BaseException:
            users.close()
            raise
    return ServerLease(directory, users, state, holder)


def serving(wanted: Recipe, env: Mapping[str, str] = os.environ) -> list[ServerState]:
    """The ready servers whose recipe serves `wanted` (its own among them, if it runs)."""
    current = stamp()
    found = []
    for state in running_servers(env):
        recipe = recipe_of(Path(state.directory), current) if state.ready else None
        if recipe is not None and recipe.serves(wanted):
            found.append(state)
    return found


def _lease_another(
    wanted: Recipe, env: Mapping[str, str], holder: str, *, skip: Path
) -> ServerLease | None:
    """A hold on a ready server of another recipe that serves `wanted`, the most recently used
    first; None when there is none. One that is starting, stopping or idling out is passed
    over (its locks are not waited for)."""
    candidates = [Path(s.directory) for s in serving(wanted, env) if Path(s.directory) != skip]
    candidates.sort(key=lambda d: _mtime(d / "last-used"), reverse=True)
    for directory in candidates:
        users = open(directory / "users.lock", "ab")  # noqa: SIM115 - held for the lease's life
        try:
            fcntl.flock(users, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:  # its supervisor is stopping it
            users.close()
            continue
        state = _read_state(directory)
        if state is None or not state.ready or not state.alive():
            users.close()
            continue
        _touch(directory / "last-used")
        return ServerLease(directory, users, state, holder)
    return None


def _start(directory: Path, recipe: Recipe, env: Mapping[str, str]) -> ServerState:
    """Start the supervisor for `recipe` in `directory` and wait until its server answers."""
    (directory / "server.json").unlink(missing_ok=True)
    (directory / "recipe.json").write_text(recipe.to_json(), encoding="utf-8")
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "hakiri.spark.connect_server", str(directory)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # outlives this command and never gets its signals
        env=dict(env),
    )
    deadline = time.monotonic() + _START_TIMEOUT
    while time.monotonic() < deadline:
        state = _read_state(directory)
        if state is not None and state.ready:
            return state
        if supervisor.poll() is not None:
            break
        time.sleep(_POLL)
    else:
        supervisor.terminate()
    raise SparkSetupError(
        f"the local Spark Connect server did not start: {_log_tail(directory / 'server.log')}",
        f"see {directory / 'server.log'}; check `java -version` (17+) and [spark] in hakiri.toml",
    )


def running_servers(env: Mapping[str, str] = os.environ) -> list[ServerState]:
    """The local servers of this user's cache, running or not yet cleaned up."""
    root = engine_root(env)
    found = []
    for directory in sorted(root.glob("*")) if root.is_dir() else []:
        state = _read_state(directory)
        if state is not None:
            found.append(state)
    return found


def in_use(state: ServerState) -> bool:
    """Does a command hold this server now (its `users.lock`, shared)?"""
    try:
        with open(Path(state.directory, "users.lock"), "ab") as users:
            fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    return False


def stop_server(state: ServerState, *, force: bool = True) -> list[Holder]:
    """Stop a local server (its supervisor stops the JVM and cleans up) and wait for it.
    Without `force`, a server a command holds is left running: the holders are returned
    (empty when it was stopped). The check and the stop happen under the start lock, so no
    command takes the server between them."""
    directory = Path(state.directory)
    with (
        _locked(directory / "start.lock", fcntl.LOCK_EX),
        open(directory / "users.lock", "ab") as users,
    ):
        try:
            fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a command holds it
            held = holders(state)
            if not force:
                return held or [Holder(0, "a hakiri command", "", time.time())]
        _stop_pids(state)
        Path(state.directory, "server.json").unlink(missing_ok=True)
    return []


def _stop_pids(state: ServerState) -> None:
    """SIGTERM the server's processes that are still its own, SIGKILL what is left of them."""
    pids = _owned_pids(state)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + _STOP_TIMEOUT
    while time.monotonic() < deadline and any(pid_alive(pid) for pid in pids):
        time.sleep(_POLL)
    for pid in pids:
        if pid_alive(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _owned_pids(state: ServerState) -> list[int]:
    """The server's pids whose processes are still its own: its supervisor (for its directory)
    and its JVM, not pids reused since (a `server.json` that outlived a reboot)."""
    marks = {
        state.supervisor_pid: f"hakiri.spark.connect_server\0{state.directory}",
        state.server_pid: SERVER_CLASS,
    }
    return [pid for pid, mark in marks.items() if _runs(pid, mark)]


# ------------------------------------------------------------------ the supervisor


def supervise(directory: Path) -> int:
    """The supervisor process: start the JVM, publish `server.json` once it answers, stop it
    when idle or told to; 0 when it stopped as asked."""
    from hakiri import __version__

    recipe = Recipe.from_json((directory / "recipe.json").read_text(encoding="utf-8"))
    port = _free_port()
    token = secrets.token_urlsafe(32)
    dump = None
    options = f"-Dlog4j2.configurationFile={_LOG4J2.as_uri()}"
    user_options = dict(recipe.conf).get("spark.driver.extraJavaOptions", "")
    sharing = class_sharing_options(user_options)
    if sharing:
        options += f" {sharing}"
    else:
        archive = archive_path(user_options, os.environ)
        if archive is not None:
            dump = (archive, archive.with_name(f"{archive.stem}.{os.getpid()}.partial"))
            options += f" -XX:ArchiveClassesAtExit={dump[1]} {QUIET_JVM_LOG}"
    options = f"{options} {user_options}".strip()
    command = _server_command(recipe, port, options)
    log = open(directory / "server.log", "ab")  # noqa: SIM115 - the JVM's stderr for its life
    jvm = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        env={**os.environ, _TOKEN_ENV: token, "PYSPARK_PYTHON": recipe.python},
        preexec_fn=_die_with_parent,
    )
    stopping = False

    def stop(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    state = ServerState(
        directory=str(directory),
        fingerprint=directory.name,
        supervisor_pid=os.getpid(),
        server_pid=jvm.pid,
        port=port,
        token=token,
        started_at=time.time(),
        ready=False,
        hakiri_version=__version__,
        master=recipe.master,
    )
    _write_state(directory, state)
    while not stopping and jvm.poll() is None:
        if _accepts(port):
            break
        time.sleep(_POLL)
    if not stopping and jvm.poll() is None:
        _write_state(directory, ServerState(**{**asdict(state), "ready": True}))
    hold = None
    while not stopping and jvm.poll() is None:
        hold = _idle(directory, recipe.idle_timeout)
        if hold is not None:
            break
        time.sleep(1.0)
    _end(jvm)
    with contextlib.suppress(OSError):
        current = _read_state(directory)
        if current is not None and current.supervisor_pid == os.getpid():
            (directory / "server.json").unlink()
    if dump is not None:
        _keep_archive(*dump)
    if hold is not None:
        hold.close()
    return 0


def _server_command(recipe: Recipe, port: int, driver_options: str) -> list[str]:
    submit = spark_submit()
    if submit is None:
        raise SparkSetupError(
            "pyspark has no bin/spark-submit to start a Spark Connect server with",
            "reinstall pyspark (`make run` does), or set [spark] remote to a running server",
        )
    command = [str(submit), "--master", recipe.master, "--class", SERVER_CLASS]
    if recipe.jars:
        command += ["--jars", ",".join(recipe.jars)]
    command += ["--driver-java-options", driver_options]
    conf = dict(recipe.conf)
    conf.pop("spark.driver.extraJavaOptions", None)
    conf.update(
        {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(port),
            # An execution whose command died is interrupted this soon, not after 5 minutes.
            "spark.connect.execute.manager.detachedTimeout": "20s",
            "spark.connect.execute.manager.maintenanceInterval": "5s",
        }
    )
    for key, value in sorted(conf.items()):
        command += ["--conf", f"{key}={value}"]
    return [*command, "spark-internal"]


def _idle(directory: Path, timeout: float) -> IO[bytes] | None:
    """Nobody holds the server and nobody let go of it for `timeout` seconds: then the
    exclusive hold on `users.lock`, kept while the server stops (a command arriving now
    waits, then starts a new server once this one is gone); else None."""
    try:
        used = (directory / "last-used").stat().st_mtime
    except OSError:
        used = 0.0
    if time.time() - used < timeout:
        return None
    users = open(directory / "users.lock", "ab")  # noqa: SIM115 - returned, held
    try:
        fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # a command holds it
        users.close()
        return None
    return users


def _end(jvm: subprocess.Popen[bytes]) -> None:
    if jvm.poll() is None:
        jvm.terminate()
        try:
            jvm.wait(_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            jvm.kill()
            jvm.wait()


def _keep_archive(archive: Path, partial: Path) -> None:
    try:
        if partial.stat().st_size > 0 and not archive.exists():
            os.replace(partial, archive)
            return
    except OSError:
        pass
    partial.unlink(missing_ok=True)


def _die_with_parent() -> None:
    """In the JVM's process before exec: get SIGTERM when the supervisor dies (Linux)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


# ------------------------------------------------------------------ small helpers

_LOG4J2 = Path(__file__).with_name("log4j2.properties")


def _read_state(directory: Path) -> ServerState | None:
    try:
        data = json.loads((directory / "server.json").read_text(encoding="utf-8"))
        return ServerState(**data)
    except (OSError, ValueError, TypeError):
        return None


def _write_state(directory: Path, state: ServerState) -> None:
    partial = directory / f"server.json.{os.getpid()}"
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(asdict(state), out)
    os.replace(partial, directory / "server.json")


def _private_dir(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)


@contextlib.contextmanager
def _locked(path: Path, how: int) -> Iterator[None]:
    with open(path, "ab") as handle:
        fcntl.flock(handle, how)
        yield


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _touch(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.touch()
        os.utime(path)


def pid_alive(pid: int) -> bool:
    """Is process `pid` running (not gone, not a zombie)?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child counts as gone
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def _runs(pid: int, marker: str) -> bool:
    """Is `pid` alive and running a command line that contains `marker` (NULs between
    arguments)? Without /proc, alive is taken for ours."""
    if not pid_alive(pid):
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return marker.encode() in cmdline.read()
    except OSError:
        return True


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return False
    return True


def _log_tail(path: Path) -> str:
    try:
        lines = [
            line.strip()
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
            if line.strip() and not line.startswith(("\t", " "))
        ]
    except OSError:
        return "its log is empty"
    return lines[-1][:300] if lines else "its log is empty"


if __name__ == "__main__":
    sys.exit(supervise(Path(sys.argv[1])))
