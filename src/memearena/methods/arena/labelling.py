"""The Arena's human-label queues and their agreement figures (``QUEUES``, loaded through
``memearena.engine.registry.method_queues``).

- ``battles``: the judged pairs, blind: a battle's A/B order is drawn from its key alone
  (never from a seed), so a label's ``A`` keeps meaning the same model whatever order the
  queue is shown in; its key is the two answers' request hashes. Hidden: the model behind A
  and B, the pair, the judges' verdicts. Figures: each judge's Cohen's κ and percent agreement
  with the human majority per criterion (and ``all`` pooled), α among the annotators, each
  judge's ranking (and the joint one) against the Bradley–Terry ranking of the human votes.
- ``guidelines``: every version of every fusion round's guideline (a round that left the text
  as it was is the same version), keyed by the round's request hash; hidden: the round(s),
  whether it is the fused one, the judge. Figures: each axis's mean rating (1-3) over all
  rounds, the fused round and per round; α per axis.

Clusters: the meme (a meme's pairs and rounds are correlated)."""

from __future__ import annotations

import json
import math
import random
from collections import Counter, defaultdict
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from memearena.labels.figures import Agreement, Labelled
from memearena.labels.items import Field, LabelItem, item_hash
from memearena.labels.queues import LabelQueue, Rating, Truth
from memearena.labels.runfiles import RunFiles
from memearena.prompts.schemas import CRITERIA
from memearena.stats.human import (
    alpha_codes,
    bt_ranking,
    cohen_kappa_codes,
    mean_codes,
    plurality,
    ranking_agreement,
)

__all__ = ["BATTLE_CHOICES", "GUIDELINE_AXES", "QUEUES", "battle_winner"]

GUIDELINE_AXES: tuple[str, ...] = (
    "readability",
    "informativeness",
    "soundness",
    "persuasiveness",
    "conciseness",
)
"""MemeArena's five guideline axes, each rated 1 (poor) to 3 (good)."""
BATTLE_CHOICES: tuple[str, ...] = ("A", "B", "tie")


def _criterion_label(name: str) -> str:
    return name.replace("_", " ").capitalize()


BATTLE_FIELDS: tuple[Field, ...] = (
    *(Field(c, _criterion_label(c), BATTLE_CHOICES, ("a", "b", "t")) for c in CRITERIA),
    Field("overall", "Overall", BATTLE_CHOICES, ("a", "b", "t")),
)
GUIDELINE_FIELDS: tuple[Field, ...] = tuple(
    Field(a, _criterion_label(a), ("1", "2", "3"), ("1", "2", "3")) for a in GUIDELINE_AXES
)


def _flip(key: str) -> bool:
    """Whether a battle shows its second model as A: drawn from the key alone."""
    return int(item_hash("ab-order", key)[:8], 16) % 2 == 1


def battle_winner(answer: str, hidden: Mapping[str, Any]) -> str | None:
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
                fields=BATTLE_FIELDS,
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
                    fields=GUIDELINE_FIELDS,
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


def _has_battles(run: RunFiles) -> bool:
    return run.has("battles.jsonl")


def _has_guidelines(run: RunFiles) -> bool:
    return bool(run.query("SELECT 1 FROM artifacts WHERE kind='guideline_round' LIMIT 1"))


def _entropy(counts: Counter[str]) -> float:
    n = sum(counts.values())
    return -sum(c / n * math.log(c / n) for c in counts.values() if c) if n else 0.0


def _battle_information(item: LabelItem) -> float:
    """The entropy of the judges' votes over all criteria (their disagreement)."""
    votes: Counter[str] = Counter()
    for per in (item.hidden.get("judges") or {}).values():
        votes.update(per.values())
    return _entropy(votes)


def _guideline_information(item: LabelItem) -> float:
    """The fused round first."""
    return 1.0 if item.hidden.get("final") else 0.0


# ---- figures -----------------------------------------------------------------------------------


def _code(outcome: str | None, pair: Sequence[str]) -> int | None:
    if outcome is None:
        return None
    if outcome == "tie":
        return 2
    return {pair[0]: 0, pair[1]: 1}.get(outcome)


