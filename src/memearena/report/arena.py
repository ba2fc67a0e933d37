"""The Arena's results: leaderboards, judge bias, and the files a run writes."""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

from memearena.config import RunConfig, SimModelConfig
from memearena.pipelines.arena import ArenaOutcome
from memearena.pipelines.schedule import owns
from memearena.stats import (
    Battle,
    DisconnectedComparisonError,
    Estimate,
    UnboundedRatingsError,
    Verdict,
    cohen_kappa,
    group_battles,
    kendall_tau,
    krippendorff_alpha,
    leaderboard_fit,
    ndcg,
    position_consistency,
    prefer_first_rate,
    prefer_longer_rate,
    self_preference,
    spearman_rho,
)
from memearena.store import RunStore

WEAK_PRIOR = 1.0
"""Virtual ties per model used only when the plain MLE does not exist (reported as such)."""

GROUPS = {
    "by_criterion": "criterion",
    "by_judge": "judge",
    "by_context": "context",
    "by_source": "source",
}


def _rows(rows: Sequence[Any]) -> list[dict[str, Any]]:
    return [r.model_dump() for r in rows]


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _estimate(e: Estimate | None) -> dict[str, Any] | None:
    """An estimate as strict JSON (NaN → null)."""
    if e is None:
        return None
    return {
        "value": _finite(e.value),
        "ci_low": _finite(e.ci_low),
        "ci_high": _finite(e.ci_high),
        "n": e.n,
    }


def fit_leaderboard(
    battles: Sequence[Battle], *, bootstrap: int, seed: int, elo_k: float
) -> tuple[list[dict[str, Any]], str | None]:
    """Leaderboard rows; when the MLE does not exist (a model never lost, or a disconnected
    comparison graph) the fit falls back to a weak prior and says so in the note."""
    try:
        rows, _ = leaderboard_fit(battles, bootstrap=bootstrap, seed=seed, elo_k=elo_k)
        return _rows(rows), None
    except (UnboundedRatingsError, DisconnectedComparisonError) as e:
        rows, _ = leaderboard_fit(
            battles, bootstrap=bootstrap, seed=seed, elo_k=elo_k, prior=WEAK_PRIOR
        )
        return _rows(rows), f"{e} — fitted with a weak prior ({WEAK_PRIOR} virtual ties)"


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
    notes: dict[str, str] = {}
    section["overall"], note = fit_leaderboard(
        battles, bootstrap=bootstrap, seed=cfg.seed, elo_k=elo_k
    )
    if note:
        notes["overall"] = note
    joint = [r["model"] for r in section["overall"]]
    if with_groups:
        for key, field in GROUPS.items():
            section[key] = {}
            for group, members in group_battles(battles, field).items():
                section[key][group], note = fit_leaderboard(
                    members, bootstrap=bootstrap, seed=cfg.seed, elo_k=elo_k
                )
                if note:
                    notes[f"{key}.{group}"] = note
    n_boot = min(bootstrap, 1000)
    section["judges"] = judge_bias(cfg, outcome, battles, joint, n_boot=n_boot)
    section["panel"] = panel_agreement(cfg, outcome, n_boot=n_boot)
    if notes:
        section["notes"] = notes
    return section


def raw_verdicts(outcome: ArenaOutcome) -> list[Verdict]:
    """Every parsed verdict as shown to the judge (``model_a`` = the response shown first),
    both orders, per criterion, with the responses' lengths in characters."""
    out: list[Verdict] = []
    as_winner = {"A": "model_a", "B": "model_b", "tie": "tie"}
    for jp in outcome.judged:
        t = jp.task
        len_x = len(outcome.answers[(t.meme.uid, t.level, jp.x)]["text"])
        len_y = len(outcome.answers[(t.meme.uid, t.level, jp.y)]["text"])
        item = f"{t.meme.uid}|{t.level}"
        shown = ((jp.forward, jp.x, jp.y, len_x, len_y), (jp.backward, jp.y, jp.x, len_y, len_x))
        for art, first, second, len_first, len_second in shown:
            for crit, v in (art.get("verdicts") or {}).items():
                out.append(
                    Verdict(
                        judge=jp.judge,
                        item=item,
                        model_a=first,
                        model_b=second,
                        winner=as_winner[v["winner"]],  # type: ignore[arg-type]
                        criterion=crit,
                        len_a=len_first,
                        len_b=len_second,
                    )
                )
    return out


