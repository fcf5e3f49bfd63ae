"""`hakiri engine status|stop`: the local Spark Connect server hakiri keeps warm."""

from __future__ import annotations

from pathlib import Path

import typer

from hakiri.cli.render import JsonFlag, ProjectDir, emit_json, err, out

app = typer.Typer(no_args_is_help=True)


@app.command("status")
def status(as_json: JsonFlag = False) -> None:
    """Show the local Spark Connect servers: port, pid, age, and whether a command uses one."""
    from hakiri.services.engine import engine_status

    found = engine_status()
    if as_json:
        emit_json(found)
        return
    if not found:
        err.print("no local Spark Connect server is running")
        return
    for server in found:
        state = "in use" if server["in_use"] else ("idle" if server["ready"] else "starting")
        out.print(
            f"{server['fingerprint']}: {state}, sc://localhost:{server['port']}, "
            f"pid {server['pid']}, master {server['master']}, "
            f"up {_age(server['up_seconds'])}, hakiri {server['hakiri_version']}"
        )


@app.command("start")
def start(project: ProjectDir = Path(".")) -> None:
    """Start the local Spark Connect server for this project's jars and settings (or find it
    running), so the next command finds it warm."""
    from hakiri.services.engine import start_engine

    server = start_engine(project)
    out.print(
        f"{server['fingerprint']}: ready on sc://localhost:{server['port']} (pid {server['pid']})"
    )


@app.command("stop")
def stop() -> None:
    """Stop the local Spark Connect servers (the next command that needs Spark starts one)."""
    from hakiri.services.engine import stop_engines

    stopped = stop_engines()
    if not stopped:
        err.print("no local Spark Connect server is running")
    for server in stopped:
        out.print(f"stopped {server['fingerprint']} (pid {server['pid']})")


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"
