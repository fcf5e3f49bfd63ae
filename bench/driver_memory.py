"""Benchmark: the driver's peak RSS while `hakiri apply` upserts 1M, then 10M rows on a Spark cluster.

The issue's criterion: nothing is collected to the driver, so its peak RSS does not grow
with the rows: peak(largest size) / peak(smallest size) <= 1.2, per destination and phase.

    .venv/bin/python bench/driver_memory.py [--sizes 1000000,10000000] [--pg-url URL]
        [--destinations context,postgres] [--driver-memory 1g] [--src DIR] [--json FILE]

Data, per size N: bench/.data/driver-memory-<N>/rev0.csv and rev1.csv (pyarrow, written
500,000 rows at a time, once), each with every id 0..N-1 once and rev 0 or 1, name,
amount decimal(12,2), day date, at timestamp, active boolean, note (NULL every 10th row).

The loads run on tests.support.spark_cluster (a master, two one-core workers). Per size
and destination, a fresh project with one pipeline over `data/*.csv` (declared columns),
mode upsert on `id`, into the context store or a PostgreSQL schema of its own (writer
"copy" at every size), is applied twice; both are measured and gated: `create` (data/
holds a symlink to rev0.csv; this first upsert creates the target with N rows), then
`merge` (rev1.csv added: one new file, one batch, upserted into the full target: all N
keys updated).

Each apply is `python -m hakiri.cli.main apply --project DIR` (PYTHONPATH=--src, default
<repo>/src) in a session of its own. Every 100 ms the process tree under it is read from
/proc; the peak of its summed VmRSS (Python, the driver JVM, spark-class's launcher JVM,
shells) is the figure gated; each process's VmHWM is reported beside it, and the
processes' VmRSS in the peak's sample. Not counted: descendants in a session of their own
(hakiri's class-data sharing warm-up, Hadoop's setsid probe), and children that have not
exec'd since their fork (same executable as their parent: a subshell, or the JVM's vfork
before it runs chmod, named after the forking thread; its pages are the parent's, which
a sum would count twice). The cluster's master, workers and executors are no
descendants of the apply. spark.driver.memory is pinned (--driver-memory) and the driver
JVM's -Xmx is checked.

Verified after every apply: exit code 0, N rows in the target (deltalake count_rows;
PostgreSQL count(*)), all with rev = 1 after the merge; a failure exits 1, a ratio over
the gate exits 2. A warm-up (1,000 rows, not reported) fills the jar cache and waits for
hakiri's class-data sharing archive first. Without --pg-url, a throwaway PostgreSQL
(tests.support.postgres) is started and stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.support

import numpy as np
import psycopg
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from psycopg import sql
from pyarrow import csv as pa_csv
from tests.support.postgres import TestPostgres
from tests.support.spark_cluster import StandaloneCluster

REPO = Path(__file__).resolve().parents[1]
DATA_DIR = REPO / "bench" / ".data"
CHUNK = 500_000
GATE = 1.2
WARM_UP_ROWS = 1_000
DESTINATIONS = ("context", "postgres")
PHASES = ("create", "merge")
TYPES = {  # column: (pyarrow type written, Spark SQL type declared); amount is cents / 100
    "id": (pa.int64(), "bigint"), "rev": (pa.int32(), "int"), "name": (pa.string(), "string"),
    "amount": (pa.float64(), "decimal(12,2)"), "day": (pa.date32(), "date"),
    "at": (pa.timestamp("s"), "timestamp"), "active": (pa.bool_(), "boolean"),
    "note": (pa.string(), "string"),
}  # fmt: skip
SCHEMA = pa.schema([(name, arrow) for name, (arrow, _) in TYPES.items()])
COLUMNS = "{ " + ", ".join(f'{name} = "{spark}"' for name, (_, spark) in TYPES.items()) + " }"
SUBMIT = "org.apache.spark.deploy.SparkSubmit"  # in the driver JVM's argv (and the launcher's)
LAUNCHER = "org.apache.spark.launcher.Main"  # spark-class's launcher, which builds that argv


@dataclass
class Setup:
    master: str  # the cluster's spark:// URL
    pg_url: str
    driver_memory: str
    src: Path  # the hakiri sources the applies run (PYTHONPATH)


@dataclass
class Run:
    destination: str
    rows: int
    phase: str
    seconds: float
    peak_rss_mb: float  # the tree's summed VmRSS, sampled: the figure gated
    jvm_hwm_mb: float
    python_hwm_mb: float
    hwm_sum_mb: float  # every process's VmHWM, summed: an upper bound of the peak
    processes: dict[str, float] = field(default_factory=dict)  # "pid name" -> VmHWM MB
    at_peak: dict[str, float] = field(default_factory=dict)  # "pid name" -> VmRSS MB then
    excluded: list[str] = field(default_factory=list)  # "pid name" in other sessions


class BenchError(Exception):
    """A load that failed or does not hold what it should."""


def csv_file(rows: int, rev: int) -> Path:
    path = DATA_DIR / f"driver-memory-{rows}" / f"rev{rev}.csv"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    options = pa_csv.WriteOptions(quoting_style="needed")
    with pa_csv.CSVWriter(partial, SCHEMA, write_options=options) as writer:
        for start in range(0, rows, CHUNK):
            ids = np.arange(start, min(start + CHUNK, rows), dtype=np.int64)
            notes = pc.binary_join_element_wise("note ", pa.array(ids % 1000).cast(pa.string()), "")
            columns = [
                pa.array(ids),
                pa.array(np.full(len(ids), rev, dtype=np.int32)),
                pc.binary_join_element_wise(
                    "name-", pa.array(ids).cast(pa.string()), f"-{rev}", ""
                ),
                pa.array(((ids * 37 + rev) % 1_000_000) / 100),
                pa.array((18_000 + ids % 2_000 + rev).astype(np.int32)).cast(pa.date32()),
                pa.array(1_700_000_000 + ids * 7 + rev * 86_400).cast(pa.timestamp("s")),
                pa.array(ids % 3 == rev),
                pc.if_else(pa.array(ids % 10 == 0), pa.scalar(None, pa.string()), notes),
            ]
            writer.write_table(pa.Table.from_arrays(columns, schema=SCHEMA))
    partial.rename(path)
    return path


def proc_table() -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, session id, name) of every process, from /proc/<pid>/stat."""
    table = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                data = Path(f"/proc/{entry.name}/stat").read_bytes()
            except OSError:
                continue
            close = data.rindex(b")")
            fields = data[close + 2 :].split()
            name = data[data.index(b"(") + 1 : close].decode(errors="replace")
            table[int(entry.name)] = (int(fields[1]), int(fields[3]), name)
    return table


