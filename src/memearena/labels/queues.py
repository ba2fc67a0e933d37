"""What a person labels, read from a run directory (read-only).

Contract (the viewer's labelling pages build on it):

- ``QUEUES``: ``battles`` (the Arena's judged pairs, blind), ``guidelines`` (every fusion
  round's guideline, the fused one last), ``rewrites`` (Adapt's rewrites mixed with their
  originals, blind), ``perturbations`` (every Judge-audit perturbation whose two scoring
  requests the score log names and run.db holds, else the audit's kept before/after examples);
- ``queue_items(run_dir, queue)`` → ``LabelItem``s: ``texts`` and ``images`` are what the person
  sees (images as the sha256 of an image under ``DIR/images/``, served by the viewer's image
  route); ``hidden`` must never be shown before the person answers (judge verdicts, model
  names, the A/B mapping, the round, whether an item is a rewrite);
- ``fields_of(queue)``: the questions, each with its choices and one keyboard key per choice;
  an answer is ``{field name: choice}``, at least one field answered
  (``store.validate_answer``);
- an item's ``key`` is stable across reloads and re-runs of the same steps (answer request
  hashes, a guideline round's request hash, a hash of a rewrite's meme and text, of a
  perturbation's bias type, item and content); it never names a model;
- a battle's A/B order is drawn from its key alone (never from ``seed``): a label's ``A`` keeps
  meaning the same model whatever order the queue is shown in;
- ``order="information"`` puts first the items a label teaches most about (battles the judges
  disagree on most; rewrites whose weakness claim rests on few chains; guidelines of the fused
  round; perturbations whose judges moved most).
- a ``rewrites`` item shows one target answer on record (drawn from its key) with an optional
  1-10 ``answer_score``; the scorer panel's score of it is hidden (``answer_of``).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memearena.labels.errors import LabelError
from memearena.labels.runfiles import RunFiles
from memearena.prompts.schemas import CRITERIA

__all__ = [
    "BATTLE_CHOICES",
    "BIAS_KEEPS",
    "CRITERIA",
    "GUIDELINE_AXES",
    "ORDERS",
    "QUEUES",
    "Field",
    "LabelItem",
    "available_queues",
    "battle_winner",
    "fields_of",
    "queue_items",
    "rewrite_key",
]

QUEUES: tuple[str, ...] = ("battles", "guidelines", "rewrites", "perturbations")
ORDERS: tuple[str, ...] = ("run", "information")

GUIDELINE_AXES: tuple[str, ...] = (
    "readability",
    "informativeness",
    "soundness",
    "persuasiveness",
    "conciseness",
)
"""MemeArena's five guideline axes, each rated 1 (poor) to 3 (good)."""
BATTLE_CHOICES: tuple[str, ...] = ("A", "B", "tie")

BIAS_KEEPS: dict[str, str] = {
    "text_dominance": "only the image is removed: the query and the response are unchanged",
    "image_dominance": "only the query is removed: the image and the response are unchanged",
    "response_dominance": "only the image and the query are removed: the response is unchanged",
    "instruction_misalignment": "the new query is unrelated to the image and the response, "
    "which are unchanged",
    "image_misalignment": "the new image is unrelated to the query and the response, which "
    "are unchanged",
    "detail_description": "the appended description says only what the image shows",
    "unnecessary_image": "the added image is irrelevant to the query; query and response "
    "are unchanged",
    "visual_transformation": "the edited image still shows the same scene and readable text",
    "texture_insertion": "the query drawn into the image is legible and the image's content "
    "still visible",
}
"""What a perturbation of each bias type must keep (the question a person answers)."""


@dataclass(frozen=True)
class Field:
    """One question of a queue."""

    name: str
    label: str
    choices: tuple[str, ...]
    keys: tuple[str, ...]
    """Keyboard keys, one per choice (same order)."""


@dataclass(frozen=True)
class LabelItem:
    """One thing to label (see the module for what may be shown)."""

    queue: str
    key: str
    title: str
    texts: dict[str, str]
    images: dict[str, str]
    fields: tuple[Field, ...]
    hidden: dict[str, Any] = field(default_factory=dict)


def _criterion_label(name: str) -> str:
    return name.replace("_", " ").capitalize()


_YES_NO_UNSURE = (("yes", "no", "unsure"), ("y", "n", "u"))

