"""The audit end to end in the simulated world: outputs, resumability, outcomes that are not
numbers, MM-JudgeBias rows, the CLI and the Arena's warning."""

from __future__ import annotations

import base64
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from typer.testing import CliRunner

from memearena.cli import app
from memearena.config import parse_config
from memearena.engine.lifecycle import run_method
from memearena.methods.judge_audit.method import SCORES_FILE

runner = CliRunner()


def _raw(**audit: Any) -> dict[str, Any]:
    return {
        "run": "ja",
        "models": {
            "sim-aurora": {"provider": "sim", "skill": 0.9, "family": "aurora"},
            "sim-ember": {"provider": "sim", "skill": 0.3, "family": "ember"},
            "clean": {"provider": "sim", "noise": 0.1},
            "blind": {"provider": "sim", "noise": 0.1, "ignores_image": 0.95},
            "broken": {"provider": "sim", "format_error_rate": 1.0},
        },
        "data": [{"format": "demo", "limit": 8}],
        "judge_audit": {
            "judges": ["clean", "blind", "broken"],
            "responders": ["sim-aurora", "sim-ember"],
            "reference_judge": "clean",
            "bootstrap": 200,
            "max_reasks": 1,
            **audit,
        },
    }


def _row(section: dict[str, Any], judge: str) -> dict[str, Any]:
    return next(r for r in section["leaderboard"] if r["judge"] == judge)


@pytest.fixture(scope="module")
def audit_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    run_dir = tmp_path_factory.mktemp("audit") / "ja"
    cfg = parse_config(_raw())
    return run_dir, run_method("judge_audit", cfg, run_dir, show_progress=False)


def test_outputs_and_leaderboard(audit_run: tuple[Path, Any]) -> None:
    run_dir, _ = audit_run
    board = json.loads((run_dir / "leaderboard.json").read_text())
    section = board["judge_audit"]
    assert {r["judge"] for r in section["leaderboard"]} == {"clean", "blind", "broken"}
    clean = _row(section, "clean")
    for key in ("overall", "p_prefer_first", "position_consistency", "p_prefer_padded"):
        est = clean[key]
        assert est["ci_low"] <= est["value"] <= est["ci_high"], key
    assert set(clean["types"]) == {
        "text_dominance",
        "image_dominance",
        "response_dominance",
        "instruction_misalignment",
        "image_misalignment",
        "detail_description",
        "unnecessary_image",
        "visual_transformation",
        "texture_insertion",
    }
    assert all(clean["types"][t]["pairs"] > 0 for t in clean["types"])
    assert clean["flags"] == []
    blind = _row(section, "blind")
    assert {"text_dominance", "image_misalignment"} <= set(blind["flags"])
    assert "texture_insertion" not in blind["flags"]
    assert section["items"] == 8
    images = list((run_dir / "judge_audit" / "images").iterdir())
    assert images and all(p.stem == p.name.split(".")[0] for p in images)
    html = (run_dir / "report.html").read_text()
    assert 'id="judge-audit"' in html and "data:image/jpeg;base64," in html
    # A standalone audit's report has what every method's has: run facts, usage, errors.
    assert board["run"]["config_sha256"] in html
    assert set(section["usage"]) >= {"clean", "blind", "broken"}
    assert 'id="judge-audit-usage"' in html and 'id="judge-audit-errors"' in html


def test_unparsed_scores_are_excluded_and_counted(audit_run: tuple[Path, Any]) -> None:
    _, result = audit_run
    broken = _row(result.section, "broken")
    assert broken["parse_failure_rate"]["value"] == pytest.approx(1.0)
    assert broken["overall"]["value"] is None and broken["overall"]["pairs"] == 0
    assert broken["types"]["text_dominance"]["excluded"] > 0
    assert all(
        r.unbiased is None and r.unbiased_status == "unparsed"
        for r in result.outcome.scores
        if r.judge == "broken"
    )


