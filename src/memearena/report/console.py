"""Readable summaries printed at the end of a command."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from memearena.config import RunConfig

if TYPE_CHECKING:
    from memearena.runner import ArenaRunResult, PlannedCalls


def _fmt(x: Any, digits: int = 3) -> str:
    """A number, an estimate ``{"value", "ci_low", "ci_high"}`` with its interval, or —."""
    if isinstance(x, dict):
        if x.get("value") is None:
            return "—"
        if x.get("ci_low") is None:
            return _fmt(x["value"], digits)
        half = (x["ci_high"] - x["ci_low"]) / 2
        return f"{x['value']:.2f}±{half:.2f}"
    return "—" if x is None else f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def print_plan(console: Console, cfg: RunConfig, plan: PlannedCalls) -> None:
    """The --dry-run table: planned calls, tokens and cost per model."""
    table = Table(title=f"planned calls for run {cfg.run!r} (dry run: nothing was called)")
    for col in ("model", "provider", "calls", "input tokens", "output tokens", "est. cost USD"):
        table.add_column(col, justify="right" if col != "model" else "left")
    for name, row in sorted(plan.per_model.items()):
        provider = cfg.models[name].provider if name in cfg.models else "?"
        table.add_row(
            name,
            provider,
            f"{int(row['calls']):,}",
            f"{int(row['input_tokens']):,}",
            f"{int(row['output_tokens']):,}",
            f"{row['cost_usd']:.2f}",
        )
    table.add_row("total", "", f"{plan.calls:,}", "", "", f"{plan.cost_usd:.2f}", style="bold")
    console.print(table)
    console.print(
        "Counts assume no re-asks and no refusals; input tokens are counted on the real prompts "
        "(~chars/4, 85 per image), output tokens are typical reply lengths per role. "
        "Set --max-cost to cap the real spend."
    )


def leaderboard_table(title: str, rows: list[dict[str, Any]]) -> Table:
    """A leaderboard as a rich table (rows as in ``rank --json``)."""
    table = Table(title=title, caption="BT: Bradley–Terry on the Elo scale, mean-anchored to 1000")
    for col in ("rank", "model", "BT", "95% CI", "Elo", "win rate", "battles"):
        table.add_column(col, justify="left" if col == "model" else "right")
    for r in rows:
        table.add_row(
            str(r["rank"]),
            r["model"],
            f"{r['bt']:.0f}",
            f"{r['ci_low']:.0f}–{r['ci_high']:.0f}",
            f"{r['elo']:.0f}",
            f"{r['win_rate']:.1%}",
            str(r["battles"]),
        )
    return table


def _ci(row: dict[str, Any], key: str) -> dict[str, Any] | None:
    """A judge row's point figure and its interval, as an estimate."""
    if row.get(key) is None:
        return None
    return {
        "value": row[key],
        "ci_low": row.get(f"{key}_ci_low"),
        "ci_high": row.get(f"{key}_ci_high"),
    }


SENSITIVITY_TITLES = {
    "self_judging_include": "with self-judged battles included",
    "self_judging_exclude": "with self-judged battles excluded",
    "refusals_as_losses": "with a refusal counted as a loss against every answer of its task",
    "length_controlled": "length-controlled (answer length as a covariate)",
}


def print_sensitivity(console: Console, arena: dict[str, Any]) -> None:
    """The alternative leaderboards: each printed in full when it changes the order."""
    sens = arena.get("sensitivity") or {}
    for key, title in SENSITIVITY_TITLES.items():
        view = sens.get(key)
        if not view:
            continue
        if view.get("order_differs"):
            rows = [
                {"elo": float("nan"), "win_rate": float("nan"), "battles": 0, **r}
                for r in view["overall"]
            ]
            console.print(leaderboard_table(f"Sensitivity: {title} — the order changes", rows))
        else:
            console.print(f"Sensitivity: {title}: same order.")
    effect = (sens.get("length_controlled") or {}).get("length_effect_elo_per_doubling")
    if effect and effect.get("value") is not None:
        console.print(
            f"Length effect: {_fmt(effect)} Elo per doubling of an answer's length relative to "
            "the other's (95% interval)"
        )


