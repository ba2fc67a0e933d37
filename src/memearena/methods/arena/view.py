"""Rendering of the Arena: its console summary and its part of the report (the view model
here, the partial in ``html/report.html.j2``, registered with the report's shell). Reads only
the ``arena`` and ``simulated`` keys of ``leaderboard.json``; every name goes through
``console_safe`` on the console and autoescaping in the report."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from memearena.report.console import (
    INTERVAL_NOTE,
    fitted_tables,
    fmt_estimate,
    name_column,
    number_column,
)
from memearena.report.html import (
    Section,
    bar_chart,
    dict_of,
    float_of,
    fmt_cell,
    fmt_num,
    fmt_pct,
    is_number,
    list_of,
    rating_chart,
    register_section,
    rows_of,
)
from memearena.report.safe import console_safe, name_cell
from memearena.report.svg import estimate, interval_chart, matrix_chart

__all__ = [
    "judge_tables",
    "leaderboard_table",
    "print_arena_summary",
    "print_sensitivity",
    "print_settings",
    "report_section",
]

_fmt = fmt_estimate


# the console's Arena tables ---------------------------------------------------------------


def leaderboard_table(
    title: str,
    rows: list[dict[str, Any]],
    win_rates: Mapping[str, Any] | None = None,
) -> Table:
    """A leaderboard as a rich table (rows as in ``rank --json``); ``win_rates``: each model's
    win-rate interval (``arena.win_rates``), shown beside its win rate."""
    caption = "BT: Bradley–Terry on the Elo scale, mean-anchored to 1000"
    if win_rates:
        caption += "; win % with its 95% interval; Elo: online, in battle order (no interval)"
    table = Table(title=title, caption=caption)
    number_column(table, "rank")
    name_column(table, "model", [str(r["model"]) for r in rows])
    for col in ("BT", "95% CI", "Elo", "win %" if win_rates else "win rate", "battles"):
        number_column(table, col)
    for r in rows:
        wr = (win_rates or {}).get(r["model"]) or {}
        lo, hi = wr.get("ci_low"), wr.get("ci_high")
        if lo is not None and hi is not None:
            win = f"{100 * r['win_rate']:.1f} ({100 * lo:.0f}–{100 * hi:.0f})"
        else:
            win = f"{r['win_rate']:.1%}"
        table.add_row(
            str(r["rank"]),
            name_cell(r["model"]),
            f"{r['bt']:.0f}",
            f"{r['ci_low']:.0f}–{r['ci_high']:.0f}",
            f"{r['elo']:.0f}",
            win,
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
            f"Length effect: {fmt_estimate(effect)} Elo per doubling of an answer's length "
            "relative to the other's (95% interval)"
        )


def print_settings(console: Console, settings: dict[str, Any], comparison: dict[str, Any]) -> None:
    """Guideline settings side by side (against the truth in simulated runs, against the
    leave-one-out joint vote, the panel's measured biases), then NDCG per judge per setting."""
    if comparison:
        cols = [
            ("leaderboard_tau_vs_truth", "τ vs truth"),
            ("mean_ndcg_vs_truth", "NDCG vs truth"),
            ("mean_ndcg_vs_loo", "NDCG vs LOO"),
            ("mean_p_prefer_first", "P(first)"),
            ("mean_p_prefer_longer", "P(longer)"),
            ("mean_self_preference", "self-pref."),
        ]
        names = [name_cell(n) for n in comparison]
        figures = [[fmt_estimate(row.get(k)) for k, _ in cols] for row in comparison.values()]
        for t in fitted_tables(
            "Guideline settings compared (panel means)",
            "setting",
            names,
            [label for _, label in cols],
            figures,
            console.width,
            caption="τ and NDCG vs truth: simulated targets only; LOO: leave-one-out joint vote",
        ):
            console.print(t)
    table = Table(title="NDCG per judge per setting (vs the leave-one-out joint vote)")
    judge_names = [j["judge"] for j in next(iter(settings.values())).get("judges", [])]
    name_column(table, "judge", [str(n) for n in judge_names])
    for s in settings:
        number_column(table, name_cell(s))
    for name in judge_names:
        cells = []
        for sec in settings.values():
            row = next((j for j in sec.get("judges", []) if j["judge"] == name), None)
            cells.append(fmt_estimate(_ci(row, "ndcg")) if row else "—")
        table.add_row(name_cell(name), *cells)
    means = []
    for sec in settings.values():
        vals = [j["ndcg"] for j in sec.get("judges", []) if j["ndcg"] is not None]
        means.append(fmt_estimate(sum(vals) / len(vals)) if vals else "—")
    table.add_row("mean", *means, style="bold")
    console.print(table)


_JUDGE_COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("NDCG", "ndcg", 3),
    ("τ", "kendall_tau", 2),
    ("unparsed", "parse_failures", 0),
    ("consistency", "position_consistency", 3),
    ("P(first)", "p_prefer_first", 3),
    ("P(longer)", "p_prefer_longer", 3),
    ("vs panel", "p_prefer_longer_vs_panel", 3),
    ("self-pref.", "self_preference", 3),
)


