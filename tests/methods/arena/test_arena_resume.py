"""Config-aware resume: after a change, a re-run on the same directory recomputes exactly the
steps the change affects, reuses the rest, and ends where a fresh run of the new config ends.

The oracle is semantic, independent of how keys are built: a step is affected when something it
depends on changed (its model, the world's seed, its template, its inputs: the meme, the task,
the answers it reads, the guideline lineage). Each step's dependencies are read back from the
artifacts of a run of the old config and of a fresh run of the new one."""

from __future__ import annotations

import importlib
import shutil
from collections import Counter
from collections.abc import Iterator
from functools import cache
from importlib.resources import as_file, files
from pathlib import Path
from typing import Any

import pytest
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from memearena.config import DatasetConfig, RunConfig, SimModelConfig
from memearena.engine.lifecycle import RunResult, run_method
from memearena.errors import IncompatibleRunError
from memearena.methods.arena.config import ArenaConfig
from memearena.store import RunStore

TEMPLATES = ("context", "answer", "guideline", "judge")
render_mod = importlib.import_module("memearena.prompts.render")  # the package shadows it


def _sim(**kw: Any) -> SimModelConfig:
    return SimModelConfig(provider="sim", **kw)


def config(
    *,
    seed: int = 0,
    weak: dict[str, Any] | None = None,
    data: list[Any] | None = None,
    **arena: Any,
) -> RunConfig:
    targets = {
        "t-strong": _sim(skill=0.9, family="s"),
        "t-mid": _sim(skill=0.6, family="m"),
        "t-weak": _sim(**{"skill": 0.3, "family": "w", **(weak or {})}),
    }
    judges = {
        "j-one": _sim(skill=0.85, family="one", noise=0.1),
        "j-two": _sim(skill=0.8, family="two", noise=0.1),
    }
    fields: dict[str, Any] = {
        "targets": list(targets),
        "judges": list(judges),
        "context_model": "j-one",
        "fusion_rounds": 3,
        "bootstrap": 10,
        **arena,
    }
    return RunConfig(
        run="r",
        seed=seed,
        models={**targets, **judges},
        data=data or [DatasetConfig(format="demo", limit=3)],
        arena=ArenaConfig(**fields),
    )


def _run(cfg: RunConfig, run_dir: Path) -> RunResult:
    return run_method("arena", cfg, run_dir, show_progress=False)


def signatures(run_dir: Path, cfg: RunConfig, templates: dict[str, int]) -> dict[str, Counter[Any]]:
    """Each stage's steps in a run directory, as what each depends on (see module doc)."""
    assert cfg.arena is not None
    model = {n: m.model_dump_json() for n, m in cfg.models.items()}
    world = cfg.seed
    with RunStore(run_dir / "run.db") as store:
        contexts = {k.split("|")[0]: v for k, v in store.artifacts("context")}
        answers = {tuple(k.split("|")[:3]): v for k, v in store.artifacts("answer")}
        rounds: dict[str, dict[int, dict[str, Any]]] = {}
        for k, v in store.artifacts("guideline_round"):
            uid, rnd = k.split("|")[:2]
            rounds.setdefault(uid, {})[int(rnd)] = v
        verdicts = [tuple(k.split("|")[:6]) for k, _ in store.artifacts("verdict")]
    tasks = {
        (uid, c["level"]): (c["background"], c["task"])
        for uid, v in contexts.items()
        for c in v["contexts"]
    }
    out: dict[str, Counter[Any]] = {s: Counter() for s in ("contexts", "answers")}
    out["guidelines"], out["judgments"] = Counter(), Counter()
    ctx_model = cfg.arena.context_model
    for uid in contexts:
        out["contexts"][
            (model[ctx_model], world, uid, cfg.arena.contexts, templates["context"])
        ] += 1
    for (uid, level, target), _v in answers.items():
        sig = (model[target], world, uid, tasks[(uid, level)], templates["answer"])
        out["answers"][sig] += 1
    final: dict[str, str] = {}
    for uid, by_round in rounds.items():
        previous = None  # a round reads the guideline the round before it wrote
        for rnd in sorted(by_round):
            v = by_round[rnd]
            pick = v["analysis"]
            text = answers[(uid, pick[0], pick[1])]["text"] if pick else None
            sig = (model[v["judge"]], v["judge"], tuple(pick or ()), text, previous)
            out["guidelines"][(world, uid, sig, templates["guideline"])] += 1
            previous = final[uid] = v["guideline"]
    for _setting, uid, level, first, second, judge in verdicts:
        sig = (
            model[judge],
            world,
            uid,
            tasks[(uid, level)],
            answers[(uid, level, first)]["text"],
            answers[(uid, level, second)]["text"],
            final[uid],
            tuple(cfg.arena.criteria),
            templates["judge"],
        )
        out["judgments"][sig] += 1
    return out


