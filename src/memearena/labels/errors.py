"""The labels' one error: a label or label store that cannot be used (one line)."""

from __future__ import annotations

from memearena.errors import MemearenaError

__all__ = ["LabelError"]


class LabelError(MemearenaError):
    """A label that cannot be stored (unknown queue or field, bad value, bad name), or a label
    store or labels file that cannot be read: the message is one line naming what is wrong."""
