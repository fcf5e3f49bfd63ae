"""Benchmark: a new project's first `hakiri apply` on a machine where the example project's
local Spark server is already warm, before and after (issue 51, "a first apply in seconds").

    PYTHONPATH=src python bench/first_apply.py [--baseline 64d36ae] [--runs 3] [--jars-from DIR]

Each run, for each variant (this tree, and the baseline from a git worktree at
bench/.baseline-<sha>; the order alternates run by run), in a cache directory of its own
(`HAKIRI_CACHE_DIR`, its `jars/` and `jvm/` linked from --jars-from, so nothing is
downloaded and the servers are the run's only):

1. `example`: the example project's first `hakiri apply` (a copy of hakiri.toml, pipelines/
   and data/ in a temporary directory) in that fresh cache: it starts the local server cold.
2. `init`: `hakiri init` into a new directory, then `hakiri apply` there, with the example's
   server warm (whole-process wall time of both commands).
3. `init+tz`: the same, with one session setting in `[spark] conf` (a time zone), as a user
   who sets one has.

Then the run's servers are stopped. Wall times of whole processes; the load average is
printed with each row, as the machine is shared.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"


def _run(cmd: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.monotonic()
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)
    elapsed = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} in {cwd} failed:\n{done.stdout}\n{done.stderr}")
    return elapsed


def _tree(baseline: str) -> Path:
    sha = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--verify", f"{baseline}^{{commit}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    tree = BENCH / f".baseline-{sha[:7]}"
    if not tree.exists():
        print(f"creating a worktree of {baseline} at {tree} ...", flush=True)
        subprocess.run(
            ["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), sha], check=True
        )
    return tree


def _cache(root: Path, jars_from: Path) -> Path:
    cache = root / "cache"
    cache.mkdir()
    (cache / "jars").symlink_to(jars_from / "jars")
    if (jars_from / "jvm").is_dir():
        (cache / "jvm").symlink_to(jars_from / "jvm")
    return cache


def one_run(name: str, src: Path, jars_from: Path) -> dict[str, float]:
    hakiri = [sys.executable, "-m", "hakiri.cli.main"]
    with tempfile.TemporaryDirectory(prefix=f"first-apply-{name}-") as tmp:
        root = Path(tmp)
        env = {
            **os.environ,
            "PYTHONPATH": f"{src}:{src.parent}",
            "HAKIRI_CACHE_DIR": str(_cache(root, jars_from)),
            "HAKIRI_PROGRESS_SECONDS": "0",
        }
        env.pop("HAKIRI_SPARK_REMOTE", None)
        example = root / "example"
        example.mkdir()
        shutil.copy(REPO / "hakiri.toml", example)
        for part in ("pipelines", "data"):
            shutil.copytree(REPO / part, example / part)
        times = {"example": _run([*hakiri, "apply"], env, example)}
        for label, extra in (
            ("init", ""),
            ("init+tz", 'conf = { "spark.sql.session.timeZone" = "Europe/Paris" }\n'),
        ):
            project = root / label
            started = time.monotonic()
            _run([*hakiri, "init", str(project)], env, root)
            if extra:
                toml = project / "hakiri.toml"
                toml.write_text(
                    toml.read_text().replace(
                        'master = "local[*]"\n', f'master = "local[*]"\n{extra}'
                    )
                )
            _run([*hakiri, "apply"], env, project)
            times[label] = time.monotonic() - started
        engines = len(list((Path(env["HAKIRI_CACHE_DIR"]) / "engine").iterdir()))
        subprocess.run(
            [*hakiri, "engine", "stop", "--force"], env=env, cwd=root, capture_output=True
        )
        times["servers"] = engines
        return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="64d36ae")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--jars-from",
        type=Path,
        default=Path(os.environ.get("HAKIRI_CACHE_DIR", Path.home() / ".cache" / "hakiri")),
        help="a hakiri cache whose jars/ (and jvm/) the runs link",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    variants = {"before": _tree(args.baseline) / "src", "after": REPO / "src"}
    for src in variants.values():  # installed, hakiri has its bytecode (load_peers.compile_tree)
        compileall.compile_dir(str(src), quiet=1)
    results: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    for run in range(args.runs):
        order = list(variants) if run % 2 == 0 else list(reversed(variants))
        for name in order:
            times = one_run(name, variants[name], args.jars_from)
            load = os.getloadavg()[0]
            results[name].append({**times, "load": load})
            print(
                f"run {run + 1} {name:6}  example {times['example']:6.1f} s  "
                f"init {times['init']:6.1f} s  init+tz {times['init+tz']:6.1f} s  "
                f"servers {times['servers']:.0f}  load {load:.2f}",
                flush=True,
            )
    for name, rows in results.items():
        medians = {k: statistics.median(r[k] for r in rows) for k in ("example", "init", "init+tz")}
        print(f"median {name:6}  " + "  ".join(f"{k} {v:.1f} s" for k, v in medians.items()))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
