"""The Judge audit as a method of the run lifecycle (``memearena.engine.protocol.Method``).

Its stages are ``memearena.methods.judge_audit.stages`` (and the stage modules it runs); its
analysis (records -> the ``judge_audit`` section, pure) is
``memearena.methods.judge_audit.analysis``; its view is ``memearena.methods.judge_audit.view``.
What is the audit's own here: its inputs (memes and MM-JudgeBias rows), the images it sent
(``DIR/judge_audit/images/``, by content hash), ``DIR/judge_audit_scores.jsonl`` (every scored
pair, re-analysable with ``judge-audit metrics``), and what an incomplete audit lacks.
"""

from __future__ import annotations

import ctypes
import sys
from collections import Counter
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from memearena.config import RunConfig
from memearena.data import Meme, load_datasets
from memearena.data.mmjudgebias import JudgeBiasRow, load_mmjudgebias
from memearena.engine.protocol import Finished, Inputs, MethodRun, RunContext
from memearena.engine.rundir import atomic_write, no_usable_items
from memearena.engine.status import ModelStatus, RunStatus, spend_cap_problem
from memearena.errors import ConfigError, DataError
from memearena.jsonsafe import dumps_strict
from memearena.methods.judge_audit import sim as sim  # its simulated judges register
from memearena.methods.judge_audit import view
from memearena.methods.judge_audit.records import MISSING
from memearena.methods.judge_audit.result import JudgeAuditResult
from memearena.methods.judge_audit.stages import JudgeAuditOutcome, JudgeAuditPipeline

if TYPE_CHECKING:
    from rich.console import Console

    from memearena.store import RunStore

__all__ = [
    "IMAGE_DIR",
    "SCORES_FILE",
    "TYPICAL_OUTPUT_TOKENS",
    "JudgeAudit",
    "judge_audit_status",
    "load_audit_inputs",
]

IMAGE_DIR = "judge_audit/images"
"""Where a run keeps every image it sent, by content hash (relative to the run directory)."""
SOURCE_DIR = "judge_audit/source"
"""Where MM-JudgeBias images read from the dataset are kept (relative to the run directory)."""
SCORES_FILE = "judge_audit_scores.jsonl"
"""Every scored pair, in the ``judge-audit metrics`` input format."""

TYPICAL_OUTPUT_TOKENS: dict[str, int] = {
    "judge_audit.respond": 450,
    "judge_audit.describe": 200,
    "judge_audit.score": 180,
    "judge_audit.pairwise": 120,
}
"""Output tokens a real model typically writes per role (the dry run's estimate)."""


class JudgeAudit:
    """Controlled perturbations scored pointwise (BD/BC) and classic pairwise biases."""

    name: ClassVar[str] = "judge_audit"
    title: ClassVar[str] = "Judge audit"
    keys: ClassVar[tuple[str, ...]] = ("judge_audit",)
    outputs: ClassVar[tuple[str, ...]] = (SCORES_FILE, IMAGE_DIR + "/")
    typical_output: ClassVar[Mapping[str, int]] = TYPICAL_OUTPUT_TOKENS
    result: ClassVar[type[JudgeAuditResult]] = JudgeAuditResult

    def __init__(self, cfg: RunConfig, options: Mapping[str, Any]) -> None:
        if cfg.judge_audit is None:
            raise ConfigError("config: judge_audit: section is missing")
        self.cfg = cfg
        self.acfg = cfg.judge_audit

    def models(self) -> list[str]:
        a = self.acfg
        extra = [m for m in (a.describer_model(), a.reference_judge) if m]
        return [*a.judges, *a.responders, *extra]

    def prepare(self, console: Console | None) -> None:
        return None

    def load(self, store: RunStore | None, run_dir: Path) -> Inputs:
        memes, rows = load_audit_inputs(self.cfg, store, run_dir / SOURCE_DIR)
        return Inputs(memes, rows)

    def setup_world(self, world: Any) -> bool:
        return True

    async def run(self, ctx: RunContext) -> MethodRun:
        pipe = JudgeAuditPipeline(
            ctx.cfg,
            ctx.inputs.memes,
            ctx.inputs.rows,
            ctx.pool,
            ctx.store,
            ctx.run_dir / IMAGE_DIR,
            ctx.progress,
        )
        outcome = await pipe.run()
        return MethodRun(outcome, outcome.stopped)

    def finish(self, ctx: RunContext, run: MethodRun, *, bootstrap: int | None) -> Finished:
        from memearena.methods.judge_audit.analysis import iter_score_rows, judge_audit_section

        outcome: JudgeAuditOutcome = run.outcome
        _return_freed_memory()
        section = judge_audit_section(ctx.cfg, outcome, ctx.store, bootstrap=bootstrap)
        view.attach_thumbnails(section, ctx.run_dir / IMAGE_DIR)
        # Streamed: one row in memory at a time, however many pairs were scored.
        lines = (dumps_strict(r, sort_keys=True) + "\n" for r in iter_score_rows(outcome))
        atomic_write(ctx.run_dir / SCORES_FILE, lines)
        status = judge_audit_status(ctx.cfg, outcome, ctx.store, max_cost=ctx.max_cost)
        return Finished({"judge_audit": section}, status)

    @staticmethod
    def summary(console: Console, board: Mapping[str, Any]) -> None:
        section = board.get("judge_audit")
        if isinstance(section, dict):
            view.print_judge_audit_summary(console, section)


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        trim = ctypes.CDLL(None).malloc_trim  # glibc's; musl and others have none
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]