def _judge_cell(j: dict[str, Any], key: str, digits: int) -> str:
    if key in ("ndcg", "kendall_tau"):  # point figures with their interval fields
        return fmt_estimate(_ci(j, key), digits) if j.get(key) is not None else "—"
    text = fmt_estimate(j.get(key), digits) if j.get(key) is not None else "—"
    if key == "p_prefer_longer_vs_panel" and j.get("verbosity_flagged"):
        text += " *"
    return text


def judge_tables(
    judges: list[dict[str, Any]], width: int = 80, *, unit: str = "meme"
) -> list[Table]:
    """Judges vs the leave-one-out joint vote: one table, or two sharing the judge column when
    one would not fit ``width`` columns (a judge's name is cut only past NAME_CHARS)."""
    names = [name_cell(j["judge"]) for j in judges]
    cells = [[_judge_cell(j, key, digits) for _, key, digits in _JUDGE_COLUMNS] for j in judges]
    caption = (
        f"95% intervals over {unit}s: {INTERVAL_NOTE}; vs panel: P(longer) minus the other "
        "judges' on the same presentations (* flagged)"
    )
    return fitted_tables(
        "Judges vs the leave-one-out joint vote",
        "judge",
        names,
        [h for h, _, _ in _JUDGE_COLUMNS],
        cells,
        width,
        caption=caption,
    )


def print_arena_summary(console: Console, board: Mapping[str, Any]) -> None:
    """Leaderboard, sensitivity, judge bias, panel agreement, settings and the simulated check
    (read from the ``arena`` and ``simulated`` keys of ``leaderboard.json``)."""
    arena = board.get("arena", {})
    if arena.get("overall"):
        unit = console_safe(arena.get("bootstrap_unit", "battle"))
        console.print(
            leaderboard_table(
                f"Arena — setting {console_safe(arena['setting'])}: "
                f"{arena['battles']:,} battles ranked (intervals resample {unit}s)",
                arena["overall"],
                arena.get("win_rates"),
            )
        )
        own = arena.get("self_judged_battles")
        if own:
            # The run's closing line counts every resolved battle: say how the two add up.
            policy = arena.get("self_judging")
            ranked = arena["battles"] + (own if policy == "exclude" else 0)
            console.print(
                f"{own:,} battles in which a judge compared its own family's model: "
                f"self_judging = {console_safe(policy)} ({ranked:,} resolved in all)"
            )
        print_sensitivity(console, arena)
        for table in judge_tables(arena.get("judges", []), console.width, unit=unit):
            console.print(table)
        alpha = (arena.get("panel") or {}).get("krippendorff_alpha")
        if alpha:
            console.print(f"Panel agreement: Krippendorff's α = {_fmt(alpha)}")
    settings = arena.get("settings")
    if settings:
        print_settings(console, settings, arena.get("settings_comparison") or {})
    conv = convergence_view(arena.get("fusion_convergence"))
    if conv:
        console.print(
            f"Fusion convergence: the panel's rating (1-3, mean of five axes) of each round's "
            f"guideline, 95% intervals over {conv['memes']} memes",
            markup=False,
        )
        table = Table()
        table.add_column("Round", justify="right")
        table.add_column("Overall [95% CI]", justify="right")
        for row in conv["rows"]:  # a file's values printed literally, never as markup
            table.add_row(console_safe(row["round"]), console_safe(row["overall"]))
        console.print(table)
        console.print(conv["plateau"], markup=False)
    sim = board.get("simulated")
    if sim:
        tau = (sim.get("leaderboard_vs_truth") or {}).get("kendall_tau") or sim["kendall_tau"]
        console.print(
            "[yellow]simulated targets[/yellow]: true order "
            f"{' > '.join(console_safe(m) for m in sim['true_ranking'])}; "
            f"recovered Kendall τ = {_fmt(tau)}"
        )


