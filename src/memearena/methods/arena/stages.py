"""The Arena method: contexts → answers → guideline fusion → pairwise battles.

Every step writes one artifact under a key that carries the fingerprint of the request it sends
(``ModelPool.request_key``: endpoint and model id, the rendered prompt with its inputs and image
hash, generation parameters) next to its coordinates and the choices that shaped it (the fusion
round's judge and analysis). So a re-run reuses exactly the steps whose request is unchanged and
recomputes the rest: a changed model, prompt template, parameter, seed-driven choice or upstream
output gives a new key. Outcomes that are final (a parsed output, a refusal, an output that stayed
unparseable after re-asks) are artifacts; a permanent model failure is only an error record, so a
re-run retries it.

The pipeline streams: memes go through a bounded window (``engine.steps.bounded_map``); each
meme's steps are looked up in batches, the missing ones called, their outcomes group-committed;
then the meme leaves memory (its prepared image included: the image's hash is kept in the store,
so a resumed step never re-encodes it). Which artifacts make up the current outcome is recorded
in the store's member views, and ``ArenaOutcome`` reads battles, judged pairs and answers back
from there, so memory does not grow with the number of memes.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from memearena.config import ImageConfig, RunConfig
from memearena.data import Meme, prepare_image
from memearena.engine.progress import StageProgress
from memearena.engine.steps import StageCount, bounded_map, run_step, seeded_rng
from memearena.errors import BudgetExceeded, ConfigError, DataError
from memearena.jsonsafe import jsonl_lines, loads_bounded
from memearena.methods.arena.config import ArenaConfig
from memearena.methods.arena.convergence import expected_ratings, rate_rounds
from memearena.methods.arena.resolve import resolve_pair
from memearena.methods.arena.schedule import (
    fusion_plan,
    pick_analysis,
    target_pairs,
)
from memearena.models import ModelPool
from memearena.models.types import GenParams, ImagePart, Message
from memearena.prompts import (
    AskResult,
    ask,
    build_messages,
    parse_answer,
    parse_contexts,
    parse_guideline,
    parse_verdicts,
)
from memearena.prompts.budget import shown_pair
from memearena.prompts.schemas import verdict_response_format
from memearena.store import RunStore, artifact_key

__all__ = [
    "ANSWERS_VIEW",
    "LEVELS",
    "STAGES",
    "AnswerLookup",
    "ArenaOutcome",
    "ArenaPipeline",
    "JudgedPair",
    "JudgedStream",
    "StageCount",
    "Task",
    "image_recipe",
    "judged_view",
    "load_human_guidelines",
    "stored_answers",
]

T = TypeVar("T")

LEVELS: tuple[str, ...] = ("high", "moderate", "unrelated")

STAGES: tuple[str, ...] = ("contexts", "answers", "guidelines", "judgments")
"""The Arena's stages, in order (progress bars and the resume summary)."""

ANSWERS_VIEW = "arena.answers"
"""Member view of the current run's answers (coord: meme uid, level, target)."""

SEP = "\x1f"
"""Separator of the parts of a member's coord (never in a uid, level or model name)."""

_STOPPED: Any = object()  # a step not run: the spend cap stopped the run
_SEQ_SHIFT = 32  # a member's seq: meme index << 32 | its position within the meme
_VERDICT_WINDOW = 64  # verdict steps in flight per meme


def judged_view(setting: str) -> str:
    """Member view of one setting's judged pairs (coord: meme uid, level, x, y, judge)."""
    return f"arena.judged:{setting}"


def image_recipe(image_cfg: ImageConfig) -> str:
    """What an image's prepared bytes depend on besides the file: the preparation settings and
    the imaging library's version (part of the key its recorded hash is reused under)."""
    import PIL

    return json.dumps(
        [image_cfg.model_dump(mode="json"), PIL.__version__], sort_keys=True, separators=(",", ":")
    )


@dataclass(frozen=True)
class Task:
    """One interpretive context of one meme: what every target answers."""

    meme: Meme
    level: str
    background: str
    task: str


@dataclass
class JudgedPair:
    """Both orders of one judge's comparison of two targets on one task."""

    task: Task
    x: str
    y: str
    judge: str
    forward: dict[str, Any]
    backward: dict[str, Any]
    requests: tuple[str | None, str | None] = (None, None)
    """The request hash of each order's verdict (``calls``' ``request_hash`` of its first
    attempt), so a battle joins the calls and requests it came from."""