def own_models(cfg: RunConfig) -> dict[str, str]:
    """Each judge's own target (same name or family), for self-preference."""
    assert cfg.arena is not None
    families = {n: m.family for n, m in cfg.models.items()}
    out: dict[str, str] = {}
    for judge in cfg.arena.judges:
        for target in cfg.arena.targets:
            if owns(judge, target, families):
                out[judge] = target
                break
    return out


def judge_bias(
    cfg: RunConfig,
    outcome: ArenaOutcome,
    battles: Sequence[Battle],
    joint: Sequence[str],
    *,
    n_boot: int,
) -> list[dict[str, Any]]:
    """Each judge's ranking against the panel's joint vote (NDCG, Kendall τ), and its
    position consistency, P(prefer first), P(prefer longer), self-preference and parse
    failures, each rate with a bootstrap interval."""
    assert cfg.arena is not None
    verdicts = raw_verdicts(outcome)
    seed = cfg.seed
    consistency = position_consistency(verdicts, n_boot=n_boot, seed=seed)
    first = prefer_first_rate(verdicts, n_boot=n_boot, seed=seed)
    longer = prefer_longer_rate(verdicts, n_boot=n_boot, seed=seed)
    mine = own_models(cfg)
    selfpref = self_preference(verdicts, mine, n_boot=n_boot, seed=seed) if mine else {}
    failures: Counter[str] = Counter()
    for jp in outcome.judged:
        failures[jp.judge] += ("verdicts" not in jp.forward) + ("verdicts" not in jp.backward)
    out: list[dict[str, Any]] = []
    for judge in cfg.arena.judges:
        own = [b for b in battles if b.judge == judge]
        row: dict[str, Any] = {"judge": judge, "battles": len(own)}
        ranking: list[str] = []
        if own:
            rows, note = fit_leaderboard(own, bootstrap=0, seed=seed, elo_k=cfg.arena.elo_k)
            ranking = [r["model"] for r in rows]
            if note:
                row["note"] = note
        row["ranking"] = ranking
        row["ndcg"] = ndcg(ranking, list(joint)) if ranking else None
        row["kendall_tau"] = (
            _finite(kendall_tau(ranking, list(joint))) if len(ranking) > 1 else None
        )
        row["position_consistency"] = _estimate(consistency.get(judge))
        row["p_prefer_first"] = _estimate(first.get(judge))
        row["p_prefer_longer"] = _estimate(longer.get(judge))
        sp = selfpref.get(judge)
        row["self_preference"] = (
            None
            if sp is None
            else {
                "model": sp.model,
                "own_win_rate": _finite(sp.own_win_rate),
                "panel_win_rate": _finite(sp.panel_win_rate),
                **(_estimate(sp.difference) or {}),
            }
        )
        row["parse_failures"] = failures[judge]
        out.append(row)
    return out


def panel_agreement(cfg: RunConfig, outcome: ArenaOutcome, *, n_boot: int) -> dict[str, Any]:
    """Inter-judge agreement on the resolved per-order verdicts: Krippendorff's α across the
    panel and Cohen's κ for every pair of judges."""
    assert cfg.arena is not None
    verdicts = raw_verdicts(outcome)
    judges = list(cfg.arena.judges)
    doc: dict[str, Any] = {
        "krippendorff_alpha": _estimate(
            krippendorff_alpha(verdicts, judges=judges, n_boot=n_boot, seed=cfg.seed)
        )
        if len(judges) > 1
        else None,
        "cohen_kappa": {},
    }
    for a, b in combinations(judges, 2):
        doc["cohen_kappa"][f"{a} vs {b}"] = _estimate(
            cohen_kappa(verdicts, a, b, n_boot=n_boot, seed=cfg.seed)
        )
    return doc


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
    return {
        t: {k: int(c[k]) for k in ("answers", "refusals", "format_failures")}
        for t, c in sorted(counts.items())
    }


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
    main["errors"] = dict(
        sorted(Counter(f"{e.kind}: {e.reason.split(':')[0]}" for e in store.errors()).items())
    )
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
            "kendall_tau": _finite(kendall_tau(found, truth)) if len(found) > 1 else None,
            "spearman_rho": _finite(spearman_rho(found, truth)) if len(found) > 1 else None,
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
