"""Loaders: each published format reads, rejects malformed rows by file and line, and turns
every image problem into a per-item error while the other items load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from data_helpers import BAD_KINDS, write_image, write_jsonl

from memearena.config import DatasetConfig, ImageConfig
from memearena.data import ItemError, LoadResult, Meme, load_dataset, load_datasets
from memearena.errors import DataError


def _one_line_error(excinfo: pytest.ExceptionInfo[DataError], path: Path, line: int) -> str:
    msg = str(excinfo.value)
    assert "\n" not in msg
    assert msg.startswith(f"{path}:{line}: "), msg
    return msg


def _kinds(result: LoadResult) -> dict[str, str]:
    return {e.item: e.kind for e in result.errors}


# --- FHM -------------------------------------------------------------------------------------


def _fhm(tmp_path: Path, rows: list[dict | str]) -> Path:
    for i in (42953, 23058, 1):
        write_image(tmp_path / "fhm" / "img" / f"{i:05d}.png")
    return write_jsonl(tmp_path / "fhm" / "dev.jsonl", rows)


FHM_ROWS: list[dict | str] = [
    {
        "id": 42953,
        "img": "img/42953.png",
        "label": 0,
        "text": "its their character not their color",
    },
    {"id": 23058, "img": "img/23058.png", "label": 1, "text": "don't be afraid to love again"},
    {"id": 1, "img": "img/00001.png", "text": "a test-set row has no label"},
]


def test_fhm_reads_the_published_format(tmp_path: Path) -> None:
    path = _fhm(tmp_path, FHM_ROWS)
    result = load_dataset(DatasetConfig(format="fhm", path=path))
    assert result.errors == []
    a, b, c = result.memes
    assert (a.id, a.source, a.harmful, a.split) == ("42953", "fhm", False, "dev")
    assert a.image_path == (tmp_path / "fhm" / "img" / "42953.png").resolve()
    assert a.text == "its their character not their color"
    assert b.harmful is True and b.labels == ["hateful"]
    assert c.id == "00001" and c.harmful is None and c.labels == []


def test_fhm_malformed_row_names_file_line_and_field(tmp_path: Path) -> None:
    rows = [*FHM_ROWS[:2], {"id": 7, "img": "img/00001.png", "label": "x", "text": "t"}]
    path = _fhm(tmp_path, rows)
    with pytest.raises(DataError) as e:
        load_dataset(DatasetConfig(format="fhm", path=path, strict=True))
    assert str(e.value) == f"{path}:3: field 'label': must be 0 or 1, got 'x'"


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ('{"id": 5, "img": "img/00001.png", "text": ', "invalid JSON"),
        ('["not", "an", "object"]', "expected a JSON object"),
        ('{"id": 5, "label": 1, "text": "no image"}', "field 'img': required field is missing"),
        ('{"id": true, "img": "img/00001.png", "text": "t"}', "field 'id'"),
        ('{"id": 5, "img": "img/00001.png", "text": 3}', "field 'text': must be a string"),
    ],
)
def test_fhm_rejects_each_kind_of_malformed_row(tmp_path: Path, bad: str, needle: str) -> None:
    path = _fhm(tmp_path, [FHM_ROWS[0], bad])
    with pytest.raises(DataError) as e:
        load_dataset(DatasetConfig(format="fhm", path=path, strict=True))
    assert needle in _one_line_error(e, path, 2)
    result = load_dataset(DatasetConfig(format="fhm", path=path))
    assert [m.id for m in result.memes] == ["42953"]
    ((err),) = result.errors
    assert (err.item, err.kind) == ("line 2", "bad row") and needle in err.reason


def test_malformed_rows_are_recorded_and_loading_goes_on(tmp_path: Path) -> None:
    rows = [FHM_ROWS[0], "{broken", {"id": 9, "img": "img/00001.png", "label": 2, "text": ""}]
    rows.append(FHM_ROWS[1])
    path = _fhm(tmp_path, rows)
    result = load_dataset(DatasetConfig(format="fhm", path=path))
    assert load_dataset(DatasetConfig(format="fhm", path=path, skip_bad=True)) == result
    assert [m.id for m in result.memes] == ["42953", "23058"]
    assert [(e.source, e.item, e.kind) for e in result.errors] == [
        (str(path), "line 2", "bad row"),
        (str(path), "line 3", "bad row"),
    ]
    assert "field 'label'" in result.errors[1].reason


def test_every_image_problem_is_an_item_error_and_the_rest_load(
    tmp_path: Path, bad_images: dict[str, str]
) -> None:
    root = tmp_path / "ds"
    write_image(root / "img" / "good.png")
    rows = [{"id": "good", "img": "img/good.png", "label": 1, "text": "fine"}]
    rows += [{"id": k, "img": rel, "label": 1, "text": k} for k, rel in bad_images.items()]
    path = write_jsonl(root / "dev.jsonl", rows)
    result = load_dataset(DatasetConfig(format="fhm", path=path))
    assert [m.id for m in result.memes] == ["good"]
    assert _kinds(result) == BAD_KINDS
    assert all(e.source == str(path) for e in result.errors)


def test_small_max_pixels_turns_a_real_image_into_a_bomb_error(tmp_path: Path) -> None:
    write_image(tmp_path / "img" / "a.png", (10, 10))
    write_image(tmp_path / "img" / "b.png", (100, 100))
    path = write_jsonl(
        tmp_path / "d.jsonl",
        [{"id": i, "img": f"img/{i}.png", "label": 0, "text": ""} for i in ("a", "b")],
    )
    result = load_dataset(DatasetConfig(format="fhm", path=path), ImageConfig(max_pixels=500))
    assert [m.id for m in result.memes] == ["a"]
    assert _kinds(result) == {"b": "decompression bomb"}


def test_check_images_false_skips_file_checks_but_still_confines_paths(tmp_path: Path) -> None:
    rows = [
        {"id": 1, "img": "img/missing.png", "label": 0, "text": ""},
        {"id": 2, "img": "../escape.png", "label": 0, "text": ""},
    ]
    path = write_jsonl(tmp_path / "d" / "x.jsonl", rows)
    result = load_dataset(DatasetConfig(format="fhm", path=path), check_images=False)
    assert [m.id for m in result.memes] == ["00001"]
    assert _kinds(result) == {"00002": "path escapes root"}


def test_image_root_overrides_the_files_folder(tmp_path: Path) -> None:
    write_image(tmp_path / "images" / "img" / "00001.png")
    path = write_jsonl(
        tmp_path / "ann" / "dev.jsonl", [{"id": 1, "img": "img/00001.png", "text": ""}]
    )
    result = load_dataset(
        DatasetConfig(format="fhm", path=path, image_root=tmp_path / "images", split="dev_seen")
    )
    assert result.errors == [] and result.memes[0].split == "dev_seen"


def test_missing_dataset_file_is_one_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="dataset file not found"):
        load_dataset(DatasetConfig(format="fhm", path=tmp_path / "nope.jsonl"))


# --- HarM ------------------------------------------------------------------------------------


def _harm(tmp_path: Path, rows: list[dict | str]) -> DatasetConfig:
    images = tmp_path / "harm" / "images"
    for name in ("covid_memes_18.png", "covid_memes_19.png", "covid_memes_20.png"):
        write_image(images / name)
    path = write_jsonl(tmp_path / "harm" / "annotations" / "test.jsonl", rows)
    return DatasetConfig(format="harm", path=path, image_root=images)


HARM_ROWS: list[dict | str] = [
    {
        "id": "covid_memes_18",
        "image": "covid_memes_18.png",
        "labels": ["somewhat harmful", "individual"],
        "text": "Bernie or Elizabeth?\nBe informed.",
    },
    {"id": "covid_memes_19", "image": "covid_memes_19.png", "labels": ["not harmful"], "text": ""},
    {
        "id": "covid_memes_20",
        "image": "covid_memes_20.png",
        "labels": ["very harmful", "society"],
        "text": "x",
    },
]


def test_harm_reads_the_published_format(tmp_path: Path) -> None:
    result = load_dataset(_harm(tmp_path, HARM_ROWS))
    assert result.errors == []
    a, b, c = result.memes
    assert (a.id, a.source, a.harmful, a.labels) == (
        "covid_memes_18",
        "harm",
        True,
        ["somewhat harmful", "individual"],
    )
    assert b.harmful is False and c.harmful is True
    assert a.image_path == (tmp_path / "harm" / "images" / "covid_memes_18.png").resolve()


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        ({"id": "x", "image": "a.png", "labels": [], "text": ""}, "field 'labels'"),
        ({"id": "x", "image": "a.png", "labels": "harmful", "text": ""}, "field 'labels'"),
        ({"id": "x", "image": "a.png", "labels": ["meh"], "text": ""}, "first label must be"),
        ({"id": "x", "labels": ["not harmful"], "text": ""}, "field 'image'"),
    ],
)
def test_harm_rejects_malformed_rows(tmp_path: Path, bad: dict, needle: str) -> None:
    cfg = _harm(tmp_path, [HARM_ROWS[0], bad])
    with pytest.raises(DataError) as e:
        load_dataset(cfg.model_copy(update={"strict": True}))
    assert needle in _one_line_error(e, cfg.path, 2)  # type: ignore[arg-type]
    result = load_dataset(cfg)
    assert len(result.memes) == 1 and result.errors[0].item == "line 2"


# --- MAMI ------------------------------------------------------------------------------------

MAMI_HEADER = (
    "file_name\tmisogynous\tshaming\tstereotype\tobjectification\tviolence\tText Transcription"
)


def _mami(tmp_path: Path, lines: list[str]) -> Path:
    for i in (1, 2, 3):
        write_image(tmp_path / "mami" / f"{i}.jpg")
    path = tmp_path / "mami" / "training.csv"
    path.write_text("\n".join([MAMI_HEADER, *lines]) + "\n", encoding="utf-8")
    return path


def test_mami_reads_the_published_format(tmp_path: Path) -> None:
    path = _mami(
        tmp_path,
        [
            "1.jpg\t0\t0\t0\t0\t0\tMilk Milk.zip",
            '2.jpg\t1\t0\t1\t1\t0\tROSES ARE RED, "VIOLETS" ARE BLUE',
            '3.jpg\t1\t1\t0\t0\t1\tunbalanced " quote',
        ],
    )
    result = load_dataset(DatasetConfig(format="mami", path=path))
    assert result.errors == []
    a, b, c = result.memes
    assert (a.id, a.source, a.harmful, a.labels, a.split) == (
        "1.jpg",
        "mami",
        False,
        [],
        "training",
    )
    assert b.harmful is True and b.labels == ["stereotype", "objectification"]
    assert b.text == 'ROSES ARE RED, "VIOLETS" ARE BLUE'
    assert c.labels == ["shaming", "violence"] and c.text == 'unbalanced " quote'


def test_a_comma_separated_mami_file_is_one_line_naming_the_separator(tmp_path: Path) -> None:
    # MAMI is tab-separated; a copy re-saved with commas reads as one column.
    path = tmp_path / "training.csv"
    path.write_text(MAMI_HEADER.replace("\t", ",") + "\n1.jpg,0,0,0,0,0,text\n", "utf-8")
    with pytest.raises(DataError) as e:
        load_dataset(DatasetConfig(format="mami", path=path))
    msg = str(e.value)
    assert msg.startswith(f"{path}:1: missing column(s) 'file_name'")
    assert "(header has 1 column(s): 'file_name,misogynous,shaming," in msg
    assert msg.endswith("; the file looks comma-separated, this format reads tab-separated columns")
    assert "[" not in msg  # the header is listed as names, not a Python list


def test_a_missing_column_lists_the_header_as_names(tmp_path: Path) -> None:
    path = tmp_path / "training.csv"
    write_image(tmp_path / "1.jpg")
    path.write_text("name\tText Transcription\n1.jpg\tsome text\n", "utf-8")
    with pytest.raises(DataError) as e:
        load_dataset(DatasetConfig(format="mami", path=path))
    assert str(e.value) == (
        f"{path}:1: missing column(s) 'file_name' "
        "(header has 2 column(s): 'name', 'Text Transcription')"
    )


def test_mami_test_file_without_labels_is_unlabelled(tmp_path: Path) -> None:
    write_image(tmp_path / "15236.jpg")
    path = tmp_path / "Test.csv"
    path.write_text("file_name\tText Transcription\n15236.jpg\tsome text\n", encoding="utf-8")
    (meme,) = load_dataset(DatasetConfig(format="mami", path=path)).memes
    assert meme.harmful is None and meme.text == "some text"


def test_mami_rejects_malformed_rows(tmp_path: Path) -> None:
    path = _mami(tmp_path, ["1.jpg\t0\t0\t0\t0\t0\tok", "2.jpg\tyes\t0\t0\t0\t0\tbad"])
    assert _kinds(load_dataset(DatasetConfig(format="mami", path=path))) == {"line 3": "bad row"}
    with pytest.raises(DataError) as e:
        load_dataset(DatasetConfig(format="mami", path=path, strict=True))
    assert "field 'misogynous': must be 0 or 1, got 'yes'" in _one_line_error(e, path, 3)
    path = _mami(tmp_path, ["1.jpg\t0\t0\t0\t0\t0\tok", "2.jpg\t1\t0\ttoo few columns"])
    with pytest.raises(DataError) as e:
        load_dataset(DatasetConfig(format="mami", path=path, strict=True))
    assert "expected 7 columns, got 4" in _one_line_error(e, path, 3)


def test_mami_missing_column_is_a_header_error(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("file_name\tmisogynous\n1.jpg\t0\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        load_dataset(DatasetConfig(format="mami", path=path))
    assert "'Text Transcription'" in _one_line_error(e, path, 1)


# --- MM-JudgeBias ----------------------------------------------------------------------------

JB_ROWS = [
    {
        "id": 0,
        "bias_type": "image_misalignment",
        "bias_category": "congruity",
        "task_type": "reasoning",
        "domain_type": "science",
        "difficulty": "hard",
        "unbiased_instruction": "What does the chart show?",
        "biased_instruction": "What does the chart show?",
        "unbiased_image": "images/chart.png",
        "biased_image": "images/elephant.png",
        "response": "Sales rose in Q3.",
    },
    {
        "id": "tx-1",
        "bias_type": "unnecessary_image",
        "bias_category": "robustness",
        "task_type": "qa",
        "domain_type": "general",
        "difficulty": "easy",
        "unbiased_instruction": "What is 2 + 2?",
        "biased_instruction": None,
        "unbiased_image": "",
        "biased_image": "images/elephant.png",
        "response": "4",
    },
]


@pytest.mark.parametrize("layout", ["array", "jsonl"])
def test_mm_judgebias_reads_json_array_and_jsonl(tmp_path: Path, layout: str) -> None:
    write_image(tmp_path / "images" / "chart.png")
    write_image(tmp_path / "images" / "elephant.png", color="grey")
    path = tmp_path / "judgebias.json"
    if layout == "array":
        path.write_text(json.dumps(JB_ROWS, indent=2), encoding="utf-8")
    else:
        write_jsonl(path, JB_ROWS)
    result = load_dataset(DatasetConfig(format="mm-judgebias", path=path))
    assert result.errors == []
    a, b = result.memes
    assert (a.id, a.source, a.text, a.harmful) == (
        "0",
        "mm-judgebias",
        "What does the chart show?",
        None,
    )
    assert a.image_path == (tmp_path / "images" / "chart.png").resolve()
    assert a.annotations["biased_image"] == str((tmp_path / "images" / "elephant.png").resolve())
    for key in (
        "bias_type",
        "bias_category",
        "task_type",
        "domain_type",
        "difficulty",
        "biased_instruction",
        "response",
    ):
        assert key in a.annotations
    assert b.image_path is None and b.annotations["biased_instruction"] is None


def test_mm_judgebias_bad_biased_image_is_an_item_error(tmp_path: Path) -> None:
    write_image(tmp_path / "images" / "chart.png")
    rows = [
        dict(JB_ROWS[0], biased_image="../../etc/passwd"),
        dict(JB_ROWS[1], id="t2", biased_image=None),
    ]
    path = write_jsonl(tmp_path / "jb.jsonl", rows)
    result = load_dataset(DatasetConfig(format="mm-judgebias", path=path))
    # The Judge audit's own rule: a bias type that needs an image, given none and with no
    # rebuilt file, is an error for that row.
    assert [m.id for m in result.memes] == []
    assert _kinds(result) == {"0": "path escapes root", "t2": "missing image"}


def test_mm_judgebias_array_rows_report_their_line(tmp_path: Path) -> None:
    bad = dict(JB_ROWS[1], response=None)
    path = tmp_path / "jb.json"
    path.write_text(json.dumps([JB_ROWS[0], bad], indent=2), encoding="utf-8")
    with pytest.raises(DataError) as e:
        load_dataset(
            DatasetConfig(format="mm-judgebias", path=path, strict=True), check_images=False
        )
    lines = json.dumps([JB_ROWS[0], bad], indent=2).splitlines()
    line = [i for i, t in enumerate(lines, start=1) if t == "  {"][1]  # the second object
    assert "field 'response'" in _one_line_error(e, path, line)


# --- folder ----------------------------------------------------------------------------------


def test_folder_reads_images_and_optional_captions(tmp_path: Path) -> None:
    folder = tmp_path / "my_memes"
    for name in ("a.png", "b.JPG", "c.webp", "d.gif"):
        write_image(folder / name)
    (folder / "notes.txt").write_text("not an image")
    (folder / "captions.csv").write_text(
        'file,text,label\na.png,"hello, world",1\nb.JPG,second,not harmful\n', encoding="utf-8"
    )
    result = load_dataset(DatasetConfig(format="folder", path=folder))
    assert result.errors == []
    by_id = {m.id: m for m in result.memes}
    assert list(by_id) == ["a.png", "b.JPG", "c.webp", "d.gif"]
    assert (by_id["a.png"].text, by_id["a.png"].harmful) == ("hello, world", True)
    assert by_id["b.JPG"].harmful is False
    assert (by_id["c.webp"].text, by_id["c.webp"].harmful) == ("", None)
    assert by_id["a.png"].source == "folder" and by_id["a.png"].split == "my_memes"


def test_folder_without_captions_and_with_broken_images(tmp_path: Path) -> None:
    folder = tmp_path / "f"
    write_image(folder / "ok.png")
    (folder / "zero.png").write_bytes(b"")
    (folder / "junk.jpg").write_bytes(b"junk")
    result = load_dataset(DatasetConfig(format="folder", path=folder))
    assert [m.id for m in result.memes] == ["ok.png"]
    assert _kinds(result) == {"zero.png": "empty image", "junk.jpg": "corrupt image"}
    assert all(e.source == str(folder) for e in result.errors)


def test_folder_caption_for_absent_or_escaping_image_is_reported(tmp_path: Path) -> None:
    folder = tmp_path / "f"
    write_image(folder / "ok.png")
    (folder / "captions.csv").write_text(
        "file,text\nok.png,fine\nghost.png,where am i\n../secret.png,sneaky\n", encoding="utf-8"
    )
    result = load_dataset(DatasetConfig(format="folder", path=folder))
    assert [m.id for m in result.memes] == ["ok.png"]
    assert _kinds(result) == {"ghost.png": "missing image", "../secret.png": "path escapes root"}


def test_folder_malformed_captions_name_the_csv_line(tmp_path: Path) -> None:
    folder = tmp_path / "f"
    write_image(folder / "ok.png")
    cap = folder / "captions.csv"
    cap.write_text("file,text,label\nok.png,fine,maybe\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        load_dataset(DatasetConfig(format="folder", path=folder, strict=True))
    assert "field 'label'" in _one_line_error(e, cap, 2)
    result = load_dataset(DatasetConfig(format="folder", path=folder))
    assert _kinds(result) == {"line 2": "bad row"}


# --- generic JSONL / CSV ---------------------------------------------------------------------


def test_generic_jsonl_labels_and_extra_columns(tmp_path: Path) -> None:
    for i in range(4):
        write_image(tmp_path / f"{i}.png")
    rows = [
        {"id": "0", "image": "0.png", "text": "a", "label": 1, "source_url": "u"},
        {"id": "1", "image": "1.png", "text": "b", "label": "not harmful", "labels": ["x", "y"]},
        {"id": "2", "image": "2.png", "text": "c", "label": True},
        {"id": "3", "image": "3.png", "text": "d"},
    ]
    path = write_jsonl(tmp_path / "mine.jsonl", rows)
    result = load_dataset(DatasetConfig(format="jsonl", path=path))
    assert [m.harmful for m in result.memes] == [True, False, True, None]
    assert result.memes[0].annotations == {"source_url": "u"}
    assert result.memes[1].labels == ["x", "y"] and result.memes[0].source == "jsonl"


def test_generic_csv_reads_and_rejects(tmp_path: Path) -> None:
    write_image(tmp_path / "img" / "1.png")
    write_image(tmp_path / "img" / "2.png")
    path = tmp_path / "mine.csv"
    path.write_text(
        "id,image,text,label,labels,lang\n"
        '1,img/1.png,"a, quoted",harmful,hate|women,en\n'
        "2,img/2.png,b,FALSE,,de\n",
        encoding="utf-8",
    )
    result = load_dataset(DatasetConfig(format="csv", path=path))
    a, b = result.memes
    assert (a.id, a.text, a.harmful, a.labels, a.source) == (
        "1",
        "a, quoted",
        True,
        ["hate", "women"],
        "csv",
    )
    assert a.annotations == {"lang": "en"} and b.harmful is False and b.labels == []
    path.write_text("id,image,text,label\n1,img/1.png,a,2\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        load_dataset(DatasetConfig(format="csv", path=path, strict=True))
    assert "field 'label'" in _one_line_error(e, path, 2)
    path.write_text("id,text\n1,a\n", encoding="utf-8")
    with pytest.raises(DataError, match="missing column"):
        load_dataset(DatasetConfig(format="csv", path=path))


# --- several datasets ------------------------------------------------------------------------


def test_load_datasets_concatenates_and_merges_identical_duplicates(tmp_path: Path) -> None:
    path = _fhm(tmp_path, FHM_ROWS)
    other = write_jsonl(tmp_path / "fhm" / "test.jsonl", [FHM_ROWS[0]])
    harm = _harm(tmp_path, HARM_ROWS)
    result = load_datasets([DatasetConfig(format="fhm", path=path), harm])
    assert len(result.memes) == 6 and result.errors == [] and result.duplicates == []
    assert len({m.uid for m in result.memes}) == 6
    merged = load_datasets(
        [DatasetConfig(format="fhm", path=path), DatasetConfig(format="fhm", path=other)]
    )
    assert [m.id for m in merged.memes] == ["42953", "23058", "00001"]
    assert merged.memes[0].split == "dev"  # the first copy is kept
    assert [(d.uid, d.count, d.where) for d in merged.duplicates] == [
        ("fhm:42953", 2, (str(path), str(other)))
    ]


def test_conflicting_duplicates_across_files_are_reported_per_id(tmp_path: Path) -> None:
    path = _fhm(tmp_path, FHM_ROWS)
    other = write_jsonl(
        tmp_path / "fhm" / "test.jsonl", [dict(FHM_ROWS[0], label=1), dict(FHM_ROWS[1])]
    )
    cfgs = [DatasetConfig(format="fhm", path=path), DatasetConfig(format="fhm", path=other)]
    result = load_datasets(cfgs)
    assert [m.id for m in result.memes] == ["23058", "00001"]  # neither conflicting copy kept
    (err,) = result.errors
    assert (err.source, err.item, err.kind) == (str(other), "42953", "conflicting duplicate")
    assert "differ in label, labels" in err.reason
    assert [d.uid for d in result.duplicates] == ["fhm:23058"]
    with pytest.raises(DataError, match="item 'fhm:42953': conflicting duplicate"):
        load_datasets([cfgs[0], cfgs[1].model_copy(update={"strict": True})])


def test_duplicate_ids_within_one_file(tmp_path: Path) -> None:
    rows = [FHM_ROWS[0], FHM_ROWS[1], FHM_ROWS[0], dict(FHM_ROWS[1], text="other"), FHM_ROWS[2]]
    path = _fhm(tmp_path, rows)
    result = load_dataset(DatasetConfig(format="fhm", path=path))
    assert [m.id for m in result.memes] == ["42953", "00001"]
    assert [(d.uid, d.count, d.where) for d in result.duplicates] == [
        ("fhm:42953", 2, (f"{path}:1", f"{path}:3"))
    ]
    (err,) = result.errors
    assert (err.item, err.reason) == (
        "23058",
        "conflicting duplicate: lines 2 and 4 differ in text",
    )
    with pytest.raises(DataError, match="id '23058': conflicting duplicate"):
        load_dataset(DatasetConfig(format="fhm", path=path, strict=True))


def test_results_are_typed(tmp_path: Path) -> None:
    result = load_dataset(DatasetConfig(format="fhm", path=_fhm(tmp_path, FHM_ROWS)))
    assert isinstance(result, LoadResult) and all(isinstance(m, Meme) for m in result.memes)
    err = ItemError("f.jsonl", "3", "missing image: /x.png (no such file)")
    assert err.kind == "missing image"


def test_folder_rejects_image_root_and_non_folders(tmp_path: Path) -> None:
    folder = tmp_path / "f"
    write_image(folder / "a.png")
    with pytest.raises(DataError, match="drop 'image_root'"):
        load_dataset(DatasetConfig(format="folder", path=folder, image_root=tmp_path))
    with pytest.raises(DataError, match="needs a folder"):
        load_dataset(DatasetConfig(format="folder", path=folder / "a.png"))


# --- canonical ids, filters by id, field mapping ---------------------------------------------


def test_fhm_ids_are_canonical_whichever_way_a_copy_stores_them() -> None:
    from memearena.data import fhm_id

    assert fhm_id(8291) == fhm_id("08291") == fhm_id(" 8291 ") == "08291"
    assert fhm_id(42953) == "42953" and fhm_id(123456) == "123456"
    assert fhm_id("meme-7") == "meme-7"


def test_ids_keeps_only_listed_items_and_reports_unknown_ones(tmp_path: Path) -> None:
    path = _fhm(tmp_path, FHM_ROWS)
    result = load_dataset(DatasetConfig(format="fhm", path=path, ids=[1, "42953", "777"]))
    assert [m.id for m in result.memes] == ["42953", "00001"]
    assert [(e.item, e.kind) for e in result.errors] == [("00777", "unknown id")]
    rest = load_dataset(DatasetConfig(format="fhm", path=path, exclude=["00001", 23058]))
    assert [m.id for m in rest.memes] == ["42953"] and rest.errors == []


def test_exclude_applies_before_sample_and_limit(tmp_path: Path) -> None:
    path = _fhm(tmp_path, FHM_ROWS)
    cfg = DatasetConfig(format="fhm", path=path, exclude=[42953], limit=1)
    assert [m.id for m in load_dataset(cfg).memes] == ["23058"]


def test_generic_formats_map_field_names(tmp_path: Path) -> None:
    write_image(tmp_path / "img" / "08291.png")
    rows = [{"id": 8291, "img": "img/08291.png", "label": 1, "text": "t", "extra": 5}]
    path = write_jsonl(tmp_path / "x.jsonl", rows)
    with pytest.raises(DataError, match="field 'image': required field is missing"):
        load_dataset(DatasetConfig(format="jsonl", path=path, strict=True))
    cfg = DatasetConfig(format="jsonl", path=path, fields={"image": "img"})
    (meme,) = load_dataset(cfg).memes
    assert (meme.id, meme.harmful, meme.text, meme.annotations) == ("8291", True, "t", {"extra": 5})
    assert meme.image_path == (tmp_path / "img" / "08291.png").resolve()
    csv_path = tmp_path / "x.csv"
    csv_path.write_text("key,picture,caption,harm\nk1,img/08291.png,hello,harmful\n")
    fields = {"id": "key", "image": "picture", "text": "caption", "label": "harm"}
    (meme,) = load_dataset(DatasetConfig(format="csv", path=csv_path, fields=fields)).memes
    assert (meme.id, meme.text, meme.harmful) == ("k1", "hello", True)
    csv_path.write_text("key,picture,caption,harm\nk1,img/08291.png,hello,maybe\n")
    result = load_dataset(DatasetConfig(format="csv", path=csv_path, fields=fields))
    assert "field 'harm'" in result.errors[0].reason  # errors name the file's own column
    with pytest.raises(DataError, match="missing column"):
        load_dataset(DatasetConfig(format="csv", path=csv_path, fields={"id": "nope"}))


def test_fields_is_refused_for_published_formats_and_ambiguous_maps() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="applies to formats jsonl and csv"):
        DatasetConfig(format="fhm", path=Path("x"), fields={"image": "img"})
    with pytest.raises(ValidationError, match="same column"):
        DatasetConfig(format="jsonl", path=Path("x"), fields={"image": "a", "text": "a"})
    with pytest.raises(ValidationError):
        DatasetConfig(format="jsonl", path=Path("x"), fields={"picture": "img"})


def test_a_file_whose_only_id_conflicts_reports_it_instead_of_an_empty_filter(
    tmp_path: Path,
) -> None:
    path = _fhm(tmp_path, [FHM_ROWS[0], dict(FHM_ROWS[0], text="changed")])
    result = load_dataset(DatasetConfig(format="fhm", path=path))
    assert result.memes == [] and [e.kind for e in result.errors] == ["conflicting duplicate"]
