"""Battle file reader: good files, every kind of malformed line, skip_bad."""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memearena.errors import DataError
from memearena.stats import WINNERS, Battle, load_battles, parse_battles
from memearena.stats import battles as battles_module
from memearena.stats.battles import BattleTable, parse_battle_table, read_battle_table


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


GOOD = [
    {"model_a": "x", "model_b": "y", "winner": "model_a", "judge": "j1", "criterion": "c1"},
    {"model_a": "y", "model_b": "z", "winner": "tie", "item": 17, "source": "fhm"},
    {"model_a": "z", "model_b": "x", "winner": "tie (bothbad)", "judge": None},
    {"model_a": "x", "model_b": "z", "winner": "model_b"},
]


def test_good_jsonl_keeps_optional_and_extra_fields(tmp_path: Path) -> None:
    path = write(tmp_path, "b.jsonl", "\n".join(json.dumps(r) for r in GOOD) + "\n\n")
    battles, skipped = load_battles(path)
    assert skipped == []
    assert [b.winner for b in battles] == ["model_a", "tie", "tie (bothbad)", "model_b"]
    assert battles[0].judge == "j1" and battles[0].criterion == "c1"
    assert battles[1].item == "17"  # integer item ids are kept as text
    assert battles[1].field("source") == "fhm"
    assert battles[0].field("source") is None
    assert [b.score_a for b in battles] == [1.0, 0.5, 0.5, 0.0]


def test_json_array_is_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, "b.json", json.dumps(GOOD, indent=2))
    battles, _ = load_battles(path)
    assert len(battles) == 4 and battles[2].model_a == "z"


def test_json_array_error_names_the_elements_line(tmp_path: Path) -> None:
    text = '[\n  {"model_a": "x", "model_b": "y", "winner": "model_a"},\n  {"model_a": "x"}\n]'
    path = write(tmp_path, "b.json", text)
    with pytest.raises(DataError, match=r"b\.json:3: field 'model_b': missing"):
        load_battles(path)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "invalid JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"model_b": "y", "winner": "tie"}', "field 'model_a': missing"),
        ('{"model_a": "x", "model_b": "y"}', "field 'winner': missing"),
        (
            '{"model_a": "", "model_b": "y", "winner": "tie"}',
            "field 'model_a': must be a non-empty",
        ),
        ('{"model_a": "x", "model_b": 3, "winner": "tie"}', "field 'model_b': must be a non-empty"),
        ('{"model_a": "x", "model_b": "x", "winner": "tie"}', "field 'model_b': must differ"),
        ('{"model_a": "x", "model_b": "y", "winner": "tie", "judge": 5}', "field 'judge'"),
    ],
)
def test_malformed_line_names_file_line_and_field(tmp_path: Path, line: str, message: str) -> None:
    rows = [json.dumps(GOOD[0])] * 3 + [line] + [json.dumps(GOOD[1])]
    path = write(tmp_path, "battles.jsonl", "\n".join(rows))
    with pytest.raises(DataError) as info:
        load_battles(path)
    text = str(info.value)
    assert text.startswith(f"{path}:4: ")
    assert message in text
    assert "\n" not in text


def test_bad_winner_message_is_exact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [json.dumps(GOOD[0])] * 6 + ['{"model_a": "x", "model_b": "y", "winner": "A"}']
    write(tmp_path, "battles.jsonl", "\n".join(rows))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError) as info:
        load_battles("battles.jsonl")
    assert str(info.value) == (
        "battles.jsonl:7: field 'winner': must be one of model_a, model_b, tie, "
        "tie (bothbad); got 'A'"
    )


def test_blank_lines_still_count_for_line_numbers() -> None:
    text = json.dumps(GOOD[0]) + "\n\n" + '{"model_a": "x"}\n'
    with pytest.raises(DataError, match=r"^f:3: "):
        parse_battles(text, source="f")


def test_skip_bad_records_and_skips(tmp_path: Path) -> None:
    self_battle = '{"model_a": "q", "model_b": "q", "winner": "tie"}'
    rows = [json.dumps(GOOD[0]), "oops", json.dumps(GOOD[1]), self_battle]
    path = write(tmp_path, "b.jsonl", "\n".join(rows))
    battles, skipped = load_battles(path, skip_bad=True)
    assert len(battles) == 2
    assert [s.line for s in skipped] == [2, 4]
    assert "invalid JSON" in skipped[0].reason and "must differ" in skipped[1].reason


def test_missing_file_is_a_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no such file"):
        load_battles(tmp_path / "nope.jsonl")


def test_battle_model_rejects_self_battles() -> None:
    with pytest.raises(ValueError):
        Battle(model_a="x", model_b="x", winner="tie")


# --- the columnar reader: the same battles, the same errors, whatever the chunking ------------


def as_rows(table: BattleTable) -> list[tuple[str, str, str]]:
    return [
        (table.models[a], table.models[b], WINNERS[o])
        for a, b, o in zip(table.model_a, table.model_b, table.outcome, strict=True)
    ]


def exact_rows(battles: list[Battle]) -> list[tuple[str, str, str]]:
    return [(b.model_a, b.model_b, b.winner) for b in battles]


