"""``export --table labels``: the run's current human labels (``LabelStore.labels()``), the
same rows in CSV and Parquet, CSV cells written inert."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd

from memearena.export import export_table
from memearena.labels import LabelStore


def _two_labels(run: Path) -> None:
    with LabelStore(run) as store:
        store.add(
            queue="rewrites",
            item_key='=HYPERLINK("http://x")|1',
            annotator="@alice",
            answer={"carries_misbelief": "yes", "still_harmful": "no"},
            created=1000.5,
        )
        store.add(
            queue="perturbations",
            item_key="item-2",
            annotator="bob",
            answer={"keeps": "no"},
            created=2000.0,
        )
        # A changed answer: only the latest one is the label exported.
        store.add(
            queue="perturbations",
            item_key="item-2",
            annotator="bob",
            answer={"keeps": "yes"},
            created=3000.0,
        )


def test_labels_export_as_csv_and_parquet(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    _two_labels(run)
    n_csv, csv_path = export_table(run, "labels", "csv", tmp_path / "labels.csv")
    n_pq, pq_path = export_table(run, "labels", "parquet", tmp_path / "labels.parquet")
    assert n_csv == n_pq == 2 and csv_path and pq_path

    frame = pd.read_parquet(pq_path)
    assert list(frame["queue"]) == ["rewrites", "perturbations"]
    assert list(frame["annotator"]) == ["@alice", "bob"]
    assert list(frame["item_key"]) == ['=HYPERLINK("http://x")|1', "item-2"]
    assert [json.loads(a) for a in frame["answer"]] == [
        {"carries_misbelief": "yes", "still_harmful": "no"},
        {"keeps": "yes"},
    ]
    assert list(frame["created"]) == [1000.5, 3000.0]
    assert frame["created"].dtype == "float64" and frame["id"].dtype == "int64"

    with csv_path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    # A cell a spreadsheet would read as a formula starts with an apostrophe.
    assert rows[0]["item_key"] == '\'=HYPERLINK("http://x")|1'
    assert rows[0]["annotator"] == "'@alice"
    assert rows[1]["item_key"] == "item-2" and json.loads(rows[1]["answer"]) == {"keeps": "yes"}
    assert pd.read_csv(csv_path)["queue"].tolist() == ["rewrites", "perturbations"]
    # Exporting leaves the label store closed and as it was.
    with LabelStore(run) as store:
        assert store.count() == 3


def test_the_labels_schema_is_the_label_store_s_record() -> None:
    from dataclasses import fields

    from memearena.export import labels_table
    from memearena.labels import Label

    assert [c.name for c in labels_table().columns] == [f.name for f in fields(Label)]
