"""What each destination can do, declared once: the write primitives the load modes use,
identifier length, replay, SQL hooks.

`plan` reports a pipeline that asks for more as an error, and the engine refuses it
before any data moves, both through `refusals`; each destination kind names its
capabilities (`destinations.kinds.KINDS`, and the destination classes' `capabilities`).
"""

from __future__ import annotations

from dataclasses import dataclass

from hakiri.errors import HakiriError, HookError
from hakiri.spec.hooks import RefreshMatViewHook, SqlHook
from hakiri.spec.modes import WRITE_PRIMITIVES, LoadStrategy, registered_modes
from hakiri.spec.pipeline import PipelineSpec

__all__ = ["CONTEXT", "POSTGRES", "Capabilities", "check_replay", "refusals"]


@dataclass(frozen=True)
class Capabilities:
    kind: str  # 'postgres' | 'context', as `spec.connections.Target.kind`
    # The `spec.modes.ModeWriter` primitives it offers; it loads every mode that needs no other.
    primitives: frozenset[str]
    max_identifier_bytes: int | None  # longer names are refused, never truncated
    replay: bool  # `hakiri replay` can load quarantined rows back
    sql_hooks: bool  # `sql` and `refresh_mat_view` hooks run in the destination

    def can_write(self, strategy: LoadStrategy) -> bool:
        return set(strategy.needs) <= self.primitives

    @property
    def modes(self) -> list[str]:
        """The load modes it can write, by name."""
        return [name for name, s in registered_modes().items() if self.can_write(s)]


# Both offer every primitive of `ModeWriter`, so both load every mode (cdc_mirror's `mirror`:
# PostgreSQL's three statements, the context store's one Delta MERGE).
POSTGRES = Capabilities("postgres", WRITE_PRIMITIVES, 63, replay=True, sql_hooks=True)
CONTEXT = Capabilities("context", WRITE_PRIMITIVES, None, replay=False, sql_hooks=False)

NO_SQL_HOOKS = (
    "sql and refresh_mat_view hooks need a PostgreSQL destination; the context store has no "
    "SQL engine"
)
NO_SQL_HOOKS_HINT = (
    "remove those hooks from [pipeline.hooks] or load into PostgreSQL; webhook hooks work "
    "with the context store"
)


def refusals(spec: PipelineSpec, capabilities: Capabilities) -> list[HakiriError]:
    """What `spec` asks of a destination that it cannot do; empty when it can do it all."""
    found: list[HakiriError] = []
    mode = spec.load.mode
    if not capabilities.can_write(spec.load.strategy):
        found.append(
            HakiriError(
                f"load mode {mode} is not supported by the {capabilities.kind} destination",
                "pick another load mode (docs/load-modes.md lists each destination's)",
            )
        )
    if not capabilities.sql_hooks:
        slots = [
            slot
            for slot, hooks in (("pre", spec.hooks.pre), ("post", spec.hooks.post))
            if any(isinstance(h, SqlHook | RefreshMatViewHook) for h in hooks)
        ]
        if slots:
            found.append(
                HookError(f"{' and '.join(slots)} hooks: {NO_SQL_HOOKS}", NO_SQL_HOOKS_HINT)
            )
    return found


def check_replay(capabilities: Capabilities) -> None:
    if not capabilities.replay:
        raise HakiriError(
            f"replay into the {'context store' if capabilities.kind == 'context' else capabilities.kind} "
            "is not supported yet",
            "read the quarantined rows with `hakiri errors`, fix them at the source and apply "
            "again; replay works for PostgreSQL targets",
        )
