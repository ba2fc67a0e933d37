"""The Judge audit's results in a run directory, as the notebook sees them
(``memearena.open_run``). Read only from the run directory: ``leaderboard.json``'s
``judge_audit`` section, ``judge_audit_scores.jsonl`` and ``run.db``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from memearena.engine.profile import ProfilePart, ScoreSource
from memearena.engine.results import INTERVAL, MethodResult, interval, pandas, read_jsonl
from memearena.errors import MemearenaError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["JudgeAuditResult"]

FIGURES = (
    "trust",
    "overall",
    "p_prefer_first",
    "position_consistency",
    "p_prefer_padded",
    "p_prefer_concise",
    "decisive_consistency",
    "self_enhancement",
    "abstention_rate",
    "parse_failure_rate",
)
"""A judge's figures, each with an interval (the section's ``order_by`` names the one it is
ranked by: ``overall`` by default, ``trust`` with ``rank_by: composite``)."""


class JudgeAuditResult(MethodResult):
    """The results of a Judge audit: the evaluator leaderboard ranks judges by trust (``value``
    with ``ci_low`` / ``ci_high``; the rank's range over the bootstrap in ``rank_ci_low`` /
    ``rank_ci_high``); ``intervals()`` holds every figure, category and bias type."""

    method: ClassVar[str] = "judge_audit"
    entity: ClassVar[str] = "judge"

    @property
    def section(self) -> dict[str, Any]:
        """The ``judge_audit`` section of ``leaderboard.json`` (MemearenaError when absent)."""
        sec = self.board.get("judge_audit")
        if not isinstance(sec, dict):
            raise MemearenaError(f"{self.run_dir}: leaderboard.json has no judge_audit section")
        return sec

    def ranked(self) -> list[dict[str, Any]]:
        """One row per judge in the section's order: rank, its range, the figure it is ordered
        by (``order_by``: ``overall`` or ``trust``) as value / ci_low / ci_high, judgments and
        flags."""
        by = self.section.get("order_by")
        figure = by if by in FIGURES else "trust"
        out = []
        for r in self.section.get("leaderboard") or []:
            est = interval(r.get(figure)) or {}
            rank_ci = r.get("rank_ci")
            lo, hi = rank_ci if isinstance(rank_ci, list) and len(rank_ci) == 2 else (None, None)
            out.append(
                {"judge": r.get("judge"), "rank": r.get("rank"), "figure": figure}
                | {k: est.get(k) for k in INTERVAL}
                | {
                    "rank_ci_low": lo,
                    "rank_ci_high": hi,
                    "judgments": r.get("judgments"),
                    "flags": ", ".join(r.get("flags") or []),
                }
            )
        return out

    def figures(self) -> Iterator[dict[str, Any]]:
        """Every judge's figures (trust, overall, position, verbosity, ...), categories
        (``category.integrality``) and bias types (``type.text_dominance``)."""
        for r in self.section.get("leaderboard") or []:
            named = [(k, r.get(k)) for k in FIGURES]
            named += [(f"category.{c}", e) for c, e in (r.get("categories") or {}).items()]
            named += [(f"type.{t}", e) for t, e in (r.get("types") or {}).items()]
            for figure, value in named:
                est = interval(value)
                if est is not None:
                    yield {"judge": r.get("judge"), "figure": figure} | est

    # -- the profile across methods (memearena.engine.profile) -------------------------------
    def profile_parts(self) -> list[ProfilePart]:
        """Each judge's rank, the ranks its interval allows, its figures with intervals and
        the biases it is flagged for (family-wise, as the audit flags them)."""
        rows = [r for r in self.section.get("leaderboard") or [] if isinstance(r, dict)]
        parts = []
        for r in rows:
            figures = [(k.replace("_", " "), interval(r.get(k))) for k in FIGURES]
            rank_ci = r.get("rank_ci")
            ranks = (
                (int(rank_ci[0]), int(rank_ci[1]))
                if isinstance(rank_ci, list)
                and len(rank_ci) == 2
                and all(isinstance(x, int) for x in rank_ci)
                else None
            )
            parts.append(
                ProfilePart(
                    method="judge_audit",
                    title="Judge audit",
                    model=str(r.get("judge")),
                    role="judge",
                    rank=r.get("rank") if isinstance(r.get("rank"), int) else None,
                    rank_range=ranks,
                    ranked=len(rows),
                    figures=tuple((k, v) for k, v in figures if v is not None),
                    flags=tuple(str(f) for f in r.get("flags") or []),
                    notes=(f"{r.get('judgments')} judgments",) if r.get("judgments") else (),
                )
            )
        return parts

    def score_sources(self) -> list[ScoreSource]:
        """The judges' figure the audit orders them by (``order_by``), as published: its
        items are not the Arena's memes, so no meme resample is offered."""
        by = self.section.get("order_by")
        figure = by if by in FIGURES else "overall"
        values = {}
        for r in self.section.get("leaderboard") or []:
            est = interval(r.get(figure)) if isinstance(r, dict) else None
            if est is not None:
                values[str(r.get("judge"))] = float(est["value"])
        if not values:
            return []
        return [ScoreSource("judge_audit", "Judge audit", "judge", figure, values)]

    def bias_types(self) -> pd.DataFrame:
        """One row per (judge, bias type): metric, value, interval, pairs and excluded pairs."""
        rows = [
            {"judge": r.get("judge"), "bias_type": t, **fig}
            for r in self.section.get("leaderboard") or []
            for t, fig in (r.get("types") or {}).items()
        ]
        return pandas().DataFrame(rows)

    def scores(self) -> pd.DataFrame:
        """Every scored pair (``judge-audit metrics`` format, with judge and status)."""
        return pandas().DataFrame(read_jsonl(self.run_dir / "judge_audit_scores.jsonl"))

    def __repr__(self) -> str:
        return f"JudgeAuditResult({str(self.run_dir)!r})"