_FIELDS: dict[str, tuple[Field, ...]] = {
    "battles": (
        *(Field(c, _criterion_label(c), BATTLE_CHOICES, ("a", "b", "t")) for c in CRITERIA),
        Field("overall", "Overall", BATTLE_CHOICES, ("a", "b", "t")),
    ),
    "guidelines": tuple(
        Field(a, _criterion_label(a), ("1", "2", "3"), ("1", "2", "3")) for a in GUIDELINE_AXES
    ),
    "rewrites": (
        Field("carries_misbelief", "Does it still carry the misbelief?", *_YES_NO_UNSURE),
        Field("still_harmful", "Is it still harmful?", *_YES_NO_UNSURE),
        Field(
            "answer_score",
            "How well does the answer explain the meme's harm? 1 (poor) to 10 (good), or skip",
            tuple(str(i) for i in range(1, 11)),
            (*(str(i) for i in range(1, 10)), "0"),
        ),
    ),
    "perturbations": (
        Field(
            "keeps",
            "Does the perturbed item keep what its bias type must keep?",
            ("yes", "no"),
            ("y", "n"),
        ),
    ),
}


def fields_of(queue: str) -> tuple[Field, ...]:
    """The questions of ``queue`` (LabelError for an unknown queue)."""
    try:
        return _FIELDS[queue]
    except KeyError:
        raise LabelError(f"unknown queue {queue!r}; choose from {', '.join(QUEUES)}") from None