def test_rerun_resumes_without_new_calls(audit_run: tuple[Path, Any]) -> None:
    run_dir, first = audit_run
    again = run_method("judge_audit", parse_config(_raw()), run_dir, show_progress=False)
    assert again.new_calls == 0
    # Every step was found in the store (looked up in batches) and counted as reused once; a
    # step the first run shared between bias types (answered once) is counted once too, so a
    # fresh run reuses nothing.
    assert first.stages["ja_score"].new > 0 and again.stages["ja_score"].new == 0
    made = first.stages["ja_score"]
    assert made.reused == 0
    assert again.stages["ja_score"].reused == made.new + made.reused
    pairwise = first.stages["ja_pairwise"]
    assert again.stages["ja_pairwise"].reused == pairwise.new + pairwise.reused
    assert _row(again.section, "clean")["overall"] == _row(first.section, "clean")["overall"]


def test_steps_stored_before_the_begun_mark_are_looked_up_not_called(tmp_path: Path) -> None:
    # A fresh audit skips its look-ups (nothing of its kinds was stored before it began); a
    # directory holding steps but no mark (written by an earlier version) must be read.
    import sqlite3

    cfg = parse_config(_raw())
    first = run_method("judge_audit", cfg, tmp_path / "ja", show_progress=False)
    db = sqlite3.connect(tmp_path / "ja" / "run.db")
    try:
        with db:
            gone = db.execute("DELETE FROM meta WHERE name = 'judge_audit.steps_begun'")
            assert gone.rowcount == 1
    finally:
        db.close()
    again = run_method("judge_audit", cfg, tmp_path / "ja", show_progress=False)
    assert again.new_calls == 0
    assert again.stages["ja_score"].new == 0
    for kind in ("ja_score", "ja_pairwise"):
        made = first.stages[kind]
        assert again.stages[kind].reused == made.new + made.reused


def test_a_fresh_audit_reads_no_step_batch(tmp_path: Path, monkeypatch) -> None:
    from memearena.store import RunStore

    batches: list[str] = []
    orig = RunStore.get_artifacts

    def counted(self: RunStore, kind: str, keys: Any) -> Any:
        batches.append(kind)
        return orig(self, kind, keys)

    monkeypatch.setattr(RunStore, "get_artifacts", counted)
    res = run_method("judge_audit", parse_config(_raw()), tmp_path / "ja", show_progress=False)
    assert res.stages["ja_score"].new > 0 and res.stages["ja_pairwise"].new > 0
    assert not [k for k in batches if k.startswith("ja_")]
    again = run_method("judge_audit", parse_config(_raw()), tmp_path / "ja", show_progress=False)
    assert again.new_calls == 0 and "ja_score" in batches  # a resumed one looks up