def test_table_reader_matches_the_battle_reader(tmp_path: Path) -> None:
    for name, text in [
        ("b.jsonl", "\n".join(json.dumps(r) for r in GOOD) + "\n\n"),
        ("b.json", json.dumps(GOOD, indent=2)),
    ]:
        path = write(tmp_path, name, text)
        table = read_battle_table(path, fields=["item", "source", "judge"])
        assert as_rows(table) == exact_rows(load_battles(path).battles)
        assert table.models == ("x", "y", "z")
        item = table.fields["item"]
        assert [item.labels[c] for c in item.codes] == [None, "17", None, None]
        source = table.fields["source"]
        assert [source.labels[c] for c in source.codes] == [None, "fhm", None, None]
        assert source.present and table.fields["judge"].present
        assert not read_battle_table(path, fields=["nope"]).fields["nope"].present


@pytest.mark.parametrize(
    "line",
    [
        "{not json",
        "[1, 2]",
        '{"model_b": "y", "winner": "tie"}',
        '{"model_a": " ", "model_b": "y", "winner": "tie"}',
        '{"model_a": "x", "model_b": 3, "winner": "tie"}',
        '{"model_a": "x", "model_b": "x", "winner": "tie"}',
        '{"model_a": "x", "model_b": "y", "winner": "tie", "judge": 5}',
        '{"model_a": "x", "model_b": "y", "winner": "tie", "item": true}',
        '{"model_a": "x", "model_b": "y", "winner": "tie", "score": NaN}',
        '{"model_a": "x\\ud800", "model_b": "y", "winner": "tie"}',
        '{"model_a": "x", "model_b": "y", "winner": "tie"} trailing',
    ],
)
def test_table_reader_gives_the_same_one_line_error(tmp_path: Path, line: str) -> None:
    rows = [json.dumps(GOOD[0])] * 3 + [line] + [json.dumps(GOOD[1])]
    path = write(tmp_path, "battles.jsonl", "\n".join(rows))
    with pytest.raises(DataError) as exact:
        load_battles(path)
    with pytest.raises(DataError) as fast:
        read_battle_table(path)
    assert str(fast.value) == str(exact.value)
    assert str(fast.value).startswith(f"{path}:4: ") and "\n" not in str(fast.value)


LINES = st.sampled_from(
    [
        *(json.dumps(r) for r in GOOD),
        '{"model_a": "w", "model_b": "x", "winner": "model_b", "g": [1, {"k": 2.5}]}',
        '{"model_a": "x", "model_b": "w", "winner": "tie", "g": true}',
        '{"model_a": "x", "model_b": "w", "winner": "tie", "g": 1}',
        '{"model_a": "y", "model_b": "w", "winner": "tie", "big": ' + "9" * 80 + "}",
        '{"model_a": "y", "model_b": "w", "winner": "tie", "g": ' + "9" * 80 + "}",
        '{"model_a": "y", "model_b": "w", "winner": "tie", "g": 1e999}',
        '{"model_a": "y", "model_b": "w", "winner": "tie", "d": ' + "[" * 40 + "]" * 40 + "}",
        "\ufeff" + json.dumps(GOOD[0]),
        "",
        "   ",
        "oops",
        '{"model_a": "q", "model_b": "q", "winner": "tie"}',
        '{"model_a": "q", "model_b": "r", "winner": "A"}',
        '{"model_a": "q", "model_b": "r", "winner": "tie", "z": "\xff"}',
    ]
)


def columns(table: BattleTable) -> tuple[object, ...]:
    g = table.fields["g"]
    # The labels themselves too: codes in order of first appearance among the lines read, and
    # none left behind by a chunk the fast path gave back to the exact one.
    return (as_rows(table), table.skipped, [g.labels[c] for c in g.codes], g.present, g.labels)


@settings(max_examples=60, deadline=None)
@given(lines=st.lists(LINES, max_size=40), chunk=st.integers(1, 400))
def test_fast_and_exact_paths_agree_at_any_chunking(lines: list[str], chunk: int) -> None:
    data = "\n".join(lines).encode("utf-8", "surrogateescape").replace(b"\xc3\xbf", b"\xff")
    with mock.patch.object(battles_module, "_fast_chunk", return_value=False):
        exact = parse_battle_table(data, source="f", fields=["g"], skip_bad=True)
    with mock.patch.object(battles_module, "_CHUNK_BYTES", chunk):
        fast = parse_battle_table(data, source="f", fields=["g"], skip_bad=True)
        plain = parse_battle_table(data, source="f", skip_bad=True)
    assert columns(fast) == columns(exact)
    loaded = parse_battles(data, source="f", skip_bad=True)
    assert as_rows(plain) == exact_rows(loaded.battles)
    assert list(plain.skipped) == loaded.skipped
    # A field that is read must hold numbers in range; one that is not read is never parsed.
    assert len(exact) <= len(plain)