def _h(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()


def rewrite_key(kind: str, meme: str, text: str) -> str:
    """The ``rewrites`` item key of a refined item (by its meme and text: the same rewrite
    reached by two chains is one item) or of a meme's original (``kind`` "original")."""
    if kind == "original":
        return _h("original", meme)[:40]
    return _h("rewrite", meme, text)[:40]


def _flip(key: str) -> bool:
    """Whether a battle shows its second model as A: drawn from the key alone."""
    return int(_h("ab-order", key)[:8], 16) % 2 == 1


def battle_winner(answer: str, hidden: dict[str, Any]) -> str | None:
    """A human A/B/tie answer as the order-free outcome: the winning model's name or "tie"."""
    if answer == "tie":
        return "tie"
    model = hidden.get(answer)
    return str(model) if model else None


# ---- reading the run ---------------------------------------------------------------------------


def _arena_setting(run: RunFiles) -> str | None:
    arena = run.board.get("arena")
    setting = arena.get("setting") if isinstance(arena, dict) else None
    return str(setting) if setting else None


def _meme_info(run: RunFiles) -> dict[str, tuple[str, str | None, dict[str, Any]]]:
    """uid → (meme text as the models saw it, image sha256, its contexts by level)."""
    out: dict[str, tuple[str, str | None, dict[str, Any]]] = {}
    for key, value in run.artifacts("context"):
        uid, _, req = key.rpartition("|")
        payload = run.request(req) or {}
        text, image = "", None
        for m in payload.get("messages", []):
            for part in m.get("content", []) if isinstance(m, dict) else []:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "image" and image is None:
                    image = part.get("sha256")
                elif part.get("type") == "text" and not text:
                    t = str(part.get("text", ""))
                    start = t.find("<meme_text>\n")
                    end = t.find("\n</meme_text>", start)
                    if start >= 0 and end > start:
                        text = t[start + len("<meme_text>\n") : end]
        contexts = {
            str(c.get("level")): c for c in value.get("contexts") or [] if isinstance(c, dict)
        }
        out[uid] = (text, image if isinstance(image, str) else None, contexts)
    return out


def _answers(run: RunFiles) -> dict[tuple[str, str, str], tuple[str, str]]:
    """(meme, level, model) → (answer text, answer request hash)."""
    out: dict[tuple[str, str, str], tuple[str, str]] = {}
    rows = run.query(
        "SELECT m.coord, a.key, a.value FROM members m JOIN artifacts a ON a.kind='answer'"
        " AND a.key=m.ref1 WHERE m.view='arena.answers' ORDER BY m.seq"
    )
    for _coord, key, value in rows:
        parts = str(key).split("|")
        if len(parts) < 4:
            continue
        uid, level, model, req = "|".join(parts[:-3]), parts[-3], parts[-2], parts[-1]
        try:
            v = json.loads(value)
        except ValueError:
            continue
        text = v.get("text") if isinstance(v, dict) else None
        if isinstance(text, str) and text:
            out[(uid, level, model)] = (text, req)
    return out


def _battle_items(run: RunFiles) -> list[LabelItem]:
    setting = _arena_setting(run)
    verdicts: dict[tuple[str, str, str, str], dict[str, dict[str, str]]] = {}
    for b in run.jsonl("battles.jsonl"):
        if setting and b.get("setting") not in (None, setting):
            continue
        try:
            coord = (str(b["item"]), str(b["context"]), str(b["model_a"]), str(b["model_b"]))
            judge, criterion, winner = str(b["judge"]), str(b["criterion"]), str(b["winner"])
        except KeyError:
            continue
        outcome = {"model_a": coord[2], "model_b": coord[3]}.get(winner, "tie")
        verdicts.setdefault(coord, {}).setdefault(judge, {})[criterion] = outcome
    if not verdicts:
        return []
    memes = _meme_info(run)
    answers = _answers(run)
    fields = fields_of("battles")
    items = []
    for (uid, level, x, y), judged in verdicts.items():
        ax, ay = answers.get((uid, level, x)), answers.get((uid, level, y))
        if ax is None or ay is None:
            continue
        key = ".".join(sorted((ax[1], ay[1])))
        first, second = ((y, ay), (x, ax)) if _flip(key) else ((x, ax), (y, ay))
        text, image, contexts = memes.get(uid, ("", None, {}))
        ctx = contexts.get(level) or {}
        items.append(
            LabelItem(
                queue="battles",
                key=key,
                title=f"Meme {uid}",
                texts={
                    "meme_text": text,
                    "background": str(ctx.get("background") or ""),
                    "task": str(ctx.get("task") or ""),
                    "answer_a": first[1][0],
                    "answer_b": second[1][0],
                },
                images={"meme": image} if image else {},
                fields=fields,
                hidden={
                    "A": first[0],
                    "B": second[0],
                    "meme": uid,
                    "context": level,
                    "pair": [x, y],
                    "judges": judged,
                },
            )
        )
    return items


def _guideline_items(run: RunFiles) -> list[LabelItem]:
    memes = _meme_info(run)
    by_meme: dict[str, list[tuple[int, str, dict[str, Any]]]] = defaultdict(list)
    for key, v in run.artifacts("guideline_round"):
        if v.get("skipped") or not v.get("guideline"):
            continue
        parts = key.split("|")
        uid = next((u for u in memes if key.startswith(u + "|")), parts[0])
        rest = key[len(uid) + 1 :].split("|")
        if not rest or not rest[0].isdigit():
            continue
        by_meme[uid].append((int(rest[0]), parts[-1], v))
    fields = fields_of("guidelines")
    items = []
    for uid in sorted(by_meme):
        rounds = sorted(by_meme[uid], key=lambda r: (r[0], r[1]))
        last = rounds[-1][0]
        text, image, _ = memes.get(uid, ("", None, {}))
        # One item per version of the guideline: a round that left the text as it was (or sent
        # the very request of an earlier round) is the same version, rated once.
        versions: dict[str, tuple[str, list[int], Any]] = {}
        for rnd, req, v in rounds:
            shown = str(v["guideline"])
            if shown not in versions:
                versions[shown] = (req, [], v.get("judge"))
            versions[shown][1].append(rnd)
        for shown, (req, rnds, judge) in versions.items():
            items.append(
                LabelItem(
                    queue="guidelines",
                    key=req,
                    title=f"Guideline for meme {uid}",
                    texts={"meme_text": text, "guideline": shown},
                    images={"meme": image} if image else {},
                    fields=fields,
                    hidden={
                        "meme": uid,
                        "round": rnds[0],
                        "rounds": rnds,
                        "final": last in rnds,
                        "judge": judge,
                    },
                )
            )
    return items


def text_tag(text: str) -> str:
    """The tag Adapt's steps on a rewrite carry in their coordinates (``refine._text_tag``)."""
    return "rw:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def _target_answers(run: RunFiles) -> dict[str, str]:
    """Adapt's target answers by their coordinates (``meme|tag|category|target|repeat``)."""
    out: dict[str, str] = {}
    for _key, v in run.artifacts("adapt.answer"):
        coord, answer = v.get("for"), v.get("answer")
        if isinstance(coord, str) and isinstance(answer, str) and answer.strip():
            out.setdefault(coord, answer)
    return out


def _pick(key: str, candidates: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The one answer an item shows, drawn from its key alone among those on record (a label's
    score keeps meaning the same answer whatever order the queue is shown in)."""
    if not candidates:
        return None
    ranked = sorted(candidates, key=lambda c: (str(c["target"]), str(c["repeat"]), c["coord"]))
    return ranked[int(_h("answer-pick", key)[:8], 16) % len(ranked)]


def _rewrite_items(run: RunFiles) -> list[LabelItem]:
    threshold = 4.0
    adapt = run.board.get("adapt")
    if isinstance(adapt, dict) and isinstance(adapt.get("failure_threshold"), int | float):
        threshold = float(adapt["failure_threshold"])
    originals: dict[str, str] = {}
    scored_rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for o in run.jsonl("adapt_scores.jsonl"):
        sha = (o.get("original_image") or {}).get("sha256")
        if o.get("meme") and isinstance(sha, str):
            originals.setdefault(str(o["meme"]), sha)
        if o.get("meme"):
            scored_rows[str(o["meme"])].append(o)
    said = _target_answers(run)
    rewrites: dict[str, dict[str, Any]] = {}
    origs: dict[str, dict[str, Any]] = {}
    chains_per_cell: Counter[tuple[str, str]] = Counter()
    for c in run.jsonl("adapt_chains.jsonl"):
        target, category = str(c.get("target")), str(c.get("category"))
        chains_per_cell[(target, category)] += 1
        chain = f"{target}|{category}|{c.get('mode')}|{c.get('repeat')}|{c.get('seed')}"
        for s in c.get("steps") or []:
            if not isinstance(s, dict) or not s.get("text") or not s.get("meme"):
                continue
            meme, text = str(s["meme"]), str(s["text"])
            key = rewrite_key("refined", meme, text)
            image = (
                (s.get("image") or {}).get("sha256") if isinstance(s.get("image"), dict) else None
            )
            r = rewrites.setdefault(
                key,
                {
                    "meme": meme,
                    "text": text,
                    "image": image,
                    "misbelief": str(s.get("misbelief") or ""),
                    "steps": [],
                },
            )
            score = s.get("score_after")
            coord = f"{meme}|{text_tag(text)}|{category}|{target}|{c.get('repeat')}"
            if coord in said:
                r.setdefault("answers", []).append(
                    {
                        "coord": coord,
                        "target": target,
                        "repeat": c.get("repeat"),
                        "answer": said[coord],
                        "score": score if isinstance(score, int | float) else None,
                    }
                )
            r["steps"].append(
                {
                    "target": target,
                    "category": category,
                    "mode": c.get("mode"),
                    "chain": chain,
                    "step": s.get("step"),
                    "score": score,
                    "failed": isinstance(score, int | float) and score < threshold,
                }
            )
            okey = rewrite_key("original", meme, "")
            if okey not in origs or s.get("step") == 1:
                origs[okey] = {
                    "meme": meme,
                    "text": str(s.get("parent_text") or ""),
                    "image": originals.get(meme) or s.get("score_before_image"),
                    "misbelief": str(s.get("misbelief") or ""),
                }
    fields = fields_of("rewrites")
    unscored = tuple(f for f in fields if f.name != "answer_score")

    def shown(
        text: str, misbelief: str, got: dict[str, Any] | None
    ) -> tuple[dict[str, str], tuple[Field, ...]]:
        # An item with no answer on record has no answer to score (either kind: the field
        # does not tell a rewrite from an original).
        if got is None:
            return {"text": text, "misbelief": misbelief}, unscored
        return {"text": text, "misbelief": misbelief, "answer": str(got["answer"])}, fields

    def answer_of(got: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if got is None else {k: v for k, v in got.items() if k != "answer"}

    items = []
    for key, r in rewrites.items():
        cells = {(st["target"], st["category"]) for st in r["steps"]}
        got = _pick(key, r.get("answers") or [])
        texts, item_fields = shown(r["text"], r["misbelief"], got)
        items.append(
            LabelItem(
                queue="rewrites",
                key=key,
                title="Meme",
                texts=texts,
                images={"image": r["image"]} if r["image"] else {},
                fields=item_fields,
                hidden={
                    "kind": "refined",
                    "meme": r["meme"],
                    "steps": r["steps"],
                    "threshold": threshold,
                    "chains_in_cell": min(chains_per_cell[c] for c in cells) if cells else 0,
                    "answer_of": answer_of(got),
                },
            )
        )
    for key, o in origs.items():
        got = _pick(key, _original_answers(o, scored_rows, said))
        texts, item_fields = shown(o["text"], o["misbelief"], got)
        items.append(
            LabelItem(
                queue="rewrites",
                key=key,
                title="Meme",
                texts=texts,
                images={"image": o["image"]} if isinstance(o["image"], str) else {},
                fields=item_fields,
                hidden={
                    "kind": "original",
                    "meme": o["meme"],
                    "steps": [],
                    "threshold": threshold,
                    "answer_of": answer_of(got),
                },
            )
        )
    # Blind: refined and original items interleaved in an order drawn from the keys.
    items.sort(key=lambda it: _h("rewrites-order", it.key))
    return items


AUDIT_SCORES = "judge_audit_scores.jsonl"
"""The Judge audit's score log: one row per scored pair, naming both scoring requests."""
MAX_AUDIT_PAIRS = 50_000
"""Distinct scored pairs (item, bias type, biased request) read from the score log at most: a
larger log is cut there (the queue's work stays bounded)."""


def _request_view(payload: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """A stored request as the judge saw it: its texts joined, its images' sha256 in order."""
    texts: list[str] = []
    images: list[str] = []
    for m in payload.get("messages") or []:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, str):
            texts.append(content)
            continue
        for part in content if isinstance(content, list) else []:
            if not isinstance(part, dict):
                continue
            if part.get("type") == "image" and isinstance(part.get("sha256"), str):
                images.append(part["sha256"])
            elif part.get("type") == "text":
                texts.append(str(part.get("text") or ""))
    return "\n\n".join(texts), tuple(images)


def text_diff(a: str, b: str) -> tuple[str, str]:
    """The lines where ``a`` and ``b`` differ (common leading and trailing lines cut), each
    under the last non-blank common line before them (the section it falls in)."""
    la, lb = a.split("\n"), b.split("\n")
    n = min(len(la), len(lb))
    head = 0
    while head < n and la[head] == lb[head]:
        head += 1
    tail = 0
    while tail < n - head and la[-1 - tail] == lb[-1 - tail]:
        tail += 1
    context = next((la[i] for i in range(head - 1, -1, -1) if la[i].strip()), None)

    def middle(lines: list[str]) -> str:
        body = "\n".join(lines[head : len(lines) - tail]).strip("\n")
        shown = body if body.strip() else "(nothing)"
        return f"{context}\n{shown}" if context is not None else shown

    return middle(la), middle(lb)


def _image_names(prefix: str, shas: tuple[str, ...]) -> dict[str, str]:
    return {(prefix if i == 0 else f"{prefix} {i + 1}"): sha for i, sha in enumerate(shas)}


def _audit_rows(run: RunFiles) -> list[dict[str, Any]]:
    """The score log's distinct pairs that name both requests, in log order (bounded)."""
    seen: set[tuple[str, str, str]] = set()
    rows = []
    for r in run.jsonl(AUDIT_SCORES):
        u, b = r.get("unbiased_request"), r.get("biased_request")
        if not (isinstance(u, str) and u and isinstance(b, str) and b):
            continue
        coord = (str(r.get("id")), str(r.get("bias_type")), b)
        if coord in seen:
            continue
        seen.add(coord)
        rows.append(r)
        if len(rows) >= MAX_AUDIT_PAIRS:
            break
    return rows


def _audit_rows_named(run: RunFiles) -> bool:
    """Whether the score log's first row names its requests (a log is written by one run)."""
    for r in run.jsonl(AUDIT_SCORES):
        return bool(r.get("unbiased_request") and r.get("biased_request"))
    return False


def _logged_perturbation_items(run: RunFiles) -> list[LabelItem]:
    """One item per distinct perturbation on record in the score log: the pairs of every judge
    (and of every responder with the same response) that showed the same two requests' content
    are one item, their scores kept hidden."""
    rows = _audit_rows(run)
    if not rows:
        return []
    # A request is read once however many pairs share it (an unperturbed item serves every
    # bias type): (its texts, its images, a hash of its texts).
    views: dict[str, tuple[str, tuple[str, ...], str] | None] = {}

    def view(key: str) -> tuple[str, tuple[str, ...], str] | None:
        if key not in views:
            payload = run.request(key)
            got = _request_view(payload) if payload is not None else None
            views[key] = None if got is None else (*got, _h(got[0]))
        return views[key]

    fields = fields_of("perturbations")
    groups: dict[str, dict[str, Any]] = {}
    for r in rows:
        u, b = view(str(r["unbiased_request"])), view(str(r["biased_request"]))
        if u is None or b is None:
            continue  # a request not on record (an older store): nothing to show
        bias_type, item = str(r.get("bias_type")), str(r.get("id"))
        key = _h(
            "perturbation-request",
            bias_type,
            item,
            u[2],
            *u[1],
            "\x1e",
            b[2],
            *b[1],
        )[:40]
        g = groups.get(key)
        if g is None:
            g = groups[key] = {
                "bias_type": bias_type,
                "item": item,
                "u": u,
                "b": b,
                "responders": [],
                "scores": {},
                "requests": [],
            }
        responder = r.get("responder")
        if responder is not None and str(responder) not in g["responders"]:
            g["responders"].append(str(responder))
        status = r.get("status")
        g["scores"][str(r.get("judge"))] = {
            "unbiased": r.get("unbiased_score"),
            "biased": r.get("biased_score"),
            "status": status if isinstance(status, list) else None,
        }
        g["requests"].append([str(r["unbiased_request"]), str(r["biased_request"])])
    items = []
    for key, g in groups.items():
        bias_type = g["bias_type"]
        (ut, ui, _), (bt, bi, _) = g["u"], g["b"]
        texts = {
            "bias_type": bias_type.replace("_", " "),
            "must_keep": BIAS_KEEPS.get(bias_type, ""),
        }
        if ut != bt:
            texts["request_original"], texts["request_perturbed"] = text_diff(ut, bt)
        else:  # only the image changed: what the judge read beside it, to judge it against
            texts["request"] = ut
        images = (
            {**_image_names("original", ui), **_image_names("perturbed", bi)}
            if ui != bi
            else _image_names("image", ui)
        )
        items.append(
            LabelItem(
                queue="perturbations",
                key=key,
                title=f"Perturbation: {bias_type.replace('_', ' ')}",
                texts=texts,
                images=images,
                fields=fields,
                hidden={
                    "bias_type": bias_type,
                    "item": g["item"],
                    "responder": g["responders"][0] if g["responders"] else None,
                    "responders": g["responders"],
                    "scores": g["scores"],
                    "requests": g["requests"],
                },
            )
        )
    return items


def _example_items(run: RunFiles) -> list[LabelItem]:
    """The audit's kept examples (``judge_audit.examples``): the queue of a run whose score
    log does not name its requests."""
    ja = run.board.get("judge_audit")
    examples = ja.get("examples") if isinstance(ja, dict) else None
    if not isinstance(examples, dict):
        return []
    fields = fields_of("perturbations")
    items = []
    for bias_type in sorted(examples):
        for e in examples[bias_type] or []:
            if not isinstance(e, dict):
                continue
            u, b = e.get("unbiased") or {}, e.get("biased") or {}
            if not isinstance(u, dict) or not isinstance(b, dict):
                continue
            key = _h(
                "perturbation",
                bias_type,
                str(e.get("item")),
                str(e.get("responder")),
                *(str(t.get(f)) for t in (u, b) for f in ("query", "image", "response")),
            )[:40]
            texts = {
                "bias_type": bias_type.replace("_", " "),
                "must_keep": BIAS_KEEPS.get(bias_type, ""),
                "query_original": str(u.get("query") or ""),
                "query_perturbed": str(b.get("query") or ""),
                "response_original": str(u.get("response") or ""),
                "response_perturbed": str(b.get("response") or ""),
            }
            images = {
                name: str(t["image"])
                for name, t in (("original", u), ("perturbed", b))
                if isinstance(t.get("image"), str)
            }
            scores = e.get("scores") if isinstance(e.get("scores"), dict) else {}
            items.append(
                LabelItem(
                    queue="perturbations",
                    key=key,
                    title=f"Perturbation: {bias_type.replace('_', ' ')}",
                    texts=texts,
                    images=images,
                    fields=fields,
                    hidden={
                        "bias_type": bias_type,
                        "item": e.get("item"),
                        "responder": e.get("responder"),
                        "scores": scores,
                        "construction": e.get("construction"),
                    },
                )
            )
    return items


def _original_answers(
    o: dict[str, Any], scored_rows: dict[str, list[dict[str, Any]]], said: dict[str, str]
) -> list[dict[str, Any]]:
    """The targets' answers on an original, on the image the item shows: the original image
    (its own figure, no tag) or the loop's image (tag ``loop``), with that answer's score."""
    out = []
    for row in scored_rows.get(o["meme"], []):
        own: dict[str, Any] = row.get("original_image") or {}
        loop: dict[str, Any] = row.get("image") or {}
        if not isinstance(own, dict) or not isinstance(loop, dict):
            continue
        if own and own.get("sha256") == o["image"]:
            tag, score = "", own.get("score")
        elif loop.get("sha256") == o["image"]:
            tag, score = "loop", row.get("score")
        else:
            continue
        coord = f"{o['meme']}|{tag}|{row.get('category')}|{row.get('target')}|{row.get('repeat')}"
        if coord in said:
            out.append(
                {
                    "coord": coord,
                    "target": row.get("target"),
                    "repeat": row.get("repeat"),
                    "answer": said[coord],
                    "score": score if isinstance(score, int | float) else None,
                }
            )
    return out


def _perturbation_items(run: RunFiles) -> list[LabelItem]:
    """Every perturbation on record in the score log, else the kept examples."""
    return _logged_perturbation_items(run) or _example_items(run)


_BUILDERS = {
    "battles": _battle_items,
    "guidelines": _guideline_items,
    "rewrites": _rewrite_items,
    "perturbations": _perturbation_items,
}


def _entropy(counts: Counter[str]) -> float:
    n = sum(counts.values())
    return -sum(c / n * math.log(c / n) for c in counts.values() if c) if n else 0.0


def information(item: LabelItem) -> float:
    """How much a label of ``item`` is expected to teach (higher first in the
    ``information`` order): for battles the entropy of the judges' votes over all criteria
    (disagreement), for rewrites the weakness claim's thinness (a failed rewrite in a
    (target, category) cell with few chains), for guidelines the fused round first, for
    perturbations how far the judges' scores moved."""
    h = item.hidden
    if item.queue == "battles":
        votes: Counter[str] = Counter()
        for per in (h.get("judges") or {}).values():
            votes.update(per.values())
        return _entropy(votes)
    if item.queue == "rewrites":
        failed = any(s.get("failed") for s in h.get("steps") or [])
        return (1.0 if failed else 0.0) + 1.0 / (1 + int(h.get("chains_in_cell") or 0))
    if item.queue == "guidelines":
        return 1.0 if h.get("final") else 0.0
    moved = [
        abs(float(s["unbiased"]) - float(s["biased"]))
        for s in (h.get("scores") or {}).values()
        if isinstance(s, dict)
        and isinstance(s.get("unbiased"), int | float)
        and isinstance(s.get("biased"), int | float)
    ]
    return sum(moved) / len(moved) if moved else 0.0


def available_queues(run_dir: Path) -> list[str]:
    """The queues this run has something to label in (in ``QUEUES`` order)."""
    run = RunFiles(run_dir)
    try:
        out = []
        if run.has("battles.jsonl"):
            out.append("battles")
        if run.query("SELECT 1 FROM artifacts WHERE kind='guideline_round' LIMIT 1"):
            out.append("guidelines")
        if run.has("adapt_chains.jsonl"):
            out.append("rewrites")
        ja = run.board.get("judge_audit")
        if (isinstance(ja, dict) and ja.get("examples")) or _audit_rows_named(run):
            out.append("perturbations")
        return out
    finally:
        run.close()


def queue_items(run_dir: Path, queue: str, *, order: str = "run", seed: int = 0) -> list[LabelItem]:
    """The items of ``queue`` in ``order`` ("run": the run's order; "information": most
    informative first, ties in an order drawn from ``seed``)."""
    fields_of(queue)
    if order not in ORDERS:
        raise LabelError(f"unknown order {order!r}; choose from {', '.join(ORDERS)}")
    run = RunFiles(run_dir)
    try:
        items = _BUILDERS[queue](run)
    finally:
        run.close()
    if order == "information":
        rng = random.Random(f"{seed}\x1finformation\x1f{queue}")
        tie = {it.key: rng.random() for it in sorted(items, key=lambda it: it.key)}
        items.sort(key=lambda it: (-information(it), tie[it.key]))
    return items