def status_kb(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM in kB ({} once the process is gone or a zombie)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    pairs = (line.partition(":") for line in lines)
    return {k: int(v.split()[0]) for k, _, v in pairs if k in ("VmRSS", "VmHWM")}


def exe(pid: int) -> str:
    """The executable: a child shows its parent's until it execs (swapped with its memory)."""
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


class TreeSampler(threading.Thread):
    """Samples the process tree under `root` (in root's session) every `interval` seconds."""

    def __init__(self, root: int, interval: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.root, self.interval, self.done = root, interval, threading.Event()
        self.peak_kb = 0
        self.at_peak: dict[str, int] = {}  # "pid name" -> VmRSS kB in the peak's sample
        self.hwm_kb: dict[int, int] = {}
        self.names: dict[int, str] = {}
        self.excluded: dict[int, str] = {}
        self.jvm: int | None = None
        self.xmx: list[str] = []

    def run(self) -> None:
        while not self.done.wait(self.interval):
            self.sample()
        self.sample()

    def sample(self) -> None:
        table = proc_table()
        children: dict[int, list[int]] = {}
        for pid, (ppid, _, _) in table.items():
            children.setdefault(ppid, []).append(pid)
        rss: dict[str, int] = {}
        todo = [self.root]
        while todo:
            pid = todo.pop()
            todo.extend(children.get(pid, []))
            parent, session, name = table.get(pid, (0, self.root, "?"))
            if session != self.root:
                self.excluded[pid] = name
                continue
            if pid != self.root and exe(pid) == exe(parent) != "":
                continue  # not exec'd since its fork: its parent's pages (shared, for a vfork)
            kb = status_kb(pid)
            rss[f"{pid} {name}"] = kb.get("VmRSS", 0)
            if "VmHWM" not in kb:
                continue
            self.hwm_kb[pid] = max(self.hwm_kb.get(pid, 0), kb["VmHWM"])
            if name == "java" and self.names.get(pid) != "java" and self.jvm is None:
                argv = cmdline(pid)  # the shells spark-submit and spark-class exec the JVM
                if SUBMIT in argv and LAUNCHER not in argv:
                    self.jvm, self.xmx = pid, [a for a in argv if a.startswith("-Xmx")]
            self.names[pid] = name
        if sum(rss.values()) > self.peak_kb:
            self.peak_kb, self.at_peak = sum(rss.values()), rss


def write_project(root: Path, setup: Setup, destination: str) -> None:
    (root / "data").mkdir(parents=True)
    writer = ', writer = "copy"' if "postgres" in destination else ""
    (root / "hakiri.toml").write_text(f"""[project]
name = "bench-driver-memory"

[spark]
master = "{setup.master}"
conf = {{ "spark.driver.memory" = "{setup.driver_memory}" }}

[[pipeline]]
id = "rows"
source = {{ connector = "files", config = {{ path = "data/*.csv", format = "csv", columns = {COLUMNS} }} }}
tables = [{{ name = "t", target = "rows" }}]
destination = {destination}
load = {{ mode = "upsert", upsert_key = ["id"]{writer} }}
""")


def apply(root: Path, label: str, src: Path) -> tuple[float, TreeSampler]:
    path = os.pathsep.join(p for p in (str(src), os.environ.get("PYTHONPATH")) if p)
    log = root / f"apply-{label.replace(' ', '-')}.log"
    began = time.monotonic()
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "hakiri.cli.main", "apply", "--project", str(root)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": path},
            start_new_session=True,  # its own session: the driver's processes, and no others
        )  # fmt: skip
        sampler = TreeSampler(process.pid)
        sampler.start()
        try:
            code = process.wait(timeout=3 * 3600)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            code = process.wait()
        finally:
            sampler.done.set()
            sampler.join()
    seconds = time.monotonic() - began
    if code != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise BenchError(f"{label}: hakiri apply exited {code}:\n{tail}")
    return seconds, sampler


def count(destination: str, root: Path, pg_url: str, schema: str) -> tuple[int, int]:
    """(rows, rows with rev = 1) in the target."""
    if destination == "context":
        dataset = DeltaTable(str(root / ".hakiri" / "context" / "rows")).to_pyarrow_dataset()
        return dataset.count_rows(), dataset.count_rows(filter=pc.field("rev") == 1)
    query = sql.SQL("SELECT count(*), count(*) FILTER (WHERE rev = 1) FROM {}")
    with psycopg.connect(pg_url) as conn:
        found = conn.execute(query.format(sql.Identifier(schema, "rows"))).fetchone()
    return (int(found[0]), int(found[1])) if found else (0, 0)


def pg_schema(pg_url: str, schema: str, *, create: bool) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        if create:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))