def expected_counts(
    before: dict[str, Counter[Any]], fresh: dict[str, Counter[Any]]
) -> dict[str, tuple[int, int]]:
    """Per stage ``(reused, new)``: a step of the new config is reused iff the old run has a
    step with the same dependencies."""
    out = {}
    for stage, sigs in fresh.items():
        reused = sum(min(n, before[stage][s]) for s, n in sigs.items())
        out[stage] = (reused, sum(sigs.values()) - reused)
    return out


def check_change(
    tmp_path: Path,
    old: RunConfig,
    new: RunConfig,
    *,
    old_templates: dict[str, int] | None = None,
    new_templates: dict[str, int] | None = None,
) -> dict[str, tuple[int, int]]:
    """Run ``old``, then ``new`` on the same directory; returns the stage counts after
    asserting they are exactly those the oracle expects and the outcome is a fresh run's."""
    plain = dict.fromkeys(TEMPLATES, 0)
    first = _run(old, tmp_path / "run")
    assert first.new_calls > 0
    before = signatures(tmp_path / "run", old, old_templates or plain)
    resumed = _run(new, tmp_path / "run")
    fresh = _run(new, tmp_path / "fresh")
    want = expected_counts(before, signatures(tmp_path / "fresh", new, new_templates or plain))
    got = {s: (c.reused, c.new) for s, c in resumed.stages.items()}
    assert got == want
    assert all(c.failed == 0 for c in resumed.stages.values())
    assert resumed.new_calls == sum(new for _reused, new in want.values())
    # resuming after the change ends exactly where a fresh run of the new config ends
    assert resumed.leaderboard["arena"]["overall"] == fresh.leaderboard["arena"]["overall"]
    assert _battles(tmp_path / "run") == _battles(tmp_path / "fresh")
    return got


def _battles(run_dir: Path) -> str:
    return (run_dir / "battles.jsonl").read_text()


def test_unchanged_config_reuses_every_step(tmp_path: Path) -> None:
    cfg = config()
    _run(cfg, tmp_path / "run")
    again = _run(cfg, tmp_path / "run")
    assert again.new_calls == 0 and again.analysis_reused
    assert {s: c.new for s, c in again.stages.items()} == dict.fromkeys(again.stages, 0)
    assert again.stages["judgments"].reused > 0


def test_changed_criteria_recompute_the_judgments_only(tmp_path: Path) -> None:
    got = check_change(tmp_path, config(), config(criteria=["instruction_following", "relevance"]))
    assert got["contexts"][1] == got["answers"][1] == got["guidelines"][1] == 0
    assert got["judgments"][0] == 0 and got["judgments"][1] > 0


def test_changed_model_id_recomputes_that_target_and_what_read_it(tmp_path: Path) -> None:
    got = check_change(tmp_path, config(), config(weak={"model": "t-weak-v2"}))
    assert got["contexts"] == (3, 0)
    assert got["answers"] == (18, 9)  # the weak target's 3 answers per meme, nothing else
    # The simulated target answers the same under its new id: what reads its answers sees the
    # same text and is reused.
    assert got["guidelines"][1] == 0 and got["judgments"][1] == 0


def test_changed_model_recomputes_its_answers_and_what_read_them(tmp_path: Path) -> None:
    got = check_change(tmp_path, config(), config(weak={"model": "t-weak-v2", "skill": 0.5}))
    assert got["answers"] == (18, 9)
    assert got["judgments"][1] > 0  # pairs with the changed target (and later guidelines)