# the report's Arena section -----------------------------------------------------------------

_NO_BATTLES = {
    "id": "no-battles",
    "title": "This run produced no battles",
    "text": "No pair of answers was judged, so nothing can be ranked: see the errors and usage "
    "below.",
}

SENSITIVITY_SECTIONS: tuple[tuple[str, str], ...] = (
    ("self_judging_include", "Self-judged battles included"),
    ("self_judging_exclude", "Self-judged battles excluded"),
    ("refusals_as_losses", "A refusal counted as a loss"),
    ("length_controlled", "Length-controlled"),
)
"""The Arena's alternative leaderboards (``arena.sensitivity``), shown among the breakdowns."""

GROUP_SECTIONS: tuple[tuple[str, str], ...] = (
    ("by_criterion", "By criterion"),
    ("by_context", "By context"),
    ("by_source", "By source"),
    ("by_judge", "By judge"),
)
"""Grouped leaderboards of the ``arena`` section, in the order the report shows them."""

JUDGE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("battles", "Battles"),
    ("ndcg", "NDCG"),
    ("kendall_tau", "Kendall τ"),
    ("position_consistency", "Position consistency"),
    ("p_prefer_first", "P(first)"),
    ("p_prefer_longer", "P(longer)"),
    ("self_preference", "Self-preference (own − panel)"),
    ("parse_failures", "Parse failures"),
)
"""Known judge-bias columns; any further scalar key of a judge row gets a column after these."""


def _win_rate_cell(value: Any, interval: Any) -> str:
    """A win rate, with its interval when the analysis computed one (the overall board's)."""
    shown = fmt_pct(value)
    if not isinstance(interval, dict):
        return shown
    lo: Any = interval.get("ci_low")
    hi: Any = interval.get("ci_high")
    if not (is_number(lo) and is_number(hi)) or math.isnan(lo) or math.isnan(hi):
        return shown
    return f"{shown} ({100 * lo:.1f}–{100 * hi:.1f})"


def _leaderboard(rows: Any, win_rates: Any = None) -> list[dict[str, Any]]:
    """Leaderboard rows for the template; ``win_rates``: the interval of each model's win rate
    (``arena.win_rates``), shown beside it."""
    intervals = win_rates if isinstance(win_rates, dict) else {}
    out = []
    for r in rows_of(rows):
        low, high = r.get("ci_low"), r.get("ci_high")
        out.append(
            {
                "rank": fmt_num(r.get("rank")),
                "model": str(r.get("model", "?")),
                "bt": fmt_num(r.get("bt")),
                "ci": f"{fmt_num(low)} – {fmt_num(high)}" if low is not None else "—",
                "elo": fmt_num(r.get("elo")),
                "win_rate": _win_rate_cell(r.get("win_rate"), intervals.get(r.get("model"))),
                "battles": fmt_num(r.get("battles")),
            }
        )
    return out


PANEL_COLUMNS = ("battles", "ndcg", "kendall_tau", "parse_failures")
"""Judge-table columns about agreement with the panel; the classic biases get their own table."""
BIAS_COLUMNS = ("position_consistency", "p_prefer_first", "p_prefer_longer", "self_preference")
"""Classic-bias columns of the judge tables (an estimate each, with its interval)."""


def _with_interval(row: dict[str, Any], key: str) -> Any:
    """``row[key]`` as an estimate when the row spells its interval as ``key_ci_low`` and
    ``key_ci_high`` beside it (the Arena's NDCG and Kendall τ)."""
    low, high = row.get(f"{key}_ci_low"), row.get(f"{key}_ci_high")
    if is_number(row.get(key)) and is_number(low) and is_number(high):
        return {"value": row[key], "ci_low": low, "ci_high": high}
    return row.get(key)


