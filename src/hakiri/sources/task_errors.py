"""A hakiri error raised inside an engine task, carried back whole.

Engines report a task's failure as text (Spark Connect wraps it in its own error, Sail in
another). A task that fails with a hakiri error (a refused token, a change the mirror
cannot apply) raises one marked line instead, and `task_error` rebuilds the error from
what the engine reports, so the user reads the task's one-line reason and hint:

    with carried():                       # in the task
        yield from read_pages(...)
    ...
    BatchRead(frame, explain=task_error)  # where the frame is consumed
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator

from hakiri import errors
from hakiri.errors import HakiriError

__all__ = ["carried", "carried_text", "task_error"]

_MARKER = "hakiri-task-error:"


def carried_text(exc: HakiriError) -> str:
    """The marked line a task fails with (also what an engine-side `raise_error` says)."""
    document = {
        "type": type(exc).__name__,
        "reason": exc.reason,
        "hint": exc.hint,
        "status": getattr(exc, "status", None),
    }
    return _MARKER + json.dumps(document)


@contextlib.contextmanager
def carried() -> Iterator[None]:
    """In a task: a hakiri error leaves as the marked line."""
    try:
        yield
    except HakiriError as exc:
        raise RuntimeError(carried_text(exc)) from None


def task_error(exc: BaseException) -> HakiriError | None:
    """The hakiri error a task raised, rebuilt from the engine's report of the failure
    (`exc`, or the error it was raised from: a destination's staging write may have put
    its own words on it); None when the failure was not one."""
    found = None
    seen: BaseException | None = exc
    while seen is not None and found is None:
        found = re.search(re.escape(_MARKER) + r"(\{.*?\})(?:\s|$)", str(seen))
        seen = seen.__cause__ or seen.__context__
    if found is None:
        return None
    try:
        document = json.loads(found.group(1))
    except ValueError:
        return None
    kind = getattr(errors, str(document.get("type")), None)
    if not (isinstance(kind, type) and issubclass(kind, HakiriError)):
        kind = errors.SourceUnreachable
    reason, hint = str(document.get("reason")), document.get("hint")
    if issubclass(kind, errors.SourceRefused):
        return kind(reason, hint, status=int(document.get("status") or 0))
    return kind(reason, hint)
