"""The Judge audit stages in order: responses → perturbed pairs → pointwise scores → classic biases.

Every model call is one idempotent step (``engine.steps.run_step``) whose artifact key
carries the request's fingerprint (``ModelPool.request_key``): a re-run resumes, a changed
prompt, image or parameter is recomputed, and identical requests (the unbiased triplet shared by
several bias types) are judged once. Jobs stream through ``capped_map`` windows and results are
folded into small records as they come. Refusals, abstentions and unparsed scores are recorded
outcomes, never numbers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import os
import random
import re
import threading
from collections import deque
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Sequence,
)
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from PIL import Image

from memearena.config import RunConfig
from memearena.data import Meme
from memearena.engine.progress import StageProgress
from memearena.engine.steps import capped_map, run_step, tally_step
from memearena.errors import BudgetExceeded, ConfigError, DataError, ParseError
from memearena.methods.judge_audit.classic import pad_response, position_pairs
from memearena.methods.judge_audit.config import JudgeAuditConfig
from memearena.methods.judge_audit.items import (
    AuditPair,
    integrality_check,
    meme_image,
    meme_query,
    pair_from_row,
    text_only_query,
    unbiased_for,
)
from memearena.methods.judge_audit.judge import (
    pairwise_messages,
    parse_pointwise,
    parse_preference,
    score_messages,
)
from memearena.methods.judge_audit.perturb import (
    IMAGE_VARIANTS,
    AuditImage,
    ImageStore,
    PerturbContext,
    SceneFingerprint,
    Triplet,
    image_variant,
    perturb,
    same_scene,
    scene_fingerprint,
)
from memearena.methods.judge_audit.records import (
    ScoreLog,
    ScoreRecord,
    VerdictLog,
    VerdictRecord,
)
from memearena.models import ModelPool
from memearena.models.types import Message
from memearena.prompts import ask, build_messages
from memearena.store import RunStore, artifact_key
from memearena.store.keyfilter import KeyFilter

T = TypeVar("T")
U = TypeVar("U")

__all__ = [
    "BaseItem",
    "JudgeAuditOutcome",
    "JudgeAuditPipeline",
    "ScoreRecord",
    "VerdictRecord",
]


@dataclass(frozen=True)
class BaseItem:
    """One meme answered by one responder: the unbiased triplet and what perturbing it needs."""

    meme: Meme
    responder: str
    triplet: Triplet
    text_query: str
    """The self-contained text-only question (the reference of ``unnecessary_image``)."""
    text_response: str | None = None
    """The responder's answer to ``text_query``, asked text-only (None when not needed)."""


@dataclass
class JudgeAuditOutcome:
    """What the audit produced: every scored pair and verdict logged as it arrives (spooled,
    not held: ``ScoreLog`` and ``VerdictLog`` read back in arrival order), and per item only
    what the report shows."""

    scores: ScoreLog = field(default_factory=ScoreLog)
    """Every scored pair (``ScoreRecord``s when iterated)."""
    verdicts: VerdictLog = field(default_factory=VerdictLog)
    """Every pairwise verdict (``VerdictRecord``s when iterated)."""
    examples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Per bias type: before/after examples (images by content hash) with every judge's scores."""
    families: dict[str, str] = field(default_factory=dict)
    """Model → family (name when none is configured)."""
    items: int = 0
    """Items audited (memes and MM-JudgeBias rows)."""
    covered: dict[str, float] = field(default_factory=dict)
    """``texture_insertion``: per item, the share of the image area the inserted text covers."""
    integrality_excluded: dict[str, int] = field(default_factory=dict)
    """Per bias type: pairs left out because the item does not need what the type removes."""
    donor_checks: dict[str, int] = field(default_factory=dict)
    """The donors' relatedness check: donors kept, draws rejected (same scene, same target
    group), items left without an unrelated donor."""
    stopped: str | None = None
    """Why the run stopped early (budget), if it did."""


def _status(art: dict[str, Any] | None) -> tuple[float | None, str]:
    if art is None:
        return None, "error"
    if art.get("refusal"):
        return None, "refusal"
    if "error" in art:
        return None, "unparsed"
    if art.get("abstained"):
        return None, "abstained"
    score = art["score"]  # one decimal is allowed: never truncated to an int
    return (score if isinstance(score, int) else float(score)), "ok"


def _encode_score(v: Any, _res: Any) -> dict[str, Any]:
    return {"score": v.value, "abstained": v.value is None, "feedback": v.feedback}


def _encode_preference(v: Any, _res: Any) -> dict[str, Any]:
    return {"preference": v}


class _Request:
    """A step's request to one judge: its messages, and its step key once computed. Keyed
    just before it is sent, its payload is still in the pool's memo (not built and hashed a
    second time); shared by identical steps, it is keyed once for all of them."""

    __slots__ = ("judge", "key", "msgs", "request", "shown")

    def __init__(self, judge: str, msgs: list[Message], shown: tuple[str, ...] = ()) -> None:
        self.judge = judge
        self.msgs = msgs
        self.key: str | None = None
        self.request: str | None = None  # its request key (calls.request_hash), with ``key``
        self.shown = shown  # the untrusted texts in it: a rating quoted from them is not one


_Judged = tuple[str, tuple[dict[str, Any] | None, ...], tuple[str | None, str | None]]
"""One judge's scores of a pair: ``(judge, (unbiased, biased artifact), (their request keys))``."""