def test_changed_number_of_contexts_recomputes_from_the_contexts_on(tmp_path: Path) -> None:
    got = check_change(tmp_path, config(contexts=3), config(contexts=2))
    assert got["contexts"] == (0, 3)


def test_changed_seed_recomputes_what_the_seed_shapes(tmp_path: Path) -> None:
    # Simulated models answer as their world does, and the world's seed is the run's seed.
    got = check_change(tmp_path, config(seed=0), config(seed=1))
    assert got["contexts"] == (0, 3)


@pytest.fixture
def edited_templates(tmp_path: Path) -> Iterator[Path]:
    """The prompt templates copied to a folder the renderer reads from, to edit them."""
    root = tmp_path / "templates"
    with as_file(files("memearena.prompts") / "templates") as src:
        shutil.copytree(src, root)

    @cache
    def env() -> Environment:
        return Environment(
            loader=FileSystemLoader(root),
            undefined=StrictUndefined,
            autoescape=False,
            trim_blocks=True,
            lstrip_blocks=True,
            finalize=render_mod._defang,
            auto_reload=False,
        )

    original = render_mod._env
    render_mod.clear_template_cache()
    render_mod._env = env  # type: ignore[assignment]
    try:
        yield root
    finally:
        render_mod._env = original
        render_mod.clear_template_cache()


def test_changed_prompt_template_recomputes_the_steps_it_prompts(
    tmp_path: Path, edited_templates: Path
) -> None:
    cfg = config()
    _run(cfg, tmp_path / "run")
    before = signatures(tmp_path / "run", cfg, dict.fromkeys(TEMPLATES, 0))
    judge = edited_templates / "arena" / "judge_pairwise.j2"
    judge.write_text(judge.read_text() + "\nBe brief.\n")
    render_mod.clear_template_cache()
    resumed = _run(cfg, tmp_path / "run")
    fresh = _run(cfg, tmp_path / "fresh")
    edited = {**dict.fromkeys(TEMPLATES, 0), "judge": 1}
    want = expected_counts(before, signatures(tmp_path / "fresh", cfg, edited))
    assert {s: (c.reused, c.new) for s, c in resumed.stages.items()} == want
    assert want["judgments"][0] == 0 and want["answers"][1] == 0
    assert resumed.leaderboard["arena"]["overall"] == fresh.leaderboard["arena"]["overall"]


def test_a_directory_of_another_dataset_is_refused_in_one_line(tmp_path: Path) -> None:
    _run(config(), tmp_path / "run")
    other = config(data=[DatasetConfig(format="demo", limit=3), DatasetConfig(format="demo")])
    with pytest.raises(IncompatibleRunError) as err:
        _run(other, tmp_path / "run")
    assert "\n" not in str(err.value) and "other datasets" in str(err.value)
    # a changed selection of the same dataset is a change, not another run
    more = _run(config(data=[DatasetConfig(format="demo", limit=4)]), tmp_path / "run")
    assert more.stages["contexts"].reused == 3 and more.stages["contexts"].new == 1


def test_a_changed_selection_reuses_its_memes_in_their_new_order(tmp_path: Path) -> None:
    # The first meme left out: every meme of the new selection moves up one place.
    first = config(data=[DatasetConfig(format="demo", limit=4)])
    later = config(data=[DatasetConfig(format="demo", limit=3, exclude=["m01"])])
    _run(first, tmp_path / "run")
    with RunStore(tmp_path / "run" / "run.db") as store:
        assert [c for c, _r, _v in store.iter_members("arena.answers") if "m01" in c]
    resumed = _run(later, tmp_path / "run")
    fresh = _run(later, tmp_path / "fresh")
    assert resumed.new_calls == 0
    assert {s: c.new for s, c in resumed.stages.items()} == dict.fromkeys(resumed.stages, 0)
    assert _battles(tmp_path / "run") == _battles(tmp_path / "fresh")
    assert resumed.leaderboard["arena"]["overall"] == fresh.leaderboard["arena"]["overall"]
    with RunStore(tmp_path / "run" / "run.db") as store:  # the meme left out is forgotten
        assert not [c for c, _r, _v in store.iter_members("arena.answers") if "m01" in c]
