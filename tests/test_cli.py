"""The command line: one-line errors, dry runs, runs, checks, the simulated server."""

from __future__ import annotations

import csv
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import openai
import pytest
import yaml
from typer.testing import CliRunner

from memearena.cli import app
from memearena.sim.serve import demo_world
from memearena.sim.server import BackgroundServer

runner = CliRunner()

SMALL = {
    "run": "small",
    "models": {
        "t1": {"provider": "sim", "skill": 0.9, "family": "one"},
        "t2": {"provider": "sim", "skill": 0.3, "family": "two"},
        "j": {"provider": "sim", "skill": 0.8, "family": "judge"},
    },
    "data": [{"format": "demo", "limit": 2}],
    "arena": {
        "targets": ["t1", "t2"],
        "judges": ["j"],
        "context_model": "j",
        "fusion_rounds": 1,
        "bootstrap": 10,
    },
}


def _write(tmp_path: Path, cfg: dict[str, object]) -> Path:
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def test_invalid_config_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = {**SMALL, "arena": {**SMALL["arena"], "targets": ["t1", "ghost"]}}  # type: ignore[dict-item]
    result = runner.invoke(app, ["arena", str(_write(tmp_path, bad))])
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "arena.targets: model 'ghost'" in lines[0]
    assert "Traceback" not in result.output


def test_dry_run_prints_the_plan_and_calls_nothing(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["arena", str(_write(tmp_path, SMALL)), "--dry-run", "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 0, result.output
    assert "planned calls" in result.output
    # 2 contexts + 2*3*2 answers + 2*2 guideline rounds + 2*3*1 pair*1 judge*2 orders
    assert "30" in result.output
    assert not (tmp_path / "o").exists()


def test_arena_run_writes_its_outputs_and_export_works(tmp_path: Path) -> None:
    out = tmp_path / "o"
    result = runner.invoke(
        app, ["arena", str(_write(tmp_path, SMALL)), "--out", str(out), "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    run = out / "small"
    for name in ("run.db", "leaderboard.json", "battles.jsonl", "report.html"):
        assert (run / name).exists(), name
    board = json.loads((run / "leaderboard.json").read_text())
    assert [r["model"] for r in board["arena"]["overall"]] == ["t1", "t2"]
    result = runner.invoke(app, ["export", str(run), "--table", "calls", "--format", "csv"])
    assert result.exit_code == 0, result.output
    with (run / "calls.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 30
    assert {r["role"] for r in rows} >= {"arena.context", "arena.answer", "arena.judge"}
    (run / "report.html").unlink()
    assert runner.invoke(app, ["report", str(run)]).exit_code == 0
    assert (run / "report.html").exists()
    missing = runner.invoke(app, ["report", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "cannot read" in missing.output
    ranked = runner.invoke(app, ["rank", str(run / "battles.jsonl"), "--json", "--bootstrap", "10"])
    assert ranked.exit_code == 0, ranked.output
    assert [m["model"] for m in json.loads(ranked.output)["models"]] == ["t1", "t2"]


def test_models_check_pings_sim_and_http_models(tmp_path: Path) -> None:
    with BackgroundServer(demo_world()) as srv:
        cfg = {
            **SMALL,
            "models": {
                "local": {"provider": "sim"},
                "remote": {"provider": "openai", "model": "sim-aurora", "base_url": srv.base_url},
            },
            "arena": None,
        }
        result = runner.invoke(app, ["models", "check", str(_write(tmp_path, cfg))])
        assert result.exit_code == 0, result.output
        assert srv.stats()["requests"] == 1
    assert result.output.count("ok") >= 2


def test_models_check_reports_an_unreachable_endpoint(tmp_path: Path) -> None:
    cfg = {
        **SMALL,
        "models": {
            "down": {
                "provider": "openai",
                "model": "x",
                "base_url": "http://127.0.0.1:9/v1",
                "max_retries": 0,
                "timeout": 2,
            }
        },
        "arena": None,
    }
    result = runner.invoke(app, ["models", "check", str(_write(tmp_path, cfg))])
    assert result.exit_code == 1
    assert "failed" in result.output


def test_models_check_names_each_failure_once_with_what_to_check(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_ENV", raising=False)
    with BackgroundServer(demo_world()) as srv:
        cfg = {
            **SMALL,
            "models": {
                "badpath": {
                    "provider": "openai",
                    "model": "sim-aurora",
                    "base_url": srv.base_url.removesuffix("/v1") + "/api",
                },
                "nokey": {"provider": "openai", "model": "x", "api_key_env": "NO_SUCH_KEY_ENV"},
            },
            "arena": None,
        }
        with caplog.at_level("WARNING", logger="memearena.models"):
            result = runner.invoke(app, ["models", "check", str(_write(tmp_path, cfg))])
    assert result.exit_code == 1
    out = " ".join(result.output.split())
    assert "HTTP 404" in out and "check the model's 'model' id and its base_url" in out
    # Each failure: its table row, and its whole reason once below; no warning or log beside.
    for name in ("badpath", "nokey"):
        assert out.count(f"failed: model '{name}'") == 1
    assert "environment variable NO_SUCH_KEY_ENV is not set" in out
    assert "warning:" not in out  # the missing key is its row's failure, not also a warning
    assert not [r for r in caplog.records if "call failed" in r.getMessage()]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_sim_serve_speaks_to_the_official_client(tmp_path: Path) -> None:
    port = _free_port()
    models = {"my-sim": {"provider": "sim", "skill": 0.7}}
    cfg = _write(tmp_path, {**SMALL, "models": models, "arena": None})
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memearena.cli",
            "sim-serve",
            "--port",
            str(port),
            "--config",
            str(cfg),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
        deadline = time.monotonic() + 30
        while True:
            try:
                models = [m.id for m in client.models.list()]
                break
            except openai.APIConnectionError:
                assert time.monotonic() < deadline, "sim-serve did not start"
                time.sleep(0.1)
        assert "sim-aurora" in models and "my-sim" in models
        reply = client.chat.completions.create(
            model="sim-aurora",
            messages=[{"role": "user", "content": "ping"}],
            extra_headers={"X-Memearena-Role": "ping"},
        )
        assert reply.choices[0].message.content
    finally:
        proc.terminate()
        proc.wait(10)


def test_demo_help_names_every_method_it_runs() -> None:
    for args in (["--help"], ["demo", "--help"]):
        out = runner.invoke(app, args, env={"COLUMNS": "200"})
        assert out.exit_code == 0
        line = next(x for x in out.output.splitlines() if "bundled demo memes" in x)
        assert "Judge audit" in line and "Arena" in line and "Adapt" in line


def test_demo_runs_offline_and_its_banner_names_every_method(tmp_path: Path) -> None:
    out = runner.invoke(app, ["demo", "--out", str(tmp_path / "demo"), "--no-progress"])
    assert out.exit_code == 0, out.output
    banner = " ".join(out.stdout.split("\n\n")[0].split()[:16])
    assert banner.startswith("memearena demo — the Judge audit, the Arena and Adapt"), banner
    assert (tmp_path / "demo" / "report.html").is_file()
