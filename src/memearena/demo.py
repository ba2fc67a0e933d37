"""``memearena demo``: every method on the bundled demo memes with simulated models, offline.

The demo wiring lives here, above the methods: it picks simulated models from the catalogue
(``memearena.sim``), builds each method's config and runs them through the lifecycle — the
Judge audit first (so the Arena can warn about the panel judges it flags), then the Arena, then
Adapt in the ordinary and the null world. No stage knows it is in a demo."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from memearena.config import DatasetConfig, RunConfig
from memearena.engine.lifecycle import RunResult, print_run_summary, run_method
from memearena.methods.adapt.config import AdaptConfig, AdaptSimConfig
from memearena.methods.adapt.view import print_adapt_summary
from memearena.methods.arena.config import ArenaConfig
from memearena.methods.judge_audit.config import JudgeAuditConfig
from memearena.methods.judge_audit.sim import (
    DEMO_AUDIT_JUDGES,
    DEMO_AUDIT_REFERENCE,
    DEMO_AUDIT_RESPONDERS,
)
from memearena.methods.judge_audit.view import demo_check, print_judge_audit_summary
from memearena.report.safe import console_safe
from memearena.sim.catalogue import (
    DEMO_CONTEXT_MODEL,
    DEMO_JUDGES,
    DEMO_TARGETS,
    NULL_WORLD,
    demo_models,
)

__all__ = [
    "DEMO_ADAPT_TARGETS",
    "DEMO_WEAKNESS",
    "adapt_demo_config",
    "adapt_demo_findings",
    "demo_audit_config",
    "demo_config",
    "demo_run_dir",
    "run_adapt_demo",
    "run_demo",
    "run_demo_audit",
    "run_label_demo",
]


def demo_config(*, seed: int = 0, bootstrap: int = 1000, null_world: bool = False) -> RunConfig:
    """The demo run: simulated targets of known skill, a simulated panel with one
    self-preferring judge, the bundled synthetic memes. `null_world` sets every world parameter
    through which guidelines can matter to 0 (the null control: settings cannot differ)."""
    models = demo_models()
    if null_world:
        models = {k: v.model_copy(update=NULL_WORLD) for k, v in models.items()}
    return RunConfig(
        run="demo",
        seed=seed,
        models={**models, **{k: v.model_copy() for k, v in DEMO_AUDIT_JUDGES.items()}},
        data=[DatasetConfig(format="demo")],
        arena=ArenaConfig(
            targets=list(DEMO_TARGETS),
            judges=list(DEMO_JUDGES),
            context_model=DEMO_CONTEXT_MODEL,
            bootstrap=bootstrap,
            rate_fusion_rounds=True,  # the panel's fusion-convergence view, shown by the demo
        ),
        judge_audit=demo_audit_config(list(DEMO_JUDGES), bootstrap=bootstrap),
    )


def demo_audit_config(judges: Sequence[str], *, bootstrap: int = 1000) -> JudgeAuditConfig:
    """The demo's audit: ``judges`` plus the failure-mode judges, on the demo targets' answers."""
    return JudgeAuditConfig(
        judges=[*judges, *(j for j in DEMO_AUDIT_JUDGES if j not in judges)],
        responders=list(DEMO_AUDIT_RESPONDERS),
        reference_judge=DEMO_AUDIT_REFERENCE,
        bootstrap=bootstrap,
    )


def demo_run_dir(seed: int = 0, null_world: bool = False) -> Path:
    """Default run directory: one per world (seed, null control), so that a run never resumes
    from another world's artifacts."""
    name = "demo" if seed == 0 else f"demo-seed{seed}"
    return Path("runs") / (name + ("-null" if null_world else ""))


def run_demo(
    run_dir: Path,
    *,
    console: Console | None = None,
    show_progress: bool = True,
    seed: int = 0,
    null_world: bool = False,
    compare_settings: bool = False,
    annotators: int = 0,
) -> RunResult:
    """Run (or resume) the demo in ``run_dir`` and print its summary; `seed` picks another
    simulated world, `null_world` its null control, `compare_settings` judges the same answers
    under every guideline setting, `annotators` simulated annotators label every queue and the
    agreement figures are printed beside what they plant. Returns the Arena's result."""
    console = console or Console()
    console.print(
        "[bold]memearena demo[/bold] — the Judge audit, the Arena and Adapt on the bundled "
        "synthetic memes with "
        "[yellow]simulated[/yellow] models (offline; not a result about real models)"
    )
    settings = ["memearena", "none", "self"] if compare_settings else None
    cfg = demo_config(seed=seed, null_world=null_world)
    # The audit runs first, so the Arena can warn about the panel judges it flags.
    cfg = run_demo_audit(cfg, Path(run_dir), console=console, show_progress=show_progress)
    result = run_method(
        "arena", cfg, run_dir, console=console, show_progress=show_progress, settings=settings
    )
    print_run_summary(console, result)
    run_adapt_demo(run_dir, console=console, show_progress=show_progress, seed=seed)
    if annotators:
        run_label_demo(Path(run_dir), annotators, console=console, seed=seed)
    return result


