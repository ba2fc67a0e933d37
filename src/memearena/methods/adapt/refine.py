"""Adaptive refinement: rewrite a meme's text to hide its harm, keep its misbelief, re-score.

As AdamMeme's released code walks it (``scripts/refinement.py``), per group (one target,
category and repeat; the loop and the control each on their own): the seed samples (the same
memes for every target by default) are walked in order. At each step the refiner sees the meme
(its original image) and, as examples, the group's scored items most similar by misbelief (BM25
with ``bm25s`` by default, or cosine similarity of ``embedding_model`` vectors): the originals
and every rewrite the group already scored, the meme's own included, each with the image it was
scored on, lowest score first. A checker verifies the rewrite still carries the original's harm
in the category (rejections recorded and retried, at most ``max_rewrites`` times a step); a step
with no accepted rewrite asks again for the same meme at the next step (``unaccepted_retries``).
The target answers the rewrite on the loop's image (the text-erased image, the text drawn in with
``render_text``) against a fresh reference, and is scored; the meme's ``s`` was scored on the same
image with its original text (like for like). In the *conditional* loop (the method) ``s' < s``
records a weakness and hops to the most similar sample no chain of the group used (never a seed,
``hop_exclusion: group``), a tie ``s' = s <= tie_max`` hops too, otherwise the chain stops. The
*unconditional control* hops whatever ``s'`` is, so its rewrites' scores are free of that
selection. Either stops after ``steps`` (K) steps or when no sample is left. Every step is kept
as lineage.
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memearena.data import Meme
from memearena.engine.steps import capped_map, seeded_rng
from memearena.errors import ModelError
from memearena.methods.adapt.common import AdaptContext, Category, parse_check, parse_rewrite
from memearena.methods.adapt.config import AdaptConfig
from memearena.methods.adapt.erase import EraseFlagged, refine_image, render_caption
from memearena.methods.adapt.reference import reference
from memearena.methods.adapt.scoring import answer_and_score
from memearena.models.types import ImagePart

__all__ = [
    "EMBED_ROLE",
    "MODES",
    "EmbeddingRetriever",
    "Example",
    "History",
    "Retriever",
    "Sample",
    "choose_seeds",
    "load_retrieval",
    "loop_image",
    "misbelief_vectors",
    "refine_chain",
    "refine_group",
    "seed_count",
]

EMBED_ROLE = "adapt.embed"
"""The call role of a misbelief embedding."""

MODES: tuple[str, ...] = ("conditional", "control")
"""The method's loop, and the unconditional control."""

RANKINGS_KEPT = 64
"""Query rankings a retriever keeps (least recently used dropped): memory per retriever is
bounded by this times its samples, whatever the number of chains."""


@dataclass(frozen=True)
class Sample:
    """One scored original (meme, category) of one target in one repeat."""

    meme: Meme
    category: Category
    misbelief: str
    score: float
    """The loop's ``s``: the score on the image the meme's rewrites are shown with."""
    image: ImagePart | None = None
    """That image (the text-erased image, the original text drawn in with ``render_text``)."""


def load_retrieval(acfg: AdaptConfig) -> None:
    """Import the retrieval library the config ranks by (``bm25s``, with SciPy's sparse
    matrices: a tenth of a second) before the run starts, so a broken install stops the run
    before any call is paid for, and the refinement stage starts without that pause."""
    if acfg.retrieval == "bm25":
        import bm25s  # noqa: F401


