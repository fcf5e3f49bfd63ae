"""The one exception tree of hakiri.

    HakiriError                 reason + hint + exit code; the CLI prints these as one line each
    ├── ManifestError           a project or pipeline manifest is invalid (carries Diagnostics)
    ├── ProjectNotFound         no hakiri.toml where we looked
    ├── PipelineNotFound        an id that no manifest defines
    ├── PlanStale               a saved plan no longer describes what apply would do
    ├── EditError               a pipeline create/convert/edit request that cannot be carried out
    ├── SparkSetupError         no usable engine setup (Java, a jar, Sail, a remote endpoint)
    │   └── EngineLost          the engine stopped answering while a command used it
    ├── CatalogError            the control-plane catalog cannot be opened or used
    │   └── CatalogOutdated     the catalog's schema is older (or newer) than this hakiri
    ├── LeaseHeld               another process holds the pipeline's lease
    ├── SecretMissing           a secret the pipeline declares is not in the environment
    ├── SourceUnreachable       a source system cannot be reached or read
    │   └── SourceRefused       the source answered and refused the request (401/403/404)
    ├── SourceDataError         a source's data cannot be read as declared (malformed record, missing file)
    │   └── SourceChanged       a batch's file changed or vanished before the batch committed
    ├── DestinationUnreachable  a destination system cannot be reached or read
    ├── LoadError               a load was refused or failed; the target is left as it was
    │   ├── EmptySource         truncate/blue_green refused: the source produced 0 rows
    │   ├── DeletesRefused      the delete guard refused the batch's deletes or closes
    │   └── TransientLoadError  (destinations.postgres) a lock timeout or deadlock, retried
    ├── SchemaIncompatible      the source's columns cannot reach the target under the schema policy
    │   └── SchemaRefused       (planner.evolution) the same, with the blocked changes for `schema accept`
    ├── TargetLost              a target dropped by hand that the source cannot give all of back
    ├── UnsafeExpression        a transform expression or type the sandbox refuses
    ├── UnsafeQuery             a view's or a query's SQL the query guard refuses
    ├── QueryTimeout            a query ran over its time limit and was stopped
    ├── TransformError          a transform step cannot apply to the batch (missing column, wrong type)
    ├── DataQualityError        the batch's data broke a check; nothing was published
    │   ├── RuleViolation       a row rule with on_fail = "abort"
    │   └── ValidationFailed    a dataset validator with on_fail = "abort"
    ├── HookError               a pre/post hook failed to run
    │   └── UnsafeHook          a hook the SQL guard or the webhook (SSRF) guard refused
    ├── ServeError              `hakiri serve` cannot start (port taken, address not ours)
    ├── CompileFailed           (spark.compile.module) a transforms module `hakiri compile` cannot compile
    ├── CompileRefusal          (spark.compile.expressions) a construct in transform(df) steps cannot carry
    └── SyncFailed              `hakiri sync` could not publish the store or pull it back
        └── SyncDiverged        the bucket and the local store hold different histories

Every user-facing failure is a HakiriError. Anything else reaching the CLI is a
bug; the CLI still prints it as one line and shows the traceback only with --debug.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CatalogError",
    "CatalogOutdated",
    "DataQualityError",
    "DeletesRefused",
    "DestinationUnreachable",
    "Diagnostic",
    "EditError",
    "EmptySource",
    "EngineLost",
    "HakiriError",
    "HookError",
    "LeaseHeld",
    "LoadError",
    "ManifestError",
    "PipelineNotFound",
    "PlanStale",
    "ProjectNotFound",
    "QueryTimeout",
    "RuleViolation",
    "SchemaIncompatible",
    "SecretMissing",
    "ServeError",
    "SourceChanged",
    "SourceDataError",
    "SourceRefused",
    "SourceUnreachable",
    "SparkSetupError",
    "SyncDiverged",
    "SyncFailed",
    "TargetLost",
    "TransformError",
    "UnsafeExpression",
    "UnsafeHook",
    "UnsafeQuery",
    "ValidationFailed",
]


@dataclass(frozen=True)
class Diagnostic:
    """One problem (or warning) found in a manifest, pinned to a file, line and key path."""

    message: str
    file: Path | None = None
    line: int | None = None
    path: str = ""
    hint: str | None = None
    severity: str = "error"  # "error" | "warning"

    @property
    def where(self) -> str:
        if self.file is None:
            return self.path
        loc = f"{self.file}:{self.line}" if self.line else str(self.file)
        return f"{loc} at {self.path}" if self.path else loc

    def render(self) -> str:
        text = (
            f"{self.severity}: {self.message} ({self.where})"
            if self.where
            else f"{self.severity}: {self.message}"
        )
        return f"{text}\n  hint: {self.hint}" if self.hint else text

    def to_json(self) -> dict[str, object]:
        return {
            "severity": self.severity,
            "message": self.message,
            "file": str(self.file) if self.file else None,
            "line": self.line,
            "path": self.path,
            "hint": self.hint,
        }


class HakiriError(Exception):
    """Base of every error a user can cause. `reason` is one line; `hint` says what to do."""

    exit_code = 1

    def __init__(self, reason: str, hint: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.hint = hint


class ManifestError(HakiriError):
    """The manifests have one or more errors; each is a Diagnostic with file:line."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        errors = [d for d in diagnostics if d.severity == "error"]
        noun = "problem" if len(errors) == 1 else "problems"
        super().__init__(
            f"{len(errors)} {noun} in the project manifests",
            "fix the lines above, then run `hakiri validate`",
        )
        self.diagnostics = diagnostics