def print_settings(console: Console, settings: dict[str, Any], comparison: dict[str, Any]) -> None:
    """Guideline settings side by side (against the truth in simulated runs, against the
    leave-one-out joint vote, the panel's measured biases), then NDCG per judge per setting."""
    if comparison:
        cols = [
            ("leaderboard_tau_vs_truth", "τ vs truth"),
            ("mean_ndcg_vs_truth", "NDCG vs truth"),
            ("mean_ndcg_vs_loo", "NDCG vs joint (LOO)"),
            ("mean_p_prefer_first", "P(first)"),
            ("mean_p_prefer_longer", "P(longer)"),
            ("mean_self_preference", "self-pref."),
        ]
        table = Table(
            title="Guideline settings compared (panel means)",
            caption="τ and NDCG vs truth: simulated targets only",
        )
        table.add_column("setting")
        for _, label in cols:
            table.add_column(label, justify="right")
        for name, row in comparison.items():
            table.add_row(name, *(_fmt(row.get(k)) for k, _ in cols))
        console.print(table)
    table = Table(title="NDCG per judge per setting (vs the leave-one-out joint vote)")
    table.add_column("judge")
    for s in settings:
        table.add_column(s, justify="right")
    judge_names = [j["judge"] for j in next(iter(settings.values())).get("judges", [])]
    for name in judge_names:
        cells = []
        for sec in settings.values():
            row = next((j for j in sec.get("judges", []) if j["judge"] == name), None)
            cells.append(_fmt(_ci(row, "ndcg")) if row else "—")
        table.add_row(name, *cells)
    means = []
    for sec in settings.values():
        vals = [j["ndcg"] for j in sec.get("judges", []) if j["ndcg"] is not None]
        means.append(_fmt(sum(vals) / len(vals)) if vals else "—")
    table.add_row("mean", *means, style="bold")
    console.print(table)


def print_arena_summary(console: Console, result: ArenaRunResult) -> None:
    """Leaderboard, sensitivity views, judge bias, settings, the simulated check, calls and
    where the files are."""
    board = result.leaderboard
    arena = board.get("arena", {})
    if arena.get("overall"):
        unit = arena.get("bootstrap_unit", "battle")
        console.print(
            leaderboard_table(
                f"Arena — setting {arena['setting']!r}, {arena['battles']:,} battles "
                f"(intervals resample {unit}s)",
                arena["overall"],
            )
        )
        if arena.get("self_judged_battles"):
            console.print(
                f"{arena['self_judged_battles']:,} battles in which a judge compared its own "
                f"family's model: self_judging = {arena.get('self_judging')}"
            )
        print_sensitivity(console, arena)
        judges = Table(
            title=f"Judges vs the leave-one-out joint vote (95% intervals over {unit}s)",
            caption="vs panel: P(longer) minus the other judges' on the same presentations; "
            "* flagged",
        )
        for col in (
            "judge",
            "NDCG",
            "τ",
            "consistency",
            "P(first)",
            "P(longer)",
            "vs panel",
            "self-pref.",
            "unparsed",
        ):
            judges.add_column(col, justify="left" if col == "judge" else "right")
        for j in arena.get("judges", []):
            sp = j.get("self_preference")
            judges.add_row(
                j["judge"],
                _fmt(_ci(j, "ndcg")),
                _fmt(_ci(j, "kendall_tau"), 2),
                _fmt(j["position_consistency"]),
                _fmt(j["p_prefer_first"]),
                _fmt(j["p_prefer_longer"]),
                _fmt(j.get("p_prefer_longer_vs_panel"))
                + (" *" if j.get("verbosity_flagged") else ""),
                _fmt(sp) if sp else "—",
                str(j["parse_failures"]),
            )
        console.print(judges)
        alpha = (arena.get("panel") or {}).get("krippendorff_alpha")
        if alpha:
            console.print(f"Panel agreement: Krippendorff's α = {_fmt(alpha)}")
    settings = arena.get("settings")
    if settings:
        print_settings(console, settings, arena.get("settings_comparison") or {})
    sim = board.get("simulated")
    if sim:
        console.print(
            f"[yellow]simulated targets[/yellow]: true order {' > '.join(sim['true_ranking'])}; "
            f"recovered Kendall τ = {_fmt(sim['kendall_tau'])}"
        )
    if result.stopped:
        console.print(f"[red]stopped:[/red] {result.stopped}. Re-run to resume.")
    console.print(
        f"{result.new_calls:,} new model calls, total cost ${result.cost_usd:.4f}. "
        f"Outputs in {result.run_dir}/ (run.db, leaderboard.json, battles.jsonl, report.html)"
    )