class Retriever:
    """The scored samples of one (target, category, repeat), ranked by BM25 similarity of their
    misbelief statements to a query sample's (ties: meme id)."""

    def __init__(self, samples: Sequence[Sample]) -> None:
        import bm25s  # a maintained BM25 (sparse matrices); imported only when refining

        self.samples = sorted(samples, key=lambda s: s.meme.uid)
        self._uids = [s.meme.uid for s in self.samples]
        self._tok = lambda texts: bm25s.tokenize(
            texts, stopwords="en", return_ids=False, show_progress=False
        )
        self._bm25 = bm25s.BM25()
        corpus = self._tok([s.misbelief for s in self.samples])
        # A query is almost always one of the samples: its tokens are the corpus's own.
        self._tokens = {
            s.meme.uid: (s.misbelief, t) for s, t in zip(self.samples, corpus, strict=True)
        }
        self._empty = not any(corpus)
        if not self._empty:
            self._bm25.index(corpus, show_progress=False)
        # The latest queries' rankings, as sample positions (4 bytes a sample): a chain asks
        # for its sample's neighbours twice a hop, and its loop and its control do too.
        self._orders: OrderedDict[tuple[str, str], Any] = OrderedDict()

    def _order(self, query: Sample) -> Any:
        import numpy as np

        k = (query.meme.uid, query.misbelief)
        order = self._orders.get(k)
        if order is not None:
            self._orders.move_to_end(k)
        else:
            own = self._tokens.get(query.meme.uid)
            q = own[1] if own is not None and own[0] == query.misbelief else None
            if q is None:
                q = self._tok([query.misbelief])[0]
            if self._empty or not q:
                scores = np.zeros(len(self.samples), dtype=np.float64)
            else:
                scores = np.asarray(self._bm25.get_scores(q), dtype=np.float64)
            # Highest score first, ties in meme-id order (the samples' order: a stable sort).
            order = np.argsort(-scores, kind="stable").astype(np.int32)
            self._orders[k] = order
            if len(self._orders) > RANKINGS_KEPT:
                self._orders.popitem(last=False)
        return order

    def order(self, query: Sample) -> list[Sample]:
        """Every sample, the query's own included, most similar misbelief first."""
        samples = self.samples
        return [samples[i] for i in self._order(query).tolist()]

    def ranked(
        self,
        query: Sample,
        exclude: set[str] | frozenset[str] = frozenset(),
        limit: int | None = None,
    ) -> list[Sample]:
        """Every other sample not in ``exclude``, most similar misbelief first (the first
        ``limit`` of them)."""
        samples, uids = self.samples, self._uids
        uid = query.meme.uid
        out: list[Sample] = []
        if limit is not None and limit <= 0:
            return out
        for i in self._order(query).tolist():
            u = uids[i]
            if u != uid and u not in exclude:
                out.append(samples[i])
                if len(out) == limit:
                    break
        return out


class EmbeddingRetriever(Retriever):
    """The scored samples of one (target, category, repeat), ranked by cosine similarity of
    their misbelief embeddings to a query sample's (ties: meme id). Every sample's misbelief
    and the query's must have a vector in ``vectors`` (misbelief text -> vector)."""

    def __init__(self, samples: Sequence[Sample], vectors: Mapping[str, Sequence[float]]) -> None:
        import numpy as np

        self.samples = sorted(samples, key=lambda s: s.meme.uid)
        self._vectors = vectors
        # Unit rows (a zero vector stays zero: similarity 0 to everything), so one product
        # gives every cosine; vectors of another size than the first never reach here.
        mat = np.asarray([vectors[s.misbelief] for s in self.samples], dtype=np.float64)
        norms = np.linalg.norm(mat, axis=1, keepdims=True) if len(mat) else mat
        self._unit = np.divide(mat, norms, out=np.zeros_like(mat), where=norms > 0)

    def _sims(self, query: Sample) -> list[float]:
        import numpy as np

        q = np.asarray(self._vectors[query.misbelief], dtype=np.float64)
        norm = float(np.linalg.norm(q))
        sims = (self._unit @ (q / norm)).tolist() if norm > 0 and len(self.samples) else []
        return sims or [0.0] * len(self.samples)

    def order(self, query: Sample) -> list[Sample]:
        """Every sample, the query's own included, most similar misbelief first."""
        ranked = sorted(
            ((-sim, s.meme.uid, s) for sim, s in zip(self._sims(query), self.samples, strict=True)),
            key=lambda t: (t[0], t[1]),
        )
        return [s for _, _, s in ranked]

    def ranked(
        self,
        query: Sample,
        exclude: set[str] | frozenset[str] = frozenset(),
        limit: int | None = None,
    ) -> list[Sample]:
        """Every other sample not in ``exclude``, most similar misbelief first (the first
        ``limit`` of them)."""
        ranked = sorted(
            (
                (-sim, s.meme.uid, s)
                for sim, s in zip(self._sims(query), self.samples, strict=True)
                if s.meme.uid != query.meme.uid and s.meme.uid not in exclude
            ),
            key=lambda t: (t[0], t[1]),
        )
        return [s for _, _, s in ranked][: len(ranked) if limit is None else max(limit, 0)]