@dataclass
class ArenaOutcome:
    """What the Arena produced for one setting. ``battles`` (battle row dicts) and ``judged``
    (``JudgedPair``) are re-iterable streams read from the store in run order (iterate them, as
    often as needed; no ``len`` or indexing); ``answers`` maps (meme uid, level, target) to the
    answer artifact, read from the store one meme at a time."""

    setting: str
    battles: Iterable[dict[str, Any]] = ()
    judged: Iterable[JudgedPair] = ()
    answers: Mapping[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    stopped: str | None = None
    tasks: Iterable[tuple[str, str]] = ()
    """(meme uid, context level) of every task targets were asked to answer (re-iterable,
    read from the store)."""


def _model_error() -> dict[str, Any]:
    return {"error": "model error (will be retried on re-run)"}


class _StoreRef:
    """The run's store while it is open, else a connection of our own to the same file (an
    outcome is often read after the run that produced it has closed its store)."""

    def __init__(self, store: RunStore) -> None:
        self._store = store
        self._own: RunStore | None = None

    def get(self) -> RunStore:
        if not self._store.closed:
            return self._store
        if self._own is None or self._own.closed:
            self._own = RunStore(self._store.path)
        return self._own


class AnswerLookup(Mapping[tuple[str, str, str], dict[str, Any]]):
    """The run's answers by (meme uid, level, target), read from the store: it holds the answers
    of the meme read last only (the analysis reads them meme by meme). Answers whose step failed
    (no artifact) are absent, as are refused memes' (never answered)."""

    def __init__(self, ref: _StoreRef, view: str = ANSWERS_VIEW) -> None:
        self._ref = ref
        self._view = view
        self._uid: str | None = None
        self._cur: dict[tuple[str, str], dict[str, Any]] = {}

    def _load(self, uid: str) -> None:
        cur: dict[tuple[str, str], dict[str, Any]] = {}
        rows = self._ref.get().iter_members(
            self._view, ("answer", None, None), coord_prefix=uid + SEP
        )
        for coord, _refs, values in rows:
            _uid, level, target = coord.split(SEP)
            if values[0] is not None:
                cur[(level, target)] = values[0]
        self._uid, self._cur = uid, cur

    def __getitem__(self, k: tuple[str, str, str]) -> dict[str, Any]:
        uid, level, target = k
        if uid != self._uid:
            self._load(uid)
        return self._cur[(level, target)]

    def __iter__(self) -> Iterator[tuple[str, str, str]]:
        for coord, _refs, values in self._ref.get().iter_members(
            self._view, ("answer", None, None)
        ):
            if values[0] is not None:
                uid, level, target = coord.split(SEP)
                yield (uid, level, target)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def stored_answers(store: RunStore) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
    """The latest run's answers as ``(meme uid, level, target, artifact)``, in run order (a
    step's key carries its request's fingerprint: read answers here, not from keys)."""
    for coord, _refs, values in store.iter_members(ANSWERS_VIEW, ("answer", None, None)):
        if values[0] is not None:
            uid, level, target = coord.split(SEP)
            yield uid, level, target, values[0]


class _TaskStream:
    """The run's tasks as (meme uid, level), in run order, from the answers view."""

    def __init__(self, ref: _StoreRef) -> None:
        self._ref = ref

    def __iter__(self) -> Iterator[tuple[str, str]]:
        last: tuple[str, str] | None = None
        for coord, _refs, _values in self._ref.get().iter_members(ANSWERS_VIEW):
            uid, level, _target = coord.split(SEP)
            if (uid, level) != last:
                last = (uid, level)
                yield last


class JudgedStream:
    """One setting's judged pairs, read from the store in run order on every iteration."""

    def __init__(self, ref: _StoreRef, setting: str, memes: Mapping[str, Meme]) -> None:
        self._ref = ref
        self.setting = setting
        self._memes = memes

    def __iter__(self) -> Iterator[JudgedPair]:
        return self._pairs(by_meme=False)

    def by_meme(self) -> Iterator[JudgedPair]:
        """The same judged pairs, each meme's together (in meme id order, not run order)."""
        return self._pairs(by_meme=True)

    def _pairs(self, by_meme: bool) -> Iterator[JudgedPair]:
        store = self._ref.get()
        ctx_key: str | None = None
        tasks: dict[str, Task] = {}
        rows = store.iter_members(
            judged_view(self.setting), ("verdict", "verdict", None), by_coord=by_meme
        )
        for coord, refs, (fwd, bwd, _) in rows:
            uid, level, x, y, judge = coord.split(SEP)
            if refs[2] != ctx_key:
                ctx_key = refs[2]
                meme = self._memes[uid]
                art = store.get_artifact("context", ctx_key) if ctx_key else None
                tasks = {
                    c["level"]: Task(meme, c["level"], c["background"], c["task"])
                    for c in (art or {}).get("contexts", [])
                }
            yield JudgedPair(
                tasks[level],
                x,
                y,
                judge,
                fwd or _model_error(),
                bwd or _model_error(),
                (_request_of(refs[0]), _request_of(refs[1])),
            )


def _request_of(verdict_key: str | None) -> str | None:
    """The request hash a verdict's artifact key ends with (``artifact_key(..., fingerprint)``)."""
    return verdict_key.rsplit("|", 1)[-1] if verdict_key else None


class _BattleStream:
    """Battle rows of a judged stream (re-iterable)."""

    def __init__(
        self, judged: JudgedStream, rows: Callable[[str, JudgedPair], list[dict[str, Any]]]
    ) -> None:
        self._judged = judged
        self._rows = rows

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for jp in self._judged:
            yield from self._rows(self._judged.setting, jp)


class _MemeJob:
    """One meme in flight: the image's hash (all a step's key needs) and, only while a call
    needs it, the prepared image."""

    __slots__ = ("done", "idx", "meme", "part", "pipe", "sent", "sha", "tally")

    def __init__(self, pipe: ArenaPipeline, idx: int, meme: Meme) -> None:
        self.pipe = pipe
        self.idx = idx
        self.meme = meme
        self.sha: str | None = None
        self.part: ImagePart | None = None
        # The messages as sent, per rendered prompt (by identity; the prompt is kept alive with
        # its entry, so an id is never reused while cached): one prompt sent to every judge is
        # the same message objects each time, so the model layer encodes it once. Holds the
        # prepared image: emptied with it (``drop_image``).
        self.sent: dict[int, tuple[Sequence[Message], list[Message]]] = {}
        self.done: dict[str, int] = dict.fromkeys(STAGES, 0)
        self.tally: dict[str, StageCount] = {st: StageCount() for st in STAGES}

    def key_image(self) -> ImagePart | None:
        """The image as a request key sees it: its hash (no data)."""
        return None if self.sha is None else ImagePart("", self.sha)

    def image(self) -> ImagePart | None:
        """The prepared image (prepared on first use, dropped with the job)."""
        path = self.meme.image_path
        if path is None:
            return None
        if self.part is None:
            img = prepare_image(path, self.pipe.cfg.image)
            if img.sha256 != self.sha:  # the file changed under a recorded hash
                self.pipe.forget_image(self.meme)
                raise DataError(f"{path}: image changed during the run; re-run to use it")
            self.part = ImagePart(img.data_url, img.sha256)
        return self.part

    def with_image(self, messages: Sequence[Message]) -> list[Message]:
        """``messages`` with the key-only image part replaced by the prepared image (the same
        objects for the same ``messages``, while the image is held)."""
        if self.sha is None:
            return list(messages)
        got = self.sent.get(id(messages))
        if got is not None and got[0] is messages:
            return got[1]
        part = self.image()
        out: list[Message] = []
        for m in messages:
            if any(isinstance(p, ImagePart) for p in m.content):
                content = tuple(part if isinstance(p, ImagePart) else p for p in m.content)
                out.append(Message(m.role, content))  # type: ignore[arg-type]
            else:
                out.append(m)
        self.sent[id(messages)] = (messages, out)
        return out

    def drop_image(self) -> None:
        """The prepared image leaves memory (with every message that holds it)."""
        self.part = None
        self.sent.clear()

    def advance(self, stage: str, n: int = 1, *, reused: bool = False) -> None:
        self.done[stage] += n
        self.pipe.progress.advance(stage, n, reused=reused)


class ArenaPipeline:
    """Runs the Arena over a set of memes with one model pool and one run store."""

    def __init__(
        self,
        cfg: RunConfig,
        memes: Sequence[Meme],
        pool: ModelPool,
        store: RunStore,
        progress: StageProgress | None = None,
        *,
        window: int | None = None,
    ) -> None:
        if cfg.arena is None:
            raise ConfigError("config: 'arena' section is missing")
        self.cfg = cfg
        self.acfg: ArenaConfig = cfg.arena
        self.memes = list(memes)
        self.pool = pool
        self.store = store
        self.progress = progress or StageProgress(enabled=False)
        self.families = {name: m.family for name, m in cfg.models.items()}
        self.window = window or meme_window(cfg)
        self.counts: dict[str, StageCount] = {s: StageCount() for s in STAGES}
        self._recipe = image_recipe(cfg.image)
        self._human: dict[str, str] | None = None
        self._ref = _StoreRef(store)
        self.stopped: str | None = None
        """Why the run stopped (the spend cap), once it has: no further step is started."""
        self._run_fp = ""

    # ---------------------------------------------------------------- images
    def _image_state(self, meme: Meme) -> tuple[str, int, int] | None:
        path = meme.image_path
        if path is None:
            return None
        try:
            st = path.stat()
        except OSError as e:
            raise DataError(f"{path}: cannot read image ({e.strerror})") from None
        return str(path.resolve()), st.st_size, st.st_mtime_ns

    def _start(self, idx: int, meme: Meme) -> _MemeJob:
        """The meme's job with its image hash: recalled from the store for an unchanged file
        (no re-encoding), else prepared now (and kept: the meme's first call needs it)."""
        job = _MemeJob(self, idx, meme)
        state = self._image_state(meme)
        if state is None:
            return job
        job.sha = self.store.image_sha(*state, self._recipe)
        if job.sha is None:
            assert meme.image_path is not None
            img = prepare_image(meme.image_path, self.cfg.image)
            self.store.put_image_sha(*state, self._recipe, img.sha256)
            job.sha = img.sha256
            job.part = ImagePart(img.data_url, img.sha256)
        return job

    def forget_image(self, meme: Meme) -> None:
        """Drop a recorded image hash that no longer matches its file."""
        state = self._image_state(meme)
        if state is not None:
            self.store.put_image_sha(*state, self._recipe, "")

    # ---------------------------------------------------------------- steps
    async def _steps(
        self,
        job: _MemeJob,
        stage: str,
        kind: str,
        plans: Sequence[tuple[str, Callable[[], Awaitable[AskResult[Any]]], Any]],
        window: int | None = None,
        required: bool = False,
    ) -> list[dict[str, Any] | None]:
        """Steps ``(key, call, encode)`` of one kind: one batched look-up, then the missing
        ones called (at most ``window`` at a time). Results in the order of ``plans``."""
        found = self.store.get_artifacts(kind, [p[0] for p in plans])
        count = job.tally[stage]
        out: list[dict[str, Any] | None] = [None] * len(plans)
        todo: list[int] = []
        for i, (key, _call, _enc) in enumerate(plans):
            got = found.get(key)
            if got is None:
                todo.append(i)
            else:
                out[i] = got
                count.reused += 1
        if len(todo) < len(plans):
            job.advance(stage, len(plans) - len(todo), reused=True)

        async def one(i: int) -> Any:
            if self.stopped is not None:
                return _STOPPED
            key, call, enc = plans[i]
            try:
                return await run_step(
                    self.store, kind, key, call, enc, lookup=False, required=required
                )
            except BudgetExceeded as e:
                # The cap stops the run, but the steps in flight finish and are recorded: a
                # cancelled call would stay on record as sent, its result lost.
                self.stopped = self.stopped or str(e)
                return _STOPPED

        async for i, art in bounded_map(one, todo, window or max(1, len(todo))):
            if art is _STOPPED:
                continue
            out[i] = art
            if art is None:
                count.failed += 1
            else:
                count.new += 1
            job.advance(stage)
        if self.stopped is not None:
            raise BudgetExceeded(self.stopped)
        return out

    async def _step(
        self,
        job: _MemeJob,
        stage: str,
        kind: str,
        key: str,
        call: Callable[[], Awaitable[AskResult[T]]],
        encode: Callable[[T, AskResult[T]], dict[str, Any]],
        required: bool = False,
    ) -> dict[str, Any] | None:
        return (await self._steps(job, stage, kind, [(key, call, encode)], required=required))[0]

    # ---------------------------------------------------------------- stage 1
    async def contexts(self, job: _MemeJob) -> tuple[str, list[Task]]:
        """The meme's interpretive contexts (and the key of their artifact)."""
        meme, n, model = job.meme, self.acfg.contexts, self.acfg.context_model
        msgs = build_messages(
            "arena/context.j2", image=job.key_image(), meme_text=meme.text, n_contexts=n
        )
        rk = self.pool.request_key(model, msgs)
        key = artifact_key(meme.uid, rk)
        art = await self._step(
            job,
            "contexts",
            "context",
            key,
            lambda: ask(
                self.pool,
                model,
                "arena.context",
                job.with_image(msgs),
                lambda t: parse_contexts(t, n),
                max_reasks=self.acfg.max_reasks,
                key=rk,
            ),
            lambda v, _: {"contexts": [c.model_dump() for c in v]},
            required=True,  # an unparseable context is asked again on a re-run
        )
        if not art or "contexts" not in art:
            return key, []
        return key, [Task(meme, c["level"], c["background"], c["task"]) for c in art["contexts"]]

    async def answers(
        self, job: _MemeJob, tasks: Sequence[Task]
    ) -> dict[tuple[str, str], tuple[str, dict[str, Any] | None]]:
        """Every target's answer to every task, by (level, target): ``(key, artifact)``. Answers
        are kept even without their sections: that is what Instruction Following judges."""
        plans: list[tuple[str, Callable[[], Awaitable[AskResult[Any]]], Any]] = []
        coords: list[tuple[str, str]] = []
        for t in tasks:
            msgs = build_messages(  # rendered once per task: every target gets the same prompt
                "arena/answer.j2",
                image=job.key_image(),
                meme_text=t.meme.text,
                background=t.background,
                task=t.task,
            )
            for target in self.acfg.targets:
                rk = self.pool.request_key(target, msgs)
                key = artifact_key(t.meme.uid, t.level, target, rk)
                plans.append((key, self._answer_call(job, target, msgs, rk), _encode_answer))
                coords.append((t.level, target))
        arts = await self._steps(job, "answers", "answer", plans)
        return {c: (p[0], a) for c, p, a in zip(coords, plans, arts, strict=True)}

    def _answer_call(
        self, job: _MemeJob, target: str, msgs: list[Message], rk: str
    ) -> Callable[[], Awaitable[AskResult[Any]]]:
        return lambda: ask(
            self.pool,
            target,
            "arena.answer",
            job.with_image(msgs),
            parse_answer,
            max_reasks=0,
            key=rk,
        )

    # ---------------------------------------------------------------- stage 2
    def _guideline_call(
        self, job: _MemeJob, judge: str, role: str, msgs: list[Message], rk: str
    ) -> Callable[[], Awaitable[AskResult[str]]]:
        return lambda: ask(
            self.pool,
            judge,
            role,
            job.with_image(msgs),
            parse_guideline,
            max_reasks=self.acfg.max_reasks,
            key=rk,
        )

    async def fused_guideline(
        self, job: _MemeJob, answers: Mapping[tuple[str, str], dict[str, Any] | None]
    ) -> str | None:
        """Draft, then ``fusion_rounds`` refinements by random judges with random analyses
        (never their own model's); every round is stored, so its lineage can be studied. A
        round's key holds its judge, its analysis and its request (the previous round's output
        included), so a changed round recomputes the rounds after it, and only those."""
        meme = job.meme
        plan = fusion_plan(
            self.acfg.judges, self.acfg.fusion_rounds, seeded_rng(self.cfg.seed, "fusion", meme.uid)
        )
        pick_rng = seeded_rng(self.cfg.seed, "analysis", meme.uid)
        usable = sorted(k for k, a in answers.items() if a and "text" in a)
        msgs = build_messages(
            "arena/guideline_draft.j2", image=job.key_image(), meme_text=meme.text
        )
        rk = self.pool.request_key(plan.drafter, msgs)
        draft = await self._step(
            job,
            "guidelines",
            "guideline_round",
            artifact_key(meme.uid, 0, plan.drafter, rk),
            self._guideline_call(job, plan.drafter, "arena.guideline_draft", msgs, rk),
            lambda v, _: {"judge": plan.drafter, "analysis": None, "guideline": v},
            required=True,
        )
        if draft is None or "guideline" not in draft:
            return None
        current: str = draft["guideline"]
        chain = [(0, current)]  # every round's guideline, for the optional panel ratings
        prev_key = ""
        for rnd, judge in enumerate(plan.refiners, start=1):
            pick = pick_analysis(judge, usable, self.families, pick_rng)
            if pick is None:
                key = artifact_key(meme.uid, rnd, judge, "skipped", prev_key)
                value = {"judge": judge, "analysis": None, "guideline": current, "skipped": True}
                await self.store.commit_step("guideline_round", key, value)
                job.tally["guidelines"].new += 1  # a step of this run (no call): counted as one
                job.advance("guidelines")
                prev_key = key
                chain.append((rnd, current))
                continue
            analysis = answers[pick]
            assert analysis is not None
            msgs = build_messages(
                "arena/guideline_refine.j2",
                image=job.key_image(),
                meme_text=meme.text,
                guideline=current,
                analysis=analysis["text"],
            )
            rk = self.pool.request_key(judge, msgs)
            key = artifact_key(meme.uid, rnd, judge, f"{pick[0]}:{pick[1]}", rk)
            art = await self._step(
                job,
                "guidelines",
                "guideline_round",
                key,
                self._guideline_call(job, judge, "arena.guideline_refine", msgs, rk),
                _encode_round(judge, pick),
            )
            if art is None:  # a model failure: the chain cannot go on without this round
                return None
            current = art.get("guideline", current)  # an unparseable refinement keeps the last
            prev_key = key
            chain.append((rnd, current))
        if self.acfg.rate_fusion_rounds:
            await rate_rounds(self, job, chain)
        return current

    async def own_guidelines(self, job: _MemeJob) -> dict[str | None, str | None]:
        """Each judge's own guideline, written alone (the LLM-as-a-judge setting)."""
        meme = job.meme
        msgs = build_messages(
            "arena/guideline_draft.j2", image=job.key_image(), meme_text=meme.text
        )
        judges = list(self.acfg.judges)
        plans: list[tuple[str, Callable[[], Awaitable[AskResult[Any]]], Any]] = []
        for j in judges:
            rk = self.pool.request_key(j, msgs)
            plans.append(
                (
                    artifact_key(meme.uid, j, rk),
                    self._guideline_call(job, j, "arena.guideline_self", msgs, rk),
                    lambda v, _: {"guideline": v},
                )
            )
        arts = await self._steps(job, "guidelines", "guideline_self", plans)
        return {j: (a.get("guideline") if a else None) for j, a in zip(judges, arts, strict=True)}

    def human_guideline(self, meme: Meme) -> str | None:
        """The guideline for this meme from the ``human_guidelines`` file."""
        if self._human is None:
            self._human = load_human_guidelines(self.acfg.human_guidelines)
        return self._human.get(meme.uid) or self._human.get(meme.id)

    async def guidelines(
        self,
        job: _MemeJob,
        setting: str,
        answers: Mapping[tuple[str, str], dict[str, Any] | None],
    ) -> dict[str | None, str | None]:
        """The meme's guidelines for a setting, by judge (None: shared by the panel)."""
        if setting == "memearena":
            return {None: await self.fused_guideline(job, answers)}
        if setting == "self":
            return await self.own_guidelines(job)
        if setting == "human":
            return {None: self.human_guideline(job.meme)}
        return {}

    # ---------------------------------------------------------------- stage 3
    def candidates(
        self,
        job: _MemeJob,
        setting: str,
        tasks: Sequence[Task],
        answers: Mapping[tuple[str, str], dict[str, Any] | None],
        guides: Mapping[str | None, str | None],
    ) -> list[tuple[int, Task, str, str, str, str | None]]:
        """The meme's judgments ``(position, task, x, y, judge, guideline)`` for a setting, in
        run order; pairs that cannot be judged are passed over (and counted done)."""
        out: list[tuple[int, Task, str, str, str, str | None]] = []
        pos = 0
        for t in tasks:
            for x, y in target_pairs(self.acfg.targets):
                ax, ay = answers.get((t.level, x)), answers.get((t.level, y))
                # A refusal is its own outcome, counted per model; it is not judged.
                ok = bool(ax and ay and "text" in ax and "text" in ay)
                for j in self.acfg.judges:
                    pos += 1
                    g = None if setting == "none" else guides.get(j if setting == "self" else None)
                    if not ok or (setting != "none" and g is None):
                        # Not judged (a refused answer, no guideline: on record): not a step.
                        job.done["judgments"] += 2
                        self.progress.drop("judgments", 2)
                        continue
                    out.append((pos, t, x, y, j, g))
        return out

    async def judge(
        self,
        job: _MemeJob,
        setting: str,
        jobs: Sequence[tuple[int, Task, str, str, str, str | None]],
        answers: Mapping[tuple[str, str], dict[str, Any] | None],
        ctx_key: str,
    ) -> list[JudgedPair]:
        """Both orders of every judgment of one meme (always both: position bias cancels only
        so), recorded in the setting's member view."""
        meme = job.meme
        criteria = list(self.acfg.criteria)
        rendered: dict[
            tuple[str, str, str, str | None], tuple[list[Message], Any, tuple[str, ...]]
        ] = {}
        plans: list[tuple[str, Callable[[], Awaitable[AskResult[Any]]], Any]] = []
        for _pos, t, x, y, j, g in jobs:
            for first, second in ((x, y), (y, x)):
                # Rendered once per (task, order, guideline): every judge gets the same prompt.
                got = rendered.get((t.level, first, second, g))
                if got is None:
                    a_first, a_second = answers[(t.level, first)], answers[(t.level, second)]
                    assert a_first is not None and a_second is not None
                    # An endless answer is cut before any judge reads (and pays for) it.
                    shown = shown_pair(
                        a_first["text"], a_second["text"], self.acfg.answer_max_tokens
                    )
                    msgs = build_messages(
                        "arena/judge_pairwise.j2",
                        image=job.key_image(),
                        meme_text=meme.text,
                        background=t.background,
                        task=t.task,
                        guideline=g,
                        response_a=shown.a,
                        response_b=shown.b,
                        criteria=criteria,
                    )
                    got = rendered[(t.level, first, second, g)] = (
                        msgs,
                        _encode_verdicts(shown.record),
                        (a_first["text"], a_second["text"], meme.text),  # what it may not copy
                    )
                msgs, encode, quoted = got
                params = self._verdict_params(j)
                fingerprint = self.pool.request_key(j, msgs, params)
                key = artifact_key(setting, meme.uid, t.level, first, second, j, fingerprint)
                plans.append(
                    (key, self._verdict_call(job, j, msgs, params, fingerprint, quoted), encode)
                )
        arts = await self._steps(job, "judgments", "verdict", plans, window=_VERDICT_WINDOW)
        rendered.clear()
        out: list[JudgedPair] = []
        rows: list[tuple[str, int, str | None, str | None, str | None]] = []
        for n, (pos, t, x, y, j, _g) in enumerate(jobs):
            fwd, bwd = arts[2 * n], arts[2 * n + 1]
            reqs = (_request_of(plans[2 * n][0]), _request_of(plans[2 * n + 1][0]))
            out.append(JudgedPair(t, x, y, j, fwd or _model_error(), bwd or _model_error(), reqs))
            coord = SEP.join((meme.uid, t.level, x, y, j))
            seq = (job.idx << _SEQ_SHIFT) | pos
            rows.append((coord, seq, plans[2 * n][0], plans[2 * n + 1][0], ctx_key))
        self.store.add_members(judged_view(setting), meme.uid, rows)
        return out

    def _verdict_params(self, judge: str) -> GenParams | None:
        """Structured outputs (a JSON schema of the verdicts) for judges whose endpoint has them."""
        if not self.cfg.models[judge].structured_outputs:
            return None
        return GenParams(response_format=verdict_response_format(self.acfg.criteria))

    def _verdict_call(
        self,
        job: _MemeJob,
        judge: str,
        msgs: list[Message],
        params: GenParams | None,
        rk: str | None = None,
        quoted: tuple[str, ...] = (),
    ) -> Callable[[], Awaitable[AskResult[Any]]]:
        return lambda: ask(
            self.pool,
            judge,
            "arena.judge",
            job.with_image(msgs),
            lambda t: parse_verdicts(t, self.acfg.criteria, quoted=quoted),
            max_reasks=self.acfg.max_reasks,
            params=params,
            key=rk,
        )

    def battle_rows(self, setting: str, jp: JudgedPair) -> list[dict[str, Any]]:
        """Battle rows (Chatbot Arena format plus judge/criterion/item/context/source)."""
        rows: list[dict[str, Any]] = []
        fv = jp.forward.get("verdicts") or {}
        bv = jp.backward.get("verdicts") or {}
        for crit in self.acfg.criteria:
            f = fv.get(crit, {}).get("winner") if fv else None
            b = bv.get(crit, {}).get("winner") if bv else None
            for winner in resolve_pair(f, b, self.acfg.resolution):
                rows.append(
                    {
                        "model_a": jp.x,
                        "model_b": jp.y,
                        "winner": winner,
                        "judge": jp.judge,
                        "criterion": crit,
                        "item": jp.task.meme.uid,
                        "context": jp.task.level,
                        "source": jp.task.meme.source,
                        "setting": setting,
                        "requests": list(jp.requests),
                    }
                )
        return rows

    # ---------------------------------------------------------------- driver
    def _expected(self, settings: Sequence[str]) -> dict[str, int]:
        """Steps per meme and stage (progress totals)."""
        a = self.acfg
        n_pairs = len(target_pairs(a.targets))
        per_setting = {"memearena": 1 + a.fusion_rounds, "self": len(a.judges)}
        return {
            "contexts": 1,
            "answers": a.contexts * len(a.targets),
            "guidelines": sum(per_setting.get(s, 0) for s in settings)
            + (expected_ratings(a) if "memearena" in settings else 0),
            "judgments": 0
            if a.pairs == "active"
            else 2 * a.contexts * n_pairs * len(a.judges) * len(settings),
        }

    async def _prepare_meme(
        self, job: _MemeJob, settings: Sequence[str]
    ) -> tuple[
        str,
        list[Task],
        dict[tuple[str, str], dict[str, Any] | None],
        dict[str, dict[str | None, str | None]],
    ]:
        """Stages 1 and 2 for one meme: contexts, answers (recorded in the answers view) and the
        guidelines of every setting."""
        ctx_key, tasks = await self.contexts(job)
        answered = await self.answers(job, tasks)
        rows = [
            (SEP.join((job.meme.uid, level, target)), (job.idx << _SEQ_SHIFT) | n, key, None, None)
            for n, ((level, target), (key, _a)) in enumerate(answered.items())
        ]
        if rows:
            self.store.add_members(ANSWERS_VIEW, job.meme.uid, rows)
        answers = {c: a for c, (_k, a) in answered.items()}
        guides = {s: await self.guidelines(job, s, answers) for s in settings}
        return ctx_key, tasks, answers, guides

    def _fingerprint(self, settings: Sequence[str]) -> str:
        """Digest of everything besides the meme that shapes a meme's steps: models, Arena
        options, seed, image preparation, prompt templates, settings (and the human guidelines
        file), this code's version. Over-inclusive on purpose: a false match would reuse stale
        steps, a false mismatch only looks the steps up again (their keys decide)."""
        from memearena.models.cache import CACHE_KEY_VERSION
        from memearena.prompts.render import rendered_template_hashes
        from memearena.version import __version__

        h = hashlib.sha256()
        models = {n: m.model_dump(mode="json") for n, m in self.cfg.models.items()}
        for part in (
            __version__,
            str(CACHE_KEY_VERSION),
            hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
            json.dumps(models, sort_keys=True, default=str),
            self.acfg.model_dump_json(),
            str(self.cfg.seed),
            self._recipe,
            json.dumps(rendered_template_hashes(), sort_keys=True),
            json.dumps(list(settings)),
            json.dumps(sorted((self._human or {}).items())),
        ):
            h.update(part.encode("utf-8"))
            h.update(b"\0")
        return h.hexdigest()

    def _meme_digest(self, job: _MemeJob) -> str:
        meme = job.meme
        h = hashlib.sha256()
        for part in (
            self._run_fp,
            meme.uid,
            meme.source,
            meme.text,
            job.sha or "",
            json.dumps(meme.annotations, sort_keys=True, default=str),
        ):
            h.update(part.encode("utf-8"))
            h.update(b"\0")
        return h.hexdigest()

    def _reuse_meme(self, job: _MemeJob, digest: str) -> bool:
        """Whether the meme's every step ended final under the same digest on an earlier run
        (its member rows stand): then none of its steps is looked at again."""
        done = self.store.item_done(job.meme.uid)
        if done is None or done[0] != digest:
            return False
        _digest, old_idx, counts = done
        if old_idx != job.idx:  # the selection changed: the meme keeps its place in run order
            self.store.move_item(job.meme.uid, old_idx, job.idx, _SEQ_SHIFT)
        for stage, n in counts.items():
            if stage in job.tally:
                job.tally[stage].reused += int(n)
                job.advance(stage, int(n), reused=True)
        return True

    async def _meme(self, idx: int, meme: Meme, settings: Sequence[str]) -> None:
        """Every stage of one meme; a bad image is recorded for this meme and the run goes on."""
        expected = self._expected(settings)
        job: _MemeJob | None = None
        stopped = False
        try:
            job = self._start(idx, meme)
            digest = self._meme_digest(job)
            if self._reuse_meme(job, digest):
                return
            self.store.drop_item(meme.uid)  # its members are listed again below
            ctx_key, tasks, answers, guides = await self._prepare_meme(job, settings)
            for s in settings:
                jobs = self.candidates(job, s, tasks, answers, guides[s])
                await self.judge(job, s, jobs, answers, ctx_key)
            if not any(c.failed for c in job.tally.values()):
                counts = {st: c.reused + c.new for st, c in job.tally.items()}
                self.store.mark_item_done(meme.uid, digest, idx, counts)
        except DataError as e:
            self.store.record_error("meme", meme.uid, str(e))
        except BudgetExceeded as e:  # recorded; the other memes in flight finish their steps
            self.stopped = self.stopped or str(e)
            stopped = True
        finally:
            done = job.done if job is not None else dict.fromkeys(STAGES, 0)
            for stage, total in expected.items():
                # Steps the meme did not need (or cannot make: a bad image, on record) leave
                # the total; those a stop left undone stay on the bar, short.
                if total > done[stage] and not stopped:
                    self.progress.drop(stage, total - done[stage])
            if job is not None:
                job.drop_image()  # the prepared image leaves memory with its meme
                self._merge_tally(job)

    def _merge_tally(self, job: _MemeJob) -> None:
        """Add a job's step counts to the run's (and start the job's afresh)."""
        for stage, c in job.tally.items():
            mine = self.counts[stage]
            mine.reused += c.reused
            mine.new += c.new
            mine.failed += c.failed
        job.tally = {st: StageCount() for st in STAGES}

    def _begin(self, settings: Sequence[str]) -> None:
        """Load what every meme shares and declare the progress stages. Member views are kept:
        a meme recomputed lists its members again, a meme left out is forgotten at the end."""
        if "human" in settings and self._human is None:  # a bad file fails before any call
            self._human = load_human_guidelines(self.acfg.human_guidelines)
        self._run_fp = self._fingerprint(settings)
        if self.acfg.pairs == "active":  # choices depend on every meme: listed afresh
            self.store.retain_items(())
        n = len(self.memes)
        for stage, per_meme in self._expected(settings).items():
            if per_meme or stage != "judgments":
                self.progress.stage(stage, n * per_meme)

    def outcome(self, setting: str) -> ArenaOutcome:
        """The setting's outcome as recorded in the store (streams; see ``ArenaOutcome``)."""
        by_uid = {m.uid: m for m in self.memes}
        judged = JudgedStream(self._ref, setting, by_uid)
        return ArenaOutcome(
            setting=setting,
            battles=_BattleStream(judged, self.battle_rows),
            judged=judged,
            answers=AnswerLookup(self._ref),
            tasks=_TaskStream(self._ref),
        )

    async def run(self, settings: Sequence[str] | None = None) -> list[ArenaOutcome]:
        """The whole method, streaming memes through a bounded window; answers are shared,
        guidelines and judging run once per setting."""
        settings = list(settings or [self.acfg.setting])
        self._begin(settings)
        try:
            if self.acfg.pairs == "active":
                await self._run_active(settings)
            else:

                async def one(item: tuple[int, Meme]) -> None:
                    if self.stopped is None:  # the cap stops scheduling
                        await self._meme(item[0], item[1], settings)

                async for _ in bounded_map(one, enumerate(self.memes), self.window):
                    pass
        except BudgetExceeded as e:
            self.stopped = self.stopped or str(e)
        if self.stopped is not None:
            return [ArenaOutcome(setting=settings[0], stopped=self.stopped)]
        self.store.retain_items(m.uid for m in self.memes)  # memes a changed selection left out
        return [self.outcome(s) for s in settings]

    async def _run_active(self, settings: Sequence[str]) -> None:
        """``pairs: active``: stages 1 and 2 stream over the memes, then (task, pair)
        comparisons are chosen actively up to the battle budget. The candidate list (with its
        answers and guidelines) is held in memory: it is what the sampler chooses from; the
        battles so far are kept as a count table only."""
        import numpy as np

        from memearena.stats import PairCounts, next_pairs

        prepared: dict[int, tuple[_MemeJob, str, Any, Any, Any]] = {}

        async def prep(item: tuple[int, Meme]) -> None:
            idx, meme = item
            if self.stopped is not None:
                return
            try:
                job = self._start(idx, meme)
                ctx_key, tasks, answers, guides = await self._prepare_meme(job, settings)
                job.drop_image()
                self._merge_tally(job)
                prepared[idx] = (job, ctx_key, tasks, answers, guides)
            except DataError as e:
                self.store.record_error("meme", meme.uid, str(e))
            except BudgetExceeded as e:
                self.stopped = self.stopped or str(e)

        async for _ in bounded_map(prep, enumerate(self.memes), self.window):
            pass
        if self.stopped is not None:
            return
        budget = self.acfg.battle_budget or 0
        n_judges = len(self.acfg.judges)
        for setting in settings:
            by_pair: dict[tuple[str, str], list[tuple[int, int]]] = {}  # pair -> (meme, task)
            cands: dict[tuple[int, int, str, str], list[Any]] = {}
            for idx in sorted(prepared):
                job, _ctx, tasks, answers, guides = prepared[idx]
                for c in self.candidates(job, setting, tasks, answers, guides[setting]):
                    ti = tasks.index(c[1])
                    lst = by_pair.setdefault((c[2], c[3]), [])
                    if not lst or lst[-1] != (idx, ti):
                        lst.append((idx, ti))
                    cands.setdefault((idx, ti, c[2], c[3]), []).append(c)
            total = min(budget, sum(map(len, by_pair.values())))
            self.progress.stage("judgments", 2 * n_judges * total)
            rng = seeded_rng(self.cfg.seed, "active", setting)
            np_rng = np.random.default_rng(rng.randrange(2**32))
            # The battles so far as counts, updated as they come (not re-counted every round).
            targets = tuple(self.acfg.targets)
            pos = {t: k for k, t in enumerate(targets)}
            wins = np.zeros((len(targets), len(targets)))
            ties = np.zeros_like(wins)
            used = 0
            while used < budget and any(by_pair.values()):
                want = min(16, budget - used)
                so_far = PairCounts(targets, wins.copy(), ties.copy())
                chosen = next_pairs(so_far, list(targets), want, np_rng)
                batch: list[tuple[int, int, str, str]] = []
                for x, y in chosen:
                    key = (x, y) if (x, y) in by_pair else (y, x)
                    ts = by_pair.get(key) or []
                    if ts:  # a pair with no task left to compare it on is passed over
                        batch.append((*ts.pop(rng.randrange(len(ts))), key[0], key[1]))
                if not batch:  # every chosen pair is exhausted: take any open one
                    key = rng.choice(sorted(p for p, ts in by_pair.items() if ts))
                    ts = by_pair[key]
                    batch.append((*ts.pop(rng.randrange(len(ts))), key[0], key[1]))
                used += len(batch)
                per_meme: dict[int, list[Any]] = {}
                for b in batch:
                    per_meme.setdefault(b[0], []).extend(cands.get(b, []))
                judged = await asyncio.gather(
                    *(
                        self.judge(prepared[i][0], setting, js, prepared[i][3], prepared[i][1])
                        for i, js in per_meme.items()
                    ),
                    return_exceptions=True,  # every meme's steps in flight finish first
                )
                for got in judged:
                    if isinstance(got, BaseException):
                        raise got
                for pairs in judged:
                    assert not isinstance(pairs, BaseException)
                    for jp in pairs:
                        for row in self.battle_rows(setting, jp):
                            ia, ib = pos[row["model_a"]], pos[row["model_b"]]
                            if row["winner"] == "model_a":
                                wins[ia, ib] += 1.0
                            elif row["winner"] == "model_b":
                                wins[ib, ia] += 1.0
                            else:
                                ties[ia, ib] += 1.0
                                ties[ib, ia] += 1.0
                for i in per_meme:
                    prepared[i][0].drop_image()
                    self._merge_tally(prepared[i][0])


def meme_window(cfg: RunConfig) -> int:
    """Memes in flight: enough to keep every model's connections busy (a meme's fusion chain is
    sequential), few enough that memory stays small: a quarter of the total concurrency of the
    Arena's models, between 8 and 128."""
    assert cfg.arena is not None
    a = cfg.arena
    names = {*a.targets, *a.judges, a.context_model}
    total = sum(cfg.models[n].max_concurrency for n in names if n in cfg.models)
    return max(8, min(128, total // 4))


def _encode_round(
    judge: str, pick: tuple[str, str]
) -> Callable[[str, AskResult[str]], dict[str, Any]]:
    return lambda v, _: {"judge": judge, "analysis": list(pick), "guideline": v}


def _encode_answer(v: Any, r: AskResult[Any]) -> dict[str, Any]:
    return {
        "text": r.raw[-1],
        "background": v.background,
        "reasoning": v.reasoning,
        "format_ok": v.format_ok,
    }


def _encode_verdicts(
    record: dict[str, Any],
) -> Callable[[Any, AskResult[Any]], dict[str, Any]]:
    """The verdict artifact, with what was cut from the answers shown (``record``)."""
    return lambda v, _: {"verdicts": {c: cv.model_dump() for c, cv in v.items()}, **record}


def load_human_guidelines(path: Path | None) -> dict[str, str]:
    """Read ``{"meme": id, "guideline": text}`` lines; a bad line is a one-line DataError."""
    if path is None:
        raise ConfigError("arena.human_guidelines: a file is needed for setting 'human'")
    out: dict[str, str] = {}
    for n, line in jsonl_lines(path):  # bounded rows, a BOM accepted
        try:
            row = loads_bounded(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{n}: invalid JSON ({e.msg})") from None
        except ValueError as e:
            raise DataError(f"{path}:{n}: invalid JSON ({e})") from None
        if not isinstance(row, dict):
            raise DataError(f"{path}:{n}: expected a JSON object")
        for fieldname in ("meme", "guideline"):
            if not isinstance(row.get(fieldname), str | int) or not str(row[fieldname]).strip():
                raise DataError(f"{path}:{n}: field {fieldname!r}: missing or empty")
        out[str(row["meme"])] = str(row["guideline"])
    return out
