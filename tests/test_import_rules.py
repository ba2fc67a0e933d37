"""The layering rules of docs/architecture.md, checked on the source's own imports (AST only:
nothing is imported). Every import counts — module level, inside functions and under
``TYPE_CHECKING`` — because each one is a dependency someone has to keep in their head.

- rendering (``report/``, ``methods/*/view.py``) never imports the lifecycle, a method's
  plug-in module or a stage;
- stages never import the lifecycle, an analysis, a view, the report or the simulator;
- an analysis never renders (no ``report/``, no view, no rich);
- ``stats/`` and ``store/`` know no method and no lifecycle;
- the engine knows methods only through its protocol and registry (``engine/protocol.py``,
  ``engine/registry.py``: a method is imported by name);
- no module imports another module's private (``_name``) name;
- no import circles, between modules or between folders;
- no import runs back up the layer order (``LAYERS``), and the simulator, the config, the
  notebook API and the CLI's main module name no method;
- the labels and the export import no method and name none in their code: no method's name,
  label queue, export table or file appears in a string they hold (each method declares those
  in its own ``labelling.py`` and ``tables.py``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = "memearena"

NOT_STAGES = {
    "__init__",
    "config",
    "analysis",
    "view",
    "method",
    "published",
    "sim",
    "result",
    "pages",
    "labelling",
    "tables",
}
"""Modules of a method package that are not stages (``published``: an analysis of logs;
``sim``: the method's part of the simulated world; ``result``: its notebook result; ``pages``:
its viewer pages; ``labelling``: its human-label queues; ``tables``: its export tables)."""
ENGINE_FOR_STAGES = {f"{PKG}.engine.steps", f"{PKG}.engine.progress", f"{PKG}.engine"}
"""The engine primitives stages may use (the rest of engine/ is the lifecycle)."""


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    names: tuple[str, ...]
    line: int

    def __str__(self) -> str:
        shown = f" ({', '.join(self.names)})" if self.names else ""
        return f"{self.src}:{self.line} -> {self.dst}{shown}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((SRC / PKG).rglob("*.py"))}


def _is_package(name: str) -> bool:
    return _modules()[name].name == "__init__.py"


@cache
def _tree(name: str) -> ast.Module:
    return ast.parse(_modules()[name].read_text(encoding="utf-8"))


def _absolute(name: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = name.split(".") if _is_package(name) else name.split(".")[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


@cache
def _reexports(package: str) -> dict[str, str]:
    """What a package's ``__init__`` hands on: name -> the module it comes from."""
    out: dict[str, str] = {}
    for node in ast.walk(_tree(package)):
        if isinstance(node, ast.ImportFrom):
            mod = _absolute(package, node)
            for a in node.names:
                out[a.asname or a.name] = mod
    return out


def _resolve(mod: str, name: str, seen: frozenset[str] = frozenset()) -> str:
    """The module that ``from mod import name`` really reads (through package faces)."""
    modules = _modules()
    if f"{mod}.{name}" in modules:
        return f"{mod}.{name}"
    if mod in modules and _is_package(mod) and mod not in seen:
        src = _reexports(mod).get(name)
        if src is not None and src in modules:
            return _resolve(src, name, seen | {mod}) if _is_package(src) else src
    return mod


def _edges_of(name: str) -> Iterator[Edge]:
    modules = _modules()
    for node in ast.walk(_tree(name)):
        if isinstance(node, ast.ImportFrom):
            mod = _absolute(name, node)
            if not mod.startswith(PKG):
                continue
            by_target: dict[str, list[str]] = {}
            for a in node.names:
                by_target.setdefault(_resolve(mod, a.name), []).append(a.name)
            for dst, names in by_target.items():
                if dst in modules and dst != name:
                    yield Edge(name, dst, tuple(names), node.lineno)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith(PKG) and a.name in modules and a.name != name:
                    yield Edge(name, a.name, (), node.lineno)