def _judge_flags(row: dict[str, Any]) -> list[str]:
    flags = [str(f) for f in list_of(row.get("flags"))]
    flags += [k.removesuffix("_flagged") for k, v in row.items() if k.endswith("_flagged") and v]
    return flags


def _judges(rows: Any) -> dict[str, Any] | None:
    judges = rows_of(rows)
    if not judges:
        return None
    labels = dict(JUDGE_COLUMNS)
    known = set(labels) | {"judge", "ranking", "flags", "reference"}
    columns = [k for k in PANEL_COLUMNS if any(k in j for j in judges)]
    extras: list[str] = []
    for j in judges:
        for k, v in j.items():
            scalar = v is None or isinstance(v, str | int | float | bool)
            folded = k.endswith(("_ci_low", "_ci_high", "_flagged"))
            if k not in known and k not in extras and scalar and not folded:
                extras.append(k)
    columns += extras
    bias = [k for k in BIAS_COLUMNS if any(k in j for j in judges)]
    references = {str(j["reference"]) for j in judges if j.get("reference") is not None}
    table = []
    for j in judges:
        table.append(
            {
                "judge": str(j.get("judge", "?")),
                "cells": [fmt_cell(_with_interval(j, k), k) for k in columns],
                "bias": [fmt_cell(j.get(k), k) for k in bias],
                "flags": _judge_flags(j),
                "ranking": " > ".join(str(m) for m in list_of(j.get("ranking"))),
            }
        )
    names = [str(j.get("judge", "?")) for j in judges]
    probabilities = [
        (label, [estimate(n, j.get(key)) for n, j in zip(names, judges, strict=True)])
        for key, label in (
            ("p_prefer_first", "P(first): prefers the answer shown first"),
            ("p_prefer_longer", "P(longer): prefers the longer answer"),
        )
        if any(key in j for j in judges)
    ]
    selfish = [estimate(n, j.get("self_preference")) for n, j in zip(names, judges, strict=True)]
    return {
        "columns": [labels.get(k, k.replace("_", " ")) for k in columns],
        "bias_columns": [labels[k] for k in bias],
        "rows": table,
        "reference": ", ".join(sorted(references)),
        "has_ranking": any(r["ranking"] for r in table),
        "chart": bar_chart([(str(j.get("judge", "?")), j.get("ndcg")) for j in judges]),
        "bias_chart": interval_chart(
            probabilities,
            title="Position and length bias per judge, with 95% intervals (0.5: no bias)",
            domain=(0.0, 1.0),
            reference=0.5,
        ),
        "self_chart": interval_chart(
            [("Self-preference: own model's win rate minus the panel's", selfish)],
            title="Self-preference per judge, with 95% intervals (0: none)",
            reference=0.0,
        ),
    }


def _win_rates(arena: dict[str, Any]) -> dict[str, Any] | None:
    """The average win rate per model (with intervals) and the pairwise win-rate matrix."""
    rates = dict_of(arena.get("win_rates"))
    order = [str(r.get("model")) for r in rows_of(arena.get("overall")) if r.get("model") in rates]
    order += [str(m) for m in rates if m not in order]
    average = interval_chart(
        [("", [estimate(m, rates.get(m)) for m in order])],
        title="Average win rate against the other models, with 95% intervals (ties count half)",
        domain=(0.0, 1.0),
        reference=0.5,
        percent=True,
    )
    pairwise = dict_of(arena.get("pairwise"))
    names = [str(m) for m in list_of(pairwise.get("models"))]
    wins = [list_of(r) for r in list_of(pairwise.get("win_rate"))]
    games = [list_of(r) for r in list_of(pairwise.get("battles"))]
    ranked = [m for m in order if m in names] + [m for m in names if m not in order]
    if len(ranked) == len(names) == len(wins) and all(len(r) == len(names) for r in wins):
        idx = [names.index(m) for m in ranked]  # best first, as in the leaderboard
        names, wins = ranked, [[wins[i][j] for j in idx] for i in idx]
        if len(games) == len(idx) and all(len(r) == len(idx) for r in games):
            games = [[games[i][j] for j in idx] for i in idx]
        else:
            games = []
    matrix = matrix_chart(
        names,
        wins,
        games or None,
        title="Pairwise win rate: the row model's share of its battles against the column "
        "model (ties count half)",
    )
    if average is None and matrix is None:
        return None
    return {"average": average, "matrix": matrix}