def test_scores_file_reanalyses_with_metrics(audit_run: tuple[Path, Any]) -> None:
    run_dir, result = audit_run
    path = run_dir / SCORES_FILE
    res = runner.invoke(
        app,
        ["judge-audit", "metrics", str(path), "--judge", "clean", "--json", "--bootstrap", "200"],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["overall"]["value"] == pytest.approx(
        _row(result.section, "clean")["overall"]["value"]
    )


def test_abstentions_are_an_outcome_not_a_number(tmp_path: Path) -> None:
    raw = _raw(prompt="abstention", judges=["clean"], reference_judge=None, classic=[])
    raw["data"] = [{"format": "demo", "limit": 4}]
    result = run_method("judge_audit", parse_config(raw), tmp_path / "run", show_progress=False)
    row = _row(result.section, "clean")
    assert row["abstention_rate"]["value"] > 0
    rd = row["types"]["response_dominance"]
    assert rd["excluded"] > 0 and rd["value"] is None  # every biased triplet was an N/A
    assert any(r.biased_status == "abstained" for r in result.outcome.scores)


def _jpeg(colour: str) -> str:
    buf = io.BytesIO()
    Image.new("RGB", (48, 32), colour).save(buf, format="JPEG")
    return base64.b64encode(buf.getvalue()).decode()


def test_mm_judgebias_rows_are_scored_and_bad_rows_recorded(tmp_path: Path) -> None:
    rows = [
        {
            "id": i,
            "bias_type": t,
            "response": f"The chart shows {i} bars.",
            "unbiased_instruction": f"How many bars are in the chart {i}?",
            "biased_instruction": "" if t == "image_dominance" else f"How many bars {i}?",
            "unbiased_image": {"bytes": _jpeg("red"), "path": None},
            "biased_image": None if t == "text_dominance" else {"bytes": _jpeg("blue")},
        }
        for i, t in enumerate(["text_dominance", "image_dominance", "not_a_bias"], start=1)
    ]
    data = tmp_path / "mmjb.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    raw = _raw(judges=["clean"], responders=[], reference_judge=None)
    raw["data"] = [{"format": "mm-judgebias", "path": str(data)}]
    result = run_method("judge_audit", parse_config(raw), tmp_path / "run", show_progress=False)
    assert result.section["items"] == 2
    scored = {(r.item, r.bias_type) for r in result.outcome.scores}
    assert scored == {("mm-judgebias:1", "text_dominance"), ("mm-judgebias:2", "image_dominance")}
    assert any(k.startswith("data: unknown bias type") for k in result.section["errors"])
    # Verbosity on the rows too (the paper's §H): each row's response against a padded copy,
    # in both orders; position needs two responses, and a row holds one.
    verdicts = list(result.outcome.verdicts)
    assert {(v.item, v.probe) for v in verdicts} == {
        ("mm-judgebias:1", "verbosity"),
        ("mm-judgebias:2", "verbosity"),
    }
    assert {(v.first, v.second) for v in verdicts} == {
        ("original", "padded"),
        ("padded", "original"),
    }
    assert all(v.len_first != v.len_second for v in verdicts)
    clean = _row(result.section, "clean")
    assert clean["p_prefer_padded"]["n"] == 2 and clean["p_prefer_concise"]["value"] is not None


def test_cli_run_dry_run_and_nothing_usable(tmp_path: Path) -> None:
    import yaml

    raw = _raw(judges=["broken"], reference_judge=None, classic=[])
    raw["data"] = [{"format": "demo", "limit": 2}]
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    res = runner.invoke(app, ["judge-audit", str(cfg), "--dry-run"])
    assert res.exit_code == 0 and "planned calls" in res.output
    res = runner.invoke(
        app, ["judge-audit", "run", str(cfg), "--out", str(tmp_path), "--no-progress"]
    )
    assert res.exit_code == 1, res.output  # every score unparsed: nothing usable
    assert "nothing usable" in res.output
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**raw, "judge_audit": {"judges": ["ghost"]}}))
    res = runner.invoke(app, ["judge-audit", str(bad)])
    assert res.exit_code == 2 and "judge_audit.judges" in res.output


AUDIT = {"judge_audit": {"leaderboard": [{"judge": "j1", "flags": ["position"]}]}}
"""A Judge audit leaderboard that flags panel judge j1 (and does not cover j2)."""


def _arena_with_audit(audit_file: Path) -> dict[str, Any]:
    """A two-target, two-judge Arena config naming ``audit_file`` (``AUDIT``, written there)."""
    audit_file.write_text(json.dumps(AUDIT))
    return {
        "models": {
            "a": {"provider": "sim", "skill": 0.9},
            "b": {"provider": "sim", "skill": 0.2},
            "j1": {"provider": "sim"},
            "j2": {"provider": "sim"},
        },
        "data": [{"format": "demo", "limit": 2}],
        "arena": {
            "targets": ["a", "b"],
            "judges": ["j1", "j2"],
            "context_model": "j1",
            "fusion_rounds": 2,
            "contexts": 1,
            "bootstrap": 10,
            "judge_audit": str(audit_file),
        },
    }


def test_arena_warns_about_flagged_panel_judges(tmp_path: Path) -> None:
    from memearena.engine.lifecycle import run_method

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    raw = _arena_with_audit(run_dir / "leaderboard.json")
    result = run_method("arena", parse_config(raw), run_dir, show_progress=False)
    warnings = result.leaderboard["arena"]["judge_audit_warnings"]
    assert any("'j1' is flagged by the judge audit: position" in w for w in warnings)
    assert any("'j2' was not covered" in w for w in warnings)
    board = json.loads((run_dir / "leaderboard.json").read_text())
    assert board["judge_audit"] == AUDIT["judge_audit"]  # the audit's section is kept


