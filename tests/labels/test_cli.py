"""``memearena labels``: agreement as JSON and in the report, CSV export and import."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memearena.cli.main import app
from memearena.labels import LabelStore, queue_items

runner = CliRunner()


@pytest.fixture
def run(small_arena: Path, tmp_path: Path) -> Path:
    out = tmp_path / "run"
    out.mkdir()
    for name in ("battles.jsonl", "leaderboard.json", "run.db"):
        shutil.copyfile(small_arena / name, out / name)
    return out


def test_export_is_blind_and_a_filled_in_export_imports_back(run: Path) -> None:
    out = run / "battles.csv"
    res = runner.invoke(
        app, ["labels", "export", str(run), "--queue", "battles", "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    items = queue_items(run, "battles")
    assert len(rows) == len(items)
    text = out.read_text(encoding="utf-8")
    for model in items[0].hidden["pair"]:
        assert model not in text  # model names are hidden
    rows[0]["annotator"], rows[0]["overall"], rows[0]["correctness"] = "=cmd|x", "A", "tie"
    rows[1]["annotator"], rows[1]["overall"] = "ana", "B"
    with out.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    res = runner.invoke(app, ["labels", "import", str(run), str(out)])
    assert res.exit_code == 0, res.output
    assert "2 label(s) written" in res.output
    labels = LabelStore(run, create=False).labels("battles")
    assert {(lab.annotator, lab.item_key, tuple(lab.answer.items())) for lab in labels} == {
        ("=cmd|x", items[0].key, (("correctness", "tie"), ("overall", "A"))),
        ("ana", items[1].key, (("overall", "B"),)),
    }
    # Exported again, the formula-like name is inert in a spreadsheet.
    runner.invoke(app, ["labels", "export", str(run), "--queue", "battles", "--out", str(out)])
    assert "'=cmd|x" in out.read_text(encoding="utf-8")


def test_a_bad_csv_row_names_the_line_and_writes_nothing(run: Path) -> None:
    bad = run / "bad.csv"
    bad.write_text("queue,item_key,annotator,overall\nbattles,k1,ana,A\nbattles,k2,ana,C\n")
    res = runner.invoke(app, ["labels", "import", str(run), str(bad)])
    assert res.exit_code == 2
    assert "bad.csv:3: battles.overall: 'C' is not one of A, B, tie" in res.output.replace("\n", "")
    assert LabelStore(run, create=False).count() == 0


def test_agreement_json_and_the_report_section(run: Path) -> None:
    items = queue_items(run, "battles")
    with LabelStore(run) as store:
        for who in ("ana", "bo"):
            for it in items[:30]:
                store.add(
                    queue="battles",
                    item_key=it.key,
                    annotator=who,
                    answer={"overall": "A", "correctness": "A"},
                )
    res = runner.invoke(app, ["labels", "agreement", str(run), "--json", "--bootstrap", "50"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    kappas = [r for r in doc["figures"] if r["figure"] == "kappa" and r["field"] == "correctness"]
    assert kappas and all(
        r["ci_low"] is None or r["ci_low"] <= r["value"] <= r["ci_high"] for r in kappas
    )
    assert doc["queues"]["battles"]["labelled"] == 30
    board = json.loads((run / "leaderboard.json").read_text())
    assert board["labels"]["queues"]["battles"]["labels"] == 60
    assert "Human labels — agreement with the judges" in (run / "report.html").read_text()


def test_agreement_during_a_run_prints_the_figures_and_leaves_the_report(run: Path) -> None:
    from memearena.store import RunLock

    items = queue_items(run, "battles")
    with LabelStore(run) as store:
        store.add(queue="battles", item_key=items[0].key, annotator="ana", answer={"overall": "A"})
    before = (run / "leaderboard.json").read_bytes()
    with RunLock(run):
        res = runner.invoke(app, ["labels", "agreement", str(run), "--bootstrap", "20"])
    assert res.exit_code == 0, res.output
    assert "1 of" in res.output and "report not updated" in res.output
    assert (run / "leaderboard.json").read_bytes() == before


def test_simulated_labels_drawn_again_are_not_written_twice(run: Path) -> None:
    from memearena.labels.simulated import simulate_labels
    from memearena.sim.annotators import demo_annotators

    first = simulate_labels(run, demo_annotators(2), queues=["battles"])
    count = LabelStore(run, create=False).count()
    again = simulate_labels(run, demo_annotators(2), queues=["battles"])
    assert LabelStore(run, create=False).count() == count == first.labels == again.labels
    assert again.kappa == first.kappa