class ProjectNotFound(HakiriError):
    pass


class PipelineNotFound(HakiriError):
    pass


class PlanStale(HakiriError):
    """A saved plan that no longer describes what apply would do, or is no plan at all."""


class EditError(HakiriError):
    pass


class SparkSetupError(HakiriError):
    pass


class EngineLost(SparkSetupError):
    pass


class CatalogError(HakiriError):
    pass


class CatalogOutdated(CatalogError):
    pass


class LeaseHeld(HakiriError):
    pass


class SecretMissing(HakiriError):
    pass


class SourceUnreachable(HakiriError):
    pass


class SourceRefused(SourceUnreachable):
    """The source answered and refused: bad credentials, no permission, no such endpoint.
    Asking again cannot help, so it is never retried; `status` is the HTTP status."""

    def __init__(self, reason: str, hint: str | None = None, *, status: int) -> None:
        super().__init__(reason, hint)
        self.status = status

    def __reduce__(self) -> tuple[Any, ...]:
        # Raised inside engine tasks: it must cross a process boundary whole.
        return (functools.partial(type(self), status=self.status), (self.reason, self.hint))


class DestinationUnreachable(HakiriError):
    pass


class SourceDataError(HakiriError):
    pass


class SourceChanged(SourceDataError):
    """A batch's file changed (`status` 'superseded') or vanished ('gone') between planning
    and commit. Not a failure: the engine ends the batch with that status and plans the
    file's current content as a batch of its own."""

    def __init__(self, reason: str, *, status: str) -> None:
        super().__init__(reason, "nothing to do: apply loads the file's current content instead")
        self.status = status


class LoadError(HakiriError):
    pass


class EmptySource(LoadError):
    pass


class DeletesRefused(LoadError):
    """The delete guard refused a load whose snapshot is empty, or would delete or close too
    many rows."""


class SchemaIncompatible(HakiriError):
    pass


class TargetLost(HakiriError):
    """A target was dropped since hakiri loaded it, and the source cannot give all of it back."""


class UnsafeExpression(HakiriError):
    """A transform expression or type the sandbox refuses (or cannot read)."""


class UnsafeQuery(HakiriError):
    """A view's or a query's SQL the query guard refuses; `line`/`column` point into the SQL."""

    def __init__(
        self,
        reason: str,
        hint: str | None = None,
        *,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        super().__init__(reason, hint)
        self.line, self.column = line, column


class QueryTimeout(HakiriError):
    """A query (`hakiri query`, serve's /v1/query) ran over its time limit and was stopped."""


class TransformError(HakiriError):
    """A transform step cannot apply to the batch: a missing column, a column of the wrong type."""


class DataQualityError(HakiriError):
    """A row rule or dataset validator with on_fail = "abort" failed; nothing was published."""


class RuleViolation(DataQualityError):
    pass


class ValidationFailed(DataQualityError):
    pass


class HookError(HakiriError):
    """A pre/post hook failed to run."""


class UnsafeHook(HookError):
    """A hook was refused by the SQL guard or the webhook (SSRF) guard."""


class ServeError(HakiriError):
    """`hakiri serve` cannot start (the port is taken, the address is not ours)."""


class SyncFailed(HakiriError):
    """`hakiri sync` could not publish the context store to its bucket, or pull it back."""


class SyncDiverged(SyncFailed):
    """The bucket and the local store hold different histories of a table."""
