"""The Arena's analysis on hand-made outcomes: self-judging policy, leave-one-out NDCG."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from memearena.config import DatasetConfig, RunConfig, SimModelConfig
from memearena.methods.arena.analysis import setting_section, write_battle_files
from memearena.methods.arena.config import ArenaConfig
from memearena.methods.arena.stages import ArenaOutcome


def _cfg(families: dict[str, str], judges: list[str], **arena: Any) -> RunConfig:
    models = {n: SimModelConfig(provider="sim", family=f, skill=0.5) for n, f in families.items()}
    return RunConfig(
        models=models,  # type: ignore[arg-type]
        data=[DatasetConfig(format="demo")],
        arena=ArenaConfig(
            targets=["a", "b", "c"],
            judges=judges,
            context_model=judges[0],
            fusion_rounds=len(judges),
            bootstrap=50,
            **arena,
        ),
    )


def _row(a: str, b: str, winner: str, judge: str, item: str) -> dict[str, Any]:
    return {
        "model_a": a,
        "model_b": b,
        "winner": winner,
        "judge": judge,
        "criterion": "accuracy",
        "item": item,
        "context": "high",
        "source": "demo",
        "setting": "memearena",
    }


def _ranked(order: str, judge: str, memes: int, per_pair: int = 1) -> list[dict[str, Any]]:
    """Battles in which `judge` prefers models in `order` (best first) on every meme."""
    rows = []
    for m in range(memes):
        for hi in range(3):
            for lo in range(hi + 1, 3):
                for _ in range(per_pair):
                    rows.append(_row(order[hi], order[lo], "model_a", judge, f"m{m}"))
    return rows


def test_self_judged_battles_are_left_out_of_the_leaderboard_and_both_boards_shown(
    tmp_path: Path,
) -> None:
    # Two clean judges see a > b > c; judge "jc" (family of target c) always puts c first.
    families = {"a": "fa", "b": "fb", "c": "fc", "j1": "f1", "j2": "f2", "jc": "fc"}
    cfg = _cfg(families, ["j1", "j2", "jc"])
    battles = _ranked("abc", "j1", 6) + _ranked("abc", "j2", 6)
    battles += _ranked("cab", "jc", 6, per_pair=6)
    outcome = ArenaOutcome(setting="memearena", battles=battles)
    section = setting_section(cfg, outcome, bootstrap=50)
    assert section["self_judging"] == "exclude" and section["bootstrap_unit"] == "meme"
    # jc's battles involving c are self-judged: 2 pairs × 6 repeats × 6 memes.
    assert section["self_judged_battles"] == 2 * 6 * 6
    assert section["battles"] == len(battles) - 72
    assert [r["model"] for r in section["overall"]] == ["a", "b", "c"]
    alt = section["sensitivity"]["self_judging_include"]
    assert alt["battles"] == len(battles)
    assert alt["order_differs"] and next(r["model"] for r in alt["overall"]) == "c"
    # The battle files split the same way; rank on battles.jsonl sees what the board saw.
    write_battle_files(tmp_path, [outcome], cfg)
    kept = (tmp_path / "battles.jsonl").read_text().splitlines()
    left = (tmp_path / "battles.self_judged.jsonl").read_text().splitlines()
    assert len(kept) == section["battles"] and len(left) == 72
    assert all(json.loads(x)["judge"] == "jc" for x in left)


def test_include_policy_keeps_every_battle() -> None:
    cfg = _cfg(
        {"a": "fa", "b": "fb", "c": "fc", "j1": "f1", "jc": "fc"},
        ["j1", "jc"],
        self_judging="include",
    )
    battles = _ranked("abc", "j1", 4) + _ranked("cab", "jc", 4)
    section = setting_section(cfg, ArenaOutcome(setting="memearena", battles=battles), bootstrap=20)
    assert section["battles"] == len(battles)
    assert "self_judging_exclude" in section["sensitivity"]


def test_ndcg_is_against_the_leave_one_out_joint_vote_by_default() -> None:
    # j1 ranks a > b > c with six times the battles of j2, who ranks c > b > a. The full joint
    # vote is j1's own order (NDCG 1 by conformity); without j1 it is j2's order.
    cfg = _cfg({"a": "fa", "b": "fb", "c": "fc", "j1": "f1", "j2": "f2"}, ["j1", "j2"])
    battles = _ranked("abc", "j1", 5, per_pair=6) + _ranked("cba", "j2", 5)
    section = setting_section(cfg, ArenaOutcome(setting="memearena", battles=battles), bootstrap=50)
    j1 = next(j for j in section["judges"] if j["judge"] == "j1")
    assert j1["ranking"] == ["a", "b", "c"] and j1["reference"] == "leave-one-out joint vote"
    # By hand: reference c > b > a gives relevances c=3, b=2, a=1; j1 lists a, b, c.
    dcg = 1 / math.log2(2) + 2 / math.log2(3) + 3 / math.log2(4)
    ideal = 3 / math.log2(2) + 2 / math.log2(3) + 1 / math.log2(4)
    assert j1["ndcg"] == pytest.approx(dcg / ideal)
    assert j1["kendall_tau"] == pytest.approx(-1.0)
    assert j1["vs_joint_vote"]["ndcg"]["value"] == pytest.approx(1.0)
    # Every meme says the same: the interval is the point.
    assert j1["ndcg_ci_low"] == pytest.approx(dcg / ideal)
    assert j1["ndcg_ci_high"] == pytest.approx(dcg / ideal)


def test_a_refusal_counts_as_a_loss_against_every_answer_of_its_task() -> None:
    # b beats a on every answered task, but refuses on half the tasks a answers.
    cfg = _cfg({"a": "fa", "b": "fb", "c": "fc", "j1": "f1"}, ["j1"])
    battles = []
    answers: dict[tuple[str, str, str], dict[str, Any]] = {}
    for m in range(8):
        for t in "abc":
            refused = t == "b" and m % 2 == 1
            answers[(f"m{m}", "high", t)] = (
                {"refusal": True} if refused else {"text": "x" * 10, "format_ok": True}
            )
        pairs = [("a", "c")] if m % 2 == 1 else [("b", "a"), ("b", "c"), ("a", "c")]
        battles += [_row(x, y, "model_a", "j1", f"m{m}") for x, y in pairs]
    outcome = ArenaOutcome(setting="memearena", battles=battles, answers=answers)
    section = setting_section(cfg, outcome, bootstrap=20)
    assert [r["model"] for r in section["overall"]] == ["b", "a", "c"]
    view = section["sensitivity"]["refusals_as_losses"]
    # 4 refused tasks × 2 answers (a, c) × 1 judge × 1 criterion
    assert view["added_battles"] == 4 * 2 * len(cfg.arena.criteria)  # type: ignore[union-attr]
    assert view["order_differs"] and view["overall"][0]["model"] == "a"


def test_the_bootstrap_unit_is_recorded_and_meme_intervals_are_the_widest() -> None:
    # Memes disagree: on half of them every judge prefers a, on the other half b.
    families = {"a": "fa", "b": "fb", "c": "fc", "j1": "f1", "j2": "f2"}
    battles = []
    for m in range(12):
        order = "abc" if m % 2 else "bac"
        for judge in ("j1", "j2"):
            battles += _ranked(order, judge, 1, per_pair=5)
            for row in battles[-15:]:
                row["item"] = f"m{m}"
                row["context"] = "high" if judge == "j1" else "moderate"
    widths = {}
    for unit in ("battle", "task", "meme"):
        cfg = _cfg(families, ["j1", "j2"], bootstrap_unit=unit)
        outcome = ArenaOutcome(setting="memearena", battles=battles)
        section = setting_section(cfg, outcome, bootstrap=300)
        assert section["bootstrap_unit"] == unit
        top = section["overall"][0]
        widths[unit] = top["ci_high"] - top["ci_low"]
    assert widths["meme"] > 1.5 * widths["battle"]


def test_the_pairwise_win_rate_matrix_counts_each_pair_and_halves_ties() -> None:
    cfg = _cfg({"a": "fa", "b": "fb", "c": "fc", "j1": "f1"}, ["j1"])
    battles = _ranked("abc", "j1", 4)  # a beats b and c, b beats c, on every meme
    battles += [_row("a", "b", "tie", "j1", f"m{m}") for m in range(4)]
    section = setting_section(cfg, ArenaOutcome(setting="memearena", battles=battles), bootstrap=20)
    pw = section["pairwise"]
    assert pw["models"] == ["a", "b", "c"]
    w, n = pw["win_rate"], pw["battles"]
    assert w[0][0] is None and n[0][0] == 0
    assert n[0][1] == n[1][0] == 8 and n[1][2] == 4
    assert w[0][1] == pytest.approx(0.75) and w[1][0] == pytest.approx(0.25)  # 4 wins + 4 ties
    assert w[0][2] == 1.0 and w[2][0] == 0.0 and w[1][2] == 1.0


def _two_settings() -> tuple[RunConfig, list[ArenaOutcome]]:
    families = {"a": "fa", "b": "fb", "c": "fc", "j1": "f1", "j2": "f2", "jc": "fc"}
    cfg = _cfg(families, ["j1", "j2", "jc"])
    main = _ranked("abc", "j1", 5) + _ranked("bca", "j2", 5) + _ranked("cab", "jc", 5)
    other = [dict(r, setting="self") for r in _ranked("acb", "j2", 4) + _ranked("cba", "jc", 3)]
    return cfg, [ArenaOutcome(setting="memearena", battles=main), ArenaOutcome("self", other)]


def test_the_analysis_writes_the_battle_files_write_battle_files_writes(tmp_path: Path) -> None:
    from memearena.methods.arena.analysis import arena_leaderboard
    from memearena.store import RunStore

    cfg, outcomes = _two_settings()
    fused, alone = tmp_path / "fused", tmp_path / "alone"
    fused.mkdir()
    alone.mkdir()
    with RunStore(tmp_path / "run.db") as store:
        arena_leaderboard(cfg, outcomes, store, bootstrap=10, run_dir=fused)
    write_battle_files(alone, outcomes, cfg)
    names = sorted(p.name for p in alone.iterdir())
    assert names == sorted(p.name for p in fused.iterdir())
    assert "battles.self.self_judged.jsonl" in names and len(names) == 4
    for name in names:
        assert (fused / name).read_bytes() == (alone / name).read_bytes()


def test_a_failed_analysis_leaves_the_previous_battle_files(tmp_path: Path) -> None:
    from memearena.methods.arena.analysis import arena_leaderboard
    from memearena.stats import StatsError
    from memearena.store import RunStore

    cfg, outcomes = _two_settings()
    (tmp_path / "battles.jsonl").write_text("earlier\n")
    bad = [*outcomes[1].battles, _row("a", "zz", "model_a", "j1", "m0")]
    outcomes[1] = ArenaOutcome("self", bad)
    with (
        RunStore(tmp_path / "run.db") as store,
        pytest.raises(StatsError, match="model 'zz', not in the model list"),
    ):
        arena_leaderboard(cfg, outcomes, store, bootstrap=10, run_dir=tmp_path)
    assert (tmp_path / "battles.jsonl").read_text() == "earlier\n"
    assert not list(tmp_path.glob("*.tmp")) and not (tmp_path / "battles.self.jsonl").exists()


@pytest.mark.parametrize("unit", ["meme", "task", "battle"])
def test_the_section_does_not_depend_on_how_the_battles_are_split_into_blocks(
    monkeypatch: pytest.MonkeyPatch, unit: str
) -> None:
    """Blocks of 7 rows (online Elo and first-seen cluster order carried across blocks) give
    the same section as one block."""
    import memearena.methods.arena.analysis as analysis

    cfg, outcomes = _two_settings()
    assert cfg.arena is not None
    cfg = cfg.model_copy(update={"arena": cfg.arena.model_copy(update={"bootstrap_unit": unit})})
    whole = setting_section(cfg, outcomes[0], bootstrap=20)
    monkeypatch.setattr(analysis, "_CHUNK", 7)
    assert setting_section(cfg, outcomes[0], bootstrap=20) == whole