def run_label_demo(run_dir: Path, n: int, *, console: Console, seed: int = 0) -> dict[str, Any]:
    """``n`` simulated annotators label every queue of the demo run; the agreement figures go
    into leaderboard.json (``labels``) and the report, and each judge's κ and the annotators'
    α are printed beside the value planted. Returns the ``labels`` section."""
    from memearena.labels.agreement import agreement
    from memearena.labels.files import write_labels_section
    from memearena.labels.simulated import simulate_labels
    from memearena.sim.annotators import demo_annotators

    console.print(
        f"[bold]Human labels[/bold] — {n} [yellow]simulated[/yellow] annotator(s) of known "
        "noise label every queue (not people)"
    )
    planted = simulate_labels(run_dir, demo_annotators(n), seed=seed)
    figures = agreement(run_dir, seed=seed)
    doc = figures.to_dict()
    doc["simulated"] = {
        "note": "simulated annotators: what their noise plants, beside what the figures show",
        "annotators": planted.annotators,
        "kappa": planted.kappa,
        "alpha": planted.alpha,
    }
    write_labels_section(run_dir, doc)

    def shown(row: dict[str, Any] | None) -> str:
        if not row or row["value"] is None:
            return "—"
        return f"{row['value']:.2f} [{row['ci_low']:.2f}, {row['ci_high']:.2f}]"

    for judge, kappa in planted.kappa.items():
        row = next(iter(figures.figure("kappa", judge=judge, field="all")), None)
        console.print(
            console_safe(
                f"κ of {judge} vs the annotators' majority: {shown(row)}; planted {kappa:.2f}"
            ),
            highlight=False,
        )
    for name, alpha in planted.alpha.items():
        queue, field = name.split(".", 1)
        row = next(iter(figures.figure("alpha", queue=queue, field=field)), None)
        console.print(
            console_safe(f"α among annotators, {name}: {shown(row)}; planted {alpha:.2f}"),
            highlight=False,
        )
    console.print(f"{planted.labels} simulated labels in {console_safe(run_dir)}/labels.sqlite")
    return doc


def run_demo_audit(
    cfg: RunConfig, run_dir: Path, *, console: Console, show_progress: bool = True
) -> RunConfig:
    """The demo's audit: run it, print the evaluator leaderboard and whether each injected
    bias is flagged on the judge that has it and the clean judge on none; return the config
    with the Arena pointed at this audit (so it warns about flagged panel judges)."""
    console.print(
        "[bold]Judge audit[/bold] — compositional bias (BD/BC) and position, verbosity and "
        "self-enhancement bias of [yellow]simulated[/yellow] judges with injected failure modes"
    )
    result = run_method("judge_audit", cfg, run_dir, console=console, show_progress=show_progress)
    print_judge_audit_summary(console, result.section)
    lines, ok = demo_check(result.section)
    for line in lines:
        console.print(line, markup=False, style="green" if line.startswith("ok") else "red")
    console.print(
        "every injected bias is flagged on its judge and the clean judge on none"
        if ok
        else "the audit did NOT recover every injected bias (see the lines above)",
        style="bold green" if ok else "bold red",
    )
    if cfg.arena is None:
        return cfg
    arena = cfg.arena.model_copy(update={"judge_audit": run_dir / "leaderboard.json"})
    return cfg.model_copy(update={"arena": arena})


DEMO_ADAPT_TARGETS: tuple[str, ...] = ("sim-aurora", "sim-borealis", "sim-cirrus", "sim-drizzle")
"""Simulated targets the demo evaluates with Adapt."""

DEMO_WEAKNESS: tuple[str, str, float] = ("sim-borealis", "Disability", 0.05)
"""(target, category, understanding): the demo's hidden weakness. The target's overall skill is
second best, so its average alone does not give the weakness away."""


