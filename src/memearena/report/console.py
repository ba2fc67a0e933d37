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


def print_arena_summary(console: Console, result: ArenaRunResult) -> None:
    """Leaderboard, judge bias, the simulated check, calls and where the files are."""
    board = result.leaderboard
    arena = board.get("arena", {})
    if arena.get("overall"):
        console.print(
            leaderboard_table(
                f"Arena — setting {arena['setting']!r}, {arena['battles']:,} battles",
                arena["overall"],
            )
        )
        judges = Table(title="Judges vs the panel's joint vote (95% bootstrap intervals)")
        for col in (
            "judge",
            "NDCG",
            "τ",
            "consistency",
            "P(first)",
            "P(longer)",
            "self-pref.",
            "unparsed",
        ):
            judges.add_column(col, justify="left" if col == "judge" else "right")
        for j in arena.get("judges", []):
            sp = j.get("self_preference")
            judges.add_row(
                j["judge"],
                _fmt(j["ndcg"]),
                _fmt(j["kendall_tau"], 2),
                _fmt(j["position_consistency"]),
                _fmt(j["p_prefer_first"]),
                _fmt(j["p_prefer_longer"]),
                _fmt(sp) if sp else "—",
                str(j["parse_failures"]),
            )
        console.print(judges)
        alpha = (arena.get("panel") or {}).get("krippendorff_alpha")
        if alpha:
            console.print(f"Panel agreement: Krippendorff's α = {_fmt(alpha)}")
    settings = arena.get("settings")
    if settings:
        table = Table(title="NDCG per judge per setting")
        table.add_column("judge")
        for s in settings:
            table.add_column(s, justify="right")
        judge_names = [j["judge"] for j in next(iter(settings.values())).get("judges", [])]
        for name in judge_names:
            cells = []
            for sec in settings.values():
                row = next((j for j in sec.get("judges", []) if j["judge"] == name), None)
                cells.append(_fmt(row["ndcg"]) if row else "—")
            table.add_row(name, *cells)
        means = []
        for sec in settings.values():
            vals = [j["ndcg"] for j in sec.get("judges", []) if j["ndcg"] is not None]
            means.append(_fmt(sum(vals) / len(vals)) if vals else "—")
        table.add_row("mean", *means, style="bold")
        console.print(table)
    sim = board.get("simulated")
    if sim:
        console.print(
            f"[yellow]simulated targets[/yellow]: true order {' > '.join(sim['true_ranking'])}; "
            f"recovered Kendall τ = {_fmt(sim['kendall_tau'])}"
        )
    if result.stopped and result.status is None:  # else the run status says it, once
        console.print(f"[red]stopped:[/red] {result.stopped}. Re-run to resume.")
    console.print(
        f"{result.new_calls:,} new model calls, total cost ${result.cost_usd:.4f}. "
        f"Outputs in {result.run_dir}/ (run.db, leaderboard.json, battles.jsonl, report.html)"
    )
