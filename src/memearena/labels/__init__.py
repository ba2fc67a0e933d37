"""Humans in the loop: labels of what the methods produced, and how far every judge agrees
with the people who gave them.

    from memearena.labels import LabelStore, queue_items, agreement

``store`` (``DIR/labels.sqlite``, append-only), ``queues`` (what a person labels, read-only from
a run directory: each method declares its own queues in its package's ``labelling.py``),
``agreement`` (the figures, each with a bootstrap interval over items).
"""

from __future__ import annotations

import sys
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memearena.labels.agreement import Agreement, agreement, compute_agreement
    from memearena.labels.queues import (
        ORDERS,
        Field,
        LabelItem,
        LabelQueue,
        available_queues,
        fields_of,
        label_queues,
        queue_items,
        queue_names,
    )
    from memearena.labels.store import UI_VERSION, Label, LabelError, LabelStore

# Imported when first named: a module of the package (``labels.store``) loads no statistics.
_WHERE = {
    "Agreement": "agreement",
    "agreement": "agreement",
    "compute_agreement": "agreement",
    "ORDERS": "queues",
    "Field": "queues",
    "LabelItem": "queues",
    "LabelQueue": "queues",
    "available_queues": "queues",
    "fields_of": "queues",
    "label_queues": "queues",
    "queue_items": "queues",
    "queue_names": "queues",
    "UI_VERSION": "store",
    "Label": "store",
    "LabelError": "store",
    "LabelStore": "store",
}

__all__ = [
    "ORDERS",
    "QUEUES",
    "UI_VERSION",
    "Agreement",
    "Field",
    "Label",
    "LabelError",
    "LabelItem",
    "LabelQueue",
    "LabelStore",
    "agreement",
    "available_queues",
    "compute_agreement",
    "fields_of",
    "label_queues",
    "queue_items",
    "queue_names",
]


class _Package(ModuleType):
    """``memearena.labels.agreement`` names the function, as it always has, though a module of
    the package has that name too: importing that module (which sets the package's attribute
    of its name) leaves the function the attribute."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "agreement" and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    if name == "QUEUES":
        # Every registered queue's name, read each time: a method registered later is seen.
        return import_module(f"{__name__}.queues").queue_names()
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{where}"), name)
    globals()[name] = value
    return value
