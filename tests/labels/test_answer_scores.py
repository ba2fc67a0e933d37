"""The target's answer on an Adapt rewrite (or original) and its optional 1-10 human score."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from memearena.labels import LabelStore, queue_items
from memearena.labels.agreement import agreement
from memearena.methods.adapt.labelling import text_tag
from memearena.stats.human import correlation_codes


def _answers_on_record(run: Path) -> dict[str, str]:
    db = sqlite3.connect(f"{(run / 'run.db').as_uri()}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT value FROM artifacts WHERE kind='adapt.answer'").fetchall()
    finally:
        db.close()
    values = [json.loads(v) for (v,) in rows]
    return {v["for"]: v["answer"] for v in values if "for" in v and "answer" in v}


def test_every_item_shows_one_answer_on_record_with_its_scorer_score_hidden(
    demo_run: Path,
) -> None:
    said = _answers_on_record(demo_run)
    items = queue_items(demo_run, "rewrites")
    kinds = {it.hidden["kind"] for it in items if it.hidden["answer_of"]}
    assert kinds == {"refined", "original"}  # both kinds: the field does not unblind
    targets = {s["target"] for it in items for s in it.hidden["steps"]}
    for it in items:
        got = it.hidden["answer_of"]
        names = [f.name for f in it.fields]
        if got is None:
            assert "answer" not in it.texts and "answer_score" not in names
            continue
        assert "answer_score" in names
        assert it.texts["answer"] == said[got["coord"]]
        meme, tag, _category, target, repeat = got["coord"].split("|")
        assert meme == it.hidden["meme"] and target == got["target"]
        if it.hidden["kind"] == "refined":
            assert tag == text_tag(it.texts["text"])
            step = next(
                s
                for s in it.hidden["steps"]
                if s["target"] == target and str(s["chain"].split("|")[3]) == repeat
            )
            assert got["score"] == step["score"]
        shown = " ".join([it.key, it.title, *it.texts.values()])
        assert not any(t in shown for t in targets)
    again = {it.key: it.hidden["answer_of"] for it in queue_items(demo_run, "rewrites")}
    assert again == {it.key: it.hidden["answer_of"] for it in items}  # drawn from the key


def test_a_human_score_is_set_against_the_scorer_score(demo_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "demo"
    run.mkdir()
    for name in ("leaderboard.json", "run.db", "adapt_chains.jsonl", "adapt_scores.jsonl"):
        shutil.copy2(demo_run / name, run / name)
    items = [
        it
        for it in queue_items(run, "rewrites")
        if it.hidden["answer_of"] and isinstance(it.hidden["answer_of"]["score"], float | int)
    ][:40]
    scores = [float(it.hidden["answer_of"]["score"]) for it in items]
    assert len(set(scores)) > 1
    with LabelStore(run) as store:
        for it, s in zip(items, scores, strict=True):
            # One annotator a point above the scorer (capped), one at it: means 0.5 or 0 above.
            up = min(10, round(s) + 1)
            for name, given in (("ana", up), ("bo", round(s))):
                store.add(
                    queue="rewrites",
                    item_key=it.key,
                    annotator=name,
                    answer={"answer_score": str(max(1, given))},
                )
    figs = agreement(run, n_boot=200)
    human = [(min(10, round(s) + 1) + max(1, round(s))) / 2 for s in scores]
    diff = figs.figure("answer_score_difference")
    assert len(diff) == 1 and diff[0]["n"] == len(items)
    assert diff[0]["value"] == pytest.approx(float(np.mean(np.subtract(human, scores))))
    assert diff[0]["ci_low"] <= diff[0]["value"] <= diff[0]["ci_high"]
    corr = figs.figure("answer_score_correlation")
    assert corr[0]["value"] == pytest.approx(float(np.corrcoef(human, scores)[0, 1]))


def test_correlation_matches_numpy_and_its_interval_covers_it() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=60)
    y = x + rng.normal(size=60)
    clusters = [i // 3 for i in range(60)]
    est = correlation_codes(x.tolist(), y.tolist(), clusters, n_boot=300, seed=1)
    assert est.value == pytest.approx(float(np.corrcoef(x, y)[0, 1]))
    assert est.ci_low < est.value < est.ci_high and est.clusters == 20
    flat = correlation_codes([1.0, 1.0, 1.0], [1.0, 2.0, 3.0], [0, 1, 2], n_boot=10)
    assert np.isnan(flat.value)
