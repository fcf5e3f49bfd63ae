"""A real S3-compatible server for the test suite: s3proxy on loopback, objects as plain files.

`S3Server.start()` runs s3proxy (`java -jar`) with its filesystem backend over a fresh
directory under /tmp, on a free loopback port, checking AWS signatures (v2 or v4) against
an access key and a random secret of its own; `stop()` stops it and removes the directory.
A bucket is a directory under `root`, an object a file under its bucket.

The jar (s3proxy's `jar-with-dependencies`, one file with everything it needs) comes from
the Maven repositories hakiri resolves its other jars from, into the same cache
(`$HAKIRI_CACHE_DIR/jars`), once: under a file lock, so xdist workers starting together
download it once, checked against the repository's `.sha1`, and renamed into place whole.
A plain HTTPS download and not Spark's resolver (`spark-submit --packages`, as
hakiri.spark.packages uses): that resolver takes no classifier, and this jar has one.

A jar that cannot be fetched, or a server that does not start, is an error, never a skip:
a suite that silently skips its object-store tests reports green for code never run.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from hakiri.spark.class_sharing import cache_root
from hakiri.spark.connect_server import pid_alive
from hakiri.spark.java import find_java
from hakiri.spark.packages import OFFLINE_ENV, REPOSITORIES_ENV, maven_repositories
from tests.support.engines import QUICK_JVM

__all__ = ["S3PROXY_VERSION", "S3Server", "S3ServerUnavailable", "s3proxy_jar"]

S3PROXY_VERSION = "4.1.0"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
_JAR = f"s3proxy-{S3PROXY_VERSION}-jar-with-dependencies.jar"
_ARTIFACT_PATH = f"org/gaul/s3proxy/{S3PROXY_VERSION}/{_JAR}"
ACCESS_KEY = "hakiri-test-key"
REGION = "us-east-1"
DIR_PREFIX = "hakiri-s3-"
OWNER_FILE = "owner.pid"
SERVER_FILE = "server.pid"
# About a second alone; generous for a machine busy with a whole suite's JVMs.
_START_TIMEOUT_SECONDS = 60.0
_DOWNLOAD_TIMEOUT_SECONDS = 60  # per socket operation: the jar is 55 MB
_STOP_GRACE_SECONDS = 5.0
# A JVM for a test server: small heap, no optimizing compiler (it never pays back here).
_JVM_OPTIONS = [*QUICK_JVM.split(), "-Xmx256m"]

_HINT = (
    f"the suite downloads s3proxy {S3PROXY_VERSION} once into $HAKIRI_CACHE_DIR/jars "
    f"(~/.cache/hakiri/jars): run once with network access, or set {REPOSITORIES_ENV} to a "
    "Maven mirror you can reach"
)


class S3ServerUnavailable(RuntimeError):
    """No S3-compatible server could be fetched or started for the tests."""


@dataclass
class S3Server:
    """One s3proxy for one test session (one per xdist worker)."""

    endpoint: str  # "http://127.0.0.1:PORT"
    access_key: str
    secret_key: str
    region: str
    root: Path  # the filesystem backend's basedir: a bucket is a directory, an object a file
    startup_seconds: float = 0.0  # from launch to its first answer
    _process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _base: Path | None = field(default=None, repr=False)

    @classmethod
    def start(cls, env: Mapping[str, str] = os.environ, *, attempts: int = 3) -> S3Server:
        """Fetch the jar if need be and start a server. Raises S3ServerUnavailable."""
        jar = s3proxy_jar(env)
        java = find_java(env)
        if java is None or not java.is_file():
            raise S3ServerUnavailable(
                "no Java to run s3proxy on; hint: install Java 17 or newer "
                "(`sudo apt-get install -y openjdk-17-jre-headless`), or point JAVA_HOME at one"
            )
        began = time.monotonic()  # the server's start, not the jar's first download
        _reap_orphans()
        base = Path(tempfile.mkdtemp(prefix=DIR_PREFIX, dir="/tmp"))
        (base / OWNER_FILE).write_text(str(os.getpid()))
        root = base / "objects"
        root.mkdir()
        secret = secrets.token_hex(20)
        for _ in range(attempts):
            server = cls(
                endpoint=f"http://127.0.0.1:{_free_port()}",
                access_key=ACCESS_KEY,
                secret_key=secret,
                region=REGION,
                root=root,
                _base=base,
            )
            try:
                server._launch(java, jar)
                server._wait_until_answering()
            except _PortTaken:  # between our probe and s3proxy's bind
                server._halt()
                continue
            except BaseException:
                server.stop()
                raise
            server.startup_seconds = time.monotonic() - began
            return server
        shutil.rmtree(base, ignore_errors=True)
        raise S3ServerUnavailable(f"s3proxy found no free port in {attempts} tries")

    def create_bucket(self, name: str) -> None:
        """A new empty bucket. The filesystem backend lists the directories under its basedir
        as the buckets, so a directory is all a bucket is, and no signed request is needed."""
        (self.root / name).mkdir()

    def storage_options(self) -> dict[str, str]:
        """This server as deltalake's and obstore's `storage_options` (plain HTTP allowed)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
            "AWS_ALLOW_HTTP": "true",
        }

    def env(self) -> dict[str, str]:
        """The variables that point hakiri's sync at this server."""
        return {
            "HAKIRI_SYNC_KEY_ID": self.access_key,
            "HAKIRI_SYNC_KEY_SECRET": self.secret_key,
            "HAKIRI_SYNC_ENDPOINT": self.endpoint,
        }

    def stop(self) -> None:
        """Stop the server and remove its directory, objects and all. Safe to call twice."""
        self._halt()
        base, self._base = self._base, None
        if base is not None:
            shutil.rmtree(base, ignore_errors=True)

    # -- steps -------------------------------------------------------------

    def _launch(self, java: Path, jar: Path) -> None:
        assert self._base is not None
        properties = self._base / "s3proxy.conf"
        properties.write_text(
            "\n".join(
                [
                    f"s3proxy.endpoint={self.endpoint}",
                    "s3proxy.authorization=aws-v2-or-v4",
                    f"s3proxy.identity={self.access_key}",
                    f"s3proxy.credential={self.secret_key}",
                    # 4.1.0's name for the filesystem store (java.nio.file); the older
                    # `filesystem-nio2` is an alias of it there, kept for old configurations.
                    "jclouds.provider=filesystem",
                    f"jclouds.filesystem.basedir={self.root}",
                    "",
                ]
            )
        )
        with open(self._base / "s3proxy.log", "wb") as log:  # the child keeps its own handle
            self._process = subprocess.Popen(
                [
                    str(java),
                    *_JVM_OPTIONS,
                    # logback's own start-up chatter would bury s3proxy's lines in the log tail
                    "-Dlogback.statusListenerClass=ch.qos.logback.core.status.NopStatusListener",
                    "-jar",
                    str(jar),
                    "--properties",
                    str(properties),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self._base,
                # Not in the terminal's process group: Ctrl-C reaches pytest, whose fixture
                # teardown then stops the server, rather than the server mid-test.
                start_new_session=True,
            )
        (self._base / SERVER_FILE).write_text(str(self._process.pid))

    def _wait_until_answering(self) -> None:
        """Until any HTTP answer comes back: an unsigned GET / is refused (403) once it is up."""
        assert self._process is not None
        deadline = time.monotonic() + _START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                tail = self._log_tail()
                if "Failed to bind" in tail:  # s3proxy's words for a port already taken
                    raise _PortTaken
                raise S3ServerUnavailable(
                    f"s3proxy exited ({self._process.returncode}) before answering:\n{tail}"
                )
            try:
                with urllib.request.urlopen(f"{self.endpoint}/", timeout=2):
                    return
            except urllib.error.HTTPError:
                return
            except OSError:
                time.sleep(0.1)
        raise S3ServerUnavailable(
            f"s3proxy did not answer on {self.endpoint} within {_START_TIMEOUT_SECONDS:.0f} s:\n"
            f"{self._log_tail()}"
        )

    def _halt(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()  # s3proxy's shutdown hook stops Jetty
        try:
            process.wait(timeout=_STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _log_tail(self, lines: int = 30) -> str:
        assert self._base is not None
        try:
            text = (self._base / "s3proxy.log").read_text(errors="replace")
        except OSError:
            return "(no server log)"
        return "\n".join(text.splitlines()[-lines:])


class _PortTaken(Exception):
    """Another process bound the probed port before s3proxy did."""


def s3proxy_jar(env: Mapping[str, str] = os.environ) -> Path:
    """The s3proxy jar in hakiri's jar cache, downloaded and verified first if need be."""
    cache = cache_root(env) / "jars"
    jar = cache / _JAR
    if jar.is_file():  # only ever renamed into place whole and verified
        return jar
    if env.get(OFFLINE_ENV, "").strip().lower() in {"1", "true", "yes", "on"}:
        raise S3ServerUnavailable(
            f"{jar} is not cached and {OFFLINE_ENV} forbids downloading it; hint: {_HINT}"
        )
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f"{_JAR}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if jar.is_file():  # another process downloaded it while we waited
            return jar
        failures = []
        # A configured mirror stands in for Maven Central, as it does for Spark's resolver.
        for repository in maven_repositories(env) or (MAVEN_CENTRAL,):
            url = f"{repository.rstrip('/')}/{_ARTIFACT_PATH}"
            try:
                _download(url, jar)
                return jar
            except (OSError, _Corrupt) as exc:  # urllib's errors are OSErrors
                failures.append(f"{url}: {exc}")
        raise S3ServerUnavailable(
            f"could not download s3proxy {S3PROXY_VERSION}:\n  "
            + "\n  ".join(failures)
            + f"\nhint: {_HINT}"
        )


class _Corrupt(Exception):
    """A download whose SHA-1 is not the one its repository publishes."""


def _download(url: str, jar: Path) -> None:
    with urllib.request.urlopen(f"{url}.sha1", timeout=_DOWNLOAD_TIMEOUT_SECONDS) as response:
        # The file holds the hex digest, sometimes followed by the file's name.
        expected = response.read().decode("ascii", "replace").split()[0].lower()
    digest = hashlib.sha1(usedforsecurity=False)
    partial = jar.with_name(f"{jar.name}.partial-{os.getpid()}")
    try:
        with (
            urllib.request.urlopen(url, timeout=_DOWNLOAD_TIMEOUT_SECONDS) as response,
            open(partial, "wb") as out,
        ):
            while chunk := response.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != expected:
            raise _Corrupt(f"SHA-1 {digest.hexdigest()}, but the repository says {expected}")
        os.replace(partial, jar)
    finally:
        partial.unlink(missing_ok=True)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _reap_orphans() -> None:
    """Stop servers left behind by test sessions that died without cleaning up (kill -9)."""
    for base in Path("/tmp").glob(f"{DIR_PREFIX}*"):
        try:
            owner = int((base / OWNER_FILE).read_text().strip())
        except (OSError, ValueError):
            continue
        if pid_alive(owner):
            continue
        with contextlib.suppress(OSError, ValueError):
            server = int((base / SERVER_FILE).read_text().strip())
            # Only if that pid is still this directory's s3proxy, not a process that reused it.
            if str(base).encode() in Path(f"/proc/{server}/cmdline").read_bytes():
                os.kill(server, signal.SIGKILL)
        shutil.rmtree(base, ignore_errors=True)