@cache
def _edges() -> tuple[Edge, ...]:
    return tuple(e for name in _modules() for e in _edges_of(name))


def _third_party(name: str) -> Iterator[tuple[str, int]]:
    for node in ast.walk(_tree(name)):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            yield node.module, node.lineno
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, node.lineno


# ---- the kinds of module ------------------------------------------------------------------


def _parts(name: str) -> list[str]:
    return name.split(".")


def is_rendering(name: str) -> bool:
    p = _parts(name)
    return (len(p) >= 2 and p[1] == "report") or (
        len(p) == 4 and p[1] == "methods" and p[3] == "view"
    )


def is_stage(name: str) -> bool:
    p = _parts(name)
    return len(p) == 4 and p[1] == "methods" and p[3] not in NOT_STAGES


def is_analysis(name: str) -> bool:
    p = _parts(name)
    return len(p) == 4 and p[1] == "methods" and p[3] in ("analysis", "published")


def is_pages(name: str) -> bool:
    p = _parts(name)
    return len(p) == 4 and p[1] == "methods" and p[3] == "pages"


def is_queues_or_tables(name: str) -> bool:
    """A method's label queues or export tables (read by the labels and the export)."""
    p = _parts(name)
    return len(p) == 4 and p[1] == "methods" and p[3] in ("labelling", "tables")


def is_method_module(name: str) -> bool:
    p = _parts(name)
    return len(p) == 4 and p[1] == "methods" and p[3] == "method"


def is_lifecycle(name: str) -> bool:
    p = _parts(name)
    return (
        len(p) >= 2
        and p[1] == "engine"
        and name not in ENGINE_FOR_STAGES | {f"{PKG}.engine.status"}
    )


def is_sim(name: str) -> bool:
    p = _parts(name)
    return len(p) >= 2 and p[1] == "sim"


def is_method_package(name: str) -> bool:
    p = _parts(name)
    return len(p) >= 3 and p[1] == "methods" and p[2] != "base"


def _violations(src_kind: object, dst_kind: object) -> list[str]:
    return [str(e) for e in _edges() if src_kind(e.src) and dst_kind(e.dst)]  # type: ignore[operator]


# ---- the rules ----------------------------------------------------------------------------


def test_the_checker_sees_the_whole_source() -> None:
    mods = _modules()
    assert f"{PKG}.engine.lifecycle" in mods and f"{PKG}.methods.base" in mods
    assert any(is_stage(m) for m in mods) and any(is_rendering(m) for m in mods)
    assert len(_edges()) > 200


def test_rendering_never_imports_the_lifecycle_a_method_or_a_stage() -> None:
    bad = _violations(
        is_rendering,
        lambda d: (
            is_lifecycle(d) or is_stage(d) or is_method_module(d) or d == f"{PKG}.methods.base"
        ),
    )
    assert bad == []


def test_viewer_pages_never_import_the_lifecycle_a_stage_the_plug_in_or_the_simulator() -> None:
    bad = _violations(
        is_pages,
        lambda d: is_lifecycle(d) or is_stage(d) or is_method_module(d) or is_sim(d),
    )
    assert bad == []


def test_label_queues_and_export_tables_read_the_run_only() -> None:
    """A method's ``labelling.py`` and ``tables.py`` read a finished run's files: no lifecycle
    (the result readers of ``engine/results.py`` apart), stage, plug-in, simulator or other
    method."""
    bad = _violations(
        is_queues_or_tables,
        lambda d: (
            (is_lifecycle(d) and d != f"{PKG}.engine.results")
            or is_stage(d)
            or is_method_module(d)
            or is_sim(d)
        ),
    )
    bad += [
        str(e)
        for e in _edges()
        if is_queues_or_tables(e.src)
        and is_method_package(e.dst)
        and _parts(e.dst)[2] != _parts(e.src)[2]
    ]
    assert bad == []


