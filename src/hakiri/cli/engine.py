"""`hakiri engine status|stop`: the local Spark Connect server hakiri keeps warm."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from hakiri.cli.render import JsonFlag, ProjectDir, emit_json, err, out

app = typer.Typer(no_args_is_help=True)


@app.command("status")
def status(project: ProjectDir = Path("."), as_json: JsonFlag = False) -> None:
    """Show the local Spark Connect servers: port, pid, age, which command holds one, and
    which is this project's."""
    from hakiri.services.engine import engine_status

    found = engine_status(root=project)
    if as_json:
        emit_json(found)
        return
    if not found:
        err.print("no local Spark Connect server is running")
        return
    for server in found:
        state = "in use" if server["in_use"] else ("idle" if server["ready"] else "starting")
        mine = " (this project's)" if server["this_project"] else ""
        out.print(
            f"{server['fingerprint']}{mine}: {state}, sc://localhost:{server['port']}, "
            f"pid {server['pid']}, master {server['master']}, "
            f"up {_age(server['up_seconds'])}, hakiri {server['hakiri_version']}"
        )
        for holder in server["holders"]:
            out.print(f"  held by {_holder(holder)}")


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
def stop(
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="Stop servers a command is using, too (that command then fails)."
        ),
    ] = False,
) -> None:
    """Stop the local Spark Connect servers no command is using (the next command that needs
    Spark starts one)."""
    from hakiri.services.engine import stop_engines

    stopped, kept = stop_engines(force=force)
    if not stopped and not kept:
        err.print("no local Spark Connect server is running")
    for server in stopped:
        out.print(f"stopped {server['fingerprint']} (pid {server['pid']})")
    for server in kept:
        users = "; ".join(_holder(h) for h in server["holders"])
        err.print(
            f"kept {server['fingerprint']} (pid {server['pid']}): in use by {users}; "
            "`hakiri engine stop --force` stops it anyway"
        )


def _holder(holder: dict[str, Any]) -> str:
    what = holder["command"] or "a hakiri command"
    where = f" in {holder['project']}" if holder["project"] else ""
    pid = f" (pid {holder['pid']})" if holder["pid"] else ""
    return f"`{what}`{where}{pid}"


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"
