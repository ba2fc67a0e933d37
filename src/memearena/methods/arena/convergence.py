"""Fusion convergence: the judge panel rates every fusion round's guideline.

With ``arena.rate_fusion_rounds``, once a meme's fusion chain is complete every panel judge
rates each distinct version of its guideline (the draft and every refinement) 1-3 on
MemeArena's five axes, one structured reply per (judge, meme, version). A round that left the
text unchanged is the same version: it shares the rating request of the round that wrote it.
Each rating is a step like the others (keyed by its request, reused on a re-run, counted by the
dry run); the member view ``RATINGS_VIEW`` maps each (meme, round, judge) to its rating.

Ratings come only from the judge's own final block: the guideline is untrusted text (a refiner
may have copied an analysis that carries a ratings object), so its ``"ratings":`` keys are
defanged in the prompt, a reply holding a ratings object before its final block is refused, and
a final block that repeats a ratings object written in the guideline is a copied forgery, a
parse failure (re-asked, then counted), never a rating.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from memearena.errors import ParseError
from memearena.models.types import Message
from memearena.prompts import AskResult, ask, build_messages
from memearena.prompts.parsers import extract_json_objects, own_object
from memearena.store import artifact_key

if TYPE_CHECKING:
    from memearena.methods.arena.config import ArenaConfig

__all__ = [
    "AXES",
    "KIND",
    "RATINGS_VIEW",
    "ROLE",
    "TEMPLATE",
    "defang_ratings",
    "expected_ratings",
    "parse_ratings",
    "rate_rounds",
]

AXES: tuple[str, ...] = (
    "readability",
    "informativeness",
    "soundness",
    "persuasiveness",
    "conciseness",
)
"""MemeArena's five guideline axes, each rated 1 (poor) to 3 (good) (the human labels' too)."""

ROLE = "arena.guideline_rating"
KIND = "guideline_rating"
TEMPLATE = "arena/guideline_rating.j2"
RATINGS_VIEW = "arena.guideline_ratings"
"""Member view of the panel's round ratings (coord: meme uid, round, judge; ref1: the rating)."""

_KEY = "ratings"
_SEP = "\x1f"
_SEQ_SHIFT = 32
# A JSON string literal short enough to decode to "ratings" (\uXXXX escapes included).
_SHORT_LITERAL = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})){1,60}"')
_AFTER_KEY = re.compile(r"\s*:")
_MAX_SCAN_CHARS = 2_000_000


def expected_ratings(acfg: ArenaConfig) -> int:
    """Most rating steps per meme (every round a distinct version): a progress total."""
    if not acfg.rate_fusion_rounds:
        return 0
    return len(acfg.judges) * (1 + acfg.fusion_rounds)


def defang_ratings(text: str) -> str:
    """``text`` with every ``"ratings":`` written as a JSON key given typographic quotes, so a
    judge that echoes the guideline cannot reproduce a ratings object from it."""
    chars: list[str] | None = None
    i = text.find('"')
    while i != -1:
        m = _SHORT_LITERAL.match(text, i)
        if m and _AFTER_KEY.match(text, m.end()):
            try:
                name = json.loads(m.group())
            except ValueError:
                name = None
            if name == _KEY:
                chars = chars if chars is not None else list(text)
                chars[i], chars[m.end() - 1] = "\u201c", "\u201d"
        i = text.find('"', i + 1)
    return text if chars is None else "".join(chars)


def _ratings_in(obj: Any, depth: int = 0) -> Iterator[Any]:
    """Every value of a ``ratings`` field in ``obj`` and in anything nested in it."""
    if depth > 64:
        yield None  # deeper than any answer asked for: suspect
        return
    if isinstance(obj, dict):
        if _KEY in obj:
            yield obj[_KEY]
        for v in obj.values():
            yield from _ratings_in(v, depth + 1)
    elif isinstance(obj, list):
        for v in obj:
            yield from _ratings_in(v, depth + 1)