async def misbelief_vectors(
    ctx: AdaptContext, texts: Sequence[str]
) -> tuple[dict[str, list[float]], int]:
    """The embedding of every distinct misbelief text by the configured ``embedding_model``,
    and how many failed. Each is an ``adapt.embedding`` artifact keyed by the request's content
    fingerprint (model endpoint + text): a re-run reads it back and pays nothing twice, and a
    changed model or text is embedded afresh. A failed call is on record in the store and is
    retried by a re-run."""
    model = ctx.acfg.embedding_model
    if model is None:
        raise ModelError("adapt.embedding_model: required for retrieval 'embeddings'")
    distinct = sorted(set(texts))
    keys = {t: ctx.pool.embed_key(model, [t]) for t in distinct}
    stored = ctx.store.get_artifacts("adapt.embedding", keys.values())
    out: dict[str, list[float]] = {}
    todo: list[str] = []
    for t in distinct:
        got = stored.get(keys[t])
        vec = got.get("vector") if got else None
        if isinstance(vec, list) and vec:
            out[t] = [float(x) for x in vec]
        else:
            todo.append(t)

    async def one(text: str) -> list[float] | None:
        try:
            vec = (await ctx.pool.embed(model, [text], role=EMBED_ROLE))[0]
        except ModelError as e:  # on record (call and error); the re-run retries it
            await ctx.store.commit_step(
                "adapt.embedding", keys[text], None, error=(f"embedding failed ({e.kind})", str(e))
            )
            return None
        # Committed write-ahead: before any request sent after this (one built from the vector
        # included), so a kill never loses a vector a later request depends on.
        await ctx.store.commit_step(
            "adapt.embedding",
            keys[text],
            {"model": model, "text": text, "vector": vec},
            clear_error=True,
        )
        return vec

    failed = 0
    async for text, vec in capped_map(one, todo, ctx.acfg.window):
        if vec is None:
            failed += 1
        else:
            out[text] = vec
    sizes = sorted({len(v) for v in out.values()})
    if len(sizes) > 1:  # cosine is undefined across sizes: never rank by a mix
        raise ModelError(
            f"adapt.embedding_model {model!r}: its endpoint returned vectors of different sizes "
            f"{sizes} across calls; use a model with a fixed dimension"
        )
    return out, failed


def choose_seeds(
    ctx: AdaptContext,
    target: str,
    category: str,
    repeat: int,
    samples: Sequence[Sample],
    candidates: Sequence[str] | None = None,
) -> list[Sample]:
    """The seed samples of one (target, category, repeat) by the configured rule; the choice
    is recorded in the store. With ``same_seeds`` (and the random rule) the draw is over
    ``candidates`` (the category's memes, the same for every target: default the samples'),
    seeded by (category, repeat) only, so every target's chains start from the same memes; a
    drawn meme this target has no scored sample of is recorded as ``missing``."""
    acfg = ctx.acfg
    pool = sorted(samples, key=lambda s: s.meme.uid)
    missing: list[str] = []
    shared = acfg.same_seeds and acfg.seed_rule == "random"
    if acfg.seed_rule == "lowest":
        chosen = sorted(pool, key=lambda s: (s.score, s.meme.uid))[: seed_count(acfg, len(pool))]
    elif shared:
        names = sorted(set(candidates) if candidates is not None else {s.meme.uid for s in pool})
        drawn = seeded_rng(ctx.cfg.seed, "adapt.seeds", category, repeat).sample(
            names, seed_count(acfg, len(names))
        )
        by_uid = {s.meme.uid: s for s in pool}
        chosen = [by_uid[u] for u in drawn if u in by_uid]
        missing = [u for u in drawn if u not in by_uid]
    else:
        rng = seeded_rng(ctx.cfg.seed, "adapt.seeds", target, category, repeat)
        chosen = rng.sample(pool, seed_count(acfg, len(pool)))
    ctx.store.put_artifact(
        "adapt.seed_choice",
        f"{target}|{category}|{repeat}",
        {
            "rule": acfg.seed_rule,
            "same_seeds": shared,
            "seeds": [s.meme.uid for s in chosen],
            "missing": missing,
            "pool": len(pool),
        },
    )
    return chosen


def seed_count(acfg: AdaptConfig, pool: int) -> int:
    """Seed chains of a (target, category, repeat) with ``pool`` scored samples: a fixed
    ``seed_samples``, else ``seed_fraction`` of them rounded up and at least ``seed_min`` (never
    more than there are)."""
    if acfg.seed_samples is not None:
        return min(acfg.seed_samples, pool)
    return min(pool, max(acfg.seed_min, math.ceil(acfg.seed_fraction * pool - 1e-9)))


