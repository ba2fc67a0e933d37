"""The Arena as a method of the run lifecycle (``memearena.engine.protocol.Method``).

Its stages are ``memearena.methods.arena.stages``; its analysis (the store's battles -> the
``arena`` section, pure) is ``memearena.methods.arena.analysis``; its view is
``memearena.methods.arena.view``. What is the Arena's own here: the settings to judge, the
human-guidelines check and the Judge-audit warnings before any call, the wall-time check, the
reuse of an unchanged leaderboard, the battle files, and what an incomplete Arena run lacks."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from memearena.config import RunConfig, check_wall_time
from memearena.engine.protocol import Finished, Inputs, MethodRun, RunContext
from memearena.engine.rundir import load_memes
from memearena.engine.status import ModelStatus, RunStatus, clean_line, spend_cap_problem
from memearena.errors import ConfigError
from memearena.methods.arena import sim as sim  # its simulated part registers
from memearena.methods.arena import view
from memearena.methods.arena.config import arena_call_estimate
from memearena.methods.arena.convergence import RATINGS_VIEW
from memearena.methods.arena.result import ArenaResult
from memearena.methods.arena.stages import (
    ANSWERS_VIEW,
    ArenaOutcome,
    ArenaPipeline,
    judged_view,
    load_human_guidelines,
)
from memearena.prompts import template_hashes

if TYPE_CHECKING:
    from rich.console import Console

    from memearena.data import Meme
    from memearena.store import RunStore

__all__ = [
    "ANALYSIS_DIGEST",
    "STATUS_COUNTS",
    "TYPICAL_OUTPUT_TOKENS",
    "Arena",
    "analysis_digest",
    "arena_status",
    "run_usage",
    "status_counts",
]

TYPICAL_OUTPUT_TOKENS: dict[str, int] = {
    "arena.context": 450,
    "arena.answer": 450,
    "arena.guideline_draft": 500,
    "arena.guideline_refine": 500,
    "arena.guideline_self": 500,
    "arena.judge": 350,
    "arena.guideline_rating": 60,
}
"""Output tokens a real model typically writes per role: the dry run's floor (capped by a
model's ``max_tokens``), since simulated replies are shorter than real ones."""

ANALYSIS_DIGEST = "arena.analysis_digest"
"""Meta entry: digest of everything the written leaderboard was computed from."""

STATUS_COUNTS = "arena.status_counts"
"""Meta entry: the status counts (``status_counts``) of the last finished run, with the key
(``_counts_key``: the analysis digest and the memes) of the records they were counted from."""