def _return_freed_memory() -> None:
    """Give the C heap's free pages back to the OS before the analysis. By then the pipeline's
    windows, image buffers and the response cache's pages are freed, but glibc keeps freed
    pages mapped, scattered between live blocks the analysis cannot reuse, so the analysis
    would grow the process from the pipeline's peak (about a millisecond; a no-op where the C
    library has no ``malloc_trim``)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _scored_twice(chunk: np.ndarray) -> np.ndarray:
    return (chunk["unbiased_kind"] != MISSING) & (chunk["biased_kind"] != MISSING)


def usable(outcome: JudgeAuditOutcome) -> bool:
    """At least one pair got two scores from some judge."""
    return any(bool(_scored_twice(c).any()) for c in outcome.scores.chunks())


def _judge_counts(outcome: JudgeAuditOutcome) -> tuple[Counter[str], Counter[str], Counter[str]]:
    """Per judge: pairs asked, pairs scored twice, pairs missing a score after a failure (one
    pass over the log)."""
    log = outcome.scores
    n = len(log.judges)
    asked, both, failed = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    error = log.statuses.codes.get("error", -1)
    for c in log.chunks():
        j = c["judge"].astype(np.intp)
        asked += np.bincount(j, minlength=n)
        both += np.bincount(j[_scored_twice(c)], minlength=n)
        hit = (c["unbiased_status"] == error) | (c["biased_status"] == error)
        failed += np.bincount(j[hit], minlength=n)
    names = log.judges.names
    return tuple(  # type: ignore[return-value]
        Counter({names[k]: int(x[k]) for k in range(n) if x[k]}) for x in (asked, both, failed)
    )


def judge_audit_status(
    cfg: RunConfig, outcome: JudgeAuditOutcome, store: RunStore, *, max_cost: float | None
) -> RunStatus:
    """Complete when every judge scored some pair; no pair with two scores is "nothing
    usable" (exit 1), like every method's."""
    assert cfg.judge_audit is not None
    spent, upper = store.spend()
    problems: list[str] = []
    if outcome.stopped:
        problems.append(spend_cap_problem(max_cost))
    asked, both, failed = _judge_counts(outcome)
    rows = [
        ModelStatus(j, "judge", asked[j], both[j], asked[j] - both[j] - failed[j])
        for j in cfg.judge_audit.judges
    ]
    if not outcome.stopped:
        if not usable(outcome):
            problems.append(
                f"the audit produced nothing usable: no pair received two scores "
                f"({len(outcome.scores)} pairs, {outcome.items} items)"
            )
        else:
            for r in rows:
                if r.done == 0:
                    problems.append(f"judge {r.model!r}: no pair scored twice (0 of {r.planned})")
        if sum(failed.values()):
            problems.append(
                f"{sum(failed.values())} pair(s) missing a score after model failures: re-run "
                "the same command to retry them"
            )
    n = sum(both.values())
    return RunStatus(
        complete=not problems,
        problems=problems,
        spent_usd=spent,
        spent_upper_bound_usd=upper,
        max_cost=max_cost,
        stopped=outcome.stopped,
        models=rows,
        produced=f"{n:,} pairs scored twice over {outcome.items:,} items",
    )


def load_audit_inputs(
    cfg: RunConfig, store: RunStore | None, image_store: Path
) -> tuple[list[Meme], list[JudgeBiasRow]]:
    """Memes from every dataset but ``mm-judgebias``, and MM-JudgeBias rows from those; every
    unusable item is recorded in the store. Nothing usable at all is a DataError."""
    if cfg.judge_audit is None:
        raise ConfigError("config: judge_audit: section is missing")
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
        raise DataError(no_usable_items(errors))
    return memes, rows