def adapt_demo_config(
    *, seed: int = 0, null_world: bool = False, bootstrap: int = 1000
) -> RunConfig:
    """The demo's Adapt run on the bundled synthetic memes with simulated models."""
    models: dict[str, Any] = dict(demo_models())
    target, category, understanding = DEMO_WEAKNESS
    models[target] = models[target].model_copy(update={"category_skill": {category: understanding}})
    return RunConfig(
        # The run name is the combined directory's title (the latest method's run facts).
        run="demo-adapt-null" if null_world else "demo",
        seed=seed,
        models=models,
        data=[DatasetConfig(format="demo")],
        adapt=AdaptConfig(
            targets=list(DEMO_ADAPT_TARGETS),
            miner="sim-judge-falcon",
            text_judge="sim-judge-harbor",
            image_examiner="sim-judge-falcon",
            instruction_writer="sim-judge-falcon",
            narrator="sim-judge-falcon",
            reference_model="sim-judge-falcon",
            reference_judge="sim-judge-harbor",
            scorers=["sim-judge-harbor"],
            refiner="sim-judge-grove",
            checker="sim-judge-falcon",
            bootstrap=bootstrap,
            sim=AdaptSimConfig(null_world=null_world),
        ),
    )


def run_adapt_demo(
    run_dir: Path, *, console: Console | None = None, show_progress: bool = True, seed: int = 0
) -> dict[str, Any]:
    """Adapt in the ordinary and the null simulated world (``seed``: another simulated world);
    prints what each shows."""
    console = console or Console()
    real = run_method(
        "adapt", adapt_demo_config(seed=seed), run_dir, console=console, show_progress=show_progress
    )
    print_adapt_summary(console, real.section, "Adapt (simulated world)")
    null_dir = run_dir / "adapt-null-world"
    null = run_method(
        "adapt",
        adapt_demo_config(seed=seed, null_world=True),
        null_dir,
        console=console,
        show_progress=show_progress,
    )
    print_adapt_summary(console, null.section, "Adapt (null world: refinement changes nothing)")
    for line in adapt_demo_findings(real.section, null.section):
        console.print(console_safe(line))
    return {"world": real.section, "null_world": null.section}


def _pct(v: Any, ci: Any) -> str:
    if v is None:
        return "—"
    if not ci or ci[0] is None:
        return f"{v:.0%}"
    return f"{v:.0%} [{ci[0]:.0%}, {ci[1]:.0%}]"


def adapt_demo_findings(world: dict[str, Any], null: dict[str, Any]) -> list[str]:
    """What the demo measured, in words: the hidden weakness, and the selection artefact."""
    target, category, _ = DEMO_WEAKNESS
    lines: list[str] = []
    rows: dict[str, dict[str, Any]] = {}
    for c, rs in world["by_category"].items():
        mine = [x for x in rs if x["model"] == target and x["failure_rate"] is not None]
        if mine:
            rows[c] = mine[0]
    if rows:
        top = max(rows, key=lambda c: rows[c]["failure_rate"])
        r = rows[top]
        excl = r["failure_rate_ci"][0] is not None and (
            r["failure_rate_ci"][0] > (r["others_failure_rate"] or 0.0)
        )
        lines.append(
            f"hidden weakness: {target} fails most in {top} "
            f"({_pct(r['failure_rate'], r['failure_rate_ci'])}) vs "
            f"{_pct(r['others_failure_rate'], r['others_failure_rate_ci'])} "
            "in its other categories; "
            + (
                "the interval excludes the others' rate"
                if excl
                else "the interval does NOT exclude the others' rate"
            )
            + (
                f" (planted in {category})"
                if top == category
                else f" (planted in {category}: NOT recovered)"
            )
        )
        peers = [
            x
            for x in world["by_category"][top]
            if x["model"] != target and x["failure_rate"] is not None
        ]
        if peers:
            lines.append(
                f"  other targets in {top}: "
                + ", ".join(
                    f"{x['model']} {_pct(x['failure_rate'], x['failure_rate_ci'])}" for x in peers
                )
            )
    for name, sec in (("world", world), ("null world", null)):
        loop = [m["refined_increase"] for m in sec["models"] if m["refined_increase"] is not None]
        ctrl = [m for m in sec["models"] if m["control_increase"] is not None]
        pooled_loop = sum(loop) / len(loop) if loop else None
        zero_in = sum(
            1 for m in ctrl if m["control_increase_ci"][0] <= 0 <= m["control_increase_ci"][1]
        )
        lines.append(
            f"{name}: conditional loop raises the failure rate by "
            + ", ".join(
                f"{m['model']} {_pct(m['refined_increase'], m['refined_increase_ci'])}"
                for m in sec["models"]
            )
            + "; unconditional control: "
            + ", ".join(
                f"{m['model']} {_pct(m['control_increase'], m['control_increase_ci'])}"
                for m in ctrl
            )
            + f" ({zero_in}/{len(ctrl)} control intervals include 0)"
        )
        del pooled_loop
    return lines
