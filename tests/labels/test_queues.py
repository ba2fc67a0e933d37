"""The label queues: blind, stable keys, the information order, rewrites from Adapt's files."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from typer.testing import CliRunner

from memearena.cli.main import app
from memearena.labels import LabelStore, available_queues, queue_items
from memearena.labels.agreement import agreement
from memearena.labels.queues import information
from memearena.methods.adapt.labelling import rewrite_key


def test_battles_are_blind_and_keep_their_order_across_reloads(small_arena: Path) -> None:
    assert available_queues(small_arena) == ["battles", "guidelines"]
    items = queue_items(small_arena, "battles")
    again = queue_items(small_arena, "battles", order="information", seed=7)
    assert sorted(i.key for i in items) == sorted(i.key for i in again)
    by_key = {i.key: i for i in again}
    for it in items:
        assert by_key[it.key].hidden["A"] == it.hidden["A"]  # A/B from the key, not the order
        shown = " ".join([it.key, it.title, *it.texts.values(), *it.images.values()])
        for name in it.hidden["pair"]:
            assert name not in shown
        for judge in it.hidden["judges"]:
            assert judge not in shown
    firsts = {it.hidden["A"] == it.hidden["pair"][0] for it in items}
    assert firsts == {True, False}  # both orders occur


def test_information_order_puts_the_battles_judges_disagree_on_first(small_arena: Path) -> None:
    items = queue_items(small_arena, "battles", order="information")
    scores = [information(it) for it in items]
    assert scores == sorted(scores, reverse=True) and scores[0] > scores[-1]


def test_guideline_versions_are_items_once_with_their_rounds(small_arena: Path) -> None:
    items = queue_items(small_arena, "guidelines")
    assert len({i.key for i in items}) == len(items)
    per_meme: dict[str, set[int]] = {}
    for it in items:
        rounds = set(it.hidden["rounds"])
        assert not rounds & per_meme.get(it.hidden["meme"], set())
        per_meme.setdefault(it.hidden["meme"], set()).update(rounds)
    assert all(0 in r for r in per_meme.values())
    assert sum(it.hidden["final"] for it in items) == len(per_meme)


def _adapt_run(tmp_path: Path) -> Path:
    run = tmp_path / "adapt"
    run.mkdir()
    steps = [
        {
            "step": 1,
            "meme": "m1",
            "parent_text": "ORIGINAL ONE",
            "text": "rewrite one",
            "misbelief": "b1",
            "score_after": 2.0,
            "image": {"sha256": "ab" * 32},
        },
        {
            "step": 1,
            "meme": "m2",
            "parent_text": "ORIGINAL TWO",
            "text": "=rewrite two",
            "misbelief": "b2",
            "score_after": 8.0,
        },
    ]
    chains = [
        {
            "target": "t1",
            "category": "Race",
            "mode": "conditional",
            "repeat": 0,
            "seed": s["meme"],
            "steps": [s],
        }
        for s in steps
    ]
    (run / "adapt_chains.jsonl").write_text("".join(json.dumps(c) + "\n" for c in chains))
    (run / "leaderboard.json").write_text(json.dumps({"adapt": {"failure_threshold": 4.0}}))
    with (run / "adapt_human_key.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["item", "kind", "meme", "category", "text", "image"])
        w.writerow(["item-00001", "refined", "m1", "Race", "rewrite one", ""])
        w.writerow(["item-00002", "refined", "m2", "Race", "'=rewrite two", ""])
        w.writerow(["item-00003", "original", "m1", "Race", "ORIGINAL ONE", ""])
    return run


def test_the_adapt_sheet_imports_into_the_rewrites_queue(tmp_path: Path) -> None:
    run = _adapt_run(tmp_path)
    items = {it.key: it for it in queue_items(run, "rewrites")}
    assert {it.hidden["kind"] for it in items.values()} == {"refined", "original"}
    assert rewrite_key("refined", "m2", "=rewrite two") in items
    sheet = run / "filled.csv"
    sheet.write_text(
        "item,image,text,harmful,category\nitem-00001,,x,yes,\n"
        "item-00002,,x,0,\nitem-00003,,x,1,\nitem-00009,,x,1,\nitem-00004,,x,,\n"
    )
    res = CliRunner().invoke(app, ["labels", "import", str(run), str(sheet), "--annotator", "ana"])
    assert res.exit_code == 0, res.output
    assert "3 label(s) written" in res.output and "1 row(s) not read" in res.output
    labels = LabelStore(run, create=False).labels("rewrites")
    assert all(lab.item_key in items for lab in labels) and len(labels) == 3
    figures = agreement(run, n_boot=50)
    (failed,) = figures.figure("failure_rate", judge="t1")
    (confirmed,) = figures.figure("failure_rate_human_harmful", judge="t1")
    assert failed["value"] == 0.5 and failed["n"] == 2
    assert confirmed["value"] == 1.0 and confirmed["n"] == 1  # only m1's rewrite is harmful
    shares = {r["group"]: r["value"] for r in figures.figure("harmful_share")}
    assert shares == {"original": 1.0, "refined": 0.5}


def test_queues_figures_and_labels_leave_run_db_byte_identical(
    small_arena: Path, tmp_path: Path
) -> None:
    import hashlib
    import shutil

    run = tmp_path / "run"
    run.mkdir()
    for name in ("battles.jsonl", "leaderboard.json", "run.db"):
        shutil.copyfile(small_arena / name, run / name)
    before = hashlib.sha256((run / "run.db").read_bytes()).hexdigest()
    for queue in available_queues(run):
        items = queue_items(run, queue, order="information")
        with LabelStore(run) as store:
            field = items[0].fields[0]
            store.add(
                queue=queue,
                item_key=items[0].key,
                annotator="ana",
                answer={field.name: field.choices[0]},
            )
    agreement(run, n_boot=20)
    assert hashlib.sha256((run / "run.db").read_bytes()).hexdigest() == before
    # A read-only reader of a WAL database may leave an empty log and its index; nothing more.
    wal = run / "run.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0