def _settings(value: Any) -> dict[str, Any] | None:
    settings = dict_of(value)
    if not settings:
        return None
    names = [str(s) for s in settings]
    judges: list[str] = []
    ndcg: dict[tuple[str, str], Any] = {}
    for name, section in settings.items():
        for j in rows_of(dict_of(section).get("judges")):
            judge = str(j.get("judge", "?"))
            if judge not in judges:
                judges.append(judge)
            ndcg[(str(name), judge)] = j.get("ndcg")
    rows = []
    for judge in judges:
        values = [float_of(ndcg.get((s, judge))) for s in names]
        best = max((v for v in values if v is not None), default=None)
        rows.append(
            {
                "judge": judge,
                "cells": [
                    {"text": fmt_num(v), "best": v is not None and v == best and len(names) > 1}
                    for v in values
                ],
            }
        )
    rankings = []
    for name, section in settings.items():
        section = dict_of(section)
        order = [str(r.get("model", "?")) for r in rows_of(section.get("overall"))]
        rankings.append(
            {
                "setting": str(name),
                "battles": fmt_num(section.get("battles")),
                "ranking": " > ".join(order) if order else "—",
                "overall": _leaderboard(section.get("overall")),
            }
        )
    return {"names": names, "rows": rows, "rankings": rankings}


def _answers(value: Any) -> list[dict[str, Any]]:
    out = []
    for model, counts in dict_of(value).items():
        counts = dict_of(counts)
        answers, refusals = counts.get("answers"), counts.get("refusals")
        rate = (
            refusals / answers if is_number(answers) and is_number(refusals) and answers else None
        )
        out.append(
            {
                "model": str(model),
                "answers": fmt_num(answers),
                "refusals": fmt_num(refusals),
                "refusal_rate": fmt_pct(rate),
                "format_failures": fmt_num(counts.get("format_failures")),
                "flag": bool(refusals) or bool(counts.get("format_failures")),
            }
        )
    return out


def _panel(value: Any) -> dict[str, Any] | None:
    """Panel agreement: Krippendorff's α over the panel and Cohen's κ per judge pair."""
    panel = dict_of(value)
    alpha = panel.get("krippendorff_alpha")
    kappas = [(str(pair), k) for pair, k in dict_of(panel.get("cohen_kappa")).items()]
    if alpha is None and not kappas:
        return None

    def row(name: str, est: Any) -> dict[str, str]:
        est = dict_of(est) if isinstance(est, Mapping) else {"value": est}
        return {
            "name": name,
            "value": fmt_cell(est, "value"),
            "n": fmt_num(est.get("n")),
        }

    return {
        "alpha": row("Krippendorff's α (whole panel)", alpha) if alpha is not None else None,
        "kappas": [row(pair, k) for pair, k in kappas],
    }


AXIS_LABELS: tuple[tuple[str, str], ...] = (
    ("readability", "Readability"),
    ("informativeness", "Informativeness"),
    ("soundness", "Soundness"),
    ("persuasiveness", "Persuasiveness"),
    ("conciseness", "Conciseness"),
)
"""The guideline rating axes (``arena.fusion_convergence``), as the views title them."""


