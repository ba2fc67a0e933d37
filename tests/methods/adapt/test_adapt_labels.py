"""`memearena adapt labels RUN_DIR LABELS.csv`: reading a filled labelling sheet."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from typer.testing import CliRunner

from memearena.cli import app

runner = CliRunner()


def fake_run(tmp: Path, target: str = "sim-a-target-with-a-rather-long-name") -> Path:
    """A run directory with the labelling key and lineage of two memes, one refined each."""
    run = tmp / "run"
    run.mkdir()
    key = [
        ["item", "kind", "meme", "category", "text"],
        ["item-00001", "original", "m1", "Race", "original one"],
        ["item-00002", "refined", "m1", "Race", "rewrite one"],
        ["item-00003", "original", "m2", "Race", "original two"],
        ["item-00004", "refined", "m2", "Race", "rewrite two"],
    ]
    with (run / "adapt_human_key.csv").open("w", newline="") as f:
        csv.writer(f).writerows(key)
    chains = [
        {
            "target": target,
            "category": "Race",
            "steps": [{"meme": m, "text": f"rewrite {n}", "score_after": s}],
        }
        for m, n, s in (("m1", "one", 2.0), ("m2", "two", 8.0))
    ]
    (run / "adapt_chains.jsonl").write_text("".join(json.dumps(c) + "\n" for c in chains))
    return run


def labels(tmp: Path, rows: list[tuple[str, str]]) -> Path:
    p = tmp / "labels.csv"
    with p.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["item", "image", "text", "harmful", "category"])
        for item, harmful in rows:
            w.writerow([item, "", "", harmful, ""])
    return p


FULL = [("item-00001", "1"), ("item-00002", "yes"), ("item-00003", "1"), ("item-00004", "0")]


def test_the_labels_table_fits_80_columns_with_every_header_whole(tmp_path: Path) -> None:
    run = fake_run(tmp_path)
    r = runner.invoke(app, ["adapt", "labels", str(run), str(labels(tmp_path, FULL))])
    assert r.exit_code == 0, r.output
    assert "…" not in r.output
    assert max(len(line) for line in r.output.splitlines()) <= 80
    text = " ".join(r.output.split())
    for header in ("rewrites", "agent %", "validated %", "harmless fails"):
        assert header in text, header
    assert "sim-a-target" in r.output  # a long name folds, never cut


def test_nothing_labelled_exits_1_with_json_too(tmp_path: Path) -> None:
    run = fake_run(tmp_path)
    empty = labels(tmp_path, [("item-00001", ""), ("item-00002", "")])
    for extra in ([], ["--json"]):
        r = runner.invoke(app, ["adapt", "labels", str(run), str(empty), *extra])
        assert r.exit_code == 1, (extra, r.output)
        assert "no labelled item" in r.output and "labels.csv" in r.output


def test_an_item_labelled_twice_is_a_problem_not_a_silent_overwrite(tmp_path: Path) -> None:
    run = fake_run(tmp_path)
    twice = labels(tmp_path, [*FULL, ("item-00004", "1")])
    r = runner.invoke(app, ["adapt", "labels", str(run), str(twice), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["problems"] == ["line 6: item 'item-00004' labelled again (first on line 5)"]
    assert doc["labelled"] == 4
    # The first label is the one read: one of the two rewrites judged harmful.
    assert doc["refined"]["harmful_share"] == 0.5


def test_the_adapt_help_lists_each_subcommand_on_one_line() -> None:
    r = runner.invoke(app, ["adapt", "--help"], terminal_width=80)
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    for name in ("labels", "import"):
        (i,) = [i for i, line in enumerate(lines) if line.startswith(f"│ {name} ")]
        # The summary ends on its own line: no sentence broken into the next listing row.
        assert lines[i].rstrip(" │").endswith("."), lines[i]
    for sub in ("labels", "import"):
        text = runner.invoke(app, ["adapt", sub, "--help"], terminal_width=80).output
        assert all(len(line) <= 80 for line in text.splitlines())
        body = [ln.strip() for ln in text.splitlines()[3:8] if ln.strip()]
        assert all(ln.endswith(".") for ln in body), body  # each help line is whole
