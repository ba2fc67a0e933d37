"""One run lifecycle for every method, against the simulated server on loopback: a spend cap
stops each method with exit 3, one spend line equal to its calls table, a status in
leaderboard.json and a banner in the report; a re-run with a higher cap completes and pays no
call twice (counted at the server); the dry run plans the calls the run makes; one writer per
run directory whatever the methods; "nothing usable" is exit 1 for every method."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from memearena.cli import app
from memearena.config import parse_config
from memearena.engine.lifecycle import plan_method, run_method
from memearena.engine.registry import method_names
from memearena.errors import ConfigError
from memearena.sim.catalogue import demo_models
from memearena.sim.serve import demo_world
from memearena.sim.server import BackgroundServer

runner = CliRunner()

PRICE = {"input": 20.0, "output": 20.0}  # $20 per 1M tokens: a call costs about a cent
CLEAN = ["sim-aurora", "sim-cirrus", "sim-judge-falcon", "sim-judge-harbor"]
"""Catalogue models without refusals or format errors: no re-asks, so a plan is exact."""
METHODS = method_names()
"""Every registered method (the built-in three)."""
COMMAND = {m: m.replace("_", "-") for m in METHODS}
CAP = {"arena": 0.15, "adapt": 0.15, "judge_audit": 0.3}
"""A spend cap well inside each small run (each one costs a few dollars uncapped)."""


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    """``sim-serve``'s world: the demo catalogue (others get a 404)."""
    with BackgroundServer(demo_world(seed=0), models=list(demo_models())) as srv:
        yield srv


def _raw(method: str, base_url: str) -> dict[str, Any]:
    models = {
        n: {
            "provider": "openai",
            "base_url": base_url,
            "model": n,
            "price": PRICE,
            "max_concurrency": 4,
            "timeout": 10,
        }
        for n in CLEAN
    }
    raw: dict[str, Any] = {"run": method, "seed": 0, "models": models}
    if method == "arena":
        raw["data"] = [{"format": "demo", "limit": 3}]
        raw["arena"] = {
            "targets": ["sim-aurora", "sim-cirrus"],
            "judges": ["sim-judge-falcon", "sim-judge-harbor"],
            "context_model": "sim-judge-falcon",
            "contexts": 1,
            "fusion_rounds": 2,
            "bootstrap": 10,
            "max_reasks": 0,
        }
    elif method == "adapt":
        raw["data"] = [{"format": "demo", "limit": 6}]
        raw["adapt"] = {
            "targets": ["sim-aurora", "sim-cirrus"],
            **dict.fromkeys(
                ["miner", "text_judge", "image_examiner", "instruction_writer", "narrator"],
                "sim-judge-falcon",
            ),
            "reference_model": "sim-judge-falcon",
            "reference_judge": "sim-judge-harbor",
            "scorers": ["sim-judge-harbor"],
            "refiner": "sim-judge-harbor",
            "checker": "sim-judge-falcon",
            "repeats": 1,
            "reference_candidates": 2,
            "seed_samples": 1,
            "steps": 2,
            "bootstrap": 20,
            "max_reasks": 0,
            "human_export": False,
        }
    else:
        raw["data"] = [{"format": "demo", "limit": 2}]
        raw["judge_audit"] = {
            "judges": ["sim-judge-falcon", "sim-judge-harbor"],
            "responders": ["sim-aurora"],
            "bias_types": ["text_dominance", "image_misalignment", "detail_description"],
            "bootstrap": 20,
            "max_reasks": 0,
        }
    return raw


def _write(tmp_path: Path, raw: dict[str, Any], name: str = "cfg.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def _run(method: str, config: Path, out: Path, *extra: str) -> Any:
    return runner.invoke(
        app,
        [COMMAND[method], str(config), "--out", str(out), "--no-progress", *extra],
        catch_exceptions=False,
    )


def _calls(db: Path) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT request_hash, status, cost_usd FROM calls").fetchall()
    finally:
        con.close()


def _spend_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if re.search(r"\$[0-9.]+ spent", line)]


