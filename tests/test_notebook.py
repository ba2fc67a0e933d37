"""The README's notebook example runs in a real Jupyter kernel and returns DataFrames; the sync
API works inside a running event loop and the async twins work from a coroutine."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sys
from pathlib import Path

import pytest

import memearena

REPO = Path(__file__).resolve().parents[1]


def _readme_example() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- notebook-example:[^>]*-->\s*```python\n(.*?)```", readme, re.DOTALL)
    assert m, "README lost its notebook example"
    return m.group(1)


def test_readme_notebook_example_runs_in_a_jupyter_kernel(tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    (tmp_path / "examples").mkdir()
    shutil.copy(REPO / "examples" / "demo-arena.yaml", tmp_path / "examples")
    # A kernel spec running this interpreter, kept inside tmp_path (no user-wide install).
    spec_dir = tmp_path / "kernels" / "memearena-test"
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "memearena-test",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    km = KernelManager(
        kernel_name="memearena-test",
        kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")]),
    )
    example = _readme_example()
    checks = (
        "import pandas as pd\n"
        "board = result.to_pandas()\n"
        "assert isinstance(board, pd.DataFrame) and len(board) == 5, board\n"
        "frames = [result.battles(), result.judges(), result.agreement(), result.answers()]\n"
        "assert all(isinstance(f, pd.DataFrame) and len(f) for f in frames)\n"
        "print('FRAMES', [type(f).__name__ for f in [board, *frames]])\n"
        "again = await memearena.arun_arena(cfg, 'runs/demo-arena', show_progress=False)\n"
        "print('RESUMED', again.new_calls)\n"
    )
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(example), nbformat.v4.new_code_cell(checks)]
    client = nbclient.NotebookClient(
        nb,
        km=km,
        resources={"metadata": {"path": str(tmp_path)}},
        timeout=300,
    )
    client.execute()
    first = nb.cells[0].outputs
    # The last expression is the leaderboard: Jupyter shows it as a DataFrame (HTML table).
    shown = [o for o in first if o.get("output_type") == "execute_result"]
    assert (
        shown and "text/html" in shown[0]["data"] and "sim-aurora" in shown[0]["data"]["text/html"]
    )
    text = "".join(o.get("text", "") for o in nb.cells[1].outputs)
    assert "FRAMES ['DataFrame', 'DataFrame', 'DataFrame', 'DataFrame', 'DataFrame']" in text
    assert "RESUMED 0" in text  # the async twin resumed the same run: nothing paid twice
    assert (tmp_path / "runs" / "demo-arena" / "leaderboard.json").is_file()


def _small_config() -> memearena.RunConfig:
    cfg = memearena.demo_config(bootstrap=10)
    return cfg.model_copy(
        update={
            "data": [cfg.data[0].model_copy(update={"limit": 2})],
            "arena": cfg.arena.model_copy(  # type: ignore[union-attr]
                update={"targets": ["sim-aurora", "sim-ember"], "fusion_rounds": 4}
            ),
        }
    )


def test_sync_api_works_inside_a_running_event_loop(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")

    async def notebook_cell() -> memearena.ArenaResult:
        # What Jupyter does: the cell runs while the kernel's loop is running.
        assert memearena.plan_arena(_small_config()).calls > 0
        return memearena.run_arena(_small_config(), tmp_path / "run", show_progress=False)

    result = asyncio.run(notebook_cell())
    assert result.new_calls and result.new_calls > 0
    assert list(result.to_pandas()["model"]) == ["sim-aurora", "sim-ember"]
    battles = result.battles()
    assert isinstance(battles, pd.DataFrame)
    assert set(battles.columns) >= {"model_a", "model_b", "winner", "judge", "criterion", "item"}
    assert len(battles) == result.arena["battles"]
    assert len(repr(result)) < 300  # not a multi-megabyte nested dict


def test_async_twins_and_open_run_give_the_same_tables(tmp_path: Path) -> None:
    pytest.importorskip("pandas")

    async def main() -> tuple[int, memearena.ArenaResult]:
        planned = await memearena.aplan_arena(_small_config())
        return planned.calls, await memearena.arun_arena(
            _small_config(), tmp_path / "run", show_progress=False
        )

    calls, result = asyncio.run(main())
    assert calls > 0
    opened = memearena.open_run(tmp_path / "run")
    assert opened.new_calls is None
    assert opened.to_pandas().equals(result.to_pandas())
    by_crit = opened.leaderboard_df(by="criterion")
    assert set(by_crit["criterion"]) == set(_small_config().arena.criteria)  # type: ignore[union-attr]
    answers = opened.answers()
    assert set(answers["model"]) == {"sim-aurora", "sim-ember"} and answers["text"].notna().all()
    agreement = opened.agreement()
    assert "krippendorff_alpha" in set(agreement["metric"])
    assert {"value", "ci_low", "ci_high"} <= set(agreement.columns)
    calls_df = opened.calls()
    assert len(calls_df) >= calls and "response" not in calls_df.columns
    with pytest.raises(memearena.MemearenaError, match="no leaderboard by 'nosuch'"):
        opened.leaderboard_df(by="nosuch")


def test_dir_lists_the_public_api_and_import_stays_light() -> None:
    names = dir(memearena)
    for name in ("run_arena", "arun_arena", "plan_arena", "aplan_arena", "open_run", "ArenaResult"):
        assert name in names and name in memearena.__all__
        assert getattr(memearena, name) is not None


def test_dataframes_without_pandas_say_which_extra_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas -> ImportError
    (tmp_path / "leaderboard.json").write_text('{"arena": {"overall": []}}', encoding="utf-8")
    with pytest.raises(memearena.MissingExtraError, match=r"pip install 'memearena\[notebook\]'"):
        memearena.open_run(tmp_path).to_pandas()