def test_budget_stop_keeps_what_was_done_and_resumes(tmp_path: Path) -> None:
    raw = _raw(judges=["clean"], reference_judge=None, classic=[])
    raw["models"]["clean"]["price"] = {"input": 1000.0, "output": 1000.0}
    raw["data"] = [{"format": "demo", "limit": 3}]
    cfg = parse_config(raw)
    stopped = run_method("judge_audit", cfg, tmp_path / "run", max_cost=0.5, show_progress=False)
    assert stopped.stopped is not None and stopped.section["stopped"]
    assert stopped.cost_usd <= 0.5 + 1e-9
    done_before = len(stopped.outcome.scores)
    # The steps in flight at the stop finished: no call is left on record as sent.
    from memearena.store import RunStore

    store = RunStore(tmp_path / "run" / "run.db")
    try:
        usage = store.usage_summary()
        assert sum(u["calls"] for u in usage.values()) > 0
        assert all(u["unsettled"] == 0 for u in usage.values())
    finally:
        store.close()
    resumed = run_method("judge_audit", cfg, tmp_path / "run", show_progress=False)
    assert resumed.stopped is None
    assert len(resumed.outcome.scores) >= done_before
    assert resumed.exit_code == 0 and resumed.status.complete


@pytest.mark.parametrize("window", [3, 10, 20, 256])
def test_every_request_is_sent_once_whatever_the_window(tmp_path: Path, window: int) -> None:
    # The unbiased triplet is shared by every bias type of its item, and a copied meme repeats
    # requests of another item: each is judged once per judge (joined while in flight,
    # answered from memory or the store after), never sent again, be the window tiny (steps
    # finish long before their repeats) or large.
    import sqlite3

    from memearena.config import DatasetConfig
    from memearena.data.demo import demo_dir
    from memearena.demo import demo_config

    # Four memes, each twice under another id: the copies' identical requests (the same
    # answer without query or image, say) recur long after the first was judged.
    rows = [json.loads(x) for x in (demo_dir() / "memes.jsonl").read_text().splitlines() if x]
    data = tmp_path / "data"
    shutil.copytree(demo_dir() / "img", data / "img")
    with (data / "memes.jsonl").open("w") as f:
        for copy in range(2):
            for row in rows[:4]:
                f.write(json.dumps({**row, "id": f"{row['id']}-{copy}"}) + "\n")
    cfg = demo_config(bootstrap=50)
    assert cfg.judge_audit is not None
    audit = cfg.judge_audit.model_copy(update={"window": window})
    cfg = cfg.model_copy(
        update={
            "data": [DatasetConfig(format="demo", path=data / "memes.jsonl")],
            "judge_audit": audit,
        }
    )
    res = run_method("judge_audit", cfg, tmp_path / "run", show_progress=False)
    db = sqlite3.connect(tmp_path / "run" / "run.db")
    try:
        # Judgments only: a copy's own answer and description are steps of their own (keyed
        # by meme), answered by the response cache.
        calls, distinct, cached = db.execute(
            "SELECT COUNT(*), COUNT(DISTINCT request_hash), SUM(status = 'cached') FROM calls"
            " WHERE role IN ('judge_audit.score', 'judge_audit.pairwise')"
        ).fetchone()
    finally:
        db.close()
    assert calls > 500 and calls == distinct and not cached
    assert res.stages["ja_score"].new + res.stages["ja_pairwise"].new > 0.9 * calls


def test_a_started_step_is_always_found_by_the_key_filter() -> None:
    # The filter is what lets a step skip its own look-up: a key started must never be
    # missed (that step's twin would be called again); a false hit only costs a look-up.
    from memearena.store.keyfilter import KeyFilter

    f = KeyFilter()
    keys = [("ja_score", f"sim-judge-{k % 9}|{k:064x}") for k in range(50_000)]
    first = [f.add(k) for k in keys]
    assert sum(first) < 50  # a fresh key is (almost always) new to the filter
    assert all(f.add(k) for k in keys) and all(k in f for k in keys)
    others = [("ja_pairwise", f"sim-judge-{k % 9}|{k:064x}") for k in range(10_000)]
    assert sum(k in f for k in others) < 100


