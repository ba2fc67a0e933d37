"""The Arena's results: leaderboards, judge bias, and the files a run writes."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memearena.config import RunConfig, SimModelConfig
from memearena.pipelines.arena import ArenaOutcome
from memearena.stats import (
    Battle,
    StatsError,
    grouped_leaderboards,
    kendall_tau,
    leaderboard_fit,
    ndcg,
    spearman_rho,
)
from memearena.store import RunStore

GROUPS = {"by_criterion": "criterion", "by_judge": "judge", "by_context": "context",
          "by_source": "source"}


def _rows(rows: Sequence[Any]) -> list[dict[str, Any]]:
    return [r.model_dump() for r in rows]


def _ranking(battles: Sequence[Battle], seed: int) -> list[str]:
    rows, _ = leaderboard_fit(battles, bootstrap=0, seed=seed)
    return [r.model for r in rows]


def setting_section(
    cfg: RunConfig, outcome: ArenaOutcome, *, bootstrap: int, with_groups: bool = True
) -> dict[str, Any]:
    """Leaderboards and judge bias of one setting's battles."""
    assert cfg.arena is not None
    battles = [Battle.model_validate(b) for b in outcome.battles]
    section: dict[str, Any] = {"setting": outcome.setting, "battles": len(battles)}
    if not battles:
        section["overall"] = []
        section["judges"] = []
        return section
    elo_k = cfg.arena.elo_k
    rows, _ = leaderboard_fit(battles, bootstrap=bootstrap, seed=cfg.seed, elo_k=elo_k)
    section["overall"] = _rows(rows)
    joint = [r.model for r in rows]
    if with_groups:
        for key, field in GROUPS.items():
            groups = grouped_leaderboards(
                battles, by=field, bootstrap=bootstrap, seed=cfg.seed, elo_k=elo_k
            )
            section[key] = {g: _rows(r) for g, r in groups.items()}
    section["judges"] = judge_bias(cfg, outcome, battles, joint)
    return section


def judge_bias(
    cfg: RunConfig, outcome: ArenaOutcome, battles: Sequence[Battle], joint: Sequence[str]
) -> list[dict[str, Any]]:
    """Each judge's ranking against the panel's joint vote (NDCG, Kendall τ), plus its
    position consistency, P(prefer first), P(prefer longer) and parse failures."""
    assert cfg.arena is not None
    out: list[dict[str, Any]] = []
    for judge in cfg.arena.judges:
        mine = [b for b in battles if b.judge == judge]
        stats = raw_verdict_stats(outcome, judge)
        row: dict[str, Any] = {"judge": judge, "battles": len(mine), **stats}
        try:
            ranking = _ranking(mine, cfg.seed) if mine else []
        except StatsError as e:
            ranking, row["note"] = [], str(e)
        row["ranking"] = ranking
        row["ndcg"] = ndcg(ranking, list(joint)) if ranking else None
        row["kendall_tau"] = kendall_tau(ranking, list(joint)) if len(ranking) > 1 else None
        out.append(row)
    return out


def raw_verdict_stats(outcome: ArenaOutcome, judge: str) -> dict[str, Any]:
    """Counts over a judge's raw (unresolved) verdicts in both orders."""
    consistent = decided_pairs = first = decided = longer = longer_decided = failures = 0
    for jp in outcome.judged:
        if jp.judge != judge:
            continue
        fv, bv = jp.forward.get("verdicts"), jp.backward.get("verdicts")
        failures += (fv is None) + (bv is None)
        len_x = len(outcome.answers[(jp.task.meme.uid, jp.task.level, jp.x)]["text"])
        len_y = len(outcome.answers[(jp.task.meme.uid, jp.task.level, jp.y)]["text"])
        for verdicts, first_is_x in ((fv, True), (bv, False)):
            for v in (verdicts or {}).values():
                if v["winner"] == "tie":
                    continue
                decided += 1
                first += v["winner"] == "A"
                picked_x = (v["winner"] == "A") == first_is_x
                if len_x != len_y:
                    longer_decided += 1
                    longer += picked_x == (len_x > len_y)
        if fv and bv:
            for crit, v in fv.items():
                w = bv.get(crit, {}).get("winner")
                if w is None:
                    continue
                decided_pairs += 1
                flipped = {"A": "B", "B": "A", "tie": "tie"}[w]
                consistent += v["winner"] == flipped
    return {
        "position_consistency": consistent / decided_pairs if decided_pairs else None,
        "p_prefer_first": first / decided if decided else None,
        "p_prefer_longer": longer / longer_decided if longer_decided else None,
        "parse_failures": failures,
    }


