"""The Arena's results in a run directory, as the notebook sees them (``memearena.open_run``).

Read only from the run directory: ``leaderboard.json``'s ``arena`` section, ``battles.jsonl``
and ``run.db``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from memearena.engine.results import INTERVAL, MethodResult, interval, pandas
from memearena.errors import MemearenaError

if TYPE_CHECKING:
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


def _columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Column order: the rank-contract fields first, then any others in first-seen order."""
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    first = [c for c in _ROW_FIELDS if c in seen]
    return first + [c for c in seen if c not in first]
