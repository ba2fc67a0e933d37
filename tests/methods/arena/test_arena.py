"""The Arena end to end on the simulated world, in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memearena.config import DatasetConfig, Price, RunConfig, SimModelConfig
from memearena.demo import demo_config
from memearena.engine.lifecycle import plan_method, run_method
from memearena.methods.arena.config import ArenaConfig
from memearena.stats import leaderboard, load_battles
from memearena.store import RunStore


def _sim(**kw: object) -> SimModelConfig:
    return SimModelConfig(provider="sim", **kw)  # type: ignore[arg-type]


def small_config(
    *, limit: int = 4, judges: dict[str, SimModelConfig] | None = None, **arena: object
) -> RunConfig:
    """Three clean simulated targets, two judges, a few demo memes."""
    targets = {
        "t-strong": _sim(skill=0.9, family="s"),
        "t-mid": _sim(skill=0.6, family="m"),
        "t-weak": _sim(skill=0.3, family="w"),
    }
    judges = judges or {
        "j-one": _sim(skill=0.85, family="one", noise=0.1),
        "j-two": _sim(skill=0.8, family="two", noise=0.1),
    }
    fields: dict[str, object] = {
        "targets": list(targets),
        "judges": list(judges),
        "context_model": next(iter(judges)),
        "fusion_rounds": 2,
        "bootstrap": 20,
        **arena,
    }
    return RunConfig(
        run="t",
        models={**targets, **judges},
        data=[DatasetConfig(format="demo", limit=limit)],
        arena=ArenaConfig(**fields),  # type: ignore[arg-type]
    )


def _new_calls(run_dir: Path) -> int:
    store = RunStore(run_dir / "run.db")
    try:
        return sum(1 for c in store.calls() if c.status not in ("cached", "budget"))
    finally:
        store.close()


def test_dry_run_plans_exactly_the_calls_a_real_run_makes(tmp_path: Path) -> None:
    cfg = small_config()
    plan = plan_method("arena", cfg)
    result = run_method("arena", cfg, tmp_path / "run", show_progress=False)
    assert result.new_calls == plan.calls
    store = RunStore(tmp_path / "run" / "run.db")
    per_model: dict[str, int] = {}
    for c in store.calls():
        per_model[c.model] = per_model.get(c.model, 0) + 1
    store.close()
    assert per_model == {m: int(v["calls"]) for m, v in plan.per_model.items()}
    # 4 memes: 4 contexts + 4*3*3 answers + 4*(1+2) guideline rounds + 4*3*3 pairs*2 judges*2
    assert plan.calls == 4 + 36 + 12 + 4 * 3 * 3 * 2 * 2


def test_dry_run_makes_no_call_and_prices_the_plan(tmp_path: Path) -> None:
    cfg = small_config()
    models = dict(cfg.models)
    models["j-one"] = models["j-one"].model_copy(update={"price": Price(input=2.5, output=10.0)})
    cfg = cfg.model_copy(update={"models": models})
    plan = plan_method("arena", cfg)
    assert plan.per_model["j-one"]["cost_usd"] > 0
    assert plan.per_model["t-strong"]["cost_usd"] == 0
    assert not (tmp_path / "run").exists()


def test_rerun_resumes_with_zero_new_calls_and_same_leaderboard(tmp_path: Path) -> None:
    cfg = small_config()
    first = run_method("arena", cfg, tmp_path / "run", show_progress=False)
    assert first.new_calls > 0
    second = run_method("arena", cfg, tmp_path / "run", show_progress=False)
    assert second.new_calls == 0
    assert second.leaderboard["arena"]["overall"] == first.leaderboard["arena"]["overall"]


def test_battles_file_reproduces_the_overall_leaderboard(tmp_path: Path) -> None:
    cfg = small_config()
    result = run_method("arena", cfg, tmp_path / "run", show_progress=False)
    battles = load_battles(tmp_path / "run" / "battles.jsonl").battles
    assert cfg.arena is not None and cfg.arena.bootstrap_unit == "meme"
    rows = leaderboard(battles, bootstrap=20, seed=cfg.seed, elo_k=cfg.arena.elo_k, cluster="item")
    assert [r.model_dump() for r in rows] == result.leaderboard["arena"]["overall"]
    doc = json.loads((tmp_path / "run" / "leaderboard.json").read_text())
    assert set(doc["arena"]["by_criterion"]) == set(cfg.arena.criteria)  # type: ignore[union-attr]
    assert doc["simulated"]["true_ranking"] == ["t-strong", "t-mid", "t-weak"]


def test_unparseable_judge_outputs_are_never_ties(tmp_path: Path) -> None:
    judges = {
        "j-good": _sim(skill=0.85, family="one", noise=0.1),
        "j-broken": _sim(skill=0.8, family="two", format_error_rate=1.0),
    }
    cfg = small_config(judges=judges, limit=2, max_reasks=1)
    result = run_method("arena", cfg, tmp_path / "run", show_progress=False)
    battles = result.outcome[0].battles
    assert battles and all(b["judge"] == "j-good" for b in battles)
    broken = next(j for j in result.leaderboard["arena"]["judges"] if j["judge"] == "j-broken")
    assert broken["battles"] == 0
    assert broken["parse_failures"] == 2 * 2 * 3 * 3  # both orders of every pair, every task
    store = RunStore(tmp_path / "run" / "run.db")
    reasons = {e.reason.split(":")[0] for e in store.errors("verdict")}
    # one original call and one re-ask per failed verdict
    judge_calls = [c for c in store.calls() if c.model == "j-broken" and c.role == "arena.judge"]
    store.close()
    assert reasons == {"unparseable"}
    assert len(judge_calls) == 2 * broken["parse_failures"]


def test_max_cost_stops_cleanly_and_a_rerun_resumes(tmp_path: Path) -> None:
    cfg = small_config(limit=2)
    priced = {
        k: v.model_copy(update={"price": Price(input=1000.0, output=1000.0)})
        for k, v in cfg.models.items()
    }
    cfg = cfg.model_copy(update={"models": priced})
    stopped = run_method("arena", cfg, tmp_path / "run", max_cost=2.0, show_progress=False)
    assert stopped.stopped is not None
    assert stopped.cost_usd <= 2.0
    done = run_method("arena", cfg, tmp_path / "run", show_progress=False)
    assert done.stopped is None
    assert done.leaderboard["arena"]["overall"]


def test_a_run_stopped_before_any_result_replaces_the_old_leaderboard_with_its_status(
    tmp_path: Path,
) -> None:
    """A finished run, then more memes under a cap already spent: nothing new finishes, so
    leaderboard.json and the report say so (no older leaderboard passed off as this run's);
    lifting the cap finishes the run and the leaderboard returns."""
    priced = {
        k: v.model_copy(update={"price": Price(input=1000.0, output=1000.0)})
        for k, v in small_config().models.items()
    }
    run = tmp_path / "run"
    first = run_method(
        "arena",
        small_config(limit=1).model_copy(update={"models": priced}),
        run,
        show_progress=False,
    )
    assert first.stopped is None and first.leaderboard["arena"]["overall"]
    more = small_config(limit=2).model_copy(update={"models": priced})
    stopped = run_method("arena", more, run, max_cost=first.cost_usd, show_progress=False)
    assert stopped.stopped is not None
    board = json.loads((run / "leaderboard.json").read_text())
    assert "arena" not in board
    assert board["status"]["complete"] is False and board["status"]["max_cost"] == first.cost_usd
    assert 'id="no-results"' in (run / "report.html").read_text()
    done = run_method("arena", more, run, show_progress=False)
    assert done.stopped is None and not done.analysis_reused
    assert json.loads((run / "leaderboard.json").read_text())["arena"]["overall"]


def test_compare_settings_reuses_answers_and_reports_ndcg_per_setting(tmp_path: Path) -> None:
    cfg = small_config(limit=2)
    settings = ["memearena", "none", "self"]
    result = run_method("arena", cfg, tmp_path / "run", settings=settings, show_progress=False)
    store = RunStore(tmp_path / "run" / "run.db")
    answer_calls = [c for c in store.calls() if c.role == "arena.answer"]
    self_guides = store.count_artifacts("guideline_self")
    store.close()
    assert len(answer_calls) == 2 * 3 * 3  # answered once, judged under three settings
    assert self_guides == 2 * 2  # each judge writes its own guideline per meme
    per_setting = result.leaderboard["arena"]["settings"]
    assert list(per_setting) == settings
    for sec in per_setting.values():
        assert {j["judge"] for j in sec["judges"]} == {"j-one", "j-two"}
        assert all(0 < j["ndcg"] <= 1 for j in sec["judges"])
    assert (tmp_path / "run" / "battles.none.jsonl").exists()


def test_human_setting_reads_guidelines_from_a_file(tmp_path: Path) -> None:
    guides = tmp_path / "guides.jsonl"
    lines = [json.dumps({"meme": f"m{i:02d}", "guideline": "Key facts:\n- x"}) for i in (1, 2)]
    guides.write_text("\n".join(lines) + "\n")
    cfg = small_config(limit=2, setting="human", human_guidelines=guides)
    result = run_method("arena", cfg, tmp_path / "run", show_progress=False)
    assert result.leaderboard["arena"]["setting"] == "human"
    assert result.outcome[0].battles


def test_active_pairs_respect_the_battle_budget(tmp_path: Path) -> None:
    cfg = small_config(limit=4, pairs="active", battle_budget=10)
    result = run_method("arena", cfg, tmp_path / "run", show_progress=False)
    compared = {(jp.task.meme.uid, jp.task.level, jp.x, jp.y) for jp in result.outcome[0].judged}
    assert 0 < len(compared) <= 10
    assert all(
        len(
            {
                jp.judge
                for jp in result.outcome[0].judged
                if (jp.task.meme.uid, jp.task.level, jp.x, jp.y) == c
            }
        )
        == 2
        for c in compared
    )


@pytest.mark.slow
def test_demo_recovers_the_true_order_and_flags_the_self_preferring_judge(
    tmp_path: Path,
) -> None:
    cfg = demo_config(bootstrap=100)
    result = run_method("arena", cfg, tmp_path / "demo", show_progress=False)
    sim = result.leaderboard["simulated"]
    assert sim["kendall_tau"] >= 0.8
    judges = result.leaderboard["arena"]["judges"]
    lowest = min(judges, key=lambda j: j["ndcg"])
    assert lowest["judge"] == "sim-judge-drizzle"  # the self-preferring judge of the catalogue
    assert cfg.models["sim-judge-drizzle"].self_bias > 0  # type: ignore[union-attr]
    again = run_method("arena", cfg, tmp_path / "demo", show_progress=False)
    assert again.new_calls == 0


def test_battle_files_are_one_ascii_line_per_battle_whatever_the_text(tmp_path: Path) -> None:
    """Battle lines are written fast (msgspec) but never hold raw non-ASCII text: a U+2028 in
    an id would split the line for readers that honour Unicode line breaks."""
    from memearena.methods.arena.analysis import write_battle_files
    from memearena.methods.arena.stages import ArenaOutcome

    cfg = small_config(limit=1)
    rows = [
        {"model_a": "t-mid", "model_b": "t-weak", "winner": "model_a", "item": "plain"},
        {"model_a": "t-mid", "model_b": "t-weak", "winner": "tie", "item": "m\u2028é\u0000"},
    ]
    write_battle_files(tmp_path, [ArenaOutcome("memearena", rows)], cfg)
    raw = (tmp_path / "battles.jsonl").read_bytes()
    assert raw.isascii()
    lines = raw.decode().splitlines()
    assert [json.loads(line) for line in lines] == rows