def test_a_bom_is_accepted_at_the_start_and_on_any_line(tmp_path: Path) -> None:
    lines = [json.dumps(r) for r in GOOD]
    path = tmp_path / "b.jsonl"
    path.write_bytes(("\ufeff" + lines[0] + "\n\ufeff" + "\n".join(lines[1:])).encode())
    assert as_rows(read_battle_table(path)) == exact_rows(load_battles(path).battles)
    assert len(load_battles(path).battles) == 4


def test_group_by_keeps_file_order_and_labels_missing_values(tmp_path: Path) -> None:
    path = write(tmp_path, "b.jsonl", "\n".join(json.dumps(r) for r in GOOD))
    groups = read_battle_table(path, fields=["judge"]).group_by("judge")
    assert list(groups) == ["j1", None]
    assert as_rows(groups[None]) == exact_rows(load_battles(path).battles)[1:]
    assert groups["j1"].models == ("x", "y")
    counts = groups[None].counts()
    assert counts.models == ("x", "y", "z") and counts.total == 3


@pytest.mark.parametrize("chunk", [1, 60, 1 << 20])
def test_plain_text_read_from_views_agrees_with_the_exact_path(chunk: int) -> None:
    deep = '{"model_a": "x", "model_b": "y", "winner": "tie", "d": ' + '{"k": ' * 40 + "1"
    lines = [
        *(json.dumps(r) for r in GOOD),
        deep + "}" * 41,  # nested past the bound with objects only: still plain text
        '{"model_a": "q", "model_b": "q", "winner": "tie", "g": "late"}',
        "oops",
        "",
        '{"model_a": "x", "model_b": "w", "winner": "tie", "g": "g1"}',
    ]
    data = "\n".join(lines).encode()
    assert battles_module._plain(data)  # ASCII, no "[": chunks are views of the file
    with mock.patch.object(battles_module, "_fast_chunk", return_value=False):
        exact = parse_battle_table(data, source="f", fields=["g"], skip_bad=True)
    with mock.patch.object(battles_module, "_CHUNK_BYTES", chunk):
        fast = parse_battle_table(data, source="f", fields=["g"], skip_bad=True)
    assert columns(fast) == columns(exact)
    assert [s.line for s in fast.skipped] == [5, 6, 7]


def test_a_chunk_given_back_to_the_exact_path_leaves_no_label_behind() -> None:
    lines = [
        '{"model_a": "w", "model_b": "x", "winner": "model_b", "g": [1, {"k": 2.5}]}',
        "oops",
        '{"model_a": "q", "model_b": "q", "winner": "tie"}',  # decodes, then is refused
    ]
    with mock.patch.object(battles_module, "_CHUNK_BYTES", 97):  # the last line alone
        table = parse_battle_table("\n".join(lines).encode(), fields=["g"], skip_bad=True)
    assert table.fields["g"].labels == ('[1, {"k": 2.5}]',)
    assert [s.line for s in table.skipped] == [2, 3]


@pytest.mark.parametrize("late", ['{"model_a": "new", "model_b": "x", "winner": "tie"}', "bad"])
def test_chunks_after_the_names_are_known_still_meet_new_names_and_bad_lines(late: str) -> None:
    # Later chunks decode model names typed as the names already met: a new name, or a bad
    # line, in such a chunk is read as the exact path reads it.
    lines = [json.dumps(GOOD[k % 2]) for k in range(40)] + [late] + [json.dumps(GOOD[0])] * 5
    data = "\n".join(lines).encode()
    with mock.patch.object(battles_module, "_CHUNK_BYTES", 200):
        fast = parse_battle_table(data, source="f", skip_bad=True)
        if late == "bad":
            with pytest.raises(DataError, match=r"^f:41: invalid JSON"):
                parse_battle_table(data, source="f")
    loaded = parse_battles(data, source="f", skip_bad=True)
    assert as_rows(fast) == exact_rows(loaded.battles)
    assert list(fast.skipped) == loaded.skipped
    assert ("new" in fast.models) == (late != "bad")


@settings(max_examples=25, deadline=None)
@given(lines=st.lists(LINES, min_size=1, max_size=60), workers=st.integers(2, 4))
def test_reading_with_forked_processes_gives_the_same_table(lines: list[str], workers: int) -> None:
    data = "\n".join(lines).encode("utf-8", "surrogateescape").replace(b"\xc3\xbf", b"\xff")
    with mock.patch.object(battles_module, "_CHUNK_BYTES", 97):
        one = parse_battle_table(data, source="f", fields=["g"], skip_bad=True)
        with mock.patch.object(battles_module, "_PARALLEL_BYTES", 1):
            many = parse_battle_table(
                data, source="f", fields=["g"], skip_bad=True, workers=workers
            )
        assert columns(many) == columns(one) and many.models == one.models
        g_one, g_many = one.fields["g"], many.fields["g"]
        assert g_many.labels == g_one.labels  # codes in order of first appearance, as one reads
        errors = []
        for count, bytes_per in ((1, 1 << 30), (workers, 1)):
            with mock.patch.object(battles_module, "_PARALLEL_BYTES", bytes_per):
                try:
                    parse_battle_table(data, source="f", fields=["g"], workers=count)
                    errors.append("")
                except DataError as exc:
                    errors.append(str(exc))
        assert errors[0] == errors[1]  # the file's first error, whichever process met it