_LOOKUP_CHUNK = 480
"""Score steps looked up in the store at a time (one query)."""

_Variant = tuple[AuditImage | None, dict[str, str]] | str
"""``image_variant``'s answer: the variant image and notes, or why it cannot be built."""


def image_workers() -> int:
    """Worker threads for the audit's image work: the cores, at most 4 (0: on the loop)."""
    return min(4, os.cpu_count() or 1)


def _text(text: str) -> str:
    if not text.strip():
        raise ParseError("empty reply")
    return text.strip()


class JudgeAuditPipeline:
    """Runs the audit over memes and MM-JudgeBias pairs with one pool and one store."""

    def __init__(
        self,
        cfg: RunConfig,
        memes: Sequence[Meme],
        rows: Sequence[Any],
        pool: ModelPool,
        store: RunStore,
        image_dir: Path,
        progress: StageProgress | None = None,
        *,
        workers: int | None = None,
    ) -> None:
        if cfg.judge_audit is None:
            raise ConfigError("config: 'judge_audit' section is missing")
        self.cfg = cfg
        self.acfg: JudgeAuditConfig = cfg.judge_audit
        self.memes = list(memes)
        self.rows = list(rows)
        self.pool = pool
        self.store = store
        self.images = ImageStore(image_dir)
        self.progress = progress or StageProgress(enabled=False)
        # Image work (originals, variants, scene fingerprints) runs in this many threads while
        # the loop keeps the calls going (0: on the loop). Every result is a pure function of
        # the item, so where it runs never changes a byte, a key or a figure.
        self.workers = image_workers() if workers is None else workers
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._variants: dict[tuple[str, str], concurrent.futures.Future[_Variant]] = {}
        self._scenes: dict[str, concurrent.futures.Future[SceneFingerprint]] = {}
        describer = self.acfg.describer_model()
        if self.memes and "detail_description" in self.acfg.bias_types and describer is None:
            raise ConfigError(
                "judge_audit.describer: set the model that writes detail_description's image "
                "descriptions (every responder is an audited judge; a judge must not read "
                "descriptions it wrote)"
            )
        self.describer = describer or self.acfg.judges[0]
        self._descriptions: dict[str, str | None] = {}
        # A step in flight → the futures of the identical steps that joined it (most have none).
        self._joins: dict[tuple[str, str], list[asyncio.Future[dict[str, Any] | None]]] = {}
        # The latest finished steps' artifacts, oldest first (bounded by ``_keep``).
        self._recent: dict[tuple[str, str], dict[str, Any] | None] = {}
        self._finished: deque[tuple[str, str]] = deque()
        self._keep = max(64, 4 * self.acfg.window)
        self._stopped: BudgetExceeded | None = None
        self._started = KeyFilter()
        # Step kinds of which the store held no artifact before this run's first step (set by
        # ``run``): a key of such a kind that no step of this run started is not stored.
        self._unstored: frozenset[str] = frozenset()
        if self.memes and not self.acfg.responders:
            raise ConfigError(
                "judge_audit.responders: the data holds memes; name at least one model to "
                "answer their queries"
            )

    # ---------------------------------------------------------------- steps
    async def _step(
        self, kind: str, key: str, call: Any, encode: Any, *, lookup: bool = True
    ) -> dict[str, Any] | None:
        """``run_step``, with identical steps joined into one: a step in flight is awaited, and
        one that finished a moment ago is answered from memory (the unbiased triplet many bias
        types share is judged, paid for and looked up once)."""
        k = (kind, key)
        recent = self._recent
        if k in recent:
            tally_step(kind, "again")  # not made again: a step this run already counted
            return recent[k]
        joins = self._joins
        waiting = joins.get(k)
        if waiting is not None:
            # A future of its own: a joiner cancelled never cancels the step it joined.
            fut: asyncio.Future[dict[str, Any] | None] = asyncio.get_running_loop().create_future()
            waiting.append(fut)
            tally_step(kind, "again")
            return await fut
        # A step skips its own look-up when its key was absent from a batch look-up
        # (``lookup=False``) or when no step of its kind was stored before this run. Either
        # way the key can have been stored since only by a step of this run (one writer per
        # directory), and every step started is in ``_started``: then it is looked up after
        # all (a key the filter wrongly finds costs a look-up, never a second call).
        if self._started.add(k):
            lookup = True
        elif kind in self._unstored:
            lookup = False
        waiting = joins[k] = []
        try:
            art = await run_step(self.store, kind, key, call, encode, lookup=lookup)
        except BaseException as e:
            # Not remembered: a re-ask after a failure goes to the store (and the model) again.
            del joins[k]
            cancelled = isinstance(e, asyncio.CancelledError)
            for w in waiting:
                if not w.done():
                    if cancelled:
                        w.cancel()
                    else:
                        w.set_exception(e)
            raise
        del joins[k]
        for w in waiting:
            if not w.done():
                w.set_result(art)
        # Bounded: only the latest finished steps are remembered (the window's worth).
        recent[k] = art
        finished = self._finished
        finished.append(k)
        if len(finished) > self._keep:
            recent.pop(finished.popleft(), None)
        return art

    async def _window(
        self, fn: Callable[[T], Awaitable[U]], items: Iterable[T], window: int
    ) -> AsyncIterator[tuple[T, U]]:
        """``capped_map`` with the audit's own record of a stop (``_stopped``, which its jobs
        also set when they catch the cap between judges): once the spend cap stops the pool no
        further job starts, the jobs in flight finish, then BudgetExceeded."""

        async def job(item: T) -> U:
            try:
                return await fn(item)
            except BudgetExceeded as e:
                self._stopped = self._stopped or e
                raise

        async for pair in capped_map(job, items, window, stopped=lambda: self._stopped):
            yield pair

    async def _response(
        self,
        meme: Meme,
        responder: str,
        image: AuditImage | None,
        q: str,
        *,
        text_only: bool = False,
    ) -> str | None:
        if text_only:
            # The text-only item's answer is written for the text-only question, no image.
            msgs = build_messages("judge_audit/respond_text.j2", query=q)
        else:
            msgs = build_messages(
                "judge_audit/respond.j2",
                image=image.part() if image else None,
                meme_text=meme.text,
                query=q,
            )
        rk = self.pool.request_key(responder, msgs)
        art = await self._step(
            "ja_response",
            artifact_key(meme.uid, responder, rk),
            lambda: ask(self.pool, responder, "judge_audit.respond", msgs, _text, max_reasks=0),
            lambda v, _: {"text": v},
        )
        return art.get("text") if art else None

    async def _description(self, meme: Meme, image: AuditImage) -> str | None:
        msgs = build_messages("judge_audit/describe.j2", image=image.part())
        rk = self.pool.request_key(self.describer, msgs)
        art = await self._step(
            "ja_description",
            artifact_key(meme.uid, self.describer, rk),
            lambda: ask(
                self.pool,
                self.describer,
                "judge_audit.describe",
                msgs,
                _text,
                max_reasks=self.acfg.max_reasks,
            ),
            lambda v, _: {"text": v[:4000]},
        )
        return art.get("text") if art else None

    async def score(self, judge: str, triplet: Triplet) -> dict[str, Any] | None:
        """One judge's pointwise score of one triplet (stored; shared by identical requests)."""
        msgs = score_messages(triplet, self.acfg.prompt)
        return await self._score(judge, _Request(judge, msgs, (triplet.query, triplet.response)))

    def _key(self, request: _Request) -> str:
        """The step key of ``request`` (the judge and the request's fingerprint)."""
        key = request.key
        if key is None:
            judge = request.judge
            request.request = self.pool.request_key(judge, request.msgs)
            key = request.key = artifact_key(judge, request.request)
        return key

    async def _score(
        self, judge: str, request: _Request, *, lookup: bool = True
    ) -> dict[str, Any] | None:
        allow_na = self.acfg.prompt == "abstention"
        msgs, shown = request.msgs, request.shown
        art = await self._step(
            "ja_score",
            self._key(request),
            lambda: ask(
                self.pool,
                judge,
                "judge_audit.score",
                msgs,
                lambda t: parse_pointwise(
                    t, allow_na=allow_na, variant=self.acfg.prompt, shown=shown
                ),
                max_reasks=self.acfg.max_reasks,
            ),
            _encode_score,
            lookup=lookup,
        )
        self.progress.advance("judgments")
        return art

    async def prefer(self, judge: str, triplet: Triplet, a: str, b: str) -> str | None:
        """One judge's pairwise preference (``A``/``B``/``tie``; None when there is none)."""
        msgs = pairwise_messages(triplet, a, b, self.acfg.pairwise_prompt)
        return await self._prefer(judge, _Request(judge, msgs))

    async def _prefer(self, judge: str, request: _Request, *, lookup: bool = True) -> str | None:
        msgs = request.msgs
        art = await self._step(
            "ja_pairwise",
            self._key(request),
            lambda: ask(
                self.pool,
                judge,
                "judge_audit.pairwise",
                msgs,
                lambda t: parse_preference(t, self.acfg.pairwise_prompt),
                max_reasks=self.acfg.max_reasks,
            ),
            _encode_preference,
            lookup=lookup,
        )
        self.progress.advance("pairwise")
        return art.get("preference") if art else None

    # ---------------------------------------------------------------- stage 1
    async def prepare(self) -> list[BaseItem]:
        """Every meme's image, query, each responder's answer and (when needed) the image
        description; an unusable meme is recorded and left out."""
        acfg = self.acfg
        want_text = "unnecessary_image" in acfg.bias_types
        per = len(acfg.responders) * (2 if want_text else 1)  # steps per meme
        self.progress.stage("responses", len(self.memes) * per)

        async def one(meme: Meme) -> list[BaseItem]:
            try:
                image = await self._off(meme_image, meme, self.images, self.cfg.image)
            except DataError as e:
                self.store.record_error("meme", meme.uid, str(e))
                self.progress.drop("responses", per)  # none of its steps is made
                return []
            q = meme_query(meme, acfg.queries, self.cfg.seed)
            tq = text_only_query(meme)
            out: list[BaseItem] = []
            for responder in acfg.responders:
                text = await self._response(meme, responder, image, q)
                self.progress.advance("responses")
                if text is None:
                    self.progress.drop("responses", 1 if want_text else 0)
                    continue
                if not out:
                    self._start_image_work(meme, image, q)
                t_text = (
                    await self._response(meme, responder, None, tq, text_only=True)
                    if want_text
                    else None
                )
                if want_text:
                    self.progress.advance("responses")
                out.append(BaseItem(meme, responder, Triplet(q, image, text), tq, t_text))
            if "detail_description" in acfg.bias_types and image is not None and out:
                self._descriptions[meme.uid] = await self._description(meme, image)
            return out

        bases: list[BaseItem] = []
        async for _, got in self._window(one, self.memes, max(1, acfg.window // 4)):
            bases.extend(got)
        bases.sort(key=lambda b: (b.meme.uid, b.responder))
        return bases

    async def _off(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the image workers (on the loop when there are none)."""
        if self._executor is None:
            return fn(*args)
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def _start_image_work(self, meme: Meme, image: AuditImage | None, query: str) -> None:
        """Starts, in the image workers, what the next stage will need of a meme that has a
        base item: its image variants (the types the integrality check keeps, as
        ``meme_pairs`` asks them) and its scene fingerprint. Only memes with a base item: an
        image stored that no pair uses would be a change to the run's files."""
        ex = self._executor
        if ex is None or image is None:
            return
        acfg = self.acfg
        pixels = _Pixels(image)  # decoded once, by the first of these jobs to run
        for bias_type in acfg.bias_types:
            if bias_type not in IMAGE_VARIANTS:
                continue
            if integrality_check(bias_type, query, meme.text) is not None:
                continue
            self._variants[(meme.uid, bias_type)] = ex.submit(
                _variant,
                pixels,
                bias_type,
                query,
                image,
                self.images.root,
                f"{self.cfg.seed}\x1f{bias_type}\x1f{meme.uid}",
                meme.text or meme.uid,
                acfg.texture_max_cover,
            )
        if DONOR_TYPES.intersection(acfg.bias_types) and image.sha256 not in self._scenes:
            self._scenes[image.sha256] = ex.submit(_scene, pixels)

    # ---------------------------------------------------------------- stage 2
    def _donor(self, uid: str, donors: _Donors, bias_type: str) -> Triplet | None:
        """Another meme's triplet, drawn by (seed, bias type, meme): never the item itself.
        For ``instruction_misalignment`` its query is that meme's own self-contained question
        (a query about other content); its image differs by content hash from this item's."""
        rng = random.Random(f"{self.cfg.seed}\x1fdonor\x1f{bias_type}\x1f{uid}")
        other = donors.draw(uid, rng)
        if other is None:
            return None
        if bias_type == "instruction_misalignment":
            return Triplet(other.text_query, other.triplet.image, other.triplet.response)
        return other.triplet

    def meme_pairs(
        self, bases: Sequence[BaseItem], outcome: JudgeAuditOutcome | None = None
    ) -> Iterator[AuditPair]:
        """Every base triplet × bias type as an audit pair (generated lazily); a pair that
        cannot be built for its item is recorded as an error and left out."""
        by_uid: dict[str, BaseItem] = {}
        for b in bases:
            by_uid.setdefault(b.meme.uid, b)
        donors = _Donors(
            by_uid,
            self.acfg.donor_group_field,
            known={sha: f.result() for sha, f in self._scenes.items()},
        )
        if outcome is not None:
            outcome.donor_checks = donors.checks  # counted as the pairs are generated
        memo_uid: str | None = None
        memo: dict[str, tuple[Triplet, dict[str, str]] | str] = {}
        for base in bases:
            for bias_type in self.acfg.bias_types:
                key = artifact_key(base.meme.uid, base.responder, bias_type)
                why = integrality_check(bias_type, base.triplet.query, base.meme.text)
                if why is not None:
                    # Counted, not scored: the pair would not test what its type means.
                    self.store.record_error("ja_integrality", key, why)
                    if outcome is not None:
                        n = outcome.integrality_excluded.get(bias_type, 0)
                        outcome.integrality_excluded[bias_type] = n + 1
                    continue
                ref = unbiased_for(bias_type, base.triplet, base.text_query, base.text_response)
                if ref is None:
                    self.store.record_error(
                        "ja_perturb", key, f"{bias_type}: no answer to the text-only question"
                    )
                    continue
                # A variant depends on the item, never on the response: build it once per
                # meme and reuse it for every responder (bases come sorted by meme).
                if memo_uid != base.meme.uid:
                    memo_uid, memo = base.meme.uid, {}
                got = memo.get(bias_type)
                made = self._variants.pop((base.meme.uid, bias_type), None)
                if got is None and made is not None:
                    # Built in the image workers (``image_variant``: the same generator on
                    # the same item with the same seed).
                    res = made.result()
                    if isinstance(res, str):
                        got = memo[bias_type] = res
                    else:
                        got = memo[bias_type] = (replace(ref, image=res[0]), res[1])
                if got is None:
                    ctx = PerturbContext(
                        store=self.images,
                        rng=random.Random(f"{self.cfg.seed}\x1f{bias_type}\x1f{base.meme.uid}"),
                        shows=base.meme.text or base.meme.uid,
                        donor=(
                            self._donor(base.meme.uid, donors, bias_type)
                            if bias_type in DONOR_TYPES
                            else None
                        ),
                        description=self._descriptions.get(base.meme.uid),
                        own_image=base.triplet.image,
                        max_cover=self.acfg.texture_max_cover,
                    )
                    try:
                        got = memo[bias_type] = (perturb(bias_type, ref, ctx), dict(ctx.notes))
                    except DataError as e:
                        got = memo[bias_type] = str(e)
                if isinstance(got, str):
                    self.store.record_error("ja_perturb", key, got)
                    continue
                biased, notes = got
                yield AuditPair(
                    base.meme.uid,
                    bias_type,
                    ref,
                    replace(biased, response=ref.response),
                    base.responder,
                    {"source": base.meme.source, **notes},
                )

    def row_pairs(self) -> Iterator[AuditPair]:
        """MM-JudgeBias rows as published (images re-encoded into the store)."""
        for row in self.rows:
            try:
                yield pair_from_row(row, self.images, self.cfg.image)
            except DataError as e:
                self.store.record_error("data", f"mm-judgebias:{row.id}", str(e))

    # ---------------------------------------------------------------- stage 3
    async def score_pairs(self, pairs: Iterator[AuditPair], out: JudgeAuditOutcome) -> None:
        """Both triplets of every pair by every judge, streamed through a bounded window."""
        judges = self.acfg.judges
        want_examples = self.acfg.examples
        candidates: dict[str, dict[str, dict[str, Any]]] = {}  # bias type → key → example

        scores, covered = out.scores, out.covered
        async for pair, done in self._scored(pairs):
            if not done:
                continue
            item, bias_type, responder = pair.item, pair.bias_type, pair.responder
            if "covered_share" in pair.meta:
                covered[item] = float(pair.meta["covered_share"])
            # Examples are the pairs with the smallest keys, not the first to finish: the
            # section must not change with completion order (a resume, a no-op re-run). The
            # largest kept key only falls, so a pair left out at its first score never
            # qualifies later, and a kept one collects every judge's scores.
            chosen = candidates.setdefault(bias_type, {})
            rank = _example_key(pair)
            match = chosen.get(rank)
            if (
                match is None
                and want_examples > 0
                and (len(chosen) < want_examples or rank < max(chosen))
            ):
                if len(chosen) >= want_examples:
                    del chosen[max(chosen)]
                match = chosen[rank] = _example(pair)
            judged = [(judge, *_status(u), *_status(b), *keys) for judge, (u, b), keys in done]
            scores.add_pair(item, bias_type, responder, judged)
            if match is not None:
                for judge, uv, us, bv, bs, *_keys in judged:
                    match["scores"][judge] = {"unbiased": uv, "biased": bv, "status": [us, bs]}
        order = {j: k for k, j in enumerate(judges)}
        for bias_type in sorted(candidates):
            examples = [candidates[bias_type][k] for k in sorted(candidates[bias_type])]
            for e in examples:
                e["scores"] = dict(sorted(e["scores"].items(), key=lambda kv: order[kv[0]]))
            out.examples[bias_type] = examples

    async def _scored(
        self, pairs: Iterator[AuditPair]
    ) -> AsyncIterator[tuple[AuditPair, list[_Judged]]]:
        """``(pair, [(judge, (unbiased artifact, biased artifact), (their request keys)), ...])``
        for every pair, as
        they finish (the judges it got to: all of them unless the spend cap stopped it). A job
        is one pair: its judges one after the other (each item starting at another judge, so
        the window's calls spread over the judges), each judge's two triplets side by side, at
        most ``window`` pairs, so ``2 x window`` calls, in flight. Each request is built once
        (a triplet's messages once for every judge, the unbiased triplet's requests once for
        every bias type sharing it), and the store is asked for a few hundred steps at a time,
        not step by step (not at all in a fresh audit: ``_step`` knows what this run stored)."""
        judges = self.acfg.judges
        Step = tuple[str, _Request, _Request, bool, bool]
        Job = tuple[AuditPair, list[Step]]
        per_chunk = max(1, _LOOKUP_CHUNK // (2 * len(judges)))

        def chunk_jobs(chunk: list[tuple[AuditPair, int]], shared: dict[Triplet, Any]) -> list[Job]:
            todo: list[tuple[AuditPair, list[tuple[str, _Request, _Request, bool]]]] = []
            for pair, turn in chunk:
                unbiased = shared.get(pair.unbiased)
                repeat = unbiased is not None
                if unbiased is None:
                    if len(shared) >= 4:
                        shared.clear()
                    unbiased = shared[pair.unbiased] = self._requests(pair.unbiased)
                biased = self._requests(pair.biased)
                order = judges[turn:] + judges[:turn]
                todo.append((pair, [(j, unbiased[j], biased[j], repeat) for j in order]))
            if "ja_score" in self._unstored:
                # Nothing to look up in a batch (``_step`` knows what is stored): each request
                # is keyed when it is sent.
                return [(p, [(j, u, b, True, True) for j, u, b, _r in steps]) for p, steps in todo]
            keys = [self._key(r) for _, steps in todo for step in steps for r in step[1:3]]
            stored = self.store.get_artifacts("ja_score", keys)
            # Only a request's first issue, looked up here and absent, is called without a
            # second look-up; a repeat (the unbiased triplet shared by an item's bias types)
            # joins the step in flight, or finds it in memory or in the store: never a
            # second call.
            fresh = set(keys).difference(stored)
            out: list[Job] = []
            for pair, steps in todo:
                marked: list[Step] = []
                for j, u, b, repeat in steps:
                    uk, bk = self._key(u), self._key(b)
                    u_look = repeat or uk not in fresh
                    fresh.discard(uk)
                    b_look = bk not in fresh
                    fresh.discard(bk)
                    marked.append((j, u, b, u_look, b_look))
                out.append((pair, marked))
            return out

        def jobs() -> Iterator[Job]:
            # The unbiased triplets of the latest pairs (pairs come grouped by item). An item's
            # pairs start at the same judge (their shared requests then coincide in time and
            # are joined), successive items at the next one.
            shared: dict[Triplet, Any] = {}
            chunk: list[tuple[AuditPair, int]] = []
            item, turn = None, -1
            for pair in pairs:
                if pair.item != item:
                    item, turn = pair.item, (turn + 1) % len(judges)
                chunk.append((pair, turn))
                if len(chunk) >= per_chunk:
                    yield from chunk_jobs(chunk, shared)
                    chunk = []
            if chunk:
                yield from chunk_jobs(chunk, shared)

        async def one(job: Job) -> list[_Judged]:
            done: list[_Judged] = []
            for judge, u_req, b_req, u_look, b_look in job[1]:
                if self._stopped is not None:
                    break
                got = await self._side_by_side(judge, u_req, b_req, u_look, b_look)
                u, b = got
                if not isinstance(u, Exception) and not isinstance(b, Exception):
                    done.append((judge, (u, b), (u_req.request, b_req.request)))
                    continue
                failed = [r for r in got if isinstance(r, BaseException)]
                stop = next((r for r in failed if isinstance(r, BudgetExceeded)), None)
                other = next((r for r in failed if not isinstance(r, BudgetExceeded)), None)
                if other is not None:
                    raise other
                if stop is not None:
                    # What this pair's judges finished is kept; ``_window`` ends the stage.
                    self._stopped = self._stopped or stop
                    break
                scored = tuple(r for r in got if not isinstance(r, BaseException))
                done.append((judge, scored, (u_req.request, b_req.request)))
            return done

        async for (pair, _steps), done in self._window(one, jobs(), self.acfg.window):
            yield pair, done

    async def _side_by_side(
        self, judge: str, u_req: _Request, b_req: _Request, u_look: bool, b_look: bool
    ) -> tuple[dict[str, Any] | Exception | None, dict[str, Any] | Exception | None]:
        """A judge's scores of a pair's two triplets, each failure as its exception (as
        ``gather(..., return_exceptions=True)``). They are asked side by side (neither depends
        on the other: the models' slots stay fuller than with one call per pair in flight):
        the biased in a task of its own while the unbiased is awaited here, so one task is made
        instead of gather's two and its future; none when the unbiased was answered a moment
        ago (answered from memory, nothing to wait for beside it)."""
        first: dict[str, Any] | Exception | None
        second: dict[str, Any] | Exception | None
        task = None
        if ("ja_score", self._key(u_req)) not in self._recent:
            task = asyncio.get_running_loop().create_task(self._score(judge, b_req, lookup=b_look))
        try:
            first = await self._score(judge, u_req, lookup=u_look)
        except Exception as e:
            first = e
        except BaseException:
            if task is not None:
                task.cancel()  # cancelled: the biased step goes with it, as under gather
            raise
        try:
            second = await (task or self._score(judge, b_req, lookup=b_look))
        except Exception as e:
            second = e
        return first, second

    def _requests(self, triplet: Triplet) -> dict[str, _Request]:
        """Every judge's pointwise request of ``triplet`` (one rendering for all of them)."""
        msgs = score_messages(triplet, self.acfg.prompt)
        shown = (triplet.query, triplet.response)
        return {j: _Request(j, msgs, shown) for j in self.acfg.judges}

    # ---------------------------------------------------------------- stage 4
    def _classic_rows(self) -> list[AuditPair]:
        """The MM-JudgeBias rows the classic biases are also measured on: ``classic_rows`` of
        them drawn with the run seed (in load order), as the unbiased triplet each shows."""
        n = min(len(self.rows), self.acfg.classic_rows)
        rng = random.Random(f"{self.cfg.seed}\x1fclassic-rows")
        picked = sorted(rng.sample(range(len(self.rows)), n))
        out: list[AuditPair] = []
        for i in picked:
            try:
                out.append(pair_from_row(self.rows[i], self.images, self.cfg.image))
            except DataError:
                continue  # recorded once, when the row's pair was scored
        return out

    async def classic(self, bases: Sequence[BaseItem], out: JudgeAuditOutcome) -> None:
        """Position (every responder pair, both orders) and verbosity (answer vs padded, both
        orders) verdicts of every judge; on MM-JudgeBias rows (``classic_rows``), verbosity of
        the row's own response (a row holds one response: position needs two)."""
        acfg = self.acfg
        by_meme: dict[str, list[BaseItem]] = {}
        for b in bases:
            by_meme.setdefault(b.meme.uid, []).append(b)
        jobs: list[tuple[str, str, Triplet, tuple[str, str], tuple[str, str]]] = []
        if "position" in acfg.classic:
            for uid, group in by_meme.items():
                answers = {b.responder: b.triplet.response for b in group}
                for x, y in position_pairs(list(answers)):
                    trip = group[0].triplet
                    jobs.append(("position", uid, trip, (x, answers[x]), (y, answers[y])))
        if "verbosity" in acfg.classic:
            for uid, group in by_meme.items():
                for b in group:
                    rng = random.Random(f"{self.cfg.seed}\x1fpad\x1f{uid}\x1f{b.responder}")
                    padded = pad_response(b.triplet.response, rng)
                    jobs.append(
                        (
                            "verbosity",
                            uid,
                            b.triplet,
                            ("original", b.triplet.response),
                            ("padded", padded),
                        )
                    )
        if "verbosity" in acfg.classic:
            for pair in self._classic_rows():
                t = pair.unbiased
                rng = random.Random(f"{self.cfg.seed}\x1fpad\x1f{pair.item}")
                padded = pad_response(t.response, rng)
                jobs.append(
                    ("verbosity", pair.item, t, ("original", t.response), ("padded", padded))
                )
        total = 2 * len(jobs) * len(acfg.judges)
        self.progress.stage("pairwise", total)

        Job = tuple[str, str, str, tuple[str, str], tuple[str, str], _Request, bool]

        def chunk_jobs(
            chunk: list[tuple[str, str, str, Triplet, tuple[str, str], tuple[str, str]]],
        ) -> list[Job]:
            variant = acfg.pairwise_prompt
            reqs = [
                _Request(j, pairwise_messages(t, x[1], y[1], variant))
                for j, _p, _u, t, x, y in chunk
            ]
            if "ja_pairwise" in self._unstored:  # as for scores: keyed when sent
                return [
                    (j, probe, uid, x, y, req, True)
                    for (j, probe, uid, _t, x, y), req in zip(chunk, reqs, strict=True)
                ]
            keys = [self._key(r) for r in reqs]
            # As for scores: only a request's first issue in the chunk, looked up here and
            # absent, skips the step's own look-up (identical answers make identical requests).
            fresh = set(keys).difference(self.store.get_artifacts("ja_pairwise", keys))
            out: list[Job] = []
            for (j, probe, uid, _t, x, y), req, key in zip(chunk, reqs, keys, strict=True):
                look = key not in fresh
                fresh.discard(key)
                out.append((j, probe, uid, x, y, req, look))
            return out

        def expand() -> Iterator[Job]:
            chunk: list[tuple[str, str, str, Triplet, tuple[str, str], tuple[str, str]]] = []
            for probe, uid, trip, x, y in jobs:
                for judge in acfg.judges:
                    chunk.append((judge, probe, uid, trip, x, y))
                    chunk.append((judge, probe, uid, trip, y, x))
                if len(chunk) >= _LOOKUP_CHUNK:
                    yield from chunk_jobs(chunk)
                    chunk = []
            if chunk:
                yield from chunk_jobs(chunk)

        async def one(job: Job) -> str | None:
            return await self._prefer(job[0], job[5], lookup=job[6])

        async for (judge, probe, uid, first, second, _r, _l), pref in self._window(
            one, expand(), acfg.window
        ):
            out.verdicts.add(
                judge,
                probe,
                uid,
                first[0],
                second[0],
                pref,
                len(first[1]),
                len(second[1]),
                _r.request,
            )

    # ---------------------------------------------------------------- driver
    async def run(self) -> JudgeAuditOutcome:
        """The whole audit (a budget stop keeps what was done and says why)."""
        out = JudgeAuditOutcome(
            families={n: (m.family or n) for n, m in self.cfg.models.items()},
        )
        self._unstored = _unstored_kinds(self.store)
        if self.workers > 0:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                self.workers, thread_name_prefix="judge-audit-image"
            )
        try:
            bases = await self.prepare()
            # The image work still running is awaited off the loop (nothing else runs now),
            # so ``meme_pairs`` finds it done.
            pending: list[concurrent.futures.Future[Any]] = [
                *self._variants.values(),
                *self._scenes.values(),
            ]
            if pending:
                await asyncio.wait([asyncio.wrap_future(f) for f in pending])
            n_meme_pairs = len(bases) * len(self.acfg.bias_types)
            self.progress.stage(
                "judgments", 2 * (n_meme_pairs + len(self.rows)) * len(self.acfg.judges)
            )
            out.items = len({b.meme.uid for b in bases}) + len(self.rows)
            await self.score_pairs(self.meme_pairs(bases, out), out)
            await self.score_pairs(self.row_pairs(), out)
            if (bases or self.rows) and self.acfg.classic:
                await self.classic(bases, out)
        except BudgetExceeded as e:
            out.stopped = str(e)
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=True, cancel_futures=True)
                self._executor = None
            self._variants.clear()
            self._scenes.clear()
        return out


_STEP_KINDS = ("ja_response", "ja_description", "ja_score", "ja_pairwise")
_BEGUN = "judge_audit.steps_begun"
"""Meta recorded before an audit's first step in a run directory."""


def _unstored_kinds(store: RunStore) -> frozenset[str]:
    """The step kinds of which ``store`` holds no artifact, when no audit has begun in it
    (none otherwise: a resumed audit looks its steps up). The mark is written before any step
    of this run, so a later run (after a kill too) never takes a stored step for a new one."""
    if store.get_meta(_BEGUN) is not None:
        return frozenset()
    # A directory written before the mark existed may hold steps: it is counted, once.
    empty = frozenset(k for k in _STEP_KINDS if store.count_artifacts(k) == 0)
    store.set_meta(_BEGUN, "1")
    return empty


DONOR_TYPES = frozenset({"instruction_misalignment", "image_misalignment", "unnecessary_image"})
"""The bias types that lend an item another meme's query or image."""
_GROUP_STOPWORDS = frozenset({"people", "men", "women", "with", "the", "of", "and", "a"})
_DONOR_TRIES = 64
"""Draws of a donor before an item is left without one (each rejected draw is counted)."""


def _group_words(value: Any) -> frozenset[str]:
    """A target group's distinctive words (``Drennish men`` and ``Drennish herd-leaders`` share
    ``drennish``)."""
    if not isinstance(value, str):
        return frozenset()
    words = re.findall(r"[a-z0-9]+", value.lower())
    return frozenset(w for w in words if w not in _GROUP_STOPWORDS and len(w) > 2)


class _Donors:
    """The memes a donor is drawn from, in load order: for each meme, another meme unrelated to
    it — its image differs by content hash and shows another scene (``same_scene``: perceptual
    hash and colour thumbnail), and its target group (the dataset field ``group_field`` in the
    meme's annotations) shares no word with this one's. A draw is uniform over the other memes,
    redrawn (and counted) while related, up to ``_DONOR_TRIES`` times."""

    def __init__(
        self,
        by_uid: dict[str, BaseItem],
        group_field: str | None,
        *,
        scenes: bool = True,
        known: dict[str, SceneFingerprint] | None = None,
    ) -> None:
        self.items = list(by_uid.values())
        self.at = {u: i for i, u in enumerate(by_uid)}
        self.by_image: dict[str, list[int]] = {}
        for i, b in enumerate(self.items):
            if b.triplet.image is not None:
                self.by_image.setdefault(b.triplet.image.sha256, []).append(i)
        self.group_field = group_field
        self.scenes = scenes
        """Whether draws showing the same scene are rejected (off: the content hash only)."""
        # Fingerprints already computed (``known``: by the image workers), by image hash.
        self._scenes: dict[str, SceneFingerprint] = dict(known or {})
        self.checks: dict[str, int] = {
            "drawn": 0,
            "rejected_same_scene": 0,
            "rejected_same_group": 0,
            "no_unrelated_donor": 0,
        }
        """What the relatedness check did: donors kept, draws rejected by reason, items left
        without a donor."""

    def _scene(self, i: int) -> SceneFingerprint | None:
        image = self.items[i].triplet.image
        if image is None:
            return None
        got = self._scenes.get(image.sha256)
        if got is None:
            got = self._scenes[image.sha256] = scene_fingerprint(image.load())
        return got

    def _related(self, me: int, other: int) -> str | None:
        if self.group_field:
            mine = _group_words(self.items[me].meme.annotations.get(self.group_field))
            theirs = _group_words(self.items[other].meme.annotations.get(self.group_field))
            if mine & theirs:
                return "rejected_same_group"
        if not self.scenes:
            return None
        a, b = self._scene(me), self._scene(other)
        if a is not None and b is not None and same_scene(a, b):
            return "rejected_same_scene"
        return None

    def _uniform(self, me: int | None, rng: random.Random) -> int | None:
        excluded: set[int] = set()
        if me is not None:
            image = self.items[me].triplet.image
            excluded = {me, *(self.by_image[image.sha256] if image is not None else ())}
        n = len(self.items) - len(excluded)
        if n <= 0:
            return None
        k = rng.randrange(n)
        # The k-th candidate: step over the excluded positions at or before it, in order.
        for e in sorted(excluded):
            if e <= k:
                k += 1
            else:
                break
        return k

    def draw(self, uid: str, rng: random.Random) -> BaseItem | None:
        """An unrelated meme for ``uid``, ``rng``-drawn (None if there is none)."""
        me = self.at.get(uid)
        for _ in range(_DONOR_TRIES):
            k = self._uniform(me, rng)
            if k is None:
                break
            why = self._related(me, k) if me is not None else None
            if why is None:
                self.checks["drawn"] += 1
                return self.items[k]
            self.checks[why] += 1
        self.checks["no_unrelated_donor"] += 1
        return None


class _Pixels:
    """An image's pixels, decoded once for all the image work on it (its variants and its scene
    fingerprint) by whichever job needs them first; freed with the last of those jobs (the
    executor drops a job's arguments once it has run). Never changed: see ``_need_image``."""

    __slots__ = ("_lock", "_pixels", "image")

    def __init__(self, image: AuditImage) -> None:
        self.image = image
        self._lock = threading.Lock()
        self._pixels: Image.Image | None = None

    def get(self) -> Image.Image:
        with self._lock:
            if self._pixels is None:
                self._pixels = self.image.load()
            return self._pixels


def _variant(
    pixels: _Pixels,
    bias_type: str,
    query: str,
    image: AuditImage | None,
    root: Path,
    seed: str,
    shows: str,
    max_cover: float,
) -> _Variant:
    """``image_variant`` on the item's shared decoded pixels (decoded inside it, if first)."""
    return image_variant(bias_type, query, image, root, seed, shows, max_cover, pixels.get)


def _scene(pixels: _Pixels) -> SceneFingerprint:
    return _fingerprint(pixels.image, pixels)


def _fingerprint(image: AuditImage, pixels: _Pixels | None = None) -> SceneFingerprint:
    return scene_fingerprint(image.load() if pixels is None else pixels.get())


def _example_key(pair: AuditPair) -> str:
    """A pair's rank among candidate examples: a hash of what it is (item, responder), so
    the examples spread over the dataset and do not depend on the order scores arrive in."""
    return hashlib.sha256(f"{pair.item}\x1f{pair.responder}".encode()).hexdigest()


def _example(pair: AuditPair) -> dict[str, Any]:
    def side(t: Triplet) -> dict[str, Any]:
        return {
            "query": t.query[:600],
            "image": t.image.sha256 if t.image is not None else None,
            "response": t.response[:600],
        }

    return {
        "item": pair.item,
        "responder": pair.responder,
        "unbiased": side(pair.unbiased),
        "biased": side(pair.biased),
        "construction": {k: v for k, v in pair.meta.items() if k != "source"},
        "scores": {},
    }
