"""Opening a run: directory, store, cache, model pool, data — and running the Arena in it."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from memearena.config import RunConfig, SimModelConfig, arena_call_estimate, check_wall_time
from memearena.data import LoadResult, Meme, demo_annotations, load_datasets
from memearena.errors import DataError, IncompatibleRunError
from memearena.jsonsafe import dumps_strict
from memearena.models import ModelPool, ResponseCache
from memearena.pipelines.arena import (
    ANSWERS_VIEW,
    STAGES,
    ArenaOutcome,
    ArenaPipeline,
    StageCount,
    judged_view,
)
from memearena.pipelines.progress import StageProgress
from memearena.prompts import template_hashes
from memearena.runstatus import RunStatus, arena_status
from memearena.sim.world import SimWorld
from memearena.store import CallRecord, RunLock, RunStore

CACHE_FILE = "cache.sqlite"

TYPICAL_OUTPUT_TOKENS: dict[str, int] = {
    "arena.context": 450,
    "arena.answer": 450,
    "arena.guideline_draft": 500,
    "arena.guideline_refine": 500,
    "arena.guideline_self": 500,
    "arena.judge": 350,
}
"""Output tokens a real model typically writes per role: the dry run's floor (capped by a
model's ``max_tokens``), since simulated replies are shorter than real ones."""


@dataclass
class ArenaRunResult:
    """Where a finished (or budget-stopped) Arena run left its outputs."""

    run_dir: Path
    outcomes: list[ArenaOutcome]
    leaderboard: dict[str, Any]
    new_calls: int
    cost_usd: float
    stopped: str | None
    status: RunStatus | None = None
    """What is missing, why, the spend and the exit code (``memearena.runstatus``)."""
    stages: dict[str, StageCount] = field(default_factory=dict)
    """Per stage: steps reused from the run directory, newly computed, and failed."""
    analysis_reused: bool = False
    """The battles and everything else the leaderboard reads were unchanged: the previous
    leaderboard was kept rather than recomputed."""

    def resume_line(self) -> str:
        """``contexts: reused N, new M · answers: ...`` (failed steps too, when any)."""
        parts = []
        for stage in STAGES:
            c = self.stages.get(stage)
            if c is None:
                continue
            text = f"{stage}: reused {c.reused:,}, new {c.new:,}"
            if c.failed:
                text += f", failed {c.failed:,} (retried on re-run)"
            parts.append(text)
        return " · ".join(parts)


def load_memes(cfg: RunConfig, store: RunStore | None = None) -> LoadResult:
    """Load every dataset of the config; per-item problems are recorded in the store."""
    loaded = load_datasets(cfg.data, cfg.image, check_images=True)
    if store is not None:
        for err in loaded.errors:
            store.record_error("data", f"{err.source}|{err.item}", err.reason)
    if not loaded.memes:
        raise DataError("no usable items in the configured datasets")
    return loaded


def sim_world(cfg: RunConfig, memes: Sequence[Meme]) -> SimWorld:
    """The simulated world for the config's ``provider: sim`` models (labelled simulated)."""
    sims = {n: m for n, m in cfg.models.items() if isinstance(m, SimModelConfig)}
    return SimWorld(sims, demo_annotations(memes), seed=cfg.seed)


def open_pool(
    cfg: RunConfig,
    memes: Sequence[Meme],
    store: RunStore | None,
    *,
    cache_path: Path | None,
    max_cost: float | None,
) -> ModelPool:
    """The model pool of a run: every configured model behind cache, limits and retries."""
    cache = ResponseCache(cache_path) if (cache_path is not None and cfg.cache) else None
    return ModelPool(
        cfg.models, store=store, cache=cache, max_cost=max_cost, responder=sim_world(cfg, memes)
    )


def run_identity(config: dict[str, Any]) -> list[list[Any]]:
    """What a run directory is bound to: its datasets' sources (format, path, image root, field
    mapping). Everything else (models, prompts, parameters, seed, Arena options, which items of
    those sources are kept) may change between runs: the steps it affects are recomputed."""
    out: list[list[Any]] = []
    for d in config.get("data") or []:
        out.append([d.get("format"), d.get("path"), d.get("image_root"), d.get("fields") or None])
    return sorted(out, key=lambda x: json.dumps(x, default=str))


