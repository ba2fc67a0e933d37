"""The Arena over HTTP: the official ``openai`` client against the simulated server, with
injected faults, a kill -9 mid-run and a resume."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from memearena.config import load_config
from memearena.engine.lifecycle import run_method
from memearena.sim.catalogue import DEMO_JUDGES, DEMO_TARGETS
from memearena.sim.serve import demo_world
from memearena.sim.server import BackgroundServer
from memearena.store import RunStore

TARGETS = ["sim-aurora", "sim-cirrus", "sim-ember"]
JUDGES = ["sim-judge-falcon", "sim-judge-grove"]


def _server(faults: tuple[str, ...]) -> BackgroundServer:
    return BackgroundServer(
        demo_world(seed=0),
        process=True,
        latency_ms=10,
        fail_rate=0.2,
        seed=7,
        hang_s=5.0,
        retry_after_s=0.05,
        faults=faults,
    )


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    """Transport faults only: 429 + Retry-After, 500, hung requests."""
    with _server(("429", "500", "timeout")) as srv:
        yield srv


@pytest.fixture(scope="module")
def garbling_server() -> Iterator[BackgroundServer]:
    """Every fault, malformed outputs included."""
    with _server(("429", "500", "timeout", "malformed")) as srv:
        yield srv


def write_config(path: Path, base_url: str) -> Path:
    catalogue = {**DEMO_TARGETS, **DEMO_JUDGES}
    models = {
        name: {
            "provider": "openai",
            "base_url": base_url,
            "model": name,
            "family": catalogue[name].family,
            "max_concurrency": 4,
            "timeout": 0.5,
            "max_retries": 10,
        }
        for name in TARGETS + JUDGES
    }
    cfg = {
        "run": "http",
        "seed": 0,
        "models": models,
        "data": [{"format": "demo", "limit": 3}],
        "arena": {
            "targets": TARGETS,
            "judges": JUDGES,
            "context_model": JUDGES[0],
            "fusion_rounds": 2,
            "bootstrap": 20,
        },
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def _calls(db: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return int(con.execute("SELECT count(*) FROM calls").fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def test_malformed_outputs_over_http_are_reasked_or_recorded(
    garbling_server: BackgroundServer, tmp_path: Path
) -> None:
    cfg = load_config(write_config(tmp_path / "http.yaml", garbling_server.base_url))
    result = run_method("arena", cfg, tmp_path / "run", show_progress=False)
    assert result.stopped is None
    faults = garbling_server.stats()["faults"]
    assert faults.get("malformed", 0) > 0
    store = RunStore(tmp_path / "run" / "run.db")
    reasks = [c for c in store.calls() if c.role == "arena.judge"]
    answers = store.artifacts("answer")
    store.close()
    assert len(reasks) > 3 * 3 * 3 * 2 * 2  # more judge calls than verdicts: re-asks happened
    # no answer is dropped: a garbled one is kept (and judged on instruction following)
    assert len(answers) == 3 * 3 * 3
    board = result.leaderboard["arena"]
    assert board["overall"] and board["answers"]


def test_arena_over_http_with_faults_survives_kill_and_resumes_to_the_same_leaderboard(
    server: BackgroundServer, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "http.yaml", server.base_url)
    cfg = load_config(config)

    # Uninterrupted reference run (in-process).
    before = server.stats()
    reference = run_method("arena", cfg, tmp_path / "a" / "http", show_progress=False)
    after = server.stats()
    assert reference.stopped is None
    faults = sum(after["faults"].values()) - sum(before["faults"].values())
    assert faults > 0  # the server did inject faults ...
    store = RunStore(tmp_path / "a" / "http" / "run.db")
    errors = [e for e in store.errors() if e.reason not in ("refusal",)]
    retried = sum(c.attempts - 1 for c in store.calls())
    store.close()
    assert retried > 0  # ... and the client retried them
    assert not [e for e in errors if e.reason.startswith("model error")]  # none left failing
    # every (task, pair, judge) was judged in both orders
    judged = {
        (jp.task.meme.uid, jp.task.level, jp.x, jp.y, jp.judge)
        for jp in reference.outcome[0].judged
    }
    assert len(judged) == 3 * 3 * 3 * 2

    # The same run through the CLI, killed with SIGKILL mid-run, then re-run.
    out = tmp_path / "b"
    cmd = [
        sys.executable,
        "-m",
        "memearena.cli",
        "arena",
        str(config),
        "--out",
        str(out),
        "--no-progress",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    db = out / "http" / "run.db"
    deadline = time.monotonic() + 60
    while _calls(db) < 40 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "http" / "leaderboard.json").exists()

    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    resumed = json.loads((out / "http" / "leaderboard.json").read_text())
    assert resumed["arena"]["overall"] == reference.leaderboard["arena"]["overall"]

    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    dupes = con.execute(
        "SELECT count(*) FROM (SELECT kind, key FROM artifacts GROUP BY kind, key "
        "HAVING count(*) > 1)"
    ).fetchone()[0]
    con.close()
    assert dupes == 0