def _battle_figures(
    out: Agreement,
    items: Sequence[LabelItem],
    labelled: Labelled,
    board: Mapping[str, Any],
    n_boot: int,
    seed: int,
) -> None:
    fields = (*CRITERIA, "overall")
    human: dict[str, dict[str, list[int]]] = {f: {} for f in fields}
    meme: dict[str, str] = {}
    for it in items:
        answers = labelled.get(it.key)
        if not answers:
            continue
        meme[it.key] = str(it.hidden.get("meme"))
        pair = it.hidden["pair"]
        for ans in answers.values():
            for f in fields:
                code = _code(battle_winner(str(ans.get(f, "")), it.hidden), pair)
                if code is not None:
                    human[f].setdefault(it.key, []).append(code)
    by_key = {it.key: it for it in items}
    pooled: dict[str, tuple[list[int], list[int], list[str]]] = defaultdict(lambda: ([], [], []))
    for k, f in enumerate(fields):
        units = human[f]
        if not units:
            continue
        keys = sorted(units)
        multi = [key for key in keys if len(units[key]) >= 2]
        if multi:
            out.add(
                "alpha",
                "battles",
                alpha_codes(
                    [units[key] for key in multi],
                    [meme[key] for key in multi],
                    3,
                    n_boot=n_boot,
                    seed=seed + k,
                ),
                field_=f,
            )
        if f == "overall":
            continue
        majority = {key: plurality(units[key]) for key in keys}
        judged: dict[str, tuple[list[int], list[int], list[str]]] = defaultdict(
            lambda: ([], [], [])
        )
        for key in keys:
            m = majority[key]
            if m is None:
                continue
            it = by_key[key]
            for judge, per in (it.hidden.get("judges") or {}).items():
                code = _code(per.get(f), it.hidden["pair"])
                if code is None:
                    continue
                for target in (judged[judge], pooled[judge]):
                    target[0].append(code)
                    target[1].append(int(m))  # type: ignore[call-overload]
                    target[2].append(meme[key])
        for judge in sorted(judged):
            x, y, c = judged[judge]
            kappa, pct = cohen_kappa_codes(x, y, c, 3, n_boot=n_boot, seed=seed)
            out.add("kappa", "battles", kappa, judge=judge, field_=f)
            out.add("percent_agreement", "battles", pct, judge=judge, field_=f)
    for judge in sorted(pooled):
        x, y, c = pooled[judge]
        kappa, pct = cohen_kappa_codes(x, y, c, 3, n_boot=n_boot, seed=seed)
        out.add("kappa", "battles", kappa, judge=judge, field_="all")
        out.add("percent_agreement", "battles", pct, judge=judge, field_="all")
    _rankings(out, items, labelled, board, n_boot, seed)


def _rankings(
    out: Agreement,
    items: Sequence[LabelItem],
    labelled: Labelled,
    board: Mapping[str, Any],
    n_boot: int,
    seed: int,
) -> None:
    """Each judge's Arena ranking against the ranking the human votes give (Bradley–Terry over
    every annotator's per-criterion votes, as the Arena counts its judges' verdicts)."""
    arena = board.get("arena") if isinstance(board.get("arena"), dict) else {}
    rankings: dict[str, list[str]] = {}
    overall = arena.get("overall") if isinstance(arena, dict) else None
    if isinstance(overall, list):
        rankings["arena (joint)"] = [str(r["model"]) for r in overall if isinstance(r, dict)]
    for j in arena.get("judges") or [] if isinstance(arena, dict) else []:
        if isinstance(j, dict) and isinstance(j.get("ranking"), list):
            rankings[str(j.get("judge"))] = [str(m) for m in j["ranking"]]
    models = sorted({m for it in items for m in it.hidden.get("pair", [])})
    index = {m: i for i, m in enumerate(models)}
    outcomes: list[tuple[int, int, float]] = []
    clusters: list[Hashable] = []
    for it in items:
        for ans in (labelled.get(it.key) or {}).values():
            for f in CRITERIA:
                won = battle_winner(str(ans.get(f, "")), it.hidden)
                if won is None:
                    continue
                a, b = it.hidden["pair"]
                score = 0.5 if won == "tie" else float(won == a)
                outcomes.append((index[a], index[b], score))
                clusters.append(str(it.hidden.get("meme")))
    if not outcomes or len(models) < 2:
        return
    point, boot = bt_ranking(outcomes, clusters, len(models), n_boot=n_boot, seed=seed)
    n_clusters = len(set(clusters))
    human_order = [models[i] for i in np.argsort(-point, kind="stable")]
    out.queues.setdefault("battles", {})["human_ranking"] = human_order
    for name, ranking in rankings.items():
        nd, tau = ranking_agreement(
            ranking, models, point, boot, n=len(outcomes), clusters=n_clusters
        )
        out.add("ranking_ndcg", "battles", nd, judge=name)
        out.add("ranking_kendall_tau", "battles", tau, judge=name)


