"""What every Adapt stage shares: the run context, one idempotent step, and the output parsers.

A step's artifact key carries the request fingerprint (``ModelPool.request_key``), so a change
of model, prompt, input or parameters is recomputed and everything else is reused on a re-run.
Outputs come only from a well-formed JSON object (or, for scores, the scorer's own rating
field); two objects that disagree are a parse failure, never a guess: meme text or a quoted
answer that holds a forged object must not decide an outcome.
"""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Generator, Hashable, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any, TypeVar, cast

from memearena.config import RunConfig
from memearena.data import Meme, prepare_image
from memearena.engine.progress import StageProgress
from memearena.engine.steps import tally_step, unparsed_outcome
from memearena.errors import ConfigError, DataError, ParseError
from memearena.jsonsafe import loads_bounded
from memearena.methods.adapt.config import AdaptConfig
from memearena.models import ModelPool
from memearena.models.types import GenParams, ImagePart, Message
from memearena.prompts import ask, build_messages, extract_json_objects
from memearena.prompts.parsers import final_block
from memearena.store import RunStore, artifact_key

__all__ = [
    "AdaptContext",
    "Category",
    "Vote",
    "gather_steps",
    "name_filter",
    "parse_check",
    "parse_fits",
    "parse_instruction",
    "parse_judgement",
    "parse_misbelief",
    "parse_reference_choice",
    "parse_rewrite",
    "parse_text",
    "parse_vote",
]

T = TypeVar("T")

_MAX_FIELD = 4000
_MAX_BLOCK = 50_000

STEP_MEMO_SIZE = 2048
"""Steps whose outcome a run keeps in memory by their inputs (least recently used dropped)."""

PROMPT_MEMO_SIZE = 256
"""Rendered prompts a run keeps by their inputs (least recently used dropped): the steps that
differ only in their parameters (a reference's candidates, a target's repeats) render theirs
once."""

_SCALARS = (int, float, bool, type(None))


def _frozen(value: object) -> Hashable:
    """A prompt variable as a hashable value that equals another's only if both render the
    same (types kept: ``1``, ``1.0`` and ``True`` render differently); TypeError for a value
    of another kind (its step is then not memoised)."""
    t = type(value)
    if t is str:
        return value  # type: ignore[return-value]
    if t in _SCALARS:
        return (t, value)
    if t is list or t is tuple:
        return (t, *[v if type(v) is str else _frozen(v) for v in value])  # type: ignore[attr-defined]
    if t is dict:
        items = value.items()  # type: ignore[attr-defined]
        return (dict, *[(k, v if type(v) is str else _frozen(v)) for k, v in items])
    raise TypeError(t.__name__)


def _vars_key(vars: dict[str, Any]) -> Hashable | None:
    """A step's prompt variables as one hashable key (None: a variable of another kind)."""
    try:
        return (
            *vars,
            *[v if v is None or type(v) is str else _frozen(v) for v in vars.values()],
        )
    except TypeError:
        return None


@dataclass(frozen=True)
class Category:
    """One category of a taxonomy version, with the instruction targets answer for it."""

    name: str
    description: str
    instruction: str
    origin: str = "seed"
    """``seed`` (configured) or ``mined`` (proposed by the miner and kept by every filter)."""


