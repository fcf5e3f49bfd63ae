"""`hakiri`: the root command, global flags, and the one place errors become exit codes."""

from __future__ import annotations

import os
import sys
import traceback
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from hakiri import __version__
from hakiri.cli import (
    apply,
    backfill,
    cdc,
    compile,
    context,
    diff,
    engine,
    pipeline,
    plan,
    project,
    quality,
    query,
    schema,
    serve,
    state,
    sync,
)
from hakiri.cli.render import emit_json_error, err, error, reset_json
from hakiri.errors import HakiriError
from hakiri.spark.jvm_output import DEBUG_ENV

_debug = {"on": os.environ.get(DEBUG_ENV) == "1"}


class _HakiriGroup(TyperGroup):
    """Turns every error into one line plus a hint and exit code 1; tracebacks only with --debug."""

    def invoke(self, ctx: Any) -> Any:
        reset_json()  # in-process callers (tests) run several commands in one process
        try:
            return super().invoke(ctx)
        except HakiriError as exc:
            if _debug["on"]:
                traceback.print_exc()
            error(exc)
            raise SystemExit(exc.exit_code) from None
        except Exception as exc:
            # Usage errors, --help and typer.Exit belong to the CLI framework (click,
            # vendored by newer typer releases): let it render them as usual.
            if type(exc).__module__.split(".")[0] in ("click", "typer"):
                raise
            from hakiri.spark.errors import is_spark_failure, translate

            if is_spark_failure(exc):  # an engine failure no layer below put into words
                if _debug["on"]:
                    traceback.print_exc()
                failure = translate(exc)
                error(failure)
                raise SystemExit(failure.exit_code) from None
            # Anything else is a bug: still one line, never a bare traceback.
            if _debug["on"]:
                traceback.print_exc()
            message = f"internal error: {type(exc).__name__}: {exc}"
            hint = "rerun with --debug for the traceback, and please report it"
            err.print(f"[red]error:[/red] {message}")
            err.print(f"  [dim]hint:[/dim] {hint}")
            emit_json_error(message, hint, "InternalError")
            raise SystemExit(1) from None


app = typer.Typer(
    cls=_HakiriGroup,
    name="hakiri",
    help="Declarative data pipelines on PySpark: validate, plan, apply, serve.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"hakiri {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
    debug: Annotated[
        bool,
        typer.Option("--debug", help="Show tracebacks for errors, and the JVM's own output."),
    ] = False,
) -> None:
    _debug["on"] = _debug["on"] or debug
    if debug:
        os.environ[DEBUG_ENV] = "1"  # the Spark layer leaves the JVM's output on the terminal


app.command("init")(project.init)
app.command("validate")(project.validate)
app.command("compile")(compile.compile_)
app.command("plan")(plan.plan)
app.command("apply")(apply.apply)
app.command("run")(apply.run)
app.command("gc")(apply.gc)
app.command("serve")(serve.serve)
app.command("diff")(diff.diff)
app.command("query")(query.query)
app.command("runs")(state.runs)
app.command("status")(state.status)
app.command("alerts")(quality.alerts)
app.command("errors")(quality.errors)
app.command("replay")(quality.replay)
app.add_typer(
    schema.app,
    name="schema",
    help="Export or check the manifests' JSON Schemas; list and accept schema-evolution events.",
)
app.add_typer(pipeline.app, name="pipeline", help="Create, convert and edit pipeline manifests.")
app.add_typer(context.app, name="context", help="Read and maintain the Delta context store.")
app.add_typer(backfill.app, name="backfill", help="Rewind and inspect backfills of table sources.")
app.add_typer(cdc.app, name="cdc", help="The replication slot of a cdc_mirror pipeline.")
app.add_typer(
    sync.app,
    name="sync",
    help="Publish the context store to its \\[sync] bucket (--status; pull to restore it).",
)
app.add_typer(engine.app, name="engine", help="Show or stop hakiri's local Spark Connect server.")


def main() -> None:
    app(prog_name="hakiri")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