def _guideline_figures(
    out: Agreement,
    items: Sequence[LabelItem],
    labelled: Labelled,
    board: Mapping[str, Any],
    n_boot: int,
    seed: int,
) -> None:
    for k, axis in enumerate(GUIDELINE_AXES):
        groups: dict[str, tuple[list[float], list[str]]] = defaultdict(lambda: ([], []))
        units: list[list[int]] = []
        unit_clusters: list[str] = []
        for it in items:
            ratings = [int(a[axis]) for a in (labelled.get(it.key) or {}).values() if a.get(axis)]
            if not ratings:
                continue
            value, cluster = sum(ratings) / len(ratings), str(it.hidden.get("meme"))
            rounds = it.hidden.get("rounds") or [it.hidden.get("round")]
            names = ["all", *(f"round {r}" for r in rounds)]
            if it.hidden.get("final"):
                names.append("fused")
            for g in names:
                groups[g][0].append(value)
                groups[g][1].append(cluster)
            if len(ratings) >= 2:
                units.append([r - 1 for r in ratings])
                unit_clusters.append(cluster)
        for g in sorted(groups, key=_group_order):
            values, clusters = groups[g]
            out.add(
                "guideline_mean",
                "guidelines",
                mean_codes(values, clusters, n_boot=n_boot, seed=seed + k),
                field_=axis,
                group=g,
            )
        if units:
            # Ratings are ordered, but α is nominal here: agreement on the exact rating.
            out.add(
                "alpha",
                "guidelines",
                alpha_codes(units, unit_clusters, 3, n_boot=n_boot, seed=seed + k),
                field_=axis,
            )


def _group_order(g: str) -> tuple[int, int]:
    if g == "all":
        return (0, 0)
    if g == "fused":
        return (1, 0)
    tail = g.rsplit(" ", 1)[-1]
    return (2, int(tail) if tail.isdigit() else 0)


# ---- the simulated world's truths ---------------------------------------------------------------


def _sim_code(outcome: str | None, pair: Sequence[str]) -> int:
    if outcome == pair[0]:
        return 0
    if outcome == pair[1]:
        return 1
    return 2


def _sim_plurality(codes: Sequence[int]) -> int:
    counts = Counter(codes).most_common()
    if not counts or (len(counts) > 1 and counts[0][1] == counts[1][1]):
        return 2
    return counts[0][0]


def _plant_battle(item: LabelItem, world: random.Random) -> tuple[list[Truth], list[Rating]]:
    """A criterion's truth is the judges' plurality on it (a tie when their top is shared), so
    every judge's disagreement with the truth is its disagreement with the panel; the overall
    answer's is the plurality of the criteria truths."""
    pair = item.hidden["pair"]
    judges = item.hidden.get("judges") or {}

    def letter(code: int) -> str:
        if code == 2:
            return "tie"
        return "A" if item.hidden["A"] == pair[code] else "B"

    truths: list[Truth] = []
    ratings: list[Rating] = []
    for c in CRITERIA:
        votes = [_sim_code(per.get(c), pair) for per in judges.values() if c in per]
        if not votes:
            continue
        t = _sim_plurality(votes)
        truths.append(Truth(c, t, 3, letter))
        ratings += [
            Rating(judge, _sim_code(per[c], pair), t, 3)
            for judge, per in judges.items()
            if c in per
        ]
    overall = _sim_plurality([t.code for t in truths])
    return [*truths, Truth("overall", overall, 3, letter)], ratings


def _rating(code: int) -> str:
    return str(code + 1)


def _plant_guideline(item: LabelItem, world: random.Random) -> tuple[list[Truth], list[Rating]]:
    """An axis's rating is 1 before round 2, 2 before round 5, 3 from then on (a quality that
    plateaus), by the version's first round."""
    rnd = int(item.hidden.get("round") or 0)
    t = 0 if rnd < 2 else 1 if rnd < 5 else 2
    return [Truth(axis, t, 3, _rating) for axis in GUIDELINE_AXES], []


QUEUES: tuple[LabelQueue, ...] = (
    LabelQueue(
        name="battles",
        title="Arena battles (blind)",
        help="Which answer is better? Model names are hidden and the order is random.",
        figure_titles=(
            ("kappa", "Cohen's κ of each judge against the human majority"),
            ("percent_agreement", "Percent agreement of each judge with the human majority"),
            ("alpha", "Krippendorff's α among the annotators"),
            ("ranking_ndcg", "Each judge's ranking against the human-vote ranking (NDCG)"),
            (
                "ranking_kendall_tau",
                "Each judge's ranking against the human-vote ranking (Kendall τ)",
            ),
        ),
        fields=BATTLE_FIELDS,
        items=_battle_items,
        available=_has_battles,
        information=_battle_information,
        figures=_battle_figures,
        plant=_plant_battle,
    ),
    LabelQueue(
        name="guidelines",
        title="Guidelines",
        help="Rate the guideline 1 (poor) to 3 (good) on each axis.",
        figure_titles=(
            ("alpha", "Krippendorff's α among the annotators"),
            ("guideline_mean", "Mean rating of each guideline axis (1-3)"),
        ),
        fields=GUIDELINE_FIELDS,
        items=_guideline_items,
        available=_has_guidelines,
        information=_guideline_information,
        figures=_guideline_figures,
        plant=_plant_guideline,
    ),
)
"""The Arena's label queues (see the module)."""