@dataclass
class AdaptContext:
    """The run a stage works in: config, memes, model pool, store, images."""

    cfg: RunConfig
    pool: ModelPool
    store: RunStore
    progress: StageProgress = field(default_factory=lambda: StageProgress(enabled=False))
    on_image: Callable[..., None] | None = None
    """Called with (image hash, meme text[, caption shown in the image]) for every image sent
    (the simulator's lookup: which meme an image is of, and what text it shows)."""
    dry_run: bool = False
    """A dry run: stand-ins replace work that costs no model call (the eraser)."""
    refine_images: Any = None
    """Each meme's refine image (``erase.RefineImages``), made on first use."""
    _images: dict[str, ImagePart | None] = field(default_factory=dict)
    _files: dict[tuple[object, ...], ImagePart] = field(default_factory=dict)
    _inflight: dict[tuple[str, str], list[asyncio.Future[Any]]] = field(default_factory=dict)
    """Steps being called, each with the callers that reached it meanwhile (they wait for it)."""
    _had_kind: dict[str, bool] = field(default_factory=dict)
    _written: set[int] = field(default_factory=set)
    """Steps this run stored (their fingerprints' first 64 bits)."""
    _memo: OrderedDict[Hashable, _Memo] = field(default_factory=OrderedDict)
    _prompts: OrderedDict[Hashable, list[Message]] = field(default_factory=OrderedDict)
    _params: dict[tuple[object, ...], GenParams] = field(default_factory=dict)
    _memo_gen: int = 0
    """Bumped whenever ``_memo`` gains a key or an outcome (a look-up's result still holds
    while it is unchanged)."""
    drawn: OrderedDict[tuple[str, str], ImagePart] = field(default_factory=OrderedDict)
    """Texts drawn into images (``render_text``), by (image hash, text): drawn once each."""

    def __post_init__(self) -> None:
        # The closing line counts Adapt's steps by kind (the lifecycle's tally), so its bars
        # do too: each step reached grows its kind's bar and is advanced as the tally counts it.
        self.progress.by_step_kind()
        # A registered section is an extra field of the config (read through pydantic's
        # __getattr__): read once, as the config does not change during a run.
        self._acfg: AdaptConfig | None = self.cfg.adapt

    @property
    def acfg(self) -> AdaptConfig:
        """The ``adapt:`` section."""
        got = self._acfg
        if got is None:
            raise ConfigError("config: 'adapt' section is missing")
        return got

    def image(self, meme: Meme) -> ImagePart | None:
        """The meme's prepared image (computed once per meme; DataError on a bad image)."""
        uid = meme.uid
        images = self._images
        if uid in images:
            return images[uid]
        if meme.image_path is None:
            images[uid] = None
            return None
        part = images[uid] = self.prepared(meme.image_path)
        if self.on_image is not None:
            self.on_image(part.sha256, meme.text)
        return part

    def prepared(self, path: Path) -> ImagePart:
        """The image file prepared for a request, encoded once per file state in a run (memes
        that share a file share its encoding; a file changed on disk is encoded afresh)."""
        try:
            st = path.stat()
            state: tuple[object, ...] | None = (str(path), st.st_size, st.st_mtime_ns)
        except OSError:
            state = None  # prepare_image names the problem
        got = self._files.get(state) if state is not None else None
        if got is None:
            img = prepare_image(path, self.cfg.image)
            got = ImagePart(img.data_url, img.sha256)
            if state is not None:
                self._files[state] = got
        return got

    def repeat_params(self, repeat: int, **extra: Any) -> GenParams:
        """Sampling parameters of one repeated seed (the seed changes the request, so a cached
        answer of another repeat is never replayed); one object per distinct value."""
        k = (repeat, *extra.items())
        got = self._params.get(k)
        if got is None:
            got = self._params[k] = GenParams(seed=self.cfg.seed * 1000 + repeat, **extra)
        return got

    def params(self, **fields: Any) -> GenParams:
        """``GenParams(**fields)``, one object per distinct value in a run (the same parameters
        are asked for again and again: a reference candidate's, a rewrite attempt's)."""
        k = ("params", *fields.items())
        got = self._params.get(k)
        if got is None:
            got = self._params[k] = GenParams(**fields)
        return got

    def _may_be_stored(self, kind: str, short: int) -> bool:
        """Whether the store may hold the step (``short``: its fingerprint's first 64 bits): it
        held steps of ``kind`` when the run first asked, or this run stored this one (a fresh
        run's steps need no look-up)."""
        had = self._had_kind.get(kind)
        if had is None:
            had = self._had_kind[kind] = self.store.count_artifacts(kind) > 0
        return had or short in self._written

    def _messages(
        self,
        prompt_key: Hashable | None,
        template: str,
        image: ImagePart | None,
        vars: dict[str, Any],
        images: Sequence[ImagePart] = (),
    ) -> list[Message]:
        """The request's messages, rendered once per distinct prompt among the latest ones:
        the same inputs render the same text, and sharing the message objects lets the model
        layer encode each of them once."""
        if prompt_key is None:
            return _with_images(build_messages(template, image=image, **vars), images)
        prompts = self._prompts
        got = prompts.get(prompt_key)
        if got is not None:
            prompts.move_to_end(prompt_key)
            return got
        got = prompts[prompt_key] = _with_images(
            build_messages(template, image=image, **vars), images
        )
        if len(prompts) > PROMPT_MEMO_SIZE:
            prompts.popitem(last=False)
        return got

    async def _join(self, key: tuple[str, str]) -> Any:
        """The outcome of the step ``key`` in flight, once its caller has it (``_ABANDONED``:
        that caller was cancelled before the step ended)."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._inflight[key].append(fut)
        return await fut

    def step(
        self,
        kind: str,
        parts: Sequence[object],
        model: str,
        role: str,
        template: str,
        parser: Callable[[str], T],
        encode: Callable[[T], dict[str, Any]],
        *,
        image: ImagePart | None = None,
        images: Sequence[ImagePart] = (),
        params: GenParams | None = None,
        max_reasks: int | None = None,
        required: bool = False,
        **vars: Any,
    ) -> Awaitable[dict[str, Any] | None]:
        """One idempotent agent call (``run_step``) keyed by the request's fingerprint; the
        artifact also records the model and ``parts`` (what the step was for), so lineage names
        who wrote what. ``required``: an output that stays unparseable is asked again on a
        re-run, never stored as final. ``images``: more images after ``image`` (in order).
        Await it (or pass several to ``gather_steps``): a step
        this run already answered is ready at once and never suspends its caller."""
        acfg = self.acfg
        if acfg.sim.null_world:
            # The null world replies differently to the same request: keep its steps apart.
            parts = (*parts, "null-world")
        reasks = acfg.max_reasks if max_reasks is None else max_reasks
        # The same inputs render the same request, so they are the same step: a step reached
        # again (a loop and its control, one rewrite reached by several chains) is answered
        # from this run's own outcome without rendering its prompt again. Only a stored
        # outcome is kept: a failure is asked again, as the store would have it.
        sha: object = image and image.sha256
        if images:
            sha = (sha, *[p.sha256 for p in images])
        vkey = _vars_key(vars)
        memo_key = (
            None
            if vkey is None
            else (kind, model, role, template, sha, params, reasks, required, vkey)
        )
        memo_gen = self._memo_gen
        if memo_key is not None:
            seen = self._memo.get(memo_key)
            if seen is not None:
                if seen.outcome is not None:
                    self._memo.move_to_end(memo_key)
                    tally_step(kind, "again")
                    return _Ready(seen.outcome)
                memo_gen = -1  # in flight: ``_step`` joins it
        return self._step(
            memo_key, kind, parts, model, role, template, parser, encode, image, params, reasks,
            required, vars, None if vkey is None else (template, sha, vkey), tuple(images),
            memo_gen,
        )  # fmt: skip

    async def _step(
        self,
        memo_key: Hashable | None,
        kind: str,
        parts: Sequence[object],
        model: str,
        role: str,
        template: str,
        parser: Callable[[str], T],
        encode: Callable[[T], dict[str, Any]],
        image: ImagePart | None,
        params: GenParams | None,
        reasks: int,
        required: bool,
        vars: dict[str, Any],
        prompt_key: Hashable | None,
        images: Sequence[ImagePart],
        memo_gen: int,
    ) -> dict[str, Any] | None:
        # ``memo_gen``: the memo's generation when ``step`` looked the key up; unchanged, that
        # look-up still holds (a step awaited at once), so it is not made again.
        if memo_key is not None and memo_gen != self._memo_gen:
            seen = self._memo.get(memo_key)
            if seen is not None:
                if seen.outcome is not None:  # answered since this step was asked for
                    self._memo.move_to_end(memo_key)
                    tally_step(kind, "again")
                    return seen.outcome
                if seen.key in self._inflight:  # being called: wait for it
                    got = await self._join(seen.key)
                    if got is not _ABANDONED:
                        tally_step(kind, "again")  # not called again, as a memo hit
                        return cast("dict[str, Any] | None", got)
                if self._memo.get(memo_key) is seen:
                    del self._memo[memo_key]
        messages = self._messages(prompt_key, template, image, vars, images)
        fingerprint = self.pool.request_key(model, messages, params)
        # The request's fingerprint is the key: one request is one step, whichever stage or
        # item reaches it (a rewrite that equals another text reuses that text's answer).
        key = (kind, fingerprint)
        # Two chains can reach the same step at once (a loop and its control share their first
        # rewrite): the later one waits for the first one's call, so nothing is paid twice
        # even with the cache off; if that caller is cancelled, the step is called afresh.
        inflight = self._inflight
        while key in inflight:
            got = await self._join(key)
            if got is not _ABANDONED:
                tally_step(kind, "again")
                return cast("dict[str, Any] | None", got)
        waiting: list[asyncio.Future[Any]] = []
        inflight[key] = waiting
        short = int(fingerprint[:16], 16)
        memo: _Memo | None = None
        if memo_key is not None:
            memo = self._memo[memo_key] = _Memo(key)
            self._memo_gen += 1
            if len(self._memo) > STEP_MEMO_SIZE:
                self._memo.popitem(last=False)
        progress = self.progress
        progress.reach(kind)
        counted = False
        try:
            # ``run_step`` (look-up, call, tally, queued commit), written out here: the step
            # that every Adapt call goes through.
            store = self.store
            got = None
            if self._may_be_stored(kind, short):
                got = store.get_artifact(kind, fingerprint)
            if got is not None:
                counted = True
                tally_step(kind, "reused")
                progress.made(kind, "reused")
            else:
                res = await ask(
                    self.pool,
                    model,
                    role,
                    messages,
                    parser,
                    max_reasks=reasks,
                    params=params,
                    key=fingerprint,
                )
                if res.value is not None:
                    # The reply itself is on record with its call (``calls.response``): the
                    # artifact keeps what the stages read, not a second copy of it.
                    value: dict[str, Any] | None = {
                        "model": model,
                        "for": artifact_key(*parts),
                        **encode(res.value),
                    }
                    error = None
                else:
                    value, error = unparsed_outcome(res, required=required)
                how = "new" if value is not None else "failed"
                counted = True
                tally_step(kind, how)
                progress.made(kind, how)
                # The key was found absent before the call (or could not be stored yet).
                got = await store.commit_step(
                    kind, fingerprint, value, error=error, clear_error=error is None, absent=True
                )
        except BaseException as e:
            if not counted:  # stopped before the tally counted it: not a step of this run
                progress.unreach(kind)
            del inflight[key]
            for w in waiting:
                if not w.done():
                    if isinstance(e, asyncio.CancelledError):
                        w.set_result(_ABANDONED)
                    else:
                        w.set_exception(e)
            raise
        del inflight[key]
        if got is not None:
            self._written.add(short)
            if memo is not None:
                memo.outcome = got
                self._memo_gen += 1
        for w in waiting:
            if not w.done():  # a caller cancelled while it waited is not woken
                w.set_result(got)
        return got


def _with_images(messages: list[Message], images: Sequence[ImagePart]) -> list[Message]:
    """``messages`` with ``images`` added to the user message, after its own image (if any)."""
    if not images:
        return messages
    out: list[Message] = []
    for m in messages:
        if m.role == "user":
            parts = list(m.content)
            at = next((i + 1 for i, p in enumerate(parts) if isinstance(p, ImagePart)), 0)
            m = Message(m.role, (*parts[:at], *images, *parts[at:]))
        out.append(m)
    return out


class _Ready:
    """A step's outcome known when it was asked for: awaiting it returns at once."""

    __slots__ = ("value",)

    def __init__(self, value: dict[str, Any] | None) -> None:
        self.value = value

    def __await__(self) -> Generator[Any, None, dict[str, Any] | None]:
        return self.value
        yield  # a generator that never suspends