def load(setup: Setup, destination: str, rows: int) -> list[Run]:
    """Both applies (create, then merge) of one size into a fresh project and target."""
    schema, target = f"bench_driver_memory_{rows}", '{ connector = "context" }'
    if destination == "postgres":
        pg_schema(setup.pg_url, schema, create=True)
        config = f'{{ url = "{setup.pg_url}", schema = "{schema}" }}'
        target = f'{{ connector = "postgres", config = {config} }}'
    root = Path(tempfile.mkdtemp(prefix="hakiri-bench-driver-memory-"))
    runs = []
    try:
        write_project(root, setup, target)
        for rev, phase in enumerate(PHASES):
            (root / "data" / f"rev{rev}.csv").symlink_to(csv_file(rows, rev))
            label = f"{destination} {rows:,} {phase}"
            seconds, sampler = apply(root, label, setup.src)
            found, updated = count(destination, root, setup.pg_url, schema)
            if found != rows or (phase == "merge" and updated != rows):
                raise BenchError(f"{label}: {found:,} rows ({updated:,} rev 1), not {rows:,}")
            if sampler.xmx != [f"-Xmx{setup.driver_memory}"]:
                raise BenchError(
                    f"{label}: the driver JVM had {sampler.xmx}, not -Xmx{setup.driver_memory}"
                )
            mb = {pid: kb / 1024 for pid, kb in sampler.hwm_kb.items()}
            runs.append(
                Run(
                    destination, rows, phase, seconds,
                    peak_rss_mb=sampler.peak_kb / 1024,
                    jvm_hwm_mb=mb.get(sampler.jvm or -1, 0.0),
                    python_hwm_mb=mb.get(sampler.root, 0.0),
                    hwm_sum_mb=sum(mb.values()),
                    processes={f"{p} {sampler.names[p]}": round(v, 1) for p, v in mb.items()},
                    at_peak={k: round(v / 1024, 1) for k, v in sampler.at_peak.items() if v},
                    excluded=[f"{p} {n}" for p, n in sampler.excluded.items()],
                )
            )  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if destination == "postgres":
            pg_schema(setup.pg_url, schema, create=False)
    return runs


def machine(pg_url: str, src: Path) -> dict[str, Any]:
    import deltalake
    import pyspark

    mem_kb = int(Path("/proc/meminfo").read_text().split()[1])
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    git = ["git", "-C", str(REPO), "describe", "--always", "--dirty"]
    info: dict[str, Any] = {
        "cpus": os.cpu_count(), "memory": f"{mem_kb / 1024**2:.1f} GiB",
        "python": platform.python_version(), "java": (java.splitlines() or ["?"])[0],
        "spark": pyspark.__version__, "pyarrow": pa.__version__, "deltalake": deltalake.__version__,
        "hakiri": f"{src} (repository at {subprocess.run(git, capture_output=True, text=True).stdout.strip()})",
    }  # fmt: skip
    if pg_url:
        with psycopg.connect(pg_url) as conn:
            info["postgresql"] = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
    return info