def test_stages_never_import_the_lifecycle_the_analysis_rendering_or_the_simulator() -> None:
    bad = _violations(
        is_stage,
        lambda d: (
            is_lifecycle(d) or is_analysis(d) or is_rendering(d) or is_sim(d) or is_method_module(d)
        ),
    )
    assert bad == []


def test_a_method_s_stages_import_no_other_method() -> None:
    bad = [
        str(e)
        for e in _edges()
        if is_stage(e.src) and is_method_package(e.dst) and _parts(e.dst)[2] != _parts(e.src)[2]
    ]
    assert bad == []


def test_analysis_never_renders() -> None:
    bad = _violations(is_analysis, lambda d: is_rendering(d) or is_lifecycle(d))
    rich = [
        f"{m}:{line} -> {mod}"
        for m in _modules()
        if is_analysis(m)
        for mod, line in _third_party(m)
        if mod == "rich" or mod.startswith("rich.")
    ]
    assert bad + rich == []


@pytest.mark.parametrize("layer", ["stats", "store"])
def test_stats_and_store_know_no_method(layer: str) -> None:
    bad = _violations(
        lambda s: _parts(s)[1:2] == [layer],
        lambda d: is_method_package(d) or is_lifecycle(d) or d == f"{PKG}.methods.base",
    )
    assert bad == []


def test_the_engine_sees_methods_only_through_the_protocol() -> None:
    bad = _violations(lambda s: _parts(s)[1:2] == ["engine"], is_method_package)
    assert bad == []


def test_no_private_name_is_imported_across_modules() -> None:
    bad = [
        str(e) for e in _edges() for n in e.names if n.startswith("_") and not n.startswith("__")
    ]
    assert bad == []


def _circles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    graph: dict[str, set[str]] = {m: set() for m in _modules()}
    for e in _edges():
        graph[e.src].add(e.dst)
    return _scc(graph)


def _scc(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles() -> None:
    circles = _circles()
    detail = [[str(e) for e in _edges() if e.src in c and e.dst in c] for c in circles]
    assert circles == [], detail


# ---- folders and layers -------------------------------------------------------------------


def unit(name: str) -> str:
    """The folder a module belongs to (``memearena.engine`` for ``engine/lifecycle.py``); a
    top-level module (``api``, ``errors``) and the package itself are units of their own."""
    if _is_package(name) or len(_parts(name)) == 2:
        return name
    return name.rsplit(".", 1)[0]


LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "version"),
    ("jsonsafe", "stats", "config", "report"),
    ("store",),
    ("models",),
    ("prompts", "data"),
    ("sim",),
    ("engine",),
    ("labels", "export"),
    ("view",),
    ("methods", "methods.adapt", "methods.arena", "methods.judge_audit"),
    ("api", "demo"),
    ("cli",),
    ("", "__main__"),
)
"""The layer order of docs/architecture.md, bottom first: a folder imports only its own layer
or the ones below (``""``: the package itself, the composition root)."""


def _layer_of() -> dict[str, int]:
    return {f"{PKG}.{name}" if name else PKG: i for i, names in enumerate(LAYERS) for name in names}


def _folder_edges() -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for e in _edges():
        a, b = unit(e.src), unit(e.dst)
        if a != b:
            out.setdefault((a, b), []).append(str(e))
    return out


def test_every_folder_has_a_layer() -> None:
    layer = _layer_of()
    assert sorted({unit(m) for m in _modules()} - set(layer)) == []


def test_no_import_runs_back_up_the_layers() -> None:
    layer = _layer_of()
    up = [
        edges[0]
        for (a, b), edges in _folder_edges().items()
        if a in layer and b in layer and layer[a] < layer[b]
    ]
    assert up == []


def test_no_folder_circles() -> None:
    graph: dict[str, set[str]] = {}
    for a, b in _folder_edges():
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    circles = _scc(graph)
    detail = [
        edges[0] for (a, b), edges in _folder_edges().items() for c in circles if {a, b} <= set(c)
    ]
    assert circles == [], detail