async def gather_steps(
    steps: Sequence[Awaitable[dict[str, Any] | None]],
) -> list[dict[str, Any] | None]:
    """The outcomes of ``steps`` (from ``AdaptContext.step``), in order, the ones still to call
    running concurrently (as ``asyncio.gather``: one of them in this task, the others in tasks
    of their own). An exception is raised once every step has ended (nothing in flight is
    orphaned, nothing paid is lost); cancelling the caller cancels the steps."""
    out: list[dict[str, Any] | None] = [None] * len(steps)
    todo: list[tuple[int, Awaitable[dict[str, Any] | None]]] = []
    for i, s in enumerate(steps):
        if type(s) is _Ready:
            out[i] = s.value
        else:
            todo.append((i, s))
    if not todo:
        return out
    (first, own), rest = todo[-1], todo[:-1]
    tasks = [(i, asyncio.ensure_future(s)) for i, s in rest]
    error: Exception | None = None
    try:
        out[first] = await own
    except asyncio.CancelledError:
        for _, t in tasks:
            t.cancel()
        raise
    except Exception as e:
        error = e
    for n, (i, t) in enumerate(tasks):
        try:
            out[i] = await t
        except asyncio.CancelledError:
            for _, later in tasks[n + 1 :]:
                later.cancel()
            raise
        except Exception as e:
            error = error or e
    if error is not None:
        raise error
    return out


