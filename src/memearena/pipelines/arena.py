"""The Arena method: contexts → answers → guideline fusion → pairwise battles.

Every step reads its inputs from the store and writes one artifact under a deterministic key,
so re-running resumes: a step whose artifact exists is not called again. Outcomes that are
final (a parsed output, a refusal, an output that stayed unparseable after re-asks) are
artifacts; a permanent model failure is only an error record, so a re-run retries it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from memearena.config import ArenaConfig, RunConfig
from memearena.data import Meme, prepare_image
from memearena.errors import BudgetExceeded, ConfigError, DataError
from memearena.models import ModelPool
from memearena.models.types import GenParams, ImagePart
from memearena.pipelines.progress import StageProgress
from memearena.pipelines.resolve import resolve_pair
from memearena.pipelines.schedule import (
    fusion_plan,
    pick_analysis,
    seeded_rng,
    target_pairs,
)
from memearena.pipelines.steps import run_step
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

T = TypeVar("T")

LEVELS: tuple[str, ...] = ("high", "moderate", "unrelated")


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


@dataclass
class ArenaOutcome:
    """What the Arena produced: battle rows and the raw material for bias metrics."""

    setting: str
    battles: list[dict[str, Any]] = field(default_factory=list)
    judged: list[JudgedPair] = field(default_factory=list)
    answers: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    stopped: str | None = None
    tasks: list[tuple[str, str]] = field(default_factory=list)
    """(meme uid, context level) of every task targets were asked to answer."""


class ArenaPipeline:
    """Runs the Arena over a set of memes with one model pool and one run store."""

    def __init__(
        self,
        cfg: RunConfig,
        memes: Sequence[Meme],
        pool: ModelPool,
        store: RunStore,
        progress: StageProgress | None = None,
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
        self._images: dict[str, ImagePart | None] = {}
        self._human: dict[str, str] | None = None

    # ---------------------------------------------------------------- helpers
    def image(self, meme: Meme) -> ImagePart | None:
        """The meme's prepared image (computed once per meme)."""
        if meme.uid not in self._images:
            if meme.image_path is None:
                self._images[meme.uid] = None
            else:
                img = prepare_image(meme.image_path, self.cfg.image)
                self._images[meme.uid] = ImagePart(img.data_url, img.sha256)
        return self._images[meme.uid]

    async def _step(
        self,
        kind: str,
        key: str,
        call: Callable[[], Awaitable[AskResult[T]]],
        encode: Callable[[T, AskResult[T]], dict[str, Any]],
    ) -> dict[str, Any] | None:
        """One idempotent step (``pipelines.steps.run_step``) over this run's store."""
        return await run_step(self.store, kind, key, call, encode)

    # ---------------------------------------------------------------- stage 1
    async def contexts(self, meme: Meme) -> list[Task]:
        """The meme's interpretive contexts, each a task every target answers."""
        n = self.acfg.contexts
        art = await self._step(
            "context",
            meme.uid,
            lambda: ask(
                self.pool,
                self.acfg.context_model,
                "arena.context",
                build_messages(
                    "arena/context.j2", image=self.image(meme), meme_text=meme.text, n_contexts=n
                ),
                lambda t: parse_contexts(t, n),
                max_reasks=self.acfg.max_reasks,
            ),
            lambda v, _: {"contexts": [c.model_dump() for c in v]},
        )
        self.progress.advance("contexts")
        if not art or "contexts" not in art:
            return []
        return [Task(meme, c["level"], c["background"], c["task"]) for c in art["contexts"]]

    async def answer(self, task: Task, target: str) -> dict[str, Any] | None:
        """One target's answer to one task (kept even without its sections: that is what
        Instruction Following judges)."""
        art = await self._step(
            "answer",
            artifact_key(task.meme.uid, task.level, target),
            lambda: ask(
                self.pool,
                target,
                "arena.answer",
                build_messages(
                    "arena/answer.j2",
                    image=self.image(task.meme),
                    meme_text=task.meme.text,
                    background=task.background,
                    task=task.task,
                ),
                parse_answer,
                max_reasks=0,
            ),
            lambda v, r: {
                "text": r.raw[-1],
                "background": v.background,
                "reasoning": v.reasoning,
                "format_ok": v.format_ok,
            },
        )
        self.progress.advance("answers")
        return art

    # ---------------------------------------------------------------- stage 2
    async def _guideline_call(
        self, judge: str, role: str, template: str, meme: Meme, **vars: Any
    ) -> AskResult[str]:
        return await ask(
            self.pool,
            judge,
            role,
            build_messages(template, image=self.image(meme), meme_text=meme.text, **vars),
            parse_guideline,
            max_reasks=self.acfg.max_reasks,
        )

    async def fused_guideline(
        self, meme: Meme, answers: dict[tuple[str, str], dict[str, Any]]
    ) -> str | None:
        """Draft, then ``fusion_rounds`` refinements by random judges with random analyses
        (never their own model's); every round is stored, so its lineage can be studied."""
        plan = fusion_plan(
            self.acfg.judges, self.acfg.fusion_rounds, seeded_rng(self.cfg.seed, "fusion", meme.uid)
        )
        pick_rng = seeded_rng(self.cfg.seed, "analysis", meme.uid)
        usable = sorted(k for k, a in answers.items() if a and "text" in a)
        draft = await self._step(
            "guideline_round",
            artifact_key(meme.uid, 0),
            lambda: self._guideline_call(
                plan.drafter, "arena.guideline_draft", "arena/guideline_draft.j2", meme
            ),
            lambda v, _: {"judge": plan.drafter, "analysis": None, "guideline": v},
        )
        self.progress.advance("guidelines")
        if draft is None or "guideline" not in draft:
            self.progress.advance("guidelines", len(plan.refiners))
            return None
        current: str = draft["guideline"]
        for rnd, judge in enumerate(plan.refiners, start=1):
            pick = pick_analysis(judge, usable, self.families, pick_rng)
            key = artifact_key(meme.uid, rnd)
            if pick is None:
                self.store.put_artifact(
                    "guideline_round",
                    key,
                    {"judge": judge, "analysis": None, "guideline": current, "skipped": True},
                )
                self.progress.advance("guidelines")
                continue
            analysis = answers[pick]["text"]
            prev = current
            art = await self._step(
                "guideline_round",
                key,
                # Called before the loop moves on, so the closures see this round's values.
                lambda: self._guideline_call(
                    judge,  # noqa: B023
                    "arena.guideline_refine",
                    "arena/guideline_refine.j2",
                    meme,
                    guideline=prev,  # noqa: B023
                    analysis=analysis,  # noqa: B023
                ),
                lambda v, _: {"judge": judge, "analysis": list(pick), "guideline": v},  # noqa: B023
            )
            self.progress.advance("guidelines")
            if art is None:  # a model failure: the chain cannot go on without this round
                self.progress.advance("guidelines", len(plan.refiners) - rnd)
                return None
            current = art.get("guideline", prev)  # an unparseable refinement keeps the last one
        return current

    async def own_guideline(self, meme: Meme, judge: str) -> str | None:
        """The judge's own guideline, written alone (the LLM-as-a-judge setting)."""
        art = await self._step(
            "guideline_self",
            artifact_key(meme.uid, judge),
            lambda: self._guideline_call(
                judge, "arena.guideline_self", "arena/guideline_draft.j2", meme
            ),
            lambda v, _: {"guideline": v},
        )
        self.progress.advance("guidelines")
        return art.get("guideline") if art else None

    def human_guideline(self, meme: Meme) -> str | None:
        """The guideline for this meme from the ``human_guidelines`` file."""
        if self._human is None:
            self._human = load_human_guidelines(self.acfg.human_guidelines)
        return self._human.get(meme.uid) or self._human.get(meme.id)

    # ---------------------------------------------------------------- stage 3
    async def judge_once(
        self,
        setting: str,
        task: Task,
        first: str,
        second: str,
        judge: str,
        answers: dict[tuple[str, str, str], dict[str, Any]],
        guideline: str | None,
    ) -> dict[str, Any]:
        """One judge's verdicts with ``first`` shown as A and ``second`` as B."""
        meme = task.meme
        shown = shown_pair(  # an endless answer is cut before any judge reads (and pays for) it
            answers[(meme.uid, task.level, first)]["text"],
            answers[(meme.uid, task.level, second)]["text"],
            self.acfg.answer_max_tokens,
        )
        art = await self._step(
            "verdict",
            artifact_key(setting, meme.uid, task.level, first, second, judge),
            lambda: ask(
                self.pool,
                judge,
                "arena.judge",
                build_messages(
                    "arena/judge_pairwise.j2",
                    image=self.image(meme),
                    meme_text=meme.text,
                    background=task.background,
                    task=task.task,
                    guideline=guideline,
                    response_a=shown.a,
                    response_b=shown.b,
                    criteria=list(self.acfg.criteria),
                ),
                lambda t: parse_verdicts(t, self.acfg.criteria),
                max_reasks=self.acfg.max_reasks,
                params=self._verdict_params(judge),
            ),
            lambda v, _: {"verdicts": {c: cv.model_dump() for c, cv in v.items()}, **shown.record},
        )
        self.progress.advance("judgments")
        return art or {"error": "model error (will be retried on re-run)"}

    def _verdict_params(self, judge: str) -> GenParams | None:
        """Structured outputs (a JSON schema of the verdicts) for judges whose endpoint has them."""
        if not self.cfg.models[judge].structured_outputs:
            return None
        return GenParams(response_format=verdict_response_format(self.acfg.criteria))

    async def judge_pair(
        self,
        setting: str,
        task: Task,
        x: str,
        y: str,
        judge: str,
        answers: dict[tuple[str, str, str], dict[str, Any]],
        guideline: str | None,
    ) -> JudgedPair:
        """Both orders of one comparison (always both: position bias cancels only so)."""
        fwd, bwd = await asyncio.gather(
            self.judge_once(setting, task, x, y, judge, answers, guideline),
            self.judge_once(setting, task, y, x, judge, answers, guideline),
        )
        return JudgedPair(task, x, y, judge, fwd, bwd)

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
                    }
                )
        return rows

    # ---------------------------------------------------------------- driver
    async def prepare(
        self,
    ) -> tuple[list[Task], dict[tuple[str, str, str], dict[str, Any]]]:
        """Stage 1 for every meme: contexts, then every target's answer to every task."""
        acfg = self.acfg
        self.progress.stage("contexts", len(self.memes))
        self.progress.stage("answers", len(self.memes) * acfg.contexts * len(acfg.targets))

        async def one(meme: Meme) -> list[tuple[Task, str, dict[str, Any] | None]]:
            try:
                self.image(meme)
            except DataError as e:
                self.store.record_error("meme", meme.uid, str(e))
                self.progress.advance("contexts")
                self.progress.advance("answers", acfg.contexts * len(acfg.targets))
                return []
            tasks = await self.contexts(meme)
            missing = acfg.contexts * len(acfg.targets) - len(tasks) * len(acfg.targets)
            self.progress.advance("answers", missing)
            jobs = [(t, tg) for t in tasks for tg in acfg.targets]
            arts = await asyncio.gather(*(self.answer(t, tg) for t, tg in jobs))
            return [(t, tg, a) for (t, tg), a in zip(jobs, arts, strict=True)]

        results = await asyncio.gather(*(one(m) for m in self.memes))
        tasks: list[Task] = []
        answers: dict[tuple[str, str, str], dict[str, Any]] = {}
        for per_meme in results:
            seen: set[tuple[str, str]] = set()
            for t, tg, a in per_meme:
                if (t.meme.uid, t.level) not in seen:
                    seen.add((t.meme.uid, t.level))
                    tasks.append(t)
                if a is not None:
                    answers[(t.meme.uid, t.level, tg)] = a
        return tasks, answers

    async def guidelines(
        self,
        setting: str,
        tasks: Sequence[Task],
        answers: dict[tuple[str, str, str], dict[str, Any]],
    ) -> dict[tuple[str, str | None], str | None]:
        """Guidelines per (meme, judge) for the setting (judge None: shared by the panel)."""
        memes = _unique_memes(tasks)
        out: dict[tuple[str, str | None], str | None] = {}
        if setting == "memearena":
            self.progress.stage("guidelines", len(memes) * (1 + self.acfg.fusion_rounds))

            async def fuse(m: Meme) -> None:
                per_meme = {(lvl, tg): a for (uid, lvl, tg), a in answers.items() if uid == m.uid}
                out[(m.uid, None)] = await self.fused_guideline(m, per_meme)

            await asyncio.gather(*(fuse(m) for m in memes))
        elif setting == "self":
            self.progress.stage("guidelines", len(memes) * len(self.acfg.judges))
            pairs = [(m, j) for m in memes for j in self.acfg.judges]
            got = await asyncio.gather(*(self.own_guideline(m, j) for m, j in pairs))
            for (m, j), g in zip(pairs, got, strict=True):
                out[(m.uid, j)] = g
        elif setting == "human":
            for m in memes:
                out[(m.uid, None)] = self.human_guideline(m)
        return out

    async def judge_all(
        self,
        setting: str,
        tasks: Sequence[Task],
        answers: dict[tuple[str, str, str], dict[str, Any]],
        guides: dict[tuple[str, str | None], str | None],
    ) -> ArenaOutcome:
        """Stage 3: pairwise judgments of every (task, pair, judge), or actively chosen pairs."""
        out = ArenaOutcome(setting=setting, answers=answers)
        jobs = self._judging_jobs(setting, tasks, answers, guides)
        if self.acfg.pairs == "active":
            return await self._judge_active(setting, jobs, answers, guides, out)
        self.progress.stage("judgments", 2 * len(jobs))
        judged = await asyncio.gather(
            *(self.judge_pair(setting, t, x, y, j, answers, g) for t, x, y, j, g in jobs)
        )
        for jp in judged:
            out.judged.append(jp)
            out.battles.extend(self.battle_rows(setting, jp))
        return out

    def _judging_jobs(
        self,
        setting: str,
        tasks: Sequence[Task],
        answers: dict[tuple[str, str, str], dict[str, Any]],
        guides: dict[tuple[str, str | None], str | None],
    ) -> list[tuple[Task, str, str, str, str | None]]:
        jobs: list[tuple[Task, str, str, str, str | None]] = []
        for t in tasks:
            for x, y in target_pairs(self.acfg.targets):
                ax = answers.get((t.meme.uid, t.level, x))
                ay = answers.get((t.meme.uid, t.level, y))
                # A refusal is its own outcome, counted per model; it is not judged.
                if not ax or not ay or "text" not in ax or "text" not in ay:
                    continue
                for j in self.acfg.judges:
                    if setting == "none":
                        g = None
                    elif setting == "self":
                        g = guides.get((t.meme.uid, j))
                        if g is None:
                            continue
                    else:
                        g = guides.get((t.meme.uid, None))
                        if g is None:
                            continue  # no guideline for this meme: recorded at fusion time
                    jobs.append((t, x, y, j, g))
        return jobs

    async def _judge_active(
        self,
        setting: str,
        jobs: list[tuple[Task, str, str, str, str | None]],
        answers: dict[tuple[str, str, str], dict[str, Any]],
        guides: dict[tuple[str, str | None], str | None],
        out: ArenaOutcome,
    ) -> ArenaOutcome:
        """Actively chosen (task, pair) comparisons up to the battle budget."""
        import numpy as np

        from memearena.stats import Battle, next_pairs

        budget = self.acfg.battle_budget or 0
        by_pair: dict[tuple[str, str], list[Task]] = {}
        for t, x, y, _j, _g in jobs:
            lst = by_pair.setdefault((x, y), [])
            if not lst or lst[-1] is not t:
                lst.append(t)
        total = min(budget, sum(map(len, by_pair.values())))
        self.progress.stage("judgments", 2 * len(self.acfg.judges) * total)
        rng = seeded_rng(self.cfg.seed, "active", setting)
        np_rng = np.random.default_rng(rng.randrange(2**32))
        guide_of = {(t.meme.uid, t.level, x, y, j): g for t, x, y, j, g in jobs}
        used = 0
        batch_size = 16
        while used < budget and any(by_pair.values()):
            want = min(batch_size, budget - used)
            so_far = [
                Battle(model_a=b["model_a"], model_b=b["model_b"], winner=b["winner"])
                for b in out.battles
            ]
            chosen = next_pairs(so_far, list(self.acfg.targets), want, np_rng)
            batch: list[tuple[Task, str, str]] = []
            for x, y in chosen:
                key = (x, y) if (x, y) in by_pair else (y, x)
                ts = by_pair.get(key) or []
                if ts:  # a pair with no task left to compare it on is passed over
                    batch.append((ts.pop(rng.randrange(len(ts))), key[0], key[1]))
            if not batch:  # every chosen pair is exhausted: take any open one
                key = rng.choice(sorted(p for p, ts in by_pair.items() if ts))
                ts = by_pair[key]
                batch.append((ts.pop(rng.randrange(len(ts))), key[0], key[1]))
            used += len(batch)
            coros = [
                self.judge_pair(
                    setting,
                    t,
                    x,
                    y,
                    j,
                    answers,
                    guide_of.get((t.meme.uid, t.level, x, y, j)),
                )
                for t, x, y in batch
                for j in self.acfg.judges
                if (t.meme.uid, t.level, x, y, j) in guide_of
            ]
            for jp in await asyncio.gather(*coros):
                out.judged.append(jp)
                out.battles.extend(self.battle_rows(setting, jp))
        return out

    async def run(self, settings: Sequence[str] | None = None) -> list[ArenaOutcome]:
        """The whole method; answers are shared, judging runs once per setting."""
        settings = list(settings or [self.acfg.setting])
        outcomes: list[ArenaOutcome] = []
        try:
            tasks, answers = await self.prepare()
            for setting in settings:
                guides = await self.guidelines(setting, tasks, answers)
                outcomes.append(await self.judge_all(setting, tasks, answers, guides))
                outcomes[-1].tasks = [(t.meme.uid, t.level) for t in tasks]
        except BudgetExceeded as e:
            stopped = ArenaOutcome(setting=settings[0], stopped=str(e))
            return [*outcomes, stopped]
        return outcomes


def _unique_memes(tasks: Iterable[Task]) -> list[Meme]:
    seen: dict[str, Meme] = {}
    for t in tasks:
        seen.setdefault(t.meme.uid, t.meme)
    return list(seen.values())


def load_human_guidelines(path: Path | None) -> dict[str, str]:
    """Read ``{"meme": id, "guideline": text}`` lines; a bad line is a one-line DataError."""
    if path is None:
        raise ConfigError("arena.human_guidelines: a file is needed for setting 'human'")
    out: dict[str, str] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror})") from None
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{n}: invalid JSON ({e.msg})") from None
        if not isinstance(row, dict):
            raise DataError(f"{path}:{n}: expected a JSON object")
        for fieldname in ("meme", "guideline"):
            if not isinstance(row.get(fieldname), str | int) or not str(row[fieldname]).strip():
                raise DataError(f"{path}:{n}: field {fieldname!r}: missing or empty")
        out[str(row["meme"])] = str(row["guideline"])
    return out