class Arena:
    """Contexts, answers, guideline fusion and pairwise battles -> Elo / Bradley–Terry."""

    name: ClassVar[str] = "arena"
    title: ClassVar[str] = "Arena"
    keys: ClassVar[tuple[str, ...]] = ("arena", "simulated")
    outputs: ClassVar[tuple[str, ...]] = ("battles.jsonl",)
    typical_output: ClassVar[Mapping[str, int]] = TYPICAL_OUTPUT_TOKENS
    result: ClassVar[type[ArenaResult]] = ArenaResult

    def __init__(self, cfg: RunConfig, options: Mapping[str, Any]) -> None:
        if cfg.arena is None:
            raise ConfigError("config: arena: section is missing")
        self.cfg = cfg
        self.acfg = cfg.arena
        # A judge listed twice would refine twice as often and count as two raters in full
        # agreement (κ = 1 with itself, α inflated), listed twice in every judge table.
        twice = [j for j, n in Counter(cfg.arena.judges).items() if n > 1]
        if twice:
            raise ConfigError(
                f"config: arena.judges: {twice[0]!r} is listed more than once; "
                "judges must be distinct"
            )
        settings = options.get("settings")
        self.settings: list[str] | None = list(settings) if settings else None
        self.notes: list[str] = []

    def models(self) -> list[str]:
        return [self.acfg.context_model, *self.acfg.targets, *self.acfg.judges]

    def prepare(self, console: Console | None) -> None:
        if "human" in (self.settings or [self.acfg.setting]):
            load_human_guidelines(self.acfg.human_guidelines)  # a bad file fails before any call
        self.notes = _judge_audit_warnings(self.cfg, console)

    def load(self, store: RunStore | None, run_dir: Path) -> Inputs:
        memes = load_memes(self.cfg, store).memes
        if store is not None:  # a real run: its wall time is checked before any call
            check_wall_time(self.cfg, arena_call_estimate(self.cfg, len(memes), self.settings))
        return Inputs(list(memes))

    def setup_world(self, world: Any) -> bool:
        return True

    async def run(self, ctx: RunContext) -> MethodRun:
        pipe = ArenaPipeline(ctx.cfg, ctx.inputs.memes, ctx.pool, ctx.store, ctx.progress)
        outcomes = await pipe.run(self.settings)
        stopped = next((o.stopped for o in outcomes if o.stopped), None)
        return MethodRun(outcomes, stopped, dict(pipe.counts))

    def finish(self, ctx: RunContext, run: MethodRun, *, bootstrap: int | None) -> Finished:
        outcomes: list[ArenaOutcome] = run.outcome
        store = ctx.store
        done = [o for o in outcomes if not o.stopped]
        # The leaderboard is recomputed only when something it reads changed; the run's facts
        # and status (date, spend, problems) are this run's either way.
        digest = (
            analysis_digest(ctx.cfg, store, [o.setting for o in done], bootstrap) if done else ""
        )
        # What the status counts (outputs per model, battles) is read from the records the
        # digest covers: a run that finds the same records reads the counts stored by the run
        # that derived them instead of re-deriving every battle.
        counts_key = _counts_key(digest, ctx.inputs.memes) if done else ""
        counts = _recorded_counts(store, counts_key) if done else None
        previous = _previous_board(ctx.run_dir, store, digest) if done else None
        board: dict[str, Any] | None = None
        if done and previous is None:
            # Imported only to analyse (statistics, numpy): a run that keeps its board needs none.
            from memearena.methods.arena.analysis import arena_leaderboard

            # The battle files are written in the analysis's own pass over the battles.
            board = arena_leaderboard(
                ctx.cfg, done, store, bootstrap=bootstrap, run_dir=ctx.run_dir
            )
            if self.notes and isinstance(board.get("arena"), dict):
                board["arena"]["judge_audit_warnings"] = self.notes
            if isinstance(board.get("arena"), dict):
                from memearena.view.usage import USAGE_KEY

                record = run_usage(ctx.run_dir, store)
                if record is not None:
                    board["arena"][USAGE_KEY] = record
        if counts is None and done:
            counts = status_counts(
                ctx.cfg,
                done[0],
                memes=len(ctx.inputs.memes),
                battles=None if board is None else _battles_read(ctx.cfg, board),
            )
            store.set_meta(STATUS_COUNTS, json.dumps({"key": counts_key, "counts": counts}))
        status = arena_status(
            ctx.cfg,
            outcomes,
            store,
            memes=len(ctx.inputs.memes),
            max_cost=ctx.max_cost,
            since=ctx.started,
            dead=ctx.pool.dead_models(),
            stopped=run.stopped,
            counts=counts,
        )
        if not done:
            # No setting finished (a spend cap or dead endpoints stopped the run before): the
            # status replaces any earlier leaderboard, so that neither the file nor the report
            # can pass an older result off as this run's; the report's banner says why.
            return Finished({}, status, written=lambda: store.set_meta(ANALYSIS_DIGEST, ""))
        if previous is not None:
            kept = {k: previous[k] for k in self.keys if k in previous}
            return Finished(kept, status, analysis_reused=True)
        assert board is not None
        return Finished(board, status, written=lambda: store.set_meta(ANALYSIS_DIGEST, digest))

    @staticmethod
    def summary(console: Console, board: Mapping[str, Any]) -> None:
        view.print_arena_summary(console, board)