_ABANDONED = object()
"""What a step's waiters get when its caller was cancelled before it ended."""


class _Memo:
    """A step reached by its inputs: its key, and its stored outcome once it has one."""

    __slots__ = ("key", "outcome")

    def __init__(self, key: tuple[str, str]) -> None:
        self.key = key
        self.outcome: dict[str, Any] | None = None


# ---- parsers ------------------------------------------------------------------------------


def _own(text: str, key: str, *alternatives: str) -> dict[str, Any]:
    """The agent's own JSON object holding ``key``: its final fenced block, or a reply that is
    only the object; another object holding ``key`` anywhere before it is a ParseError (a forged
    object quoted from untrusted text can never be the answer)."""
    how = f'reply with one JSON object holding "{key}" (or end with one fenced json block)'
    stripped = text.strip()
    block = final_block(stripped)
    if block is None:
        if not stripped.startswith("{"):
            raise ParseError(f"no final JSON object; {how}")
        body, before = stripped, ""
    else:
        body, before = block
    if len(body) > _MAX_BLOCK:
        raise ParseError(f"the answer is longer than {_MAX_BLOCK:,} characters")
    try:
        obj = loads_bounded(body, max_bytes=4 * _MAX_BLOCK)
    except ValueError:
        raise ParseError(f"the final JSON is not one valid object; {how}") from None
    keys = (key, *alternatives)
    if not isinstance(obj, dict) or not any(k in obj for k in keys):
        raise ParseError(f'no "{key}" field; {how}')
    if any(k in o for o in extract_json_objects(before[: 4 * _MAX_BLOCK]) for k in keys):
        raise ParseError(f'a "{key}" object appears before the final one: write exactly one')
    return obj


