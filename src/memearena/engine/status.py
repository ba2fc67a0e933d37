"""The end of every run: what is missing, why, what it cost, and the exit code that says so.

A run that produced nothing for a configured model, or no battles, or stopped at the spend cap
never ends looking like a success: the console shows a summary per model (planned vs done,
failed calls by reason), ``leaderboard.json`` carries the same verdict under ``"status"`` and
the command exits non-zero (``EXIT_INCOMPLETE`` or ``EXIT_BUDGET``)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from rich.console import Console
from rich.table import Table

from memearena.report.safe import console_safe

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_BUDGET",
    "EXIT_INCOMPLETE",
    "EXIT_OK",
    "ModelStatus",
    "RunStatus",
    "clean_line",
    "directory_status",
    "print_run_status",
    "spend_cap_problem",
    "status_from_record",
    "status_record",
]

EXIT_OK = 0
"""The run is complete."""
EXIT_INCOMPLETE = 1
"""The run is incomplete: a configured target or judge produced nothing, items are missing
after model errors (a re-run retries them), or no battles were produced."""
EXIT_BAD_INPUT = 2
"""Bad input: config, dataset, option or file (nothing was run)."""
EXIT_BUDGET = 3
"""The spend cap (``--max-cost``) was reached; re-run with a higher cap to continue."""


def clean_line(text: str, limit: int = 200) -> str:
    """One printable line of untrusted text (an endpoint's error message may hold anything)."""
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    return " ".join(text.split())[:limit]


def _money(x: float) -> float:
    return round(x, 6) if math.isfinite(x) else 0.0


@dataclass(frozen=True)
class ModelStatus:
    """What one configured model was asked for and what it delivered."""

    model: str
    role: str
    """``context``, ``target`` or ``judge`` (one row per role a model plays)."""
    planned: int
    """Outputs the run needed from it (contexts: memes; answers: tasks; verdicts: judgments)."""
    done: int
    """Outputs it delivered (parsed)."""
    refused: int = 0
    """Refusals and outputs that stayed unparseable (final outcomes, not retried)."""
    errors: dict[str, int] = field(default_factory=dict)
    """Failed calls of this invocation by reason (``timeout``, ``auth``, ``bad_response``...)."""

    @property
    def missing(self) -> int:
        """Outputs neither delivered nor finally refused: a re-run retries them."""
        return max(0, self.planned - self.done - self.refused)


@dataclass(frozen=True)
class RunStatus:
    """The verdict on one run: complete or not, why not, and what it cost."""

    complete: bool
    problems: list[str]
    spent_usd: float
    spent_upper_bound_usd: float
    max_cost: float | None
    stopped: str | None = None
    models: list[ModelStatus] = field(default_factory=list)
    battles: int = 0
    produced: str = ""
    """What the run produced, in words, for its final line (default: its battles)."""

    @property
    def exit_code(self) -> int:
        """``EXIT_BUDGET`` when the cap stopped the run, ``EXIT_INCOMPLETE`` when anything is
        missing, else ``EXIT_OK``."""
        if self.stopped:
            return EXIT_BUDGET
        return EXIT_OK if self.complete else EXIT_INCOMPLETE

    def as_json(self) -> dict[str, Any]:
        """The ``"status"`` object of ``leaderboard.json``."""
        return {
            "complete": self.complete,
            "problems": list(self.problems),
            "spent_usd": _money(self.spent_usd),
            "spent_upper_bound_usd": _money(self.spent_upper_bound_usd),
            "max_cost": self.max_cost,
        }

    def final_line(self) -> str:
        """The one line a run ends with."""
        spend = f"${self.spent_usd:.4f} spent in this run"
        if self.spent_upper_bound_usd > self.spent_usd + 1e-12:
            spend += f" (at most ${self.spent_upper_bound_usd:.4f} counting unsettled calls)"
        if self.stopped and self.stopped.startswith("interrupted"):  # a signal's polite stop
            return f"stopped: {self.stopped} — {spend}"
        if self.stopped:
            cap = f"${self.max_cost:.4f}" if self.max_cost is not None else "the cap"
            return (
                f"stopped: spend cap reached — {spend} of --max-cost {cap}; to continue, re-run "
                "the same command with a higher --max-cost (finished calls are not paid again)"
            )
        if self.complete:
            return f"complete: {self.produced or f'{self.battles:,} battles'}; {spend}"
        return (
            f"INCOMPLETE: {len(self.problems)} problem(s), "
            f"{self.produced or f'{self.battles:,} battles'}; {spend}; "
            "re-run the same command to retry what is missing"
        )


def status_record(status: RunStatus) -> dict[str, Any]:
    """The whole status as JSON, as a later run that finds nothing changed would compute it:
    its failed calls by reason left out (they are each invocation's own, and that run makes
    none)."""
    doc = asdict(status)
    for row in doc["models"]:
        row["errors"] = {}
    return doc


def status_from_record(doc: Any) -> RunStatus | None:
    """The status ``status_record`` gave, or None when ``doc`` is not one (never trusted
    beyond its shape: a damaged record only costs the status being computed again)."""
    try:
        models = [ModelStatus(**row) for row in doc["models"]]
        status = RunStatus(**{**doc, "models": models})
        fields = (status.spent_usd, status.spent_upper_bound_usd, status.battles)
        if not all(isinstance(x, int | float) for x in fields):
            return None
        if not all(isinstance(p, str) for p in status.problems):
            return None
        return replace(status, problems=list(status.problems))
    except (KeyError, TypeError, ValueError):
        return None


def directory_status(latest: RunStatus, others: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The ``"status"`` of a run directory that holds several methods' results: complete only
    when each method's latest run was, with every method's problems (named by method), and the
    spend of the latest run (the store's, every method's calls). ``others``: the other methods'
    latest ``as_json()`` by method name. With no others it is ``latest.as_json()``."""
    doc = latest.as_json()
    if not others:
        return doc
    for name, st in sorted(others.items()):
        if st.get("complete") is False:
            doc["complete"] = False
            doc["problems"] += [f"{name}: {p}" for p in st.get("problems") or []]
    return doc


def spend_cap_problem(max_cost: float | None) -> str:
    """The problem line of a run the spend cap stopped."""
    cap = f"${max_cost:.4f}" if max_cost is not None else "the cap"
    return f"spend cap reached (--max-cost {cap}): re-run with a higher --max-cost to continue"


def print_run_status(console: Console, status: RunStatus) -> None:
    """The end-of-run summary: a per-model table when anything is missing, then one line (only
    that line when the spend cap stopped the run: what is missing then is simply not run yet)."""
    if not status.complete and not status.stopped:
        table = Table(title="What is missing")
        # Names and reasons wrap, never end in "…": on 80 columns every cell is read in full.
        for col in ("model", "role", "planned", "done", "refused / unparsed", "failed calls"):
            left = col in ("model", "role", "failed calls")
            table.add_column(col, justify="left" if left else "right", overflow="fold")
        for r in status.models:
            errs = ", ".join(f"{k} {n}" for k, n in sorted(r.errors.items())) or "—"
            style = "red" if (r.planned and r.done == 0) or r.missing else None
            table.add_row(
                console_safe(r.model, max_chars=60),
                r.role,
                f"{r.planned:,}",
                f"{r.done:,}",
                f"{r.refused:,}",
                console_safe(errs),
                style=style,
            )
        if status.models:
            console.print(table)
        for p in status.problems:
            console.print(f"[red]problem:[/red] {console_safe(p)}", highlight=False, soft_wrap=True)
    colour = "green" if status.complete and not status.stopped else "red"
    console.print(
        f"[{colour}]{console_safe(status.final_line())}[/]", highlight=False, soft_wrap=True
    )
