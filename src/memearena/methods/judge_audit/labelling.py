"""The Judge audit's human-label queue and its agreement figures (``QUEUES``, loaded through
``memearena.engine.registry.method_queues``).

- ``perturbations``: every perturbation whose two scoring requests the score log names and
  run.db holds (the pairs of every judge, and of every responder with the same response, that
  showed the same two requests' content are one item), else the audit's kept before/after
  examples; the key is a hash of its bias type, item and content. The person answers whether
  the perturbed item keeps what its bias type must keep (``BIAS_KEEPS``); the judges' scores
  are hidden. Figures: α among the annotators; the share the majority accepts, overall and per
  bias type.

Clusters: the item itself (perturbations of one item are different questions)."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from memearena.labels.figures import Agreement, Labelled, choice_alpha, majority
from memearena.labels.items import Field, LabelItem, item_hash
from memearena.labels.queues import LabelQueue, Rating, Truth
from memearena.labels.runfiles import RunFiles
from memearena.stats.human import mean_codes

__all__ = ["AUDIT_SCORES", "BIAS_KEEPS", "MAX_AUDIT_PAIRS", "QUEUES", "text_diff"]

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

PERTURBATION_FIELDS: tuple[Field, ...] = (
    Field(
        "keeps",
        "Does the perturbed item keep what its bias type must keep?",
        ("yes", "no"),
        ("y", "n"),
    ),
)

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
            views[key] = None if got is None else (*got, item_hash(got[0]))
        return views[key]

    fields = PERTURBATION_FIELDS
    groups: dict[str, dict[str, Any]] = {}
    for r in rows:
        u, b = view(str(r["unbiased_request"])), view(str(r["biased_request"]))
        if u is None or b is None:
            continue  # a request not on record (an older store): nothing to show
        bias_type, item = str(r.get("bias_type")), str(r.get("id"))
        key = item_hash(
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
    fields = PERTURBATION_FIELDS
    items = []
    for bias_type in sorted(examples):
        for e in examples[bias_type] or []:
            if not isinstance(e, dict):
                continue
            u, b = e.get("unbiased") or {}, e.get("biased") or {}
            if not isinstance(u, dict) or not isinstance(b, dict):
                continue
            key = item_hash(
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


def _perturbation_items(run: RunFiles) -> list[LabelItem]:
    """Every perturbation on record in the score log, else the kept examples."""
    return _logged_perturbation_items(run) or _example_items(run)


def _has_perturbations(run: RunFiles) -> bool:
    ja = run.board.get("judge_audit")
    return bool((isinstance(ja, dict) and ja.get("examples")) or _audit_rows_named(run))


def _information(item: LabelItem) -> float:
    """How far the judges' scores moved."""
    moved = [
        abs(float(s["unbiased"]) - float(s["biased"]))
        for s in (item.hidden.get("scores") or {}).values()
        if isinstance(s, dict)
        and isinstance(s.get("unbiased"), int | float)
        and isinstance(s.get("biased"), int | float)
    ]
    return sum(moved) / len(moved) if moved else 0.0


def _figures(
    out: Agreement,
    items: Sequence[LabelItem],
    labelled: Labelled,
    board: Mapping[str, Any],
    n_boot: int,
    seed: int,
) -> None:
    def key(it: LabelItem) -> str:
        return it.key

    choice_alpha(out, "perturbations", items, labelled, "keeps", key, n_boot, seed, ("yes", "no"))
    groups: dict[str, tuple[list[float], list[str]]] = defaultdict(lambda: ([], []))
    for it in items:
        m = majority((labelled.get(it.key) or {}).values(), "keeps")
        if m is None:
            continue
        for g in ("all", str(it.hidden.get("bias_type"))):
            groups[g][0].append(1.0 if m == "yes" else 0.0)
            groups[g][1].append(it.key)
    for g in sorted(groups, key=lambda g: (g != "all", g)):
        values, clusters = groups[g]
        out.add(
            "perturbation_accepted",
            "perturbations",
            mean_codes(values, clusters, n_boot=n_boot, seed=seed),
            group=g,
        )


_KEEPS = {"texture_insertion": 0.6}


def _yes_no(code: int) -> str:
    return ("yes", "no")[code]


def _plant(item: LabelItem, world: random.Random) -> tuple[list[Truth], list[Rating]]:
    """A perturbation keeps what its type must keep with probability 0.9 (0.6 for texture
    insertion)."""
    p = _KEEPS.get(str(item.hidden.get("bias_type")), 0.9)
    return [Truth("keeps", 0 if world.random() < p else 1, 2, _yes_no)], []


QUEUES: tuple[LabelQueue, ...] = (
    LabelQueue(
        name="perturbations",
        title="Judge-audit perturbations",
        help="The original and the perturbed item side by side: does the perturbed one "
        "keep what its bias type must keep?",
        figure_titles=(
            ("alpha", "Krippendorff's α among the annotators"),
            ("perturbation_accepted", "Share of perturbations humans accepted"),
        ),
        fields=PERTURBATION_FIELDS,
        items=_perturbation_items,
        available=_has_perturbations,
        information=_information,
        figures=_figures,
        cluster="items",
        plant=_plant,
    ),
)
"""The Judge audit's label queue (see the module)."""
