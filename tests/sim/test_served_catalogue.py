"""``sim-serve`` serves the whole demo catalogue: the Judge audit's demo judges too."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import openai

from memearena.engine.registry import get_method
from memearena.sim.catalogue import demo_models, served_models


def test_served_models_hold_every_method_s_demo_models() -> None:
    from memearena.methods.judge_audit.sim import DEMO_AUDIT_JUDGES

    get_method("judge_audit")
    served = served_models()
    assert set(DEMO_AUDIT_JUDGES) <= set(served)
    assert set(demo_models()) <= set(served)
    assert set(DEMO_AUDIT_JUDGES).isdisjoint(demo_models())  # the demo's own list is unchanged


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_sim_serve_answers_for_the_judge_audit_demo_judges() -> None:
    from memearena.methods.judge_audit.sim import DEMO_AUDIT_JUDGES

    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "memearena.cli", "sim-serve", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
        deadline = time.monotonic() + 30
        while True:
            try:
                listed = {m.id for m in client.models.list()}
                break
            except openai.APIConnectionError:
                assert time.monotonic() < deadline, "sim-serve did not start"
                time.sleep(0.1)
        assert set(DEMO_AUDIT_JUDGES) <= listed and "sim-aurora" in listed
        for name in DEMO_AUDIT_JUDGES:
            reply = client.chat.completions.create(
                model=name,
                messages=[{"role": "user", "content": "ping"}],
                extra_headers={"X-Memearena-Role": "ping"},
            )
            assert reply.choices[0].message.content, name
    finally:
        proc.terminate()
        proc.wait(10)


def test_sim_serve_idempotency_flag_answers_a_repeated_key_unbilled() -> None:
    import json
    import urllib.request

    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "memearena.cli", "sim-serve", "--port", str(port), "--idempotency"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}/v1"
    try:
        client = openai.OpenAI(base_url=base, api_key="x", max_retries=0)
        deadline = time.monotonic() + 30
        while True:
            try:
                client.models.list()
                break
            except openai.APIConnectionError:
                assert time.monotonic() < deadline, "sim-serve did not start"
                time.sleep(0.1)
        headers = {"X-Memearena-Role": "ping", "Idempotency-Key": "memearena-test-1"}
        replies = [
            client.chat.completions.create(
                model="sim-aurora",
                messages=[{"role": "user", "content": "ping"}],
                extra_headers=headers,
            )
            for _ in range(2)
        ]
        assert replies[0].choices[0].message.content == replies[1].choices[0].message.content
        with urllib.request.urlopen(f"{base}/stats") as resp:
            stats = json.loads(resp.read())
        assert stats["replayed"] == 1, stats
    finally:
        proc.terminate()
        proc.wait(timeout=10)
