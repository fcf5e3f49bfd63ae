"""hakiri.errors is the one exception tree: every HakiriError anywhere in hakiri is drawn in its
docstring under its parent, and every class it defines is exported."""

from __future__ import annotations

import importlib
import pkgutil
import re

import hakiri
from hakiri import errors
from hakiri.errors import HakiriError


def _every_module() -> None:
    for module in pkgutil.walk_packages(hakiri.__path__, "hakiri."):
        if ".migrations" in module.name:  # alembic's scripts run only under alembic
            continue
        importlib.import_module(module.name)


def _subclasses(cls: type) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub, *_subclasses(sub)}
    return found


def _drawn() -> dict[str, int]:
    """Each class the docstring's tree draws, with its depth (HakiriError is 0)."""
    drawn = {}
    for line in (errors.__doc__ or "").splitlines():
        match = re.match(r"^    ((?:[│ ]   )*)(?:[├└]── )?(\w+)\s", line)
        if match and match.group(2)[0].isupper():
            depth = len(match.group(1)) // 4 + (1 if "──" in line else 0)
            drawn[match.group(2)] = depth
    return drawn


def test_every_hakiri_error_is_drawn_in_the_tree_under_its_parent() -> None:
    _every_module()
    drawn = _drawn()
    hakiri_errors = {
        cls for cls in _subclasses(HakiriError) if cls.__module__.startswith("hakiri.")
    }

    missing = sorted(cls.__name__ for cls in hakiri_errors if cls.__name__ not in drawn)
    assert not missing, f"not in hakiri.errors' tree: {missing}"
    for cls in hakiri_errors:
        parent = cls.__bases__[0]
        assert drawn[cls.__name__] == drawn[parent.__name__] + 1, (cls, parent)


def test_every_class_of_the_errors_module_is_exported() -> None:
    defined = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and value.__module__ == "hakiri.errors"
    }
    assert defined == set(errors.__all__)


def test_a_refused_source_is_unreachable_and_crosses_a_process_boundary_whole() -> None:
    # Raised inside engine tasks, it comes back to the driver pickled.
    import pickle

    refused = errors.SourceRefused("GET /x was refused: 401", "check GITHUB_TOKEN", status=401)
    back = pickle.loads(pickle.dumps(refused))

    assert isinstance(back, errors.SourceUnreachable)
    assert (back.reason, back.hint, back.status) == (refused.reason, refused.hint, 401)
