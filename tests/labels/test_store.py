"""The label store: append-only, validated, the latest answer per annotator wins, two writers."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from memearena.errors import MemearenaError
from memearena.labels import LabelError, LabelStore, fields_of


def test_a_changed_answer_is_a_new_row_and_the_latest_wins(tmp_path: Path) -> None:
    with LabelStore(tmp_path) as store:
        store.add(queue="battles", item_key="k1", annotator="ana", answer={"overall": "A"})
        store.add(queue="battles", item_key="k1", annotator="ana", answer={"overall": "tie"})
        store.add(queue="battles", item_key="k1", annotator="bo", answer={"overall": "B"})
        assert len(store.all_labels()) == 3
        current = {(lab.annotator, lab.answer["overall"]) for lab in store.labels("battles")}
        assert current == {("ana", "tie"), ("bo", "B")}
        assert store.done_keys("battles", "ana") == {"k1"}
        assert store.done_keys("guidelines", "ana") == set()


def test_rows_cannot_be_updated_or_deleted(tmp_path: Path) -> None:
    LabelStore(tmp_path).add(
        queue="perturbations", item_key="p", annotator="a", answer={"keeps": "no"}
    )
    db = sqlite3.connect(tmp_path / "labels.sqlite")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        db.execute("UPDATE labels SET answer='{}'")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        db.execute("DELETE FROM labels")
    db.close()


@pytest.mark.parametrize(
    ("queue", "answer", "message"),
    [
        ("nope", {"overall": "A"}, "unknown queue"),
        ("battles", {"overall": "C"}, "battles.overall: 'C' is not one of A, B, tie"),
        ("battles", {"colour": "A"}, "unknown field 'colour'"),
        ("battles", {}, "no field answered"),
        ("guidelines", {"readability": 4}, "not one of 1, 2, 3"),
        ("rewrites", {"still_harmful": True}, "must be one of"),
    ],
)
def test_a_bad_answer_is_one_line_naming_the_field(
    tmp_path: Path, queue: str, answer: dict, message: str
) -> None:
    store = LabelStore(tmp_path)
    with pytest.raises(LabelError, match=message) as err:
        store.add(queue=queue, item_key="k", annotator="a", answer=answer)
    assert isinstance(err.value, MemearenaError) and "\n" not in str(err.value)
    assert store.count() == 0


@pytest.mark.parametrize("name", ["", "   ", "a\x1b[31mb", "x" * 65, "a\u202eb"])
def test_an_annotator_name_with_control_characters_or_empty_is_refused(
    tmp_path: Path, name: str
) -> None:
    with pytest.raises(LabelError, match="annotator name"):
        LabelStore(tmp_path).add(
            queue="battles", item_key="k", annotator=name, answer={"overall": "A"}
        )


def test_guideline_answers_are_stored_in_field_order_as_text(tmp_path: Path) -> None:
    lab = LabelStore(tmp_path).add(
        queue="guidelines",
        item_key="g",
        annotator="a",
        answer={"conciseness": 2, "readability": "3"},
    )
    assert lab.answer == {"readability": "3", "conciseness": "2"}
    assert fields_of("guidelines")[0].name == "readability"


def test_two_writers_at_once_keep_every_label(tmp_path: Path) -> None:
    LabelStore(tmp_path).close()

    def write(who: str) -> None:
        store = LabelStore(tmp_path)  # one connection per writer, as two processes would have
        for i in range(100):
            store.add(queue="battles", item_key=f"k{i}", annotator=who, answer={"overall": "A"})
        store.close()

    threads = [threading.Thread(target=write, args=(w,)) for w in ("ana", "bo")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store = LabelStore(tmp_path, create=False)
    assert store.count() == 200
    assert len(store.done_keys("battles", "ana")) == len(store.done_keys("battles", "bo")) == 100


def test_a_missing_store_reads_empty_without_creating_a_file(tmp_path: Path) -> None:
    store = LabelStore(tmp_path, create=False)
    assert store.labels() == [] and not (tmp_path / "labels.sqlite").exists()
    with pytest.raises(LabelError, match="not open for writing"):
        store.add(queue="battles", item_key="k", annotator="a", answer={"overall": "A"})


def test_the_store_file_is_private(tmp_path: Path) -> None:
    LabelStore(tmp_path).close()
    assert (tmp_path / "labels.sqlite").stat().st_mode & 0o077 == 0