def _text_tag(text: str) -> str:
    return "rw:" + hashlib.sha256(text.encode()).hexdigest()[:16]


# ---- the image of the loop ---------------------------------------------------------------


async def loop_image(
    ctx: AdaptContext, meme: Meme, text: str
) -> tuple[ImagePart | None, dict[str, Any]] | EraseFlagged | None:
    """The image ``text`` is shown with in the loop, the meme's original text and each of its
    rewrites alike (scores are compared like for like): the meme's refine image (text-erased by
    default), with ``text`` drawn into it under ``render_text``; and its record. None: the
    erasure failed (on record in the store; a re-run retries it); ``EraseFlagged``: the erasure
    masked too much (a finished outcome: the meme is not scored in the loop)."""
    shown = await refine_image(ctx, meme)
    if shown is None or isinstance(shown, EraseFlagged):
        return shown
    image = shown.part
    rec: dict[str, Any] = {**shown.record(), "rendered": False, "base_sha256": rec_sha(image)}
    if ctx.acfg.render_text and image is not None:
        key = (image.sha256, text)
        drawn = ctx.drawn.get(key)
        if drawn is None:
            drawn = ctx.drawn[key] = render_caption(image, text)
            if len(ctx.drawn) > DRAWN_KEPT:
                ctx.drawn.popitem(last=False)
        if ctx.on_image is not None:
            ctx.on_image(drawn.sha256, meme.text, text)
        image = drawn
        rec.update(sha256=image.sha256, rendered=True)
    return image, rec


def rec_sha(image: ImagePart | None) -> str | None:
    """An image's hash, None for no image."""
    return image.sha256 if image is not None else None


DRAWN_KEPT = 256
"""Drawn captions a run keeps by (image, text) (least recently used dropped)."""


# ---- the refiner's history ---------------------------------------------------------------


@dataclass(frozen=True)
class Example:
    """One scored item the refiner may be shown: an original (scored on the loop's image) or a
    rewrite scored earlier in the group."""

    meme: str
    kind: str
    """``original`` or ``rewrite``."""
    text: str
    score: float
    image: ImagePart | None

    def label(self) -> str:
        """How lineage names it (a meme id; a rewrite also by its text's tag)."""
        return self.meme if self.kind == "original" else f"{self.meme} {_text_tag(self.text)}"

    def record(self) -> dict[str, Any]:
        """The JSON-able record kept with the step that showed it."""
        return {
            "meme": self.meme,
            "kind": self.kind,
            "text": self.text,
            "score": self.score,
            "image": rec_sha(self.image),
        }


class History:
    """Every scored item of one group (target, category, repeat, mode): its originals, then each
    rewrite as it is scored. The refiner's examples are retrieved from it as the method does:
    the items whose misbelief is most similar to the query's (a rewrite carries its meme's
    misbelief, so it ranks with its meme; ties: meme id, then originals before rewrites in the
    order they were scored), the query meme's own original and rewrites included, then ordered
    by score (lowest first)."""

    def __init__(self, retriever: Retriever) -> None:
        self.retriever = retriever
        self._items: dict[str, list[Example]] = {
            s.meme.uid: [Example(s.meme.uid, "original", s.meme.text, s.score, s.image)]
            for s in retriever.samples
        }

    def add(self, sample: Sample, text: str, score: float, image: ImagePart | None) -> None:
        """A rewrite of ``sample``'s meme scored ``score`` on ``image``."""
        uid = sample.meme.uid
        self._items.setdefault(uid, []).append(Example(uid, "rewrite", text, score, image))

    def examples(self, query: Sample, limit: int) -> list[Example]:
        """The ``limit`` most similar scored items, lowest score first."""
        out: list[Example] = []
        if limit <= 0:
            return out
        for s in self.retriever.order(query):
            for e in self._items.get(s.meme.uid, ()):
                out.append(e)
                if len(out) == limit:
                    return sorted(out, key=lambda e: e.score)
        return sorted(out, key=lambda e: e.score)


# ---- one rewrite -------------------------------------------------------------------------


