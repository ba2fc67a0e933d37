"""What a person labels, read from a run directory (read-only), queue by queue.

A queue belongs to the method whose outputs it shows: each method's package declares its
queues (``QUEUES`` of its ``labelling.py``, a tuple of :class:`LabelQueue`), loaded through
``memearena.engine.registry.method_queues``; this module names no method. The queues are
listed in registration order (each method's in its own order).

Contract (the viewer's labelling pages build on it):

- ``queue_items(run_dir, queue)`` → ``LabelItem``s (``memearena.labels.items``): ``texts``
  and ``images`` are what the person sees; ``hidden`` must never be shown before the person
  answers;
- ``fields_of(queue)``: the questions, each with its choices and one keyboard key per choice;
  an answer is ``{field name: choice}``, at least one field answered
  (``store.validate_answer``);
- an item's ``key`` is stable across reloads and re-runs of the same steps; it never names a
  model;
- ``order="information"`` puts first the items a label teaches most about (each queue's
  ``information``), ties in an order drawn from ``seed``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from memearena.engine.registry import MethodSpec, method_names, method_queues, method_spec
from memearena.labels.errors import LabelError
from memearena.labels.figures import Agreement, Labelled
from memearena.labels.items import Field, LabelItem, item_hash
from memearena.labels.runfiles import RunFiles

__all__ = [
    "ORDERS",
    "Field",
    "LabelItem",
    "LabelQueue",
    "Rating",
    "Sheet",
    "Truth",
    "available_queues",
    "fields_of",
    "information",
    "item_hash",
    "label_queue",
    "label_queues",
    "queue_items",
    "queue_names",
]

ORDERS: tuple[str, ...] = ("run", "information")


@dataclass(frozen=True)
class Truth:
    """One field's true answer on an item in the simulated world: the simulated annotators
    answer it with their noise (``memearena.labels.simulated``)."""

    field: str
    code: int
    """The true choice, ``0 <= code < choices``."""
    choices: int
    answer: Callable[[int], str]
    """A choice's code as the field's answer (``1`` → ``"B"``)."""


@dataclass(frozen=True)
class Rating:
    """A judge's own answer on a field whose truth is planted: its planted κ against the
    annotators' majority follows from these."""

    judge: str
    code: int
    truth: int
    choices: int


@dataclass(frozen=True)
class Sheet:
    """A method's own labelling sheet (a CSV it writes for people to fill in), imported as
    labels of its queue (``memearena.labels.files.import_sheet``)."""

    columns: tuple[str, ...]
    """The header columns that tell the sheet from a labels CSV."""
    read: Callable[[Path, Path, str], tuple[list[dict[str, Any]], int, list[str]]]
    """(run directory, sheet, annotator) → (labels for ``LabelStore.add_many``, unlabelled
    rows, problems: one line each, naming the sheet and its line)."""


Figures = Callable[[Agreement, Sequence[LabelItem], Labelled, Mapping[str, Any], int, int], None]
"""A queue's figures: (into, its items, their labels, the run's leaderboard document, bootstrap
rounds, seed); each figure with a bootstrap interval over the queue's clusters."""


@dataclass(frozen=True)
class LabelQueue:
    """One queue a method offers to label (see the module)."""

    name: str
    fields: tuple[Field, ...]
    items: Callable[[RunFiles], list[LabelItem]]
    """Its items in the run's order (read-only from the run's files)."""
    available: Callable[[RunFiles], bool]
    """Whether the run has anything to label in it (cheap: no item is built)."""
    information: Callable[[LabelItem], float]
    """How much a label of an item is expected to teach (higher first)."""
    figures: Figures
    unlabelled_figures: tuple[str, ...] = ()
    """Its figures that do not rest on labels (shown beside their human counterpart): never
    named the widest interval."""
    cluster: str = "memes"
    """What its figures' bootstrap draws (an item's correlated units: its meme's items)."""
    plant: Callable[[LabelItem, random.Random], tuple[list[Truth], list[Rating]]] | None = None
    """The simulated world's truths on an item (drawn from the generator given), in the order
    the annotators answer them, and the judges' ratings against them."""
    sheet: Sheet | None = None
    title: str = ""
    """Its heading where people label (the name when empty)."""
    help: str = ""
    """One line telling a person what to answer."""
    figure_titles: tuple[tuple[str, str], ...] = ()
    """Headings of its figures, (figure, heading); another figure is shown under its name."""
    target_figures: frozenset[str] = frozenset()
    """Its figures whose ``judge`` column names the model under test, not a judge."""


def label_queues() -> dict[str, LabelQueue]:
    """Every registered method's queues by name, in registration order."""
    return dict(_queues_of(tuple(method_spec(name) for name in method_names())))


@cache
def _queues_of(specs: tuple[MethodSpec, ...]) -> tuple[tuple[str, LabelQueue], ...]:
    # Keyed by the registrations themselves: a method registered or removed is seen at once.
    out: dict[str, LabelQueue] = {}
    owner: dict[str, str] = {}
    for method in (spec.name for spec in specs):
        for q in method_queues(method):
            if q.name in out:
                raise LabelError(
                    f"label queue {q.name!r} is declared by both {owner[q.name]} and {method}"
                )
            out[q.name], owner[q.name] = q, method
    return tuple(out.items())


def queue_names() -> tuple[str, ...]:
    """The registered queues' names (``QUEUES``: the same, read when first asked for)."""
    return tuple(label_queues())


def label_queue(queue: str) -> LabelQueue:
    """The queue named ``queue`` (LabelError naming the known ones if none)."""
    queues = label_queues()
    try:
        return queues[queue]
    except KeyError:
        raise LabelError(f"unknown queue {queue!r}; choose from {', '.join(queues)}") from None


def fields_of(queue: str) -> tuple[Field, ...]:
    """The questions of ``queue`` (LabelError for an unknown queue)."""
    return label_queue(queue).fields


def information(item: LabelItem) -> float:
    """How much a label of ``item`` is expected to teach (its queue's measure; 0 for an item
    of a queue no method declares)."""
    q = label_queues().get(item.queue)
    return q.information(item) if q is not None else 0.0


def available_queues(run_dir: Path) -> list[str]:
    """The queues this run has something to label in (in registration order)."""
    run = RunFiles(run_dir)
    try:
        return [name for name, q in label_queues().items() if q.available(run)]
    finally:
        run.close()


def queue_items(run_dir: Path, queue: str, *, order: str = "run", seed: int = 0) -> list[LabelItem]:
    """The items of ``queue`` in ``order`` ("run": the run's order; "information": most
    informative first, ties in an order drawn from ``seed``)."""
    q = label_queue(queue)
    if order not in ORDERS:
        raise LabelError(f"unknown order {order!r}; choose from {', '.join(ORDERS)}")
    run = RunFiles(run_dir)
    try:
        items = q.items(run)
    finally:
        run.close()
    if order == "information":
        rng = random.Random(f"{seed}\x1finformation\x1f{queue}")
        tie = {it.key: rng.random() for it in sorted(items, key=lambda it: it.key)}
        items.sort(key=lambda it: (-q.information(it), tie[it.key]))
    return items


def __getattr__(name: str) -> tuple[str, ...]:
    # ``QUEUES`` is read when first asked for: the methods' queue modules import this one.
    if name == "QUEUES":
        return queue_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
