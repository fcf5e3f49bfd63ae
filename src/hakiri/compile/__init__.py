"""What a transforms module imports from hakiri: `from hakiri.compile import context_table`."""

from hakiri.compile.api import context_table

__all__ = ["context_table"]