def test_the_arena_dry_run_warns_about_flagged_panel_judges_as_a_run_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from memearena.engine.lifecycle import plan_method

    plan = plan_method("arena", parse_config(_arena_with_audit(tmp_path / "leaderboard.json")))
    assert plan.calls > 0  # the dry run still plans its calls
    err = " ".join(capsys.readouterr().err.split())
    assert "warning: judge 'j1' is flagged by the judge audit: position" in err


def test_each_method_of_a_shared_directory_keeps_its_own_run_facts(tmp_path: Path) -> None:
    # The demo's directory holds several methods: the top-level facts are the latest
    # method's; each section keeps its own config and date, and the report shows both.
    from memearena.engine.lifecycle import run_method

    run_dir = tmp_path / "shared"
    arena = {
        "run": "arena-run",
        "models": {
            "a": {"provider": "sim", "skill": 0.9},
            "b": {"provider": "sim", "skill": 0.2},
            "j1": {"provider": "sim"},
        },
        "data": [{"format": "demo", "limit": 2}],
        "arena": {
            "targets": ["a", "b"],
            "judges": ["j1"],
            "context_model": "j1",
            "fusion_rounds": 1,
            "contexts": 1,
            "bootstrap": 10,
        },
    }
    run_method("arena", parse_config(arena), run_dir, show_progress=False)
    audit = {**_raw(), "run": "audit-run"}
    run_method("judge_audit", parse_config(audit), run_dir, show_progress=False)
    board = json.loads((run_dir / "leaderboard.json").read_text())
    assert board["run"]["name"] == "audit-run"
    assert board["arena"]["run"]["name"] == "arena-run"
    assert board["arena"]["run"]["config"]["arena"]["judges"] == ["j1"]
    assert board["judge_audit"]["run"]["name"] == "audit-run"
    page = (run_dir / "report.html").read_text()
    assert 'id="arena-run"' in page and "arena-run" in page  # the Arena's facts, with it
    assert 'id="judge-audit-run"' not in page  # the same facts as the page's: said once


def test_the_report_states_the_ranking_once_and_the_flag_margins(
    audit_run: tuple[Path, Any],
) -> None:
    run_dir, _ = audit_run
    page = " ".join((run_dir / "report.html").read_text().split())
    assert page.count("Ordered by overall") == 1  # the template no longer repeats the note's
    for rule in (
        "family-wise error rate of 0.05",
        "by at least 0.05",
        "at least 0.08 from 0.5",
        "P(prefer padded) is at least 0.58",
        "at least 0.25 points",
        "fewer than 10 pairs per type",
    ):
        assert rule in page, rule


def test_a_judges_two_triplets_are_in_flight_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One pair at a time (window 1): its judge's unbiased and biased triplets, independent of
    # each other, are still asked side by side, so the models' slots are not left half idle.
    from memearena.config import DatasetConfig
    from memearena.data.demo import demo_dir
    from memearena.demo import demo_config
    from memearena.models import backends as be

    rows = [json.loads(x) for x in (demo_dir() / "memes.jsonl").read_text().splitlines() if x]
    data = tmp_path / "data"
    shutil.copytree(demo_dir() / "img", data / "img")
    (data / "memes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    cfg = demo_config(bootstrap=20)
    assert cfg.judge_audit is not None
    models = {n: m.model_copy(update={"latency_ms": 5}) for n, m in cfg.models.items()}
    cfg = cfg.model_copy(
        update={
            "models": models,
            "data": [DatasetConfig(format="demo", path=data / "memes.jsonl")],
            "judge_audit": cfg.judge_audit.model_copy(update={"window": 1}),
        }
    )
    now, most = [0], [0]
    chat = be.SimBackend.chat

    async def counted(self, messages, params, role):  # type: ignore[no-untyped-def]
        if role != "judge_audit.score":
            return await chat(self, messages, params, role)
        now[0] += 1
        most[0] = max(most[0], now[0])
        try:
            return await chat(self, messages, params, role)
        finally:
            now[0] -= 1

    monkeypatch.setattr(be.SimBackend, "chat", counted)
    res = run_method("judge_audit", cfg, tmp_path / "run", show_progress=False)
    assert res.exit_code == 0 and res.stages["ja_score"].new > 0
    assert most[0] == 2