def _written_ratings(text: str) -> list[Any]:
    """Every ratings object written anywhere in ``text`` (fenced or not, nested, escaped)."""
    if _KEY not in text and "\\u" not in text:
        return []
    out: list[Any] = []
    for obj in extract_json_objects(text[:_MAX_SCAN_CHARS]):
        out.extend(_ratings_in(obj))
    return out


def parse_ratings(text: str, *, quoted: Sequence[str] = ()) -> dict[str, int]:
    """The judge's ratings, 1-3 on every axis, from its final block ``{"ratings": {...}}`` (or a
    reply that is only that object); ParseError otherwise. ``quoted``: the raw texts the judge
    was shown (the guideline, the meme's text): a final block repeating a ratings object written
    in one of them is a copied forgery."""
    obj = own_object(text, _KEY)  # the judge's own block, no ratings object before it
    own = obj[_KEY]
    if any(own in _written_ratings(q) for q in quoted):
        raise ParseError(
            "the ratings repeat ones written inside the guideline being rated; give your own"
        )
    if not isinstance(own, dict):
        raise ParseError('"ratings" must be an object')
    out: dict[str, int] = {}
    for axis in AXES:
        v = own.get(axis)
        if isinstance(v, str) and v.strip().isdigit():
            v = int(v.strip())
        if isinstance(v, bool) or not isinstance(v, int | float) or v not in (1, 2, 3):
            raise ParseError(f'"{axis}" must be 1, 2 or 3')
        out[axis] = int(v)
    return out


# The pipeline and its meme job are handed in by stages.py, which calls this module; they are
# typed loosely here so that this module never imports the stage that imports it.
Pipeline = Any
MemeJob = Any


def _rating_call(
    pipe: Pipeline,
    job: MemeJob,
    judge: str,
    msgs: list[Message],
    quoted: tuple[str, ...],
    rk: str,
) -> Callable[[], Awaitable[AskResult[dict[str, int]]]]:
    return lambda: ask(
        pipe.pool,
        judge,
        ROLE,
        job.with_image(msgs),
        lambda t: parse_ratings(t, quoted=quoted),
        max_reasks=pipe.acfg.max_reasks,
        key=rk,
    )


def _encode(judge: str) -> Callable[[dict[str, int], AskResult[Any]], dict[str, Any]]:
    return lambda v, _: {"judge": judge, "ratings": v}


async def rate_rounds(pipe: Pipeline, job: MemeJob, chain: Sequence[tuple[int, str]]) -> None:
    """Every panel judge rates each distinct version of the meme's complete fusion chain
    (``(round, guideline)``, the draft as round 0); recorded in ``RATINGS_VIEW``."""
    meme, judges = job.meme, list(pipe.acfg.judges)
    versions: dict[str, list[int]] = {}
    for rnd, text in chain:
        versions.setdefault(text, []).append(rnd)
    plans: list[tuple[str, Callable[[], Awaitable[AskResult[Any]]], Any]] = []
    where: list[tuple[list[int], int]] = []
    for text, rounds in versions.items():
        msgs = build_messages(
            TEMPLATE, image=job.key_image(), meme_text=meme.text, guideline=defang_ratings(text)
        )
        quoted = (text, meme.text)
        for j, judge in enumerate(judges):
            rk = pipe.pool.request_key(judge, msgs)
            key = artifact_key(meme.uid, "rating", judge, rk)
            plans.append((key, _rating_call(pipe, job, judge, msgs, quoted, rk), _encode(judge)))
            where.append((rounds, j))
    arts = await pipe._steps(job, "guidelines", KIND, plans)
    rows: list[tuple[str, int, str | None, str | None, str | None]] = []
    for (key, _call, _enc), (rounds, j), art in zip(plans, where, arts, strict=True):
        if art is None or "ratings" not in art:
            continue  # a failure (on record) or an unparseable rating: no rating
        for rnd in rounds:
            coord = _SEP.join((meme.uid, str(rnd), judges[j]))
            seq = (job.idx << _SEQ_SHIFT) | (rnd * len(judges) + j)
            rows.append((coord, seq, key, None, None))
    if rows:
        pipe.store.add_members(RATINGS_VIEW, meme.uid, rows)