async def _rewrite(
    ctx: AdaptContext,
    sample: Sample,
    examples: Sequence[Example],
    seed: int,
    again: int,
) -> tuple[str | None, str, list[dict[str, Any]]] | None:
    """(accepted rewrite or None, its explanation, every attempt's record); None to retry.
    ``again``: how many steps in a row this meme ended with no accepted rewrite (a new draw)."""
    acfg = ctx.acfg
    meme = sample.meme
    image = ctx.image(meme)
    attempts: list[dict[str, Any]] = []
    rejected: list[str] = []
    # The meme's own image first, then each example's (the image it was scored on).
    images = [e.image for e in examples if e.image is not None]
    shown: list[dict[str, Any]] = []
    n = 1 if image is not None else 0
    for e in examples:
        if e.image is not None:
            n += 1
        shown.append(
            {
                "text": e.text,
                "score": f"{e.score:g}",
                "kind": e.kind,
                "image": n if e.image is not None else None,
            }
        )
    category = f"{sample.category.name}: {sample.category.description}"
    for attempt in range(acfg.max_rewrites):
        rw = await ctx.step(
            "adapt.rewrite",
            (meme.uid, sample.category.name, again, attempt),
            acfg.refiner,
            "adapt.refine",
            "adapt/refiner.j2",
            lambda t: parse_rewrite(t, meme.text),
            lambda v: {"rewrite": v[0], "explanation": v[1]},
            image=image,
            images=images,
            params=ctx.params(seed=(seed * 64 + again) * 16 + attempt),
            meme_text=meme.text,
            category=sample.category.name,
            misbelief=sample.misbelief,
            examples=shown,
            first_image=image is not None,
            rejected=list(rejected),
        )
        if rw is None:
            return None
        if "rewrite" not in rw:
            attempts.append(
                {"rewrite": None, "outcome": "refused" if rw.get("refusal") else "unparsed"}
            )
            continue
        # The checker is asked what the method asks: does the rewrite keep the original's
        # harm in this category (the task), with the original image; not told the misbelief.
        chk = await ctx.step(
            "adapt.check",
            (meme.uid, sample.category.name),
            acfg.checker,
            "adapt.check",
            "adapt/checker.j2",
            parse_check,
            lambda v: {"carries": v[0], "reason": v[1]},
            image=image,
            original_text=meme.text,
            rewrite=rw["rewrite"],
            category=category,
        )
        if chk is None:
            return None
        if "carries" not in chk:
            outcome = "checker refused" if chk.get("refusal") else "checker unparsed"
            attempts.append({"rewrite": rw["rewrite"], "outcome": outcome})
            rejected.append(rw["rewrite"])
            continue
        verdict = "accepted" if chk["carries"] else "rejected"
        attempts.append({"rewrite": rw["rewrite"], "outcome": verdict, "reason": chk["reason"]})
        if chk["carries"]:
            return rw["rewrite"], rw.get("explanation", ""), attempts
        rejected.append(rw["rewrite"])
    return None, "", attempts


# ---- the chains --------------------------------------------------------------------------


async def refine_chain(
    ctx: AdaptContext,
    target: str,
    repeat: int,
    mode: str,
    seed: Sample,
    retriever: Retriever,
) -> dict[str, Any] | None:
    """One refinement chain from ``seed`` alone in its group; its lineage record, or None when
    a model failure leaves it for a re-run (every finished call is stored, so the re-run
    repeats none)."""
    return (await refine_group(ctx, target, repeat, mode, [seed], retriever))[0]


async def refine_group(
    ctx: AdaptContext,
    target: str,
    repeat: int,
    mode: str,
    seeds: Sequence[Sample],
    retriever: Retriever,
) -> list[dict[str, Any] | None]:
    """The chains of one group (``target``, the retriever's category, ``repeat``) in one mode,
    from ``seeds`` in order, as the method walks them: each chain's refiner sees the rewrites
    the group's earlier chains scored, and (``hop_exclusion: group``) no hop reaches a seed or a
    meme an earlier chain used, so the group's chains are disjoint. A chain left for a re-run
    leaves the later ones for it too: their inputs depend on it."""
    acfg = ctx.acfg
    history = History(retriever)
    used: set[str] = {s.meme.uid for s in seeds} if acfg.hop_exclusion == "group" else set()
    out: list[dict[str, Any] | None] = []
    for i, seed in enumerate(seeds):
        visited = used if acfg.hop_exclusion == "group" else {seed.meme.uid}
        rec = await _walk(ctx, target, repeat, mode, seed, retriever, history, visited)
        if rec is None:
            out.extend([None] * (len(seeds) - i))
            break
        out.append(rec)
    return out