@pytest.mark.parametrize("method", METHODS)
def test_a_capped_run_exits_3_and_a_rerun_completes_paying_nothing_twice(
    method: str, server: BackgroundServer, tmp_path: Path
) -> None:
    config = _write(tmp_path, _raw(method, server.base_url))
    out = tmp_path / "runs"
    run_dir = out / method
    before = server.stats()["completed"]

    capped = _run(method, config, out, "--max-cost", str(CAP[method]))
    assert capped.exit_code == 3, capped.output
    lines = _spend_lines(capped.output)
    assert len(lines) == 1, capped.output  # one spend line, not two different figures
    shown = float(re.search(r"\$([0-9.]+) spent", lines[0]).group(1))  # type: ignore[union-attr]
    rows = _calls(run_dir / "run.db")
    assert shown == pytest.approx(sum(r[2] for r in rows), abs=5e-5)
    assert shown <= CAP[method] + 1e-9
    assert "re-run the same command with a higher --max-cost" in lines[0]
    board = json.loads((run_dir / "leaderboard.json").read_text(encoding="utf-8"))
    status = board["status"]
    assert status["complete"] is False and status["max_cost"] == CAP[method]
    assert status["spent_usd"] == pytest.approx(shown, abs=5e-5)
    assert status["spent_upper_bound_usd"] >= status["spent_usd"]
    assert board["run"]["name"] == method  # run facts, every method
    report = (run_dir / "report.html").read_text(encoding="utf-8")
    assert 'id="run-failed"' in report and "spend cap reached" in report

    done = _run(method, config, out, "--max-cost", "100")
    assert done.exit_code == 0, done.output
    assert len(_spend_lines(done.output)) == 1
    assert "complete:" in done.output and "reused" in done.output and "Outputs in" in done.output
    rows = _calls(run_dir / "run.db")
    paid = [r for r in rows if r[1] in ("ok", "refusal")]
    assert len({r[0] for r in paid}) == len(paid)  # no request paid twice
    assert server.stats()["completed"] - before == len(paid)  # counted at the server
    board = json.loads((run_dir / "leaderboard.json").read_text(encoding="utf-8"))
    assert board["status"]["complete"] is True and board["status"]["problems"] == []
    assert isinstance(board[method], dict)
    assert 'id="run-failed"' not in (run_dir / "report.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("method", METHODS)
def test_the_dry_run_plans_the_calls_the_run_makes(
    method: str, server: BackgroundServer, tmp_path: Path
) -> None:
    raw = _raw(method, server.base_url)
    plan = plan_method(method, parse_config(raw))
    before = server.stats()["completed"]
    dry = _run(method, _write(tmp_path, raw), tmp_path / "dry", "--dry-run")
    assert dry.exit_code == 0 and f"{plan.calls:,}" in dry.output
    assert server.stats()["completed"] == before  # the dry run called nothing
    result = run_method(method, parse_config(raw), tmp_path / "run", show_progress=False)
    made = server.stats()["completed"] - before
    assert result.exit_code == 0 and made == result.new_calls
    assert abs(plan.calls - made) <= 0.02 * made, (plan.calls, made)


@pytest.mark.parametrize("second", ["adapt", "judge_audit"])
def test_a_second_process_on_an_adapt_run_directory_refuses_and_nothing_is_paid_twice(
    second: str, tmp_path: Path
) -> None:
    with BackgroundServer(demo_world(seed=0), models=list(demo_models()), latency_ms=40) as srv:
        raw = _raw("adapt", srv.base_url)
        raw["judge_audit"] = _raw("judge_audit", srv.base_url)["judge_audit"]
        raw["run"] = "shared"
        config = _write(tmp_path, raw)
        out = tmp_path / "runs"
        lock = out / "shared" / "run.lock"
        first = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memearena",
                "adapt",
                str(config),
                "--out",
                str(out),
                "--no-progress",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 60
            while not (lock.exists() and lock.read_text().strip()) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert first.poll() is None, "the first process ended before the second started"
            refused = _run(second, config, out)
            assert refused.exit_code == 2, refused.output
            assert "in use by pid" in refused.output
        finally:
            _, err = first.communicate(timeout=300)
        assert first.returncode == 0, err
        rows = _calls(out / "shared" / "run.db")
        paid = [r for r in rows if r[1] in ("ok", "refusal")]
        assert len({r[0] for r in paid}) == len(paid)
        assert srv.stats()["completed"] == len(paid)  # the refused process paid for nothing


def test_nothing_usable_is_exit_1_for_adapt(tmp_path: Path) -> None:
    """A scorer whose every reply is unparseable: no target answer scored, exit 1."""
    raw = _raw("adapt", "http://127.0.0.1:9/v1")
    raw["models"] = {n: {"provider": "sim", "skill": 0.8, "family": n} for n in CLEAN}
    raw["models"]["sim-judge-harbor"]["format_error_rate"] = 1.0
    raw["data"] = [{"format": "demo", "limit": 3}]
    result = _run("adapt", _write(tmp_path, raw), tmp_path / "runs")
    assert result.exit_code == 1, result.output
    assert "no target answer was scored" in result.output
    status = json.loads((tmp_path / "runs" / "adapt" / "leaderboard.json").read_text())["status"]
    assert status["complete"] is False


def test_nothing_usable_is_exit_1_for_the_judge_audit(tmp_path: Path) -> None:
    raw = _raw("judge_audit", "http://127.0.0.1:9/v1")
    raw["models"] = {n: {"provider": "sim", "skill": 0.8, "family": n} for n in CLEAN}
    for judge in ("sim-judge-falcon", "sim-judge-harbor"):
        raw["models"][judge]["format_error_rate"] = 1.0
    result = _run("judge_audit", _write(tmp_path, raw), tmp_path / "runs")
    assert result.exit_code == 1, result.output
    assert "nothing usable" in result.output


@pytest.mark.parametrize("method", METHODS)
def test_a_missing_key_is_found_before_any_call(
    method: str, server: BackgroundServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMEARENA_TEST_UNSET_KEY", raising=False)
    raw = _raw(method, server.base_url)
    raw["models"]["sim-judge-harbor"]["api_key_env"] = "MEMEARENA_TEST_UNSET_KEY"
    before = server.stats()["completed"]
    result = _run(method, _write(tmp_path, raw), tmp_path / "runs")
    assert result.exit_code == 2
    assert "MEMEARENA_TEST_UNSET_KEY" in result.output and "sim-judge-harbor" in result.output
    assert server.stats()["completed"] == before


@pytest.mark.parametrize("method", METHODS)
def test_planning_a_config_without_the_section_is_one_config_error(method: str) -> None:
    import memearena

    raw = _raw("arena" if method != "arena" else "adapt", "http://127.0.0.1:9/v1")
    with pytest.raises(ConfigError) as err:
        getattr(memearena, f"plan_{method}")(parse_config(raw))
    assert "\n" not in str(err.value) and method in str(err.value)


def test_open_run_returns_the_result_of_each_kind_of_directory(tmp_path: Path) -> None:
    pytest.importorskip("pandas")
    import memearena
    from memearena.api import AdaptResult, ArenaResult, JudgeAuditResult, RunResults

    dirs = {}
    for method in METHODS:
        raw = _raw(method, "http://127.0.0.1:9/v1")
        raw["models"] = {n: {"provider": "sim", **demo_models()[n].model_dump()} for n in CLEAN}
        for m in raw["models"].values():
            m.pop("provider_extra", None)
        cfg = parse_config(raw)
        dirs[method] = tmp_path / method
        run_method(method, cfg, dirs[method], show_progress=False)
    kinds = {"arena": ArenaResult, "adapt": AdaptResult, "judge_audit": JudgeAuditResult}
    for method, cls in kinds.items():
        result = memearena.open_run(dirs[method])
        assert type(result) is cls
        df = result.to_pandas()
        assert len(df) > 0 and result.status is not None
    demo = memearena.open_run(_demo_dir(tmp_path))
    assert isinstance(demo, RunResults) and set(demo.methods) == set(METHODS)
    table = demo.to_pandas()
    assert set(table["method"]) == set(METHODS)
    assert len(demo.arena.to_pandas()) and len(demo.judge_audit.to_pandas())


def _demo_dir(tmp_path: Path) -> Path:
    """A directory holding every method's section, as the demo leaves it (sections copied)."""
    board: dict[str, Any] = {}
    for method in METHODS:
        board.update(json.loads((tmp_path / method / "leaderboard.json").read_text()))
    demo = tmp_path / "demo"
    demo.mkdir()
    (demo / "leaderboard.json").write_text(json.dumps(board), encoding="utf-8")
    return demo


def test_a_later_method_never_hides_an_earlier_ones_failure(
    server: BackgroundServer, tmp_path: Path
) -> None:
    """One directory, two methods: the Arena stopped at its cap, then a complete Judge audit;
    the directory's status (and the report's banner) still says the Arena is not done."""
    raw = _raw("arena", server.base_url)
    raw["judge_audit"] = _raw("judge_audit", server.base_url)["judge_audit"]
    config = _write(tmp_path, raw)
    out = tmp_path / "runs"
    assert _run("arena", config, out, "--max-cost", "0.05").exit_code == 3
    audit = _run("judge_audit", config, out)
    assert audit.exit_code == 0, audit.output  # the audit itself is complete
    board = json.loads((out / "arena" / "leaderboard.json").read_text(encoding="utf-8"))
    assert board["status"]["complete"] is False
    assert any(p.startswith("arena: spend cap reached") for p in board["status"]["problems"])
    assert 'id="run-failed"' in (out / "arena" / "report.html").read_text(encoding="utf-8")
    assert _run("arena", config, out).exit_code == 0
    board = json.loads((out / "arena" / "leaderboard.json").read_text(encoding="utf-8"))
    assert board["status"]["complete"] is True and set(board) >= {"arena", "judge_audit"}