def check_compatible(cfg: RunConfig, store: RunStore, run_dir: Path) -> None:
    """Refuse a run directory whose run read other datasets (``run_identity``)."""
    prev = store.latest_snapshot()
    if prev is None:
        return
    old = run_identity(prev["config"])
    new = run_identity(json.loads(cfg.model_dump_json()))
    if old != new:
        raise IncompatibleRunError(
            f"{run_dir}: holds a run over other datasets ({_sources(old)}; this config: "
            f"{_sources(new)}); use another --out or run name"
        )


def _sources(identity: list[list[Any]]) -> str:
    return ", ".join(f"{fmt}:{path}" if path else str(fmt) for fmt, path, *_ in identity)


ANALYSIS_DIGEST = "arena.analysis_digest"
"""Meta entry: digest of everything the written leaderboard was computed from."""


def analysis_digest(
    cfg: RunConfig, store: RunStore, settings: Sequence[str], bootstrap: int | None
) -> str:
    """Digest of everything an Arena leaderboard is computed from: the config and prompts,
    the member views (which answers and verdicts make up each setting), the calls and errors on
    record, and the analysis code. Equal digests, equal leaderboards."""
    from memearena import __version__
    from memearena.analysis import arena as analysis

    h = hashlib.sha256()
    for part in (
        __version__,
        Path(analysis.__file__).read_bytes().hex(),
        cfg.model_dump_json(),
        json.dumps(template_hashes(), sort_keys=True),
        json.dumps([list(settings), bootstrap]),
        str(store.last_call_id()),
        store.errors_digest(),
        store.view_digest(ANSWERS_VIEW),
        *(store.view_digest(judged_view(s)) for s in settings),
    ):
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def _previous_board(run_dir: Path, store: RunStore, digest: str) -> dict[str, Any] | None:
    """The leaderboard written by an earlier run from exactly the same records, if intact."""
    if store.get_meta(ANALYSIS_DIGEST) != digest:
        return None
    needed = [run_dir / n for n in ("leaderboard.json", "battles.jsonl", "report.html")]
    if not all(p.exists() for p in needed):
        return None
    try:
        board = json.loads(needed[0].read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return board if isinstance(board, dict) else None


def write_leaderboard(run_dir: Path, board: dict[str, Any]) -> None:
    """Rewrite ``leaderboard.json`` alone (atomically: a kill never leaves half a file)."""
    path = run_dir / "leaderboard.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(dumps_strict(board, indent=2), encoding="utf-8")
    os.replace(tmp, path)


def run_facts(cfg: RunConfig) -> dict[str, Any]:
    """What a report says about the run: name, date, seed, version, config (no secrets: keys
    are only env-var names) with its hash, and the prompt templates' hashes."""
    import hashlib
    from datetime import UTC, datetime

    from memearena import __version__

    config = json.loads(cfg.model_dump_json())
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return {
        "name": cfg.run,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "seed": cfg.seed,
        "version": __version__,
        "config_sha256": hashlib.sha256(canonical.encode()).hexdigest(),
        "config": config,
        "prompt_hashes": template_hashes(),
    }


def snapshot_config(cfg: RunConfig, store: RunStore) -> None:
    """Record the config (no secrets: keys are only env-var names) and prompt hashes."""
    store.save_snapshot(json.loads(cfg.model_dump_json()), template_hashes())


def run_arena(
    cfg: RunConfig,
    run_dir: str | Path,
    *,
    max_cost: float | None = None,
    settings: Sequence[str] | None = None,
    cache_path: Path | None = None,
    console: Console | None = None,
    show_progress: bool = True,
    bootstrap: int | None = None,
) -> ArenaRunResult:
    """Run (or resume) the Arena in ``run_dir`` and write its leaderboard and battles."""
    run_dir = Path(run_dir)
    # One writer per run directory: a second process refuses at once (before opening anything).
    with RunLock(run_dir):
        return _run_arena_locked(
            cfg,
            run_dir,
            max_cost=max_cost,
            settings=settings,
            cache_path=cache_path,
            console=console,
            show_progress=show_progress,
            bootstrap=bootstrap,
        )


def _run_arena_locked(
    cfg: RunConfig,
    run_dir: Path,
    *,
    max_cost: float | None,
    settings: Sequence[str] | None,
    cache_path: Path | None,
    console: Console | None,
    show_progress: bool,
    bootstrap: int | None,
) -> ArenaRunResult:
    from memearena.analysis.arena import arena_leaderboard, write_arena_outputs
    from memearena.report.html import write_report

    audit_notes = _judge_audit_warnings(cfg, console)
    store = RunStore(run_dir / "run.db")
    try:
        check_compatible(cfg, store, run_dir)
        started = time.time()
        snapshot_config(cfg, store)
        memes = load_memes(cfg, store).memes
        check_wall_time(cfg, arena_call_estimate(cfg, len(memes), settings))  # before any call
        calls_before = store.last_call_id()
        stages: dict[str, StageCount] = {}
        pool = open_pool(
            cfg, memes, store, cache_path=cache_path or run_dir / CACHE_FILE, max_cost=max_cost
        )

        async def go() -> list[ArenaOutcome]:
            try:
                with StageProgress(console, enabled=show_progress) as progress:
                    pipe = ArenaPipeline(cfg, memes, pool, store, progress)
                    stages.update(pipe.counts)
                    return await pipe.run(settings)
            finally:
                await pool.aclose()

        outcomes = asyncio.run(go())
        stopped = next((o.stopped for o in outcomes if o.stopped), None)
        done = [o for o in outcomes if not o.stopped]
        status = arena_status(
            cfg,
            outcomes,
            store,
            memes=len(memes),
            max_cost=max_cost,
            since=started,
            dead=pool.dead_models(),
            stopped=stopped,
        )
        board: dict[str, Any] = {}
        reused = False
        if done:
            # The leaderboard is recomputed only when something it reads changed; the run's
            # facts and status (date, spend, problems) are this run's either way.
            digest = analysis_digest(cfg, store, [o.setting for o in done], bootstrap)
            previous = _previous_board(run_dir, store, digest)
            if previous is not None:
                board, reused = previous, True
            else:
                board = arena_leaderboard(cfg, done, store, bootstrap=bootstrap)
            board = _keep_other_methods(run_dir, board, audit_notes)
            board["run"] = run_facts(cfg)
            board["status"] = status.as_json()
            if reused:
                write_leaderboard(run_dir, board)
            else:
                write_arena_outputs(run_dir, board, done, cfg)
            write_report(run_dir, board)
            if not reused:
                store.set_meta(ANALYSIS_DIGEST, digest)
        else:
            # No setting finished (a spend cap or dead endpoints stopped the run before): the
            # status replaces any earlier leaderboard, so that neither the file nor the report
            # can pass an older result off as this run's; the report's banner says why.
            board = _keep_other_methods(run_dir, {}, [])
            board["run"] = run_facts(cfg)
            board["status"] = status.as_json()
            write_leaderboard(run_dir, board)
            write_report(run_dir, board)
            store.set_meta(ANALYSIS_DIGEST, "")
        new_calls = store.count_new_calls(calls_before)
        return ArenaRunResult(
            run_dir,
            outcomes,
            board,
            new_calls,
            store.total_cost(),
            stopped,
            status,
            stages,
            reused,
        )
    finally:
        store.close()


def _judge_audit_warnings(cfg: RunConfig, console: Console | None) -> list[str]:
    """Warnings about panel judges that the Judge audit named by ``arena.judge_audit`` flagged
    (printed before any call is made)."""
    if cfg.arena is None or cfg.arena.judge_audit is None:
        return []
    from rich.markup import escape

    from memearena.analysis.judge_audit import audit_warnings

    notes = audit_warnings(cfg.arena.judge_audit, cfg.arena.judges)
    out = console or Console(stderr=True)
    for note in notes:
        out.print(f"[yellow]warning:[/yellow] {escape(note)}")
    return notes


def _keep_other_methods(
    run_dir: Path, board: dict[str, Any], audit_notes: list[str]
) -> dict[str, Any]:
    """The Arena's document plus the Judge audit's section already in the run's
    ``leaderboard.json`` (each method owns its key) and the audit warnings."""
    path = run_dir / "leaderboard.json"
    if audit_notes and isinstance(board.get("arena"), dict):
        board["arena"]["judge_audit_warnings"] = audit_notes
    try:
        old = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except (OSError, json.JSONDecodeError):
        old = {}
    if isinstance(old, dict) and "judge_audit" in old and "judge_audit" not in board:
        board = {**board, "judge_audit": old["judge_audit"]}
    return board


@dataclass(frozen=True)
class PlannedCalls:
    """The calls a run would make, per model, with estimated tokens and cost."""

    per_model: dict[str, dict[str, float]]

    @property
    def calls(self) -> int:
        """Total planned calls."""
        return int(sum(v["calls"] for v in self.per_model.values()))

    @property
    def cost_usd(self) -> float:
        """Total estimated cost in USD."""
        return sum(v["cost_usd"] for v in self.per_model.values())


def stand_in_config(cfg: RunConfig) -> RunConfig:
    """The config a dry run executes: every model stood in for by a simulated one of the same
    name (a simulated model keeps its profile, without refusals, format errors or latency), no
    cache, so the plan follows the real prompts and never calls an endpoint."""
    stand_ins: dict[str, Any] = {}
    for name, m in cfg.models.items():
        if isinstance(m, SimModelConfig):
            stand_ins[name] = m.model_copy(
                update={"refusal_rate": 0.0, "format_error_rate": 0.0, "latency_ms": 0.0}
            )
        else:
            stand_ins[name] = SimModelConfig(provider="sim", family=m.family, price=m.price)
    return cfg.model_copy(update={"models": stand_ins, "cache": False})


def plan_arena(cfg: RunConfig, settings: Sequence[str] | None = None) -> PlannedCalls:
    """Dry run: the Arena with every model stood in for by a simulated one of the same name.

    Counts are exact for a run without re-asks or refusals; input tokens are estimated from the
    real prompts, output tokens from typical reply lengths per role (``TYPICAL_OUTPUT_TOKENS``);
    cost uses each model's real price.
    No endpoint is called."""
    sim_cfg = stand_in_config(cfg)
    with tempfile.TemporaryDirectory(prefix="memearena-plan-") as tmp:
        store = RunStore(Path(tmp) / "run.db")
        try:
            memes = load_memes(sim_cfg).memes
            pool = open_pool(sim_cfg, memes, store, cache_path=None, max_cost=None)

            async def go() -> None:
                try:
                    await ArenaPipeline(sim_cfg, memes, pool, store).run(settings)
                finally:
                    await pool.aclose()

            asyncio.run(go())
            return planned_from_calls(cfg, store.iter_calls(), TYPICAL_OUTPUT_TOKENS)
        finally:
            store.close()


def planned_from_calls(
    cfg: RunConfig, calls: Iterable[CallRecord], typical_output: Mapping[str, int]
) -> PlannedCalls:
    """Tally a dry run's simulated calls per model and price them for the real config: input
    tokens as counted, output tokens at least the role's typical reply (capped by the model's
    ``max_tokens``), a batched model at its batch discount."""
    per_model: dict[str, dict[str, float]] = {}
    for c in calls:
        row = per_model.setdefault(
            c.model, {"calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
        )
        row["calls"] += 1
        row["input_tokens"] += c.input_tokens
        typical = typical_output.get(c.role, 0)
        cap = getattr(cfg.models.get(c.model), "max_tokens", None) or typical
        row["output_tokens"] += max(c.output_tokens, min(typical, cap))
    for name, row in per_model.items():
        model_cfg = cfg.models.get(name)
        if model_cfg is None or model_cfg.price is None:
            continue
        share = getattr(model_cfg, "batch_discount", 1) if getattr(model_cfg, "batch", False) else 1
        price = model_cfg.price
        row["cost_usd"] = (
            share * (row["input_tokens"] * price.input + row["output_tokens"] * price.output) / 1e6
        )
    return PlannedCalls(per_model)


def env_flag(name: str) -> bool:
    """Whether an environment flag is set to a true value."""
    return os.environ.get(name, "").lower() in ("1", "true", "yes")