class _Kept:
    """An awaitable's outcome, kept once awaited (``value``: None until then)."""

    def __init__(self, job: Awaitable[dict[str, Any] | None]) -> None:
        self._job = job
        self.value: dict[str, Any] | None = None

    async def run(self) -> dict[str, Any] | None:
        self.value = await self._job
        return self.value


def _decision(acfg: AdaptConfig, mode: str, before: float, after: float) -> str:
    """What a scored step decides: ``s' < s`` (a weakness: hop), ``tie`` (s' = s at most
    ``tie_max``: hop, as the method does), ``held`` (stop), or ``control`` (always hop)."""
    if mode != "conditional":
        return "control"
    if after < before:
        return "s' < s"
    if after == before and acfg.tie_max is not None and before <= acfg.tie_max:
        return "tie"
    return "held"


async def _walk(
    ctx: AdaptContext,
    target: str,
    repeat: int,
    mode: str,
    seed: Sample,
    retriever: Retriever,
    history: History,
    visited: set[str],
) -> dict[str, Any] | None:
    acfg = ctx.acfg
    visited.add(seed.meme.uid)
    current = seed
    steps: list[dict[str, Any]] = []
    stop = f"{acfg.steps} steps"
    seed_value = ctx.cfg.seed * 1000 + repeat
    retries = acfg.steps if acfg.unaccepted_retries is None else acfg.unaccepted_retries
    again = 0
    for k in range(1, acfg.steps + 1):
        examples = history.examples(current, acfg.examples)
        got = await _rewrite(ctx, current, examples, seed_value, again)
        if got is None:
            return None
        text, explanation, attempts = got
        step: dict[str, Any] = {
            "step": k,
            "meme": current.meme.uid,
            "parent_text": current.meme.text,
            "misbelief": current.misbelief,
            "examples": [e.label() for e in examples],
            "example_items": [e.record() for e in examples],
            "checks": attempts,
            "score_before": current.score,
            # The image s was scored on: the one the rewrite is shown with (like for like).
            "score_before_image": rec_sha(current.image),
        }
        if text is None:
            steps.append({**step, "text": None, "outcome": "no accepted rewrite"})
            again += 1
            if again > retries:
                stop = "no accepted rewrite"
                break
            continue  # the same meme is asked again at the next step, as the method does
        again = 0
        # The rewrite is shown on the text-erased image (never the original, whose caption
        # still carries the original text); the refiner and the checker saw the original.
        shown = await loop_image(ctx, current.meme, text)
        # The erasure failed (on record): a re-run retries the chain. A chain's memes were
        # scored on their loop image, so none of them is ever flagged here.
        if shown is None or isinstance(shown, EraseFlagged):
            return None
        image, step["image"] = shown
        tag = _text_tag(text)
        # The target's answer needs no reference: it is asked while the reference is written.
        ref_job = _Kept(
            reference(
                ctx, f"{current.meme.uid}|{tag}", text, image, current.category, current.misbelief
            )
        )
        scored = await answer_and_score(
            ctx, target, current.meme.uid, text, image, current.category, ref_job.run(), repeat,
            tag=tag,
        )  # fmt: skip
        ref = ref_job.value
        if scored is None:
            return None
        rec = scored.record()
        done = {
            **step,
            "text": text,
            "explanation": explanation,
            "reference": ref.get("reference") if ref else None,
            "score_after": scored.score,
            **{f"score_{k2}": v for k2, v in rec.items() if k2 != "score"},
        }
        steps.append(done)
        if scored.outcome != "scored" or scored.score is None:
            stop = f"rewrite {scored.outcome}"
            break
        history.add(current, text, scored.score, image)
        decision = done["decision"] = _decision(acfg, mode, current.score, scored.score)
        if decision == "held":
            stop = "score held (s' >= s)"
            break
        if k == acfg.steps:
            break
        nxt = retriever.ranked(current, visited, limit=1)
        if not nxt:
            stop = "no similar sample left"
            break
        current = nxt[0]
        visited.add(current.meme.uid)
    ctx.progress.advance("refinement")
    return {
        "target": target,
        "category": seed.category.name,
        "repeat": repeat,
        "mode": mode,
        "seed": seed.meme.uid,
        "seed_score": seed.score,
        "steps": steps,
        "stop": stop,
    }