def analysis_digest(
    cfg: RunConfig, store: RunStore, settings: Sequence[str], bootstrap: int | None
) -> str:
    """Digest of everything an Arena leaderboard is computed from: the config and prompts,
    the member views (which answers and verdicts make up each setting), the calls and errors on
    record, and the analysis code. Equal digests, equal leaderboards."""
    from memearena.version import __version__

    h = hashlib.sha256()
    for part in (
        __version__,
        _analysis_source().hex(),
        cfg.model_dump_json(),
        json.dumps(template_hashes(), sort_keys=True),
        json.dumps([list(settings), bootstrap]),
        str(store.last_call_id()),
        store.errors_digest(),
        store.view_digest(ANSWERS_VIEW),
        *(store.view_digest(judged_view(s)) for s in settings),
        store.view_digest(RATINGS_VIEW),
    ):
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def _analysis_source() -> bytes:
    """The analysis module's source, found without importing it (a kept board needs none)."""
    spec = importlib.util.find_spec("memearena.methods.arena.analysis")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).read_bytes()


def run_usage(run_dir: Path, store: RunStore) -> dict[str, Any] | None:
    """The run directory's calls (every method's) as the viewer's overview shows them, with
    the stamp of the calls they were summed from (``memearena.view.usage``), stored with the
    section so that a viewer's first page need not scan the calls; None when they cannot be
    read as the store sees them (a viewer then scans them)."""
    from memearena.view.queries import RunReader, ViewError
    from memearena.view.usage import usage_record

    # Read through the viewer's own queries, so that its pages show what a scan would; every
    # call row queued by the run is committed first (a read through the store syncs).
    last = store.last_call_id()
    try:
        reader = RunReader(run_dir)
    except ViewError:
        return None
    try:
        record = usage_record(reader.q)
    finally:
        reader.close()
    return record if record["calls"][1] == last else None


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


def _judge_audit_warnings(cfg: RunConfig, console: Console | None) -> list[str]:
    """Warnings about panel judges that the Judge audit named by ``arena.judge_audit`` flagged
    (printed before any call is made)."""
    if cfg.arena is None or cfg.arena.judge_audit is None:
        return []
    from rich.console import Console
    from rich.markup import escape

    from memearena.methods.judge_audit.analysis import audit_warnings

    notes = audit_warnings(cfg.arena.judge_audit, cfg.arena.judges)
    out = console or Console(stderr=True)
    for note in notes:
        out.print(f"[yellow]warning:[/yellow] {escape(note)}")
    return notes


def _judgment_state(art: Mapping[str, Any]) -> str:
    if art.get("verdicts"):
        return "done"
    err = str(art.get("error") or "")
    if art.get("refusal") or err.startswith("unparseable"):
        return "refused"
    return "missing"


def _counts_key(digest: str, memes: Sequence[Meme]) -> str:
    """What status counts are read from: the records (the analysis digest: config, prompts,
    member views, calls and errors on record) and the memes of this run, in order."""
    h = hashlib.sha256(digest.encode("utf-8"))
    for m in memes:
        h.update(b"\0" + m.uid.encode("utf-8"))
    return h.hexdigest()


def _recorded_counts(store: RunStore, key: str) -> dict[str, Any] | None:
    """The status counts stored under exactly this key, if any (anything else: None)."""
    raw = store.get_meta(STATUS_COUNTS)
    if not raw:
        return None
    try:
        entry = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(entry, dict) or entry.get("key") != key:
        return None
    counts = entry.get("counts")
    return counts if isinstance(counts, dict) else None


def _battles_read(cfg: RunConfig, board: Mapping[str, Any]) -> int:
    """The battle rows of the main setting that the analysis read: its leaderboard's battles
    and, under the exclude policy, the self-judged ones it left out (under include the
    leaderboard holds every battle)."""
    assert cfg.arena is not None
    arena = board["arena"]
    left_out = arena["self_judged_battles"] if cfg.arena.self_judging == "exclude" else 0
    return int(arena["battles"]) + int(left_out)


