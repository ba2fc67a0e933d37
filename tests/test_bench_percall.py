"""bench/percall.py's ideal pipeline (``--floor``): the essential work recorded in a run is
redone around the replayed calls, all of it and once, and its step outcomes reach the store."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from memearena.errors import ParseError
from memearena.store import RunStore

BENCH = Path(__file__).resolve().parents[1] / "bench"
spec = importlib.util.spec_from_file_location("bench_percall", BENCH / "percall.py")
assert spec is not None and spec.loader is not None
percall = importlib.util.module_from_spec(spec)
sys.modules["bench_percall"] = percall
spec.loader.exec_module(percall)


class _Pool:
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def complete(self, model: str, messages: Any, **kw: Any) -> str:
        self.asked.append(model)
        return "ok"

    async def aclose(self) -> None:
        pass


def test_the_ideal_replay_redoes_every_render_parse_and_step_once(tmp_path: Path) -> None:
    ess = percall.Essentials()
    rendered: list[int] = []
    parsed: list[str] = []

    def parse(text: str) -> str:
        parsed.append(text)
        if text == "bad":
            raise ParseError("no")  # a reply that did not parse is parsed again, not fatal
        return text

    ess.renders = [(rendered.append, (i,), {}) for i in range(7)]
    ess.parses = [(parse, t) for t in ("a", "bad", "c", "d", "e")]
    ess.steps = [(("kind", f"k{i}", {"v": i}), {"absent": True}) for i in range(3)]
    calls = [("complete", f"m{i}", ([],), {}) for i in range(4)]
    pool = _Pool()
    store = RunStore(tmp_path / "floor.db")
    cpu = percall.replay(lambda: pool, calls, 2, floor=ess, store=store)
    store.close()
    assert cpu >= 0
    assert sorted(pool.asked) == ["m0", "m1", "m2", "m3"]
    assert sorted(rendered) == list(range(7))
    assert sorted(parsed) == sorted(["a", "bad", "c", "d", "e"])
    again = RunStore(tmp_path / "floor.db")
    assert {k: again.get_artifact("kind", k) for k in ("k0", "k1", "k2")} == {
        f"k{i}": {"v": i} for i in range(3)
    }
    again.close()


def test_shares_cover_the_work_in_order_whatever_the_counts() -> None:
    for items, n in ((list(range(10)), 3), (list(range(2)), 5), ([], 4), (list(range(5)), 5)):
        got = [x for i in range(n) for x in percall._share(items, i, n)]
        assert got == items


def test_recording_patches_are_undone(tmp_path: Path) -> None:
    import types

    mod = types.SimpleNamespace(render=lambda x: x * 2)
    orig = mod.render
    commit = RunStore.commit_step
    ess = percall.Essentials().install()
    ess.renderer(mod, "render")
    assert mod.render(3) == 6 and len(ess.renders) == 1
    ess.uninstall()
    assert mod.render is orig and RunStore.commit_step is commit
