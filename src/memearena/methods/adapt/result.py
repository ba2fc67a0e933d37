"""Adapt's results in a run directory, as the notebook sees them (``memearena.open_run``).

Read only from the run directory: ``leaderboard.json``'s ``adapt`` section,
``adapt_scores.jsonl``, ``adapt_chains.jsonl`` and ``run.db``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from memearena.engine.results import INTERVAL, MethodResult, interval, pandas, read_jsonl
from memearena.errors import MemearenaError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["AdaptResult"]


class AdaptResult(MethodResult):
    """The results of an Adapt run. The leaderboard has one row per target, its figure the
    failure rate (a score below the section's ``failure_threshold``) with its interval; it is
    not a ranking (``rank`` is empty). ``intervals()`` holds every figure that has one (average
    score, failure rates after refinement and in the unconditional control, their increases)."""

    method: ClassVar[str] = "adapt"

    @property
    def section(self) -> dict[str, Any]:
        """The ``adapt`` section of ``leaderboard.json`` (MemearenaError when absent)."""
        sec = self.board.get("adapt")
        if not isinstance(sec, dict):
            raise MemearenaError(f"{self.run_dir}: leaderboard.json has no adapt section")
        return sec

    def ranked(self) -> list[dict[str, Any]]:
        """One row per target: the failure rate as value / ci_low / ci_high, then its counts."""
        out = []
        for row in self.section.get("models") or []:
            est = interval(row.get("failure_rate"), row.get("failure_rate_ci")) or {}
            counts = {
                k: v
                for k, v in row.items()
                if k != "model"
                and isinstance(v, int | float | str | None)
                and not isinstance(row.get(f"{k}_ci"), list)
            }
            out.append(
                {"model": row.get("model"), "rank": None, "figure": "failure_rate"}
                | {k: est.get(k) for k in INTERVAL}
                | counts
            )
        return out

    def figures(self) -> Iterator[dict[str, Any]]:
        """Every per-target figure with an interval (``avg_score``, ``failure_rate``,
        ``refined_failure_rate``, ``control_increase``, ...) and per (category, target)
        (``failure_rate[category=Race]``)."""
        for prefix, rows in [("", self.section.get("models") or [])] + [
            (f"[category={c}]", rs) for c, rs in (self.section.get("by_category") or {}).items()
        ]:
            for row in rows:
                for key, value in row.items():
                    est = interval(value, row.get(f"{key}_ci")) if f"{key}_ci" in row else None
                    if est is not None:
                        yield {"model": row.get("model"), "figure": key + prefix} | est

    def models(self) -> pd.DataFrame:
        """One row per target as the section holds it: scores, failure rates, loop and
        control, with ``[low, high]`` intervals (``intervals()`` has them as columns)."""
        return pandas().DataFrame(self.section["models"])

    def by_category(self) -> pd.DataFrame:
        """One row per (category, target)."""
        rows = [{"category": c, **r} for c, rs in self.section["by_category"].items() for r in rs]
        return pandas().DataFrame(rows)

    def weaknesses(self) -> pd.DataFrame:
        """Every refinement step that lowered a target's score."""
        return pandas().DataFrame(self.section["weaknesses"])

    def scores(self) -> pd.DataFrame:
        """Every original answer's outcome and score (refused / unparsed have no score)."""
        return pandas().DataFrame(read_jsonl(self.run_dir / "adapt_scores.jsonl"))

    def chains(self) -> pd.DataFrame:
        """One row per refinement step (the lineage), with its chain's target, mode and stop."""
        rows = [
            {k: c[k] for k in ("target", "category", "repeat", "mode", "seed", "stop")} | s
            for c in read_jsonl(self.run_dir / "adapt_chains.jsonl")
            for s in c["steps"]
        ]
        return pandas().DataFrame(rows)

    def __repr__(self) -> str:
        return f"AdaptResult({str(self.run_dir)!r})"
