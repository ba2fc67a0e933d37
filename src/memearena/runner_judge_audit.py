"""Opening a Judge audit run: data, store, pool — running the audit and writing its outputs.

Writes ``DIR/leaderboard.json`` (its ``"judge_audit"`` key; other methods' keys are kept),
``DIR/judge_audit_scores.jsonl`` (every scored pair, re-analysable with ``judge-audit
metrics``), ``DIR/judge_audit/images/`` (every image sent, by content hash) and
``DIR/report.html``.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from memearena.config import RunConfig
from memearena.data import Meme, load_datasets
from memearena.data.mmjudgebias import JudgeBiasRow, load_mmjudgebias
from memearena.errors import DataError
from memearena.jsonsafe import dumps_strict
from memearena.pipelines.judge_audit.driver import JudgeAuditOutcome, JudgeAuditPipeline
from memearena.pipelines.progress import StageProgress
from memearena.runner import (
    CACHE_FILE,
    PlannedCalls,
    open_pool,
    planned_from_calls,
    snapshot_config,
    stand_in_config,
)
from memearena.store import RunLock, RunStore

__all__ = [
    "IMAGE_DIR",
    "SCORES_FILE",
    "JudgeAuditRunResult",
    "load_audit_inputs",
    "plan_judge_audit",
    "run_demo_audit",
    "run_judge_audit",
]

IMAGE_DIR = "judge_audit/images"
"""Where a run keeps every image it sent, by content hash (relative to the run directory)."""
SCORES_FILE = "judge_audit_scores.jsonl"
"""Every scored pair, in the ``judge-audit metrics`` input format."""

TYPICAL_OUTPUT_TOKENS: dict[str, int] = {
    "judge_audit.respond": 450,
    "judge_audit.describe": 200,
    "judge_audit.score": 180,
    "judge_audit.pairwise": 120,
}
"""Output tokens a real model typically writes per role (the dry run's estimate)."""


@dataclass
class JudgeAuditRunResult:
    """Where a finished (or budget-stopped) audit left its outputs."""

    run_dir: Path
    outcome: JudgeAuditOutcome
    section: dict[str, Any]
    new_calls: int
    cost_usd: float
    stopped: str | None

    @property
    def usable(self) -> bool:
        """At least one pair got two scores from some judge."""
        return any(r.unbiased is not None and r.biased is not None for r in self.outcome.scores)


def load_audit_inputs(
    cfg: RunConfig, store: RunStore | None, image_store: Path
) -> tuple[list[Meme], list[JudgeBiasRow]]:
    """Memes from every dataset but ``mm-judgebias``, and MM-JudgeBias rows from those; every
    unusable item is recorded in the store. Nothing usable at all is a DataError."""
    assert cfg.judge_audit is not None
    meme_sets = [d for d in cfg.data if d.format != "mm-judgebias"]
    memes: list[Meme] = []
    errors: list[tuple[str, str, str]] = []
    if meme_sets:
        loaded = load_datasets(meme_sets, cfg.image, check_images=True)
        memes = loaded.memes
        errors += [(e.source, e.item, e.reason) for e in loaded.errors]
    rows: list[JudgeBiasRow] = []
    for d in cfg.data:
        if d.format != "mm-judgebias":
            continue
        assert d.path is not None
        got = load_mmjudgebias(
            d.path,
            image_root=d.image_root,
            image_store=image_store,
            image_cfg=cfg.image,
            bias_types=list(cfg.judge_audit.bias_types),
            limit=cfg.judge_audit.limit_per_type or d.limit,
        )
        rows += got.rows
        errors += [(e.source, e.item, e.reason) for e in got.errors]
    if store is not None:
        for source, item, reason in errors:
            store.record_error("data", f"{source}|{item}", reason)
    if not memes and not rows:
        raise DataError("no usable items in the configured datasets")
    return memes, rows


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _merged_board(run_dir: Path, section: dict[str, Any]) -> dict[str, Any]:
    """The run's leaderboard document with this audit's section (other methods' keys kept)."""
    board: dict[str, Any] = {}
    path = run_dir / "leaderboard.json"
    if path.exists():
        try:
            old = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(old, dict):
                board = old
        except (OSError, json.JSONDecodeError):
            board = {}  # a damaged file is replaced, not trusted
    board["judge_audit"] = section
    return board


def run_judge_audit(
    cfg: RunConfig,
    run_dir: str | Path,
    *,
    max_cost: float | None = None,
    cache_path: Path | None = None,
    console: Console | None = None,
    show_progress: bool = True,
    bootstrap: int | None = None,
) -> JudgeAuditRunResult:
    """Run (or resume) the Judge audit in ``run_dir`` and write its outputs."""
    if cfg.judge_audit is None:
        raise DataError("config: judge_audit: section is missing")
    run_dir = Path(run_dir)
    # One writer per run directory (the Arena and the audit may share one, one after the other).
    with RunLock(run_dir):
        return _run_locked(cfg, run_dir, max_cost, cache_path, console, show_progress, bootstrap)


def _run_locked(
    cfg: RunConfig,
    run_dir: Path,
    max_cost: float | None,
    cache_path: Path | None,
    console: Console | None,
    show_progress: bool,
    bootstrap: int | None,
) -> JudgeAuditRunResult:
    from memearena.analysis.judge_audit import judge_audit_section, score_rows
    from memearena.report.html import write_report
    from memearena.report.judge_audit import attach_thumbnails

    run_dir.mkdir(parents=True, exist_ok=True)
    store = RunStore(run_dir / "run.db")
    try:
        snapshot_config(cfg, store)
        image_dir = run_dir / IMAGE_DIR
        memes, rows = load_audit_inputs(cfg, store, run_dir / "judge_audit" / "source")
        calls_before = len(store.calls())
        pool = open_pool(
            cfg, memes, store, cache_path=cache_path or run_dir / CACHE_FILE, max_cost=max_cost
        )

        async def go() -> JudgeAuditOutcome:
            try:
                with StageProgress(console, enabled=show_progress) as progress:
                    pipe = JudgeAuditPipeline(cfg, memes, rows, pool, store, image_dir, progress)
                    return await pipe.run()
            finally:
                await pool.aclose()

        outcome = asyncio.run(go())
        section = judge_audit_section(cfg, outcome, store, bootstrap=bootstrap)
        attach_thumbnails(section, image_dir)
        lines = "".join(dumps_strict(r, sort_keys=True) + "\n" for r in score_rows(outcome))
        _atomic_write(run_dir / SCORES_FILE, lines)
        board = _merged_board(run_dir, section)
        _atomic_write(run_dir / "leaderboard.json", dumps_strict(board, indent=2))
        write_report(run_dir, board)
        new_calls = sum(
            1 for c in store.calls()[calls_before:] if c.status not in ("cached", "budget")
        )
        return JudgeAuditRunResult(
            run_dir, outcome, section, new_calls, store.total_cost(), outcome.stopped
        )
    finally:
        store.close()


def plan_judge_audit(cfg: RunConfig) -> PlannedCalls:
    """Dry run: the audit with every model stood in for by a simulated one of the same name
    (no endpoint is called). Counts are exact for a run without re-asks or refusals; input
    tokens come from the real prompts, output tokens from typical reply lengths per role."""
    sim_cfg = stand_in_config(cfg)
    with tempfile.TemporaryDirectory(prefix="memearena-plan-") as tmp:
        store = RunStore(Path(tmp) / "run.db")
        try:
            memes, rows = load_audit_inputs(sim_cfg, None, Path(tmp) / "source")
            pool = open_pool(sim_cfg, memes, store, cache_path=None, max_cost=None)

            async def go() -> None:
                try:
                    pipe = JudgeAuditPipeline(
                        sim_cfg, memes, rows, pool, store, Path(tmp) / "images"
                    )
                    await pipe.run()
                finally:
                    await pool.aclose()

            asyncio.run(go())
            return planned_from_calls(cfg, store.iter_calls(), TYPICAL_OUTPUT_TOKENS)
        finally:
            store.close()


def run_demo_audit(
    cfg: RunConfig, run_dir: Path, *, console: Console, show_progress: bool = True
) -> RunConfig:
    """The demo's audit: run it, print the evaluator leaderboard and whether each injected
    bias is flagged on the judge that has it and the clean judge on none; return the config
    with the Arena pointed at this audit (so it warns about flagged panel judges)."""
    from memearena.report.judge_audit import demo_check, print_judge_audit_summary

    console.print(
        "[bold]Judge audit[/bold] — compositional bias (BD/BC) and position, verbosity and "
        "self-enhancement bias of [yellow]simulated[/yellow] judges with injected failure modes"
    )
    result = run_judge_audit(cfg, run_dir, console=console, show_progress=show_progress)
    print_judge_audit_summary(console, result)
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