def report(runs: list[Run], destinations: list[str]) -> dict[str, dict[str, float]]:
    print(
        f"\n{'':21} {'rows':>11} {'peak RSS':>9} {'JVM HWM':>8} {'Py HWM':>7} {'HWM sum':>8} {'wall':>7}"
    )
    for r in runs:
        print(
            f"{r.destination:9} {r.phase:11} {r.rows:>11,} {r.peak_rss_mb:>6.0f} MB {r.jvm_hwm_mb:>5.0f} MB "
            f"{r.python_hwm_mb:>4.0f} MB {r.hwm_sum_mb:>5.0f} MB {r.seconds:>6.1f}s"
        )
    ratios: dict[str, dict[str, float]] = {}
    for destination in destinations:
        for phase in PHASES:
            mine = sorted(
                (r for r in runs if (r.destination, r.phase) == (destination, phase)),
                key=lambda r: r.rows,
            )
            low, high = mine[0], mine[-1]
            ratio = high.peak_rss_mb / low.peak_rss_mb
            ratios.setdefault(destination, {})[phase] = round(ratio, 3)
            print(
                f"{destination} {phase}: peak RSS {high.rows:,} / {low.rows:,} rows = {high.peak_rss_mb:.0f} / "
                f"{low.peak_rss_mb:.0f} MB = {ratio:.2f} -> {'PASS' if ratio <= GATE else 'FAIL'} (<= {GATE})"
            )
    return ratios


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,10000000", help="comma-separated row counts")
    parser.add_argument("--destinations", default=",".join(DESTINATIONS))
    parser.add_argument("--driver-memory", default="1g", help="spark.driver.memory, every run")
    parser.add_argument("--pg-url", help="an existing PostgreSQL (default: start a throwaway one)")
    parser.add_argument("--src", type=Path, default=REPO / "src", help="the hakiri sources to run")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    destinations = [d for d in args.destinations.split(",") if d]
    if len(sizes) < 2 or not destinations or not set(destinations) <= set(DESTINATIONS):
        parser.error(f"--sizes: two sizes or more; --destinations: among {DESTINATIONS}")
    if not (args.src / "hakiri" / "__init__.py").is_file():
        parser.error(f"--src {args.src}: no hakiri package there")

    for rows in sorted({WARM_UP_ROWS, *sizes}):
        began, files = time.monotonic(), [csv_file(rows, rev) for rev in (0, 1)]  # when missing
        mb = sum(f.stat().st_size for f in files) / 1e6
        print(f"data {rows:,} rows: 2 files, {mb:,.0f} MB ({time.monotonic() - began:.1f} s)")
    server = TestPostgres().start() if "postgres" in destinations and not args.pg_url else None
    pg_url = args.pg_url or (server.url if server else "")
    cluster, runs = StandaloneCluster(), []
    try:
        info = machine(pg_url, args.src.resolve())
        print("machine:", "; ".join(f"{k} {v}" for k, v in info.items()))
        cluster.start()
        setup = Setup(cluster.url, pg_url, args.driver_memory, args.src.resolve())
        print(f"cluster {cluster.url}: 2 workers, 1 core, 1 GiB each; driver {args.driver_memory}")
        for destination in destinations:  # warm-up: the jar cache, the class-sharing archive
            warm = load(setup, destination, WARM_UP_ROWS)
            pids = [int(p.split()[0]) for r in warm for p in r.excluded]
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
                time.sleep(1)
        for rows in sizes:
            for destination in destinations:
                for run in load(setup, destination, rows):
                    runs.append(run)
                    took = f"{run.seconds:.1f} s, peak RSS {run.peak_rss_mb:.0f} MB"
                    print(f"{destination} {rows:,} {run.phase}: {took}", flush=True)
    except BenchError as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        cluster.stop()
        if server is not None:
            server.stop()
    ratios = report(runs, destinations)
    passed = all(r <= GATE for phases in ratios.values() for r in phases.values())
    print(f"overall: {'PASS' if passed else 'FAIL'} (gate: peak RSS ratio <= {GATE})")
    if args.json:
        document = {"machine": info, "driver_memory": args.driver_memory, "gate": GATE}
        document |= {"runs": [asdict(r) for r in runs], "ratios": ratios, "pass": passed}
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    return 0 if passed else 2


if __name__ == "__main__":
    sys.exit(main())