def status_counts(
    cfg: RunConfig, main: ArenaOutcome, *, memes: int, battles: int | None = None
) -> dict[str, Any]:
    """What a finished setting delivered, per model and role, read from its records (one pass
    over answers and judged pairs, one count of battles unless `battles` gives it, as the
    analysis read them): ``{"rows": [[model, role, planned, done, refused], ...], "battles":
    n}``, rows in the status's order."""
    assert cfg.arena is not None
    acfg = cfg.arena
    answers = main.answers
    task_ids = set(main.tasks) or {(uid, lvl) for uid, lvl, _t in answers}
    with_context = {uid for uid, _lvl in task_ids}
    rows: list[list[Any]] = [[acfg.context_model, "context", memes, len(with_context), 0]]
    # One pass over the answers (a stream from the store), counting per target.
    answered: Counter[str] = Counter()
    texts: Counter[str] = Counter()
    for (_u, _l, tg), a in answers.items():
        answered[tg] += 1
        texts[tg] += "text" in a
    for t in acfg.targets:
        rows.append([t, "target", len(task_ids), texts[t], answered[t] - texts[t]])
    states: dict[str, Counter[str]] = {j: Counter() for j in acfg.judges}
    for jp in main.judged:
        c = states.setdefault(jp.judge, Counter())
        c[_judgment_state(jp.forward)] += 1
        c[_judgment_state(jp.backward)] += 1
    for j in acfg.judges:
        c = states[j]
        rows.append([j, "judge", sum(c.values()), c["done"], c["refused"]])
    if battles is None:
        battles = sum(1 for _ in main.battles)  # a stream: counted, never held
    return {"rows": rows, "battles": battles}


def arena_status(
    cfg: RunConfig,
    outcomes: Sequence[ArenaOutcome],
    store: RunStore,
    *,
    memes: int,
    max_cost: float | None,
    since: float = 0.0,
    dead: Mapping[str, str] | None = None,
    stopped: str | None = None,
    counts: Mapping[str, Any] | None = None,
) -> RunStatus:
    """The status of an Arena run from its outcomes (the first one is the main setting), the
    store (spend, failed calls since ``since``) and ``dead`` (model -> why nothing can be sent
    to it, e.g. a missing key). ``counts``: the main setting's ``status_counts``, when already
    known (else counted here)."""
    assert cfg.arena is not None
    dead = dict(dead or {})
    call_errors = store.call_errors(since)
    spent, upper = store.spend()
    main = next((o for o in outcomes if not o.stopped), None)
    rows: list[ModelStatus] = []
    problems: list[str] = []

    def why(model: str) -> str:
        errs = call_errors.get(model, {})
        parts = [f"{n} {k}" for k, n in sorted(errs.items(), key=lambda kv: -kv[1])]
        if model in dead:
            parts.insert(0, clean_line(dead[model]))
        return "; ".join(parts) if parts else "no reply recorded"

    if main is not None:
        if counts is None:
            counts = status_counts(cfg, main, memes=memes)
        for model, role, planned, done, refused in counts["rows"]:
            rows.append(
                ModelStatus(model, role, planned, done, refused, call_errors.get(model, {}))
            )
        battles = int(counts["battles"])
    else:
        battles = 0

    if stopped:
        problems.append(spend_cap_problem(max_cost))
    for r in rows:
        what = {"context": "contexts", "target": "answers", "judge": "verdicts"}[r.role]
        if r.planned and r.done == 0:
            problems.append(
                f"{r.role} {r.model!r} produced no {what} (0 of {r.planned}): {why(r.model)}"
            )
        elif r.missing:
            problems.append(
                f"{r.role} {r.model!r}: {r.missing} of {r.planned} {what} missing ({why(r.model)})"
            )
    if main is not None and not rows[0].planned:
        problems.append("no memes to run on")
    for name in sorted(dead):
        if not any(name in p for p in problems):
            problems.append(f"model {name!r} unavailable: {clean_line(dead[name])}")
    if main is not None and battles == 0 and not stopped:
        problems.append("no battles were produced")
    return RunStatus(
        complete=not problems,
        problems=problems,
        spent_usd=spent,
        spent_upper_bound_usd=upper,
        max_cost=max_cost,
        stopped=stopped,
        models=rows,
        battles=battles,
    )
