"""Humans in the loop: labels of battles, guidelines, rewrites and perturbations, and how far
every judge agrees with the people who gave them.

    from memearena.labels import LabelStore, queue_items, agreement

``store`` (``DIR/labels.sqlite``, append-only), ``queues`` (what a person labels, read-only from
a run directory), ``agreement`` (the figures, each with a bootstrap interval over items).
"""

from memearena.labels.agreement import Agreement, agreement, compute_agreement
from memearena.labels.queues import (
    ORDERS,
    QUEUES,
    Field,
    LabelItem,
    available_queues,
    fields_of,
    queue_items,
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
    "LabelStore",
    "agreement",
    "available_queues",
    "compute_agreement",
    "fields_of",
    "queue_items",
]