def test_the_simulator_and_the_config_name_no_method() -> None:
    """The simulator's core, the config, the notebook API, the viewer, the report and the CLI's
    main module reach a method only through the registry (a method's own part of the world,
    viewer pages and report partial live in its package)."""
    bad = [
        str(e)
        for e in _edges()
        if (
            is_sim(e.src)
            or _parts(e.src)[1:2] in (["config"], ["api"], ["view"], ["report"])
            or e.src == f"{PKG}.cli.main"
        )
        and is_method_package(e.dst)
    ]
    assert bad == []


# ---- the labels and the export name no method ---------------------------------------------


def _labels_or_export(name: str) -> bool:
    return _parts(name)[1:2] in (["labels"], ["export"])


def _code_strings(name: str) -> Iterator[tuple[str, int]]:
    """The string constants of a module's code (f-strings' literal parts too), documentation
    (a string standing as a statement) left out."""
    tree = _tree(name)
    docs = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node.value, node.lineno


def _first_strings(module: str, call: str, keyword: str | None = None) -> set[str]:
    """The first argument (or ``keyword=``) of every ``call(...)`` in a module, where a string."""
    out = set()
    for node in ast.walk(_tree(module)):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == call):
            continue
        args = [k.value for k in node.keywords if k.arg == keyword] + node.args[:1]
        out |= {a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    return out


def method_vocabulary() -> set[str]:
    """What names a method: its registered name (spelt as a word too), and the label queues,
    export tables and files its own ``labelling.py`` and ``tables.py`` declare."""
    words = set()
    for method in _first_strings(f"{PKG}.engine.registry", "register_method"):
        words |= {method, method.replace("_", "-"), method.replace("_", " ")}
    for m in _modules():
        p = _parts(m)
        if len(p) == 4 and p[1] == "methods" and p[3] == "labelling":
            words |= _first_strings(m, "LabelQueue", "name")
        if len(p) == 4 and p[1] == "methods" and p[3] == "tables":
            words |= _first_strings(m, "Table")
        if len(p) == 4 and p[1] == "methods" and p[3] in ("labelling", "tables"):
            words |= {s for s, _ in _code_strings(m) if re.fullmatch(r"[\w.-]+\.(jsonl|csv)", s)}
    return words


KEPT_NAMES: dict[str, set[str]] = {}
"""Names a rule lets through, by module (none at present)."""


def test_the_labels_and_the_export_import_no_method() -> None:
    bad = _violations(
        _labels_or_export, lambda d: is_method_package(d) or d == f"{PKG}.methods.base"
    )
    assert bad == []


def test_the_labels_and_the_export_name_no_method() -> None:
    words = method_vocabulary()
    assert {"arena", "battles", "rewrites", "perturbations", "audit_scores"} <= words
    assert "adapt_chains.jsonl" in words and "judge_audit_scores.jsonl" in words
    pattern = re.compile(
        r"(?<![a-z0-9])(" + "|".join(map(re.escape, sorted(words))) + r")(?![a-z0-9])"
    )
    bad = [
        f"{m}:{line}: {s[:60]!r}"
        for m in _modules()
        if _labels_or_export(m)
        for s, line in _code_strings(m)
        if pattern.search(s.lower()) and s not in KEPT_NAMES.get(m, set())
    ]
    methods = _first_strings(f"{PKG}.engine.registry", "register_method")
    named = [
        f"{m}:{node.lineno}: {node.name}"
        for m in _modules()
        if _labels_or_export(m)
        for node in ast.walk(_tree(m))
        if isinstance(node, ast.FunctionDef | ast.ClassDef)
        and any(w in node.name.lower() for w in methods)
    ]
    named += [
        f"{m}:{node.lineno}: {t.id}"
        for m in _modules()
        if _labels_or_export(m)
        for node in ast.walk(_tree(m))
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
        and any(w in t.id.lower() for w in methods)
        and t.id not in KEPT_NAMES.get(m, set())
    ]
    assert bad + named == []