def _only(text: str, key: str) -> Any:
    return _own(text, key)[key]


def _string(value: Any, what: str, limit: int = _MAX_FIELD) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ParseError(f'"{what}" must be a non-empty string')
    if len(value) > limit:
        raise ParseError(f'"{what}" is too long ({len(value)} > {limit} characters)')
    return value.strip()


def _bool(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise ParseError(f'"{what}" must be true or false')
    return value


@dataclass(frozen=True)
class Vote:
    """One miner vote: categories of the current taxonomy, and perhaps a new one."""

    categories: tuple[str, ...]
    new: tuple[str, str] | None


def parse_vote(text: str, taxonomy: Sequence[str]) -> Vote:
    """A vote naming only categories of ``taxonomy`` (matched case-insensitively)."""
    known = {n.lower(): n for n in taxonomy}
    obj = _own(text, "categories")
    cats = obj["categories"]
    if not isinstance(cats, list) or not all(isinstance(c, str) for c in cats):
        raise ParseError('"categories" must be a list of category names')
    chosen: list[str] = []
    for c in cats:
        name = known.get(c.strip().lower())
        if name is None:
            raise ParseError(f"unknown category {c[:40]!r}; propose it as new_category instead")
        if name not in chosen:
            chosen.append(name)
    new = None
    raw_new = obj.get("new_category")
    if raw_new is not None:
        if not isinstance(raw_new, dict):
            raise ParseError('"new_category" must be null or {"name", "description"}')
        new = (
            _string(raw_new.get("name"), "new_category.name", 60),
            _string(raw_new.get("description"), "new_category.description", 300),
        )
    return Vote(tuple(chosen), new)


def parse_judgement(text: str) -> dict[str, Any]:
    """The text judge's verdict on a proposed category (accepted only if unique, of the right
    granularity, with no overlap, and accepted)."""
    obj = _own(text, "accept")
    accept = _bool(obj["accept"], "accept")
    unique = _bool(obj.get("unique"), "unique")
    granularity = _bool(obj.get("granularity"), "granularity")
    overlaps = obj.get("overlaps") or []
    if not isinstance(overlaps, list):
        raise ParseError('"overlaps" must be a list')
    return {
        "accept": accept and unique and granularity and not overlaps,
        "unique": unique,
        "granularity": granularity,
        "overlaps": [str(o)[:60] for o in overlaps],
        "reason": str(obj.get("reason", ""))[:300],
    }


def parse_fits(text: str) -> bool:
    """The image examiner's verdict."""
    return _bool(_only(text, "fits"), "fits")


def parse_instruction(text: str) -> str:
    """A generated category instruction."""
    return _string(_only(text, "instruction"), "instruction", 1500)


_META = re.compile(r"\b(meme|memes|image|picture|caption)\b", re.I)


def parse_misbelief(text: str, meme_text: str) -> str:
    """A standalone misbelief: one statement that does not mention the meme or quote it."""
    belief = _string(_only(text, "misbelief"), "misbelief", 600)
    if _META.search(belief):
        raise ParseError("state the belief itself, without mentioning the meme or its image")
    words = meme_text.lower().split()
    low = " ".join(belief.lower().split())
    for i in range(len(words) - 5):
        if " ".join(words[i : i + 6]) in low:
            raise ParseError("do not quote the meme's text; state the general belief")
    return belief


def parse_text(text: str) -> str:
    """Any non-empty free-text answer."""
    if not text.strip():
        raise ParseError("empty answer")
    return text.strip()


def parse_reference_choice(text: str, n: int) -> int | str:
    """A candidate number (0-based on return) or a better reference the judge wrote."""
    obj = _own(text, "choice", "better")
    if "better" in obj and obj["better"] is not None:
        return _string(obj["better"], "better")
    choice = obj.get("choice")
    if not isinstance(choice, int) or isinstance(choice, bool) or not 1 <= choice <= n:
        raise ParseError(f'"choice" must be a candidate number from 1 to {n}')
    return choice - 1


def parse_rewrite(text: str, original: str = "") -> tuple[str, str]:
    """The refiner's rewrite (which must change the text) and its explanation."""
    obj = _own(text, "rewrite")
    rewrite = _string(obj["rewrite"], "rewrite", 400)
    if " ".join(rewrite.lower().split()) == " ".join(original.lower().split()):
        raise ParseError("the rewrite is the original text; change the wording")
    return rewrite, str(obj.get("explanation", ""))[:600]


def parse_check(text: str) -> tuple[bool, str]:
    """The checker's verdict: does the rewrite still carry the misbelief?"""
    obj = _own(text, "carries_misbelief")
    carries = _bool(obj["carries_misbelief"], "carries_misbelief")
    return carries, str(obj.get("reason", ""))[:300]


# ---- the name filter of mined categories --------------------------------------------------

_NAME = re.compile(r"^[A-Za-z][A-Za-z-]*( [A-Za-z][A-Za-z-]*)?$")
_SUFFIXES = ("isms", "ism", "ists", "ist", "ness", "ies", "es", "s", "al", "ic")


def _stem(word: str) -> str:
    w = re.sub(r"[^a-z]", "", word.lower())
    for suf in _SUFFIXES:
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            return w[: -len(suf)]
    return w


def name_filter(name: str, existing: Sequence[str]) -> str | None:
    """Why a proposed category name is rejected (None: it passes). A name is one or two words
    of letters, and not a variant of an existing category (same stem, one containing the
    other, or nearly the same spelling)."""
    clean = " ".join(name.split())
    if not _NAME.match(clean):
        return "name must be one or two words of letters"
    stem = " ".join(_stem(w) for w in clean.split())
    for other in existing:
        o = " ".join(_stem(w) for w in other.split())
        if stem == o:
            return f"a variant of {other!r}"
        if len(min(stem, o, key=len)) >= 4 and (stem in o or o in stem):
            return f"a variant of {other!r}"
        if SequenceMatcher(None, stem, o).ratio() >= 0.85:
            return f"a variant of {other!r}"
    return None


def meme_or_error(ctx: AdaptContext, meme: Meme) -> ImagePart | DataError | None:
    """The meme's image, or the DataError that makes it unusable (recorded in the store)."""
    try:
        return ctx.image(meme)
    except DataError as e:
        ctx.store.record_error("meme", meme.uid, str(e))
        return e