def answer_outcomes(outcome: ArenaOutcome) -> dict[str, dict[str, int]]:
    """Per target: answers, refusals and format failures (missing sections)."""
    counts: dict[str, Counter[str]] = {}
    for (_uid, _lvl, target), a in outcome.answers.items():
        c = counts.setdefault(target, Counter())
        c["answers"] += 1
        if a.get("refusal"):
            c["refusals"] += 1
        elif "error" in a:
            c["unparseable"] += 1
        elif not a.get("format_ok", True):
            c["format_failures"] += 1
    return {t: {k: int(c[k]) for k in ("answers", "refusals", "format_failures")}
            for t, c in sorted(counts.items())}


def true_ranking(cfg: RunConfig) -> list[str] | None:
    """Best-first order of the targets by latent skill, when every target is simulated."""
    assert cfg.arena is not None
    sims = [cfg.models[t] for t in cfg.arena.targets]
    if not all(isinstance(m, SimModelConfig) for m in sims):
        return None
    skill = {t: m.skill for t, m in zip(cfg.arena.targets, sims, strict=True)}  # type: ignore[union-attr]
    return sorted(cfg.arena.targets, key=lambda t: -skill[t])


def arena_leaderboard(
    cfg: RunConfig,
    outcomes: Sequence[ArenaOutcome],
    store: RunStore,
    *,
    bootstrap: int | None = None,
) -> dict[str, Any]:
    """The ``leaderboard.json`` document of an Arena run (see DESIGN: contracts)."""
    assert cfg.arena is not None
    n_boot = cfg.arena.bootstrap if bootstrap is None else bootstrap
    main = setting_section(cfg, outcomes[0], bootstrap=n_boot)
    main["answers"] = answer_outcomes(outcomes[0])
    main["errors"] = dict(Counter(e.kind for e in store.errors()))
    main["usage"] = store.usage_summary()
    if len(outcomes) > 1:
        main["settings"] = {
            o.setting: setting_section(cfg, o, bootstrap=0, with_groups=False) for o in outcomes
        }
    doc: dict[str, Any] = {"arena": main}
    truth = true_ranking(cfg)
    if truth is not None:
        found = [r["model"] for r in main.get("overall", [])]
        doc["simulated"] = {
            "note": "targets are simulated; this checks the method, not real models",
            "true_ranking": truth,
            "kendall_tau": kendall_tau(found, truth) if len(found) > 1 else None,
            "spearman_rho": spearman_rho(found, truth) if len(found) > 1 else None,
        }
    return doc


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_arena_outputs(
    run_dir: Path, board: dict[str, Any], outcomes: Sequence[ArenaOutcome]
) -> None:
    """Write ``leaderboard.json`` and ``battles.jsonl`` (the main setting's resolved battles,
    so ``memearena rank`` reproduces the leaderboard; other settings go to
    ``battles.<setting>.jsonl``)."""
    _atomic_write(run_dir / "leaderboard.json", json.dumps(board, indent=2))
    for i, o in enumerate(outcomes):
        name = "battles.jsonl" if i == 0 else f"battles.{o.setting}.jsonl"
        lines = "".join(json.dumps(b, sort_keys=True) + "\n" for b in o.battles)
        _atomic_write(run_dir / name, lines)
