"""Adapt's results in a run directory, as the notebook sees them (``memearena.open_run``).

Read only from the run directory: ``leaderboard.json``'s ``adapt`` section,
``adapt_scores.jsonl``, ``adapt_chains.jsonl`` and ``run.db``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from memearena.engine.profile import ProfilePart, ScoreSource
from memearena.engine.results import INTERVAL, MethodResult, interval, pandas, read_jsonl
from memearena.errors import MemearenaError

if TYPE_CHECKING:
    import numpy as np
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

    # -- the profile across methods (memearena.engine.profile) -------------------------------
    def profile_parts(self) -> list[ProfilePart]:
        """Each target's average score, failure rate overall and per category (with
        intervals), and its weakest category: the highest failure rate (said unsure when that
        cell has too few memes, or its interval overlaps the next one's)."""
        parts = []
        by_cat = self.section.get("by_category") or {}
        for row in self.section.get("models") or []:
            if not isinstance(row, dict):
                continue
            name = str(row.get("model"))
            figures = []
            for key, label in (("avg_score", "average score"), ("failure_rate", "failure rate")):
                est = interval(row.get(key), row.get(f"{key}_ci"))
                if est is not None:
                    figures.append((label, est))
            cells = []
            for cat, rows in by_cat.items():
                for r in rows or []:
                    if isinstance(r, dict) and str(r.get("model")) == name:
                        est = interval(r.get("failure_rate"), r.get("failure_rate_ci"))
                        if est is not None:
                            figures.append((f"failure rate: {cat}", est))
                            cells.append((str(cat), est, bool(r.get("too_few"))))
            notes = []
            if cells and max(float(c[1]["value"]) for c in cells) == 0:
                notes.append("no failure in any category")
            elif cells:
                cells.sort(key=lambda c: -float(c[1]["value"]))
                cat, est, too_few = cells[0]
                shown = _pct(est)
                caveat = []
                if too_few:
                    caveat.append("too few memes in that cell")
                if len(cells) > 1 and _overlaps(est, cells[1][1]):
                    caveat.append(f"its interval overlaps the next, {cells[1][0]}")
                said = f" ({'; '.join(caveat)})" if caveat else ""
                notes.append(f"weakest category: {cat}, failure rate {shown}{said}")
            parts.append(
                ProfilePart(
                    method="adapt",
                    title="Adapt",
                    model=name,
                    role="target",
                    figures=tuple(figures),
                    notes=tuple(notes),
                )
            )
        return parts

    def score_sources(self) -> list[ScoreSource]:
        """The targets' average score of their original answers (recomputed on any resample
        of memes from ``adapt_scores.jsonl``, a meme's repeats together)."""
        values = {
            str(r.get("model")): float(r["avg_score"])
            for r in self.section.get("models") or []
            if isinstance(r, dict) and isinstance(r.get("avg_score"), int | float)
        }
        if not values:
            return []
        import numpy as np

        models = tuple(values)
        pos = {m: i for i, m in enumerate(models)}
        path = self.run_dir / "adapt_scores.jsonl"
        sums: dict[str, np.ndarray] = {}
        counts: dict[str, np.ndarray] = {}
        for row in read_jsonl(path) if path.is_file() else []:
            if not isinstance(row, dict) or row.get("outcome") != "scored":
                continue
            i = pos.get(str(row.get("target")))
            score = row.get("score")
            if i is None or not isinstance(score, int | float) or isinstance(score, bool):
                continue
            meme = str(row.get("meme"))
            sums.setdefault(meme, np.zeros(len(models)))[i] += float(score)
            counts.setdefault(meme, np.zeros(len(models)))[i] += 1
        units = tuple(sorted(sums))
        s = np.stack([sums[u] for u in units]) if units else np.zeros((0, len(models)))
        c = np.stack([counts[u] for u in units]) if units else np.zeros((0, len(models)))

        def resample(shared: Sequence[str], weights: np.ndarray) -> dict[str, np.ndarray]:
            at = {u: i for i, u in enumerate(units)}
            idx = [at[u] for u in shared]
            with np.errstate(invalid="ignore", divide="ignore"):
                avg = (weights @ s[idx]) / (weights @ c[idx])
            return {m: avg[:, i] for i, m in enumerate(models)}

        return [
            ScoreSource(
                "adapt",
                "Adapt",
                "target",
                "average score",
                values,
                unit="meme" if units else None,
                units=units,
                resample=resample if units else None,
            )
        ]

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


def _pct(est: dict[str, Any]) -> str:
    lo, hi = est.get("ci_low"), est.get("ci_high")
    if isinstance(lo, int | float) and isinstance(hi, int | float):
        return f"{est['value']:.0%} [{lo:.0%}, {hi:.0%}]"
    return f"{est['value']:.0%}"


def _overlaps(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two intervals overlap (True when either has none: nothing tells them apart)."""
    lo, hi = a.get("ci_low"), b.get("ci_high")
    if not isinstance(lo, int | float) or not isinstance(hi, int | float):
        return True
    return float(lo) <= float(hi)