def convergence_view(value: Any) -> dict[str, Any] | None:
    """The panel's ratings per fusion round (``arena.fusion_convergence``) as text cells, each
    with its 95% interval over memes, and the plateau stated (or its absence); None when the run
    did not rate the rounds."""
    conv = dict_of(value)
    if not conv:
        return None
    rows = []
    for r in list_of(conv.get("rounds")):
        r = dict_of(r)
        axes = dict_of(r.get("axes"))
        rows.append(
            {
                "round": "draft" if r.get("round") == 0 else str(r.get("round")),
                "overall": fmt_cell(dict_of(r.get("overall")), "value"),
                "axes": [fmt_cell(dict_of(axes.get(a)), "value") for a, _ in AXIS_LABELS],
            }
        )
    plateau = conv.get("plateau_round")
    gain = dict_of(conv.get("gain_after_plateau"))
    if isinstance(plateau, int) and not isinstance(plateau, bool):
        text = (
            f"Plateau after round {plateau}: no later round's mean rises above its interval "
            f"(last round minus round {plateau}: {fmt_cell(gain, 'value')})."
        )
    elif rows:
        text = "No plateau: the mean was still rising beyond earlier intervals at the last round."
    else:
        text = "No meme had every fusion round rated."
    memes = fmt_num(conv.get("memes"))
    return {
        "title": f"Fusion convergence — the panel's ratings (1-3) of each round's guideline, "
        f"mean of five axes, 95% intervals over {memes} memes",
        "axes": [label for _, label in AXIS_LABELS],
        "rows": rows,
        "plateau": text,
        "memes": memes,
        "chart": interval_chart(
            [
                (
                    "",
                    [
                        estimate(f"round {r.get('round')}", dict_of(r.get("overall")))
                        for r in map(dict_of, list_of(conv.get("rounds")))
                    ],
                )
            ],
            title="Mean rating of each round's guideline (1-3), with 95% intervals over memes",
            domain=(1.0, 3.0),
        )
        if rows
        else None,
    }


def _arena_view(arena: dict[str, Any], board: dict[str, Any]) -> dict[str, Any]:
    """The Arena section's view model (``html/report.html.j2``)."""
    overall = rows_of(arena.get("overall"))
    groups = []
    for key, label in GROUP_SECTIONS:
        tables = [
            {"name": str(name), "rows": _leaderboard(rows)}
            for name, rows in dict_of(arena.get(key)).items()
        ]
        if tables:
            groups.append({"id": key.replace("_", "-"), "title": label, "tables": tables})
    sensitivity = dict_of(arena.get("sensitivity"))
    views = [
        {
            "name": f"{label} ({'order differs' if view.get('order_differs') else 'same order'})",
            "rows": _leaderboard(view.get("overall")),
        }
        for key, label in SENSITIVITY_SECTIONS
        if (view := dict_of(sensitivity.get(key)))
    ]
    if views:
        groups.insert(0, {"id": "sensitivity", "title": "Sensitivity", "tables": views})
    judges = _judges(arena.get("judges"))
    settings = _settings(arena.get("settings"))
    answers = _answers(arena.get("answers"))
    panel = _panel(arena.get("panel"))
    win_rates = _win_rates(arena)
    nav = [("overall", "Leaderboard")]
    nav += [("win-rates", "Win rates")] if win_rates else []
    nav += [("groups", "Breakdowns")] if groups else []
    nav += [("judges", "Judge bias")] if judges else []
    nav += [("agreement", "Agreement")] if panel else []
    convergence = convergence_view(arena.get("fusion_convergence"))
    nav += [("convergence", "Convergence")] if convergence else []
    nav += [("settings", "Settings")] if settings else []
    nav += [("answers", "Answers")] if answers else []
    setting = str(arena["setting"]) if arena.get("setting") is not None else None
    battles = fmt_num(arena["battles"]) if arena.get("battles") is not None else None
    meta = [("setting ", setting, "")] if setting else []
    meta += [("", battles, " battles")] if battles else []
    meta += [("", str(len(overall)), " models ranked")]
    return {
        "setting": setting,
        "battles": battles,
        "subtitle": setting,
        "meta": meta,
        "empty": _NO_BATTLES if not overall or arena.get("battles") == 0 else None,
        "models": len(overall),
        "overall": _leaderboard(overall, arena.get("win_rates")),
        "overall_chart": rating_chart(overall),
        "groups": groups,
        "judges": judges,
        "panel": panel,
        "convergence": convergence,
        "settings": settings,
        "answers": answers,
        "win_rates": win_rates,
        "nav": nav,
    }


def report_section(arena: dict[str, Any], board: dict[str, Any]) -> dict[str, Any]:
    """The report's Arena part (``html/report.html.j2``)."""
    return _arena_view(arena, board)


register_section(
    Section(
        "arena",
        "Arena",
        "report.html.j2",
        report_section,
        order=0,
        folder=Path(__file__).parent / "html",
    )
)
