"""Humans in the loop: labels of what the methods produced, and how far every judge agrees
with the people who gave them.

    from memearena.labels import LabelStore, queue_items, agreement

``store`` (``DIR/labels.sqlite``, append-only), ``queues`` (what a person labels, read-only from
a run directory: each method declares its own queues in its package's ``labelling.py``),
``agreement`` (the figures, each with a bootstrap interval over items).
"""

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


def __getattr__(name: str) -> tuple[str, ...]:
    # ``QUEUES`` (every registered queue's name) is read when first asked for: the methods'
    # queue modules import this package.
    if name == "QUEUES":
        return queue_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
