"""The Adapt part of ``memearena demo``: simulated targets, one with a hidden weakness, run in
the ordinary simulated world and in the null world (where refinement makes nothing harder)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from memearena.config import DatasetConfig, RunConfig
from memearena.methods.adapt.config import AdaptConfig, AdaptSimConfig
from memearena.report.safe import console_safe
from memearena.sim.catalogue import demo_models

__all__ = ["DEMO_ADAPT_TARGETS", "DEMO_WEAKNESS", "adapt_demo_config", "run_adapt_demo"]

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
        run="demo-adapt-null" if null_world else "demo-adapt",
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
    from memearena.methods.adapt.driver import run_adapt
    from memearena.methods.adapt.view import print_adapt_summary

    console = console or Console()
    real = run_adapt(
        adapt_demo_config(seed=seed), run_dir, console=console, show_progress=show_progress
    )
    print_adapt_summary(console, real.section, "Adapt (simulated world)")
    null_dir = run_dir / "adapt-null-world"
    null = run_adapt(
        adapt_demo_config(seed=seed, null_world=True),
        null_dir,
        console=console,
        show_progress=show_progress,
    )
    print_adapt_summary(console, null.section, "Adapt (null world: refinement changes nothing)")
    for line in demo_findings(real.section, null.section):
        console.print(console_safe(line))
    return {"world": real.section, "null_world": null.section}


def _fmt(v: Any, ci: Any) -> str:
    if v is None:
        return "—"
    if not ci or ci[0] is None:
        return f"{v:.0%}"
    return f"{v:.0%} [{ci[0]:.0%}, {ci[1]:.0%}]"


def demo_findings(world: dict[str, Any], null: dict[str, Any]) -> list[str]:
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
            f"({_fmt(r['failure_rate'], r['failure_rate_ci'])}) vs "
            f"{_fmt(r['others_failure_rate'], r['others_failure_rate_ci'])} "
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
                    f"{x['model']} {_fmt(x['failure_rate'], x['failure_rate_ci'])}" for x in peers
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
                f"{m['model']} {_fmt(m['refined_increase'], m['refined_increase_ci'])}"
                for m in sec["models"]
            )
            + "; unconditional control: "
            + ", ".join(
                f"{m['model']} {_fmt(m['control_increase'], m['control_increase_ci'])}"
                for m in ctrl
            )
            + f" ({zero_in}/{len(ctrl)} control intervals include 0)"
        )
        del pooled_loop
    return lines
