"""The Arena's results in a run directory, as the notebook sees them (``memearena.open_run``).

Read only from the run directory: ``leaderboard.json``'s ``arena`` section, ``battles.jsonl``
and ``run.db``."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from memearena.engine.profile import ProfilePart, ScoreSource, rank_range
from memearena.engine.results import INTERVAL, MethodResult, interval, pandas
from memearena.errors import MemearenaError

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

__all__ = ["ArenaResult"]

_ROW_FIELDS = ("model", "rank", "bt", "ci_low", "ci_high", "elo", "win_rate", "battles")


class ArenaResult(MethodResult):
    """An Arena run directory's outputs, with DataFrame accessors (``pip install
    'memearena[notebook]'`` for pandas). The leaderboard ranks models by their Bradley–Terry
    rating (``figure`` ``bt``: ``value`` with its bootstrap ``ci_low`` / ``ci_high``).

    ``repr`` is one line; the data is read from the run directory when an accessor is called.
    """

    method: ClassVar[str] = "arena"
    bare_error_kinds: ClassVar[bool] = True

    @property
    def arena(self) -> dict[str, Any]:
        """The leaderboard's ``arena`` section (empty when absent)."""
        return self.section

    def ranked(self) -> list[dict[str, Any]]:
        """One row per model, best first: rank, ``bt`` as value / ci_low / ci_high, then elo,
        win rate, battles and the rank's upper bound."""
        out = []
        for row in self.arena.get("overall") or []:
            extra = {k: v for k, v in row.items() if k not in ("model", "rank", "bt", *INTERVAL)}
            out.append(
                {
                    "model": row.get("model"),
                    "rank": row.get("rank"),
                    "figure": "bt",
                    "value": row.get("bt"),
                    "ci_low": row.get("ci_low"),
                    "ci_high": row.get("ci_high"),
                    **extra,
                }
            )
        return out

    def figures(self) -> Iterator[dict[str, Any]]:
        """Each model's rating overall and per breakdown (``bt``, ``bt[criterion=...]``), and
        each judge's figures with an interval (``judge.ndcg``, ...; the judge in ``model``)."""
        yield from super().figures()
        for key, groups in self.arena.items():
            if not key.startswith("by_") or not isinstance(groups, dict):
                continue
            for group, rows in groups.items():
                for row in rows if isinstance(rows, list) else []:
                    est = interval(row.get("bt"), [row.get("ci_low"), row.get("ci_high")])
                    if est is not None:
                        yield {"model": row.get("model"), "figure": f"bt[{key[3:]}={group}]"} | est
        for row in self.arena.get("judges") or []:
            for name, value in row.items():
                if isinstance(value, int | float) and f"{name}_ci_low" in row:
                    est = {"value": value, "ci_low": row[f"{name}_ci_low"]}
                    est["ci_high"] = row.get(f"{name}_ci_high")
                    yield {"model": row.get("judge"), "figure": f"judge.{name}"} | est

    # -- the profile across methods (memearena.engine.profile) -------------------------------
    def profile_parts(self) -> list[ProfilePart]:
        """Each target's rating, rank and the ranks its interval allows; each judge's
        agreement with the reference ranking (NDCG, Kendall τ) and its self-preference."""
        rows = [r for r in self.arena.get("overall") or [] if isinstance(r, dict)]
        bounds = [
            (str(r.get("model")), float(r["ci_low"]), float(r["ci_high"]))
            for r in rows
            if _number(r.get("ci_low")) and _number(r.get("ci_high"))
        ]
        ranges = rank_range(bounds)
        parts = []
        for r in rows:
            name = str(r.get("model"))
            bt = interval(r.get("bt"), [r.get("ci_low"), r.get("ci_high")])
            rating = (("rating (Bradley–Terry)", bt),) if bt is not None else ()
            parts.append(
                ProfilePart(
                    method="arena",
                    title="Arena",
                    model=name,
                    role="target",
                    rank=r.get("rank") if isinstance(r.get("rank"), int) else None,
                    rank_range=ranges.get(name),
                    ranked=len(rows),
                    figures=rating,
                    notes=(f"{r.get('battles')} battles",) if r.get("battles") else (),
                )
            )
        for j in self.arena.get("judges") or []:
            if not isinstance(j, dict):
                continue
            ref = "vs truth" if isinstance(j.get("vs_truth"), dict) else "vs panel"
            found = j.get("vs_truth") or j.get("vs_joint_vote") or {}
            figures = []
            for key, label in (("ndcg", f"NDCG {ref}"), ("kendall_tau", f"Kendall τ {ref}")):
                est = interval(found.get(key)) or interval(
                    j.get(key), [j.get(f"{key}_ci_low"), j.get(f"{key}_ci_high")]
                )
                if est is not None:
                    figures.append((label, est))
            for key, label in (
                ("position_consistency", "position consistency"),
                ("p_prefer_first", "P(prefers first)"),
                ("p_prefer_longer", "P(prefers longer)"),
            ):
                est = interval(j.get(key))
                if est is not None:
                    figures.append((label, est))
            notes, flags = [], []
            self_pref = j.get("self_preference")
            if isinstance(self_pref, dict) and interval(self_pref) is not None:
                label = f"self-preference (own model {self_pref.get('model')})"
                figures.append((label, interval(self_pref) or {}))
                if _number(self_pref.get("ci_low")) and float(self_pref["ci_low"]) > 0:
                    flags.append("self-preference")
            else:
                notes.append("no self-preference figure (its own model is not a target)")
            if j.get("verbosity_flagged"):
                flags.append("verbosity")
            parts.append(
                ProfilePart(
                    method="arena",
                    title="Arena (as judge)",
                    model=str(j.get("judge")),
                    role="judge",
                    figures=tuple(figures),
                    flags=tuple(flags),
                    notes=(f"{j.get('battles')} battles judged", *notes),
                )
            )
        return parts

    def score_sources(self) -> list[ScoreSource]:
        """The targets' rating (recomputed on any resample of memes from ``battles.jsonl``)
        and the judges' NDCG against the reference ranking."""
        rows = [r for r in self.arena.get("overall") or [] if isinstance(r, dict)]
        values = {str(r.get("model")): float(r["bt"]) for r in rows if _number(r.get("bt"))}
        sources = []
        if values:
            models = tuple(values)
            units, tables = self._meme_tables(models)

            def resample(shared: Sequence[str], weights: np.ndarray) -> dict[str, np.ndarray]:

                pos = {u: i for i, u in enumerate(units)}
                picked = tables[[pos[u] for u in shared]]
                k = len(models)
                wins = (weights @ picked.reshape(len(shared), k * k)).reshape(-1, k, k)
                theta = bt_strengths(wins)
                return {m: theta[:, i] for i, m in enumerate(models)}

            sources.append(
                ScoreSource(
                    "arena",
                    "Arena",
                    "target",
                    "rating (Bradley–Terry)",
                    values,
                    unit="meme" if units else None,
                    units=units,
                    resample=resample if units else None,
                )
            )
        ndcg: dict[str, float] = {}
        for j in self.arena.get("judges") or []:
            if not isinstance(j, dict):
                continue
            ref = j.get("vs_truth") if isinstance(j.get("vs_truth"), dict) else None
            v = (ref or {}).get("ndcg", {}).get("value") if ref else j.get("ndcg")
            if isinstance(v, int | float) and _number(v):
                ndcg[str(j.get("judge"))] = float(v)
        if ndcg:
            judges = [j for j in self.arena.get("judges") or [] if isinstance(j, dict)]
            ref_name = (
                "truth" if any(isinstance(j.get("vs_truth"), dict) for j in judges) else "panel"
            )
            figure = f"NDCG vs {ref_name}"
            sources.append(ScoreSource("arena", "Arena (as judge)", "judge", figure, ndcg))
        return sources

    def _meme_tables(self, models: Sequence[str]) -> tuple[tuple[str, ...], np.ndarray]:
        """Per meme, the wins of each model over each other in the ranked setting's battles
        (a tie half to each): (memes, memes × models × models)."""
        import numpy as np

        from memearena.errors import DataError
        from memearena.stats.battles import read_battle_table

        k = len(models)
        path = self.run_dir / "battles.jsonl"
        if not path.is_file():
            return (), np.zeros((0, k, k))
        try:
            table = read_battle_table(path, fields=("item", "setting"))
        except DataError as e:
            raise MemearenaError(str(e)) from None
        to_model = np.array([{m: i for i, m in enumerate(models)}.get(n, -1) for n in table.models])
        a, b = to_model[table.model_a], to_model[table.model_b]
        keep = (a >= 0) & (b >= 0) & (a != b)
        setting = self.arena.get("setting")
        col = table.fields["setting"]
        if setting is not None and col.present:
            labels = np.array([lab in (None, str(setting)) for lab in col.labels])
            keep &= labels[col.codes]
        items = table.fields["item"]
        seen = {items.labels[c] for c in np.unique(items.codes[keep])}
        units = tuple(sorted(str(u) for u in seen if u is not None))
        at = {u: i for i, u in enumerate(units)}
        unit = np.array([-1 if lab is None else at.get(lab, -1) for lab in items.labels])
        unit = unit[items.codes]
        keep &= unit >= 0  # a battle without its meme cannot be resampled with it
        unit, a, b, outcome = unit[keep], a[keep], b[keep], table.outcome[keep]
        tables = np.zeros((len(units), k, k))
        # outcome: 0 model_a won, 1 model_b won, 2 and 3 ties (half to each)
        score_a = np.array([1.0, 0.0, 0.5, 0.5])[outcome]
        np.add.at(tables, (unit, a, b), score_a)
        np.add.at(tables, (unit, b, a), 1.0 - score_a)
        return units, tables

    def iter_battles(self) -> Iterator[dict[str, Any]]:
        """Every resolved battle from ``battles.jsonl``, one dict each (streamed)."""
        from memearena.jsonsafe import loads_bounded

        path = self.run_dir / "battles.jsonl"
        if not path.is_file():
            return
        with path.open(encoding="utf-8-sig") as f:
            for n, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    row = loads_bounded(line)
                except ValueError as e:
                    raise MemearenaError(f"{path}:{n}: not valid JSON ({e})") from None
                if isinstance(row, dict):
                    yield row

    # -- DataFrames --------------------------------------------------------------------------
    def leaderboard_df(self, by: str | None = None) -> pd.DataFrame:
        """The overall leaderboard as written (``bt`` with ``ci_low`` / ``ci_high``), or with
        ``by`` (``criterion``, ``judge``, ``context``, ``source``) one row per (group, model)
        with a first column naming the group."""
        pd = pandas()
        if by is None:
            rows = self.arena.get("overall") or []
            return pd.DataFrame(rows, columns=_columns(rows))
        groups = self.arena.get(f"by_{by}")
        if not isinstance(groups, dict):
            known = sorted(k[3:] for k in self.arena if k.startswith("by_"))
            have = ", ".join(known) or "none"
            raise MemearenaError(f"no leaderboard by {by!r} in this run (have: {have})")
        flat = [{by: g, **row} for g, rows in groups.items() for row in rows]
        return pd.DataFrame(flat, columns=[by, *(c for c in _columns(flat) if c != by)])

    def battles(self) -> pd.DataFrame:
        """Every resolved battle (``battles.jsonl``), one row each."""
        return pandas().DataFrame(list(self.iter_battles()))

    def judges(self) -> pd.DataFrame:
        """Judge metrics: one row per judge (NDCG, Kendall τ vs the panel with intervals, ...);
        nested fields are flattened with ``.`` (e.g. ``vs_truth.ndcg.value``)."""
        pd = pandas()
        rows = self.arena.get("judges") or []
        return pd.json_normalize(rows) if rows else pd.DataFrame()

    def agreement(self) -> pd.DataFrame:
        """Panel agreement: Krippendorff's α and each judge pair's Cohen κ, with intervals."""
        pd = pandas()
        panel = self.arena.get("panel") or {}
        rows: list[dict[str, Any]] = []
        alpha = panel.get("krippendorff_alpha")
        if isinstance(alpha, dict):
            rows.append({"metric": "krippendorff_alpha", "pair": None, **alpha})
        for pair, k in (panel.get("cohen_kappa") or {}).items():
            if isinstance(k, dict):
                rows.append({"metric": "cohen_kappa", "pair": pair, **k})
        return pd.DataFrame(rows, columns=_columns(rows) or ["metric", "pair", "value"])

    def fusion_convergence(self) -> pd.DataFrame:
        """The panel's ratings of each fusion round's guideline (``rate_fusion_rounds``): one
        row per round and axis (``overall``: the mean of the five), with 95% intervals over
        memes; empty when the run did not rate the rounds."""
        pd = pandas()
        conv = self.arena.get("fusion_convergence") or {}
        rows: list[dict[str, Any]] = []
        for r in conv.get("rounds") or []:
            cells = {"overall": r.get("overall"), **(r.get("axes") or {})}
            for axis, est in cells.items():
                if isinstance(est, dict):
                    rows.append({"round": r.get("round"), "axis": axis, **est})
        cols = ["round", "axis", "value", "ci_low", "ci_high", "n"]
        return pd.DataFrame(rows, columns=cols)

    def answer_outcomes(self) -> pd.DataFrame:
        """Per target: answers, refusals and format failures (from leaderboard.json)."""
        pd = pandas()
        rows = [{"model": m, **v} for m, v in (self.arena.get("answers") or {}).items()]
        return pd.DataFrame(rows, columns=_columns(rows) or ["model"])

    def answers(self) -> pd.DataFrame:
        """Every stored answer (``run.db``): item, context level, model, text and whether it had
        the requested sections. Text is the model's untrusted output: escape before rendering."""
        from memearena.methods.arena.stages import stored_answers

        rows = []
        for item, level, model, value in self._with_store(lambda s: list(stored_answers(s))):
            rows.append(
                {
                    "item": item,
                    "context": level,
                    "model": model,
                    "text": value.get("text"),
                    "format_ok": value.get("format_ok"),
                }
            )
        cols = ["item", "context", "model", "text", "format_ok"]
        return pandas().DataFrame(rows, columns=cols)

    def __repr__(self) -> str:
        overall = self.arena.get("overall") or []
        top = ", ".join(str(r.get("model")) for r in overall[:3])
        more = ", …" if len(overall) > 3 else ""
        extra = f", stopped={self.stopped!r}" if self.stopped else ""
        return (
            f"ArenaResult({str(self.run_dir)!r}, battles={self.arena.get('battles', 0)}, "
            f"models=[{top}{more}]{extra})"
        )


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def bt_strengths(wins: np.ndarray, iterations: int = 500, tol: float = 1e-10) -> np.ndarray:
    """Bradley–Terry log-strengths of each table of ``wins`` (draws × models × models, ``[i,
    j]`` the wins of i over j, a tie half to each), fitted by minorisation–maximisation, all
    draws at once; a model without a win in a draw tends to −∞ there (last in that draw's
    order, which is all a rank correlation reads)."""
    import numpy as np

    games = wins + np.swapaxes(wins, 1, 2)
    won = wins.sum(axis=2)
    p = np.ones(wins.shape[:2])
    for _ in range(iterations):
        denom = (games / (p[:, :, None] + p[:, None, :])).sum(axis=2)
        with np.errstate(divide="ignore", invalid="ignore"):
            new = np.where(denom > 0, won / denom, p)
        new /= np.exp(np.log(np.maximum(new, 1e-300)).mean(axis=1, keepdims=True))
        if np.max(np.abs(new - p)) < tol:
            p = new
            break
        p = new
    with np.errstate(divide="ignore"):
        return np.asarray(np.log(p))


def _columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Column order: the rank-contract fields first, then any others in first-seen order."""
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    first = [c for c in _ROW_FIELDS if c in seen]
    return first + [c for c in seen if c not in first]
