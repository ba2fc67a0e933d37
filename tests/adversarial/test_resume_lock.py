"""One writer per run directory: a second run on the same directory refuses at once, naming
the holder, and no call is paid twice."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import yaml

from memearena.store import LOCK_FILE

TARGETS = {"t-a": 0.9, "t-b": 0.5, "t-c": 0.2}
JUDGES = ["j-one", "j-two"]
CLI = [sys.executable, "-m", "memearena.cli"]


def write_config(path: Path, *, latency_ms: float) -> Path:
    models = {
        name: {"provider": "sim", "skill": skill, "family": name, "latency_ms": latency_ms}
        for name, skill in TARGETS.items()
    }
    for j in JUDGES:
        models[j] = {"provider": "sim", "skill": 0.8, "family": j, "latency_ms": latency_ms}
    cfg = {
        "run": "locked",
        "models": models,
        "data": [{"format": "demo", "limit": 2}],
        "arena": {
            "targets": list(TARGETS),
            "judges": JUDGES,
            "context_model": JUDGES[0],
            "fusion_rounds": 2,
            "bootstrap": 10,
        },
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def _arena(config: Path, out: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CLI, "arena", str(config), "--out", str(out), "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_second_run_on_a_directory_refuses_naming_the_holder_and_nothing_is_paid_twice(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path / "c.yaml", latency_ms=1000)  # a run of several seconds
    out = tmp_path / "out"
    lock = out / "locked" / LOCK_FILE
    first = _arena(config, out)
    try:
        deadline = time.monotonic() + 60
        while not (lock.exists() and lock.read_text().strip()):
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first run never took the lock"
            time.sleep(0.05)
        t0 = time.monotonic()
        second = _arena(config, out)
        _, err = second.communicate(timeout=60)
        refused_in = time.monotonic() - t0
        assert first.poll() is None, "the first run ended before the second was refused"
    finally:
        _, err1 = first.communicate(timeout=300)
    assert first.returncode == 0, err1
    assert second.returncode == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert f"pid {first.pid}" in lines[0] and "in use" in lines[0]
    assert "Traceback" not in err
    assert refused_in < 30  # at once: it never waits for the holder
    con = sqlite3.connect(out / "locked" / "run.db")
    try:
        paid = con.execute(
            "SELECT COUNT(*), COUNT(DISTINCT request_hash) FROM calls WHERE status = 'ok'"
        ).fetchone()
    finally:
        con.close()
    assert paid[0] > 0
    assert paid[0] == paid[1]  # every request paid once

    # the lock dies with its holder: a re-run after the first one ended resumes at no cost
    third = _arena(config, out)
    out3, err3 = third.communicate(timeout=300)
    assert third.returncode == 0, err3
    assert "0 new model calls" in " ".join(out3.split())
