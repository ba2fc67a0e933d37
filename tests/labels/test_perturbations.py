"""The perturbations queue: every perturbation on record in the audit's score log, blind."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from memearena.labels import available_queues, queue_items
from memearena.labels.runfiles import RunFiles
from memearena.methods.judge_audit.labelling import BIAS_KEEPS, text_diff
from memearena.store.images import IMAGES_DIR


def _log(run: Path) -> list[dict]:
    lines = (run / "judge_audit_scores.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _image_on_record(run: Path, sha: str) -> bool:
    return any((run / IMAGES_DIR / sha[:2]).glob(f"{sha}.*"))


def test_every_scored_pair_of_every_bias_type_is_an_item_with_its_content_on_record(
    demo_run: Path,
) -> None:
    log = _log(demo_run)
    items = queue_items(demo_run, "perturbations")
    assert len({i.key for i in items}) == len(items)
    covered = {
        (i.hidden["item"], i.hidden["bias_type"], b) for i in items for _, b in i.hidden["requests"]
    }
    assert covered == {(r["id"], r["bias_type"], r["biased_request"]) for r in log}
    assert {i.hidden["bias_type"] for i in items} == set(BIAS_KEEPS)
    # Far more than the kept examples (at most 5 per bias type).
    assert len(items) > 5 * len(BIAS_KEEPS)
    run = RunFiles(demo_run)
    try:
        for it in items:
            assert it.texts["must_keep"] == BIAS_KEEPS[it.hidden["bias_type"]]
            shown = [
                *it.images.values(),
                *(v for k, v in it.texts.items() if k.startswith("request")),
            ]
            assert shown, it.key  # something that differs, or what the judge read beside it
            for sha in it.images.values():
                assert _image_on_record(demo_run, sha), sha
            u, b = it.hidden["requests"][0]
            assert run.request(u) is not None and run.request(b) is not None
    finally:
        run.close()


def test_no_judge_score_or_name_is_shown_before_an_answer(demo_run: Path) -> None:
    items = queue_items(demo_run, "perturbations")
    judges = {r["judge"] for r in _log(demo_run)}
    for it in items:
        assert set(it.hidden["scores"]) <= judges and it.hidden["scores"]
        shown = " ".join([it.key, it.title, *it.texts.values(), *it.images.values()])
        for judge in judges:
            assert judge not in shown
        for responder in it.hidden["responders"]:
            assert responder not in shown


def test_each_bias_type_shows_what_it_changes(demo_run: Path) -> None:
    by_type: dict[str, list] = {}
    for it in queue_items(demo_run, "perturbations"):
        by_type.setdefault(it.hidden["bias_type"], []).append(it)
    for it in by_type["image_misalignment"] + by_type["visual_transformation"]:
        assert it.images["original"] != it.images["perturbed"]
        assert "request" in it.texts  # the unchanged text it is judged against
    for it in by_type["image_dominance"] + by_type["instruction_misalignment"]:
        assert it.texts["request_original"] != it.texts["request_perturbed"]
        assert set(it.images) == {"image"}
    for it in by_type["text_dominance"]:
        assert "original" in it.images and "perturbed" not in it.images


def test_text_diff_keeps_only_the_differing_lines_under_their_section() -> None:
    a = "intro\n### Query:\nwhat is it?\n\n### Response:\nsame"
    b = "intro\n### Query:\n\n\n### Response:\nsame"
    assert text_diff(a, b) == ("### Query:\nwhat is it?", "### Query:\n(nothing)")
    assert text_diff("x", "y") == ("x", "y")


@pytest.fixture(scope="module")
def older_run(demo_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo run with a score log written before requests were recorded."""
    dst = tmp_path_factory.mktemp("older") / "demo"
    dst.mkdir()
    for name in ("leaderboard.json", "run.db"):
        shutil.copy2(demo_run / name, dst / name)
    rows = [{**r, "unbiased_request": None, "biased_request": None} for r in _log(demo_run)[:50]]
    (dst / "judge_audit_scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return dst


def test_a_log_without_request_keys_falls_back_to_the_kept_examples(
    demo_run: Path, older_run: Path
) -> None:
    examples = json.loads((demo_run / "leaderboard.json").read_text())["judge_audit"]["examples"]
    items = queue_items(older_run, "perturbations")
    assert "perturbations" in available_queues(older_run)
    assert len(items) == sum(len(v) for v in examples.values()) > 0
    assert {i.hidden["bias_type"] for i in items} == set(examples)
    assert all("query_original" in i.texts for i in items)
    logged = {i.key for i in queue_items(demo_run, "perturbations")}
    assert not logged & {i.key for i in items}


def test_requests_missing_from_the_store_fall_back_too(demo_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "demo"
    run.mkdir()
    for name in ("leaderboard.json", "judge_audit_scores.jsonl"):
        shutil.copy2(demo_run / name, run / name)
    # No run.db: no request can be read back, so the kept examples are the queue.
    items = queue_items(run, "perturbations")
    assert items and all("query_original" in i.texts for i in items)
