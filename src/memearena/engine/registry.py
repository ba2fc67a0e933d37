"""The method registry: every method the engine runs, by name.

A method is its package plus one line here (or one :func:`register_method` call from a plug-in
or a test): the package, the class in its ``method.py`` (implementing
:class:`memearena.engine.protocol.Method`) and the config section model in its ``config.py``;
a ``templates/`` folder in the package holds its prompt templates (``<name>/<file>.j2``), an
``html/`` folder the templates of its viewer pages and report partial, ``view.py`` its console
summary and report section (registered on import), ``pages.py`` its viewer pages,
``labelling.py`` its human-label queues and their agreement figures, ``tables.py`` its export
tables and ``sim.py`` its part of the simulated world. All are imported by name when first
needed, so the engine, the config, the simulator, the CLI, the notebook API, the viewer, the
report, the labels and the export name no method: they read this registry. The order of
registration is the order configs, the viewer, the notebook, the label queues and the export
tables list methods in (the report orders its sections by their own ``order``)."""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memearena.config.sections import register_section, unregister_section
from memearena.errors import ConfigError
from memearena.sim.parts import register_part_module

if TYPE_CHECKING:
    from memearena.engine.protocol import Method

__all__ = [
    "MethodSpec",
    "get_method",
    "load_view",
    "method_html",
    "method_names",
    "method_pages",
    "method_queues",
    "method_spec",
    "method_tables",
    "register_method",
    "unregister_method",
]


@dataclass(frozen=True)
class MethodSpec:
    """One registered method."""

    name: str
    """Registry name, config section and leaderboard key (``arena``)."""
    method: str
    """Where its class is, ``module:Class`` (imported when first asked for)."""
    section: str
    """Where its config section model is, ``module:Class``."""
    package: str = ""
    """Its package."""


_METHODS: dict[str, MethodSpec] = {}


def register_method(name: str, package: str, method: str, section: str) -> None:
    """Register method ``name``: ``package`` holds ``method.py`` with the class ``method`` and
    ``config.py`` with the section model ``section``. Registering a name again replaces it."""
    if not name.isidentifier():
        raise ConfigError(f"method name {name!r} must be an identifier (it is a config key)")
    spec = MethodSpec(name, f"{package}.method:{method}", f"{package}.config:{section}", package)
    _METHODS[name] = spec
    register_section(name, spec.section)
    templates = _templates_of(package)
    if templates is not None:
        from memearena.prompts import register_templates  # only for a package that has some

        register_templates(name, templates)
    # Its part of the simulated world (roles ``<name>.*``), imported when a world needs it.
    has_part = _in_package(package, "sim.py") is not None
    register_part_module(name, f"{package}.sim" if has_part else None)


def _in_package(package: str, name: str) -> Path | None:
    """The file or folder ``name`` of the package (found without importing the package), or
    None."""
    try:
        found = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        found = None
    if found is None:
        raise ConfigError(f"method package {package!r} cannot be found")
    for where in found.submodule_search_locations or []:
        path = Path(where) / name
        if path.exists():
            return path
    return None


def _templates_of(package: str) -> Path | None:
    """The package's own ``templates/`` folder (its prompt templates), or None."""
    folder = _in_package(package, "templates")
    return folder if folder is not None and folder.is_dir() else None


def unregister_method(name: str) -> None:
    """Remove method ``name`` (a plug-in's test cleaning up after itself)."""
    spec = _METHODS.pop(name, None)
    unregister_section(name)
    register_part_module(name, None)
    if spec is not None and _templates_of(spec.method.partition(".method:")[0]) is not None:
        from memearena.prompts import register_templates

        register_templates(name, None)


def method_html(name: str) -> Path | None:
    """The folder of method ``name``'s HTML templates (its package's ``html/``: its viewer
    pages and its report partial), or None."""
    spec = _METHODS.get(name)
    folder = _in_package(spec.package, "html") if spec is not None else None
    return folder if folder is not None and folder.is_dir() else None


def method_pages(name: str) -> Any | None:
    """Method ``name``'s viewer pages (``PAGES`` of its package's ``pages.py``, a
    ``memearena.view.app.MethodPages``), imported when first asked for; None when it has
    none or is not registered."""
    spec = _METHODS.get(name)
    if spec is None or _in_package(spec.package, "pages.py") is None:
        return None
    return load(f"{spec.package}.pages:PAGES")


def method_queues(name: str) -> tuple[Any, ...]:
    """Method ``name``'s human-label queues (``QUEUES`` of its package's ``labelling.py``, each
    a ``memearena.labels.queues.LabelQueue``), imported when first asked for; () when it has
    none or is not registered."""
    spec = _METHODS.get(name)
    if spec is None or _in_package(spec.package, "labelling.py") is None:
        return ()
    return tuple(load(f"{spec.package}.labelling:QUEUES"))


def method_tables(name: str) -> Any | None:
    """Method ``name``'s export tables (``TABLES`` of its package's ``tables.py``, a
    ``memearena.export.MethodTables``), imported when first asked for; None when it has none
    or is not registered."""
    spec = _METHODS.get(name)
    if spec is None or _in_package(spec.package, "tables.py") is None:
        return None
    return load(f"{spec.package}.tables:TABLES")


def method_names() -> list[str]:
    """Every registered method's name, in registration order."""
    return list(_METHODS)


def method_spec(name: str) -> MethodSpec:
    """The registration of method ``name`` (ConfigError naming the known ones if none)."""
    spec = _METHODS.get(name)
    if spec is None:
        raise ConfigError(f"unknown method {name!r}; expected one of {', '.join(_METHODS)}")
    return spec


def load(where: str) -> Any:
    """The object at ``module:attr``."""
    module, _, attr = where.partition(":")
    return getattr(importlib.import_module(module), attr)


def load_view(name: str) -> None:
    """Import method ``name``'s view (its package's ``view.py``, which registers its report
    section) without its stages and simulated part; a package without a ``view.py`` has its
    method module imported instead (importing it registers its view)."""
    spec = method_spec(name)
    if _in_package(spec.package, "view.py") is not None:
        importlib.import_module(f"{spec.package}.view")
    else:
        load(spec.method)


def get_method(name: str) -> type[Method]:
    """The method class registered as ``name`` (importing it registers its view's report
    section and its simulated responders)."""
    cls: type[Method] = load(method_spec(name).method)
    return cls


# The built-in methods, one line each (in the order configs, lists and notebooks show them).
register_method("arena", "memearena.methods.arena", "Arena", "ArenaConfig")
register_method("adapt", "memearena.methods.adapt", "Adapt", "AdaptConfig")
register_method("judge_audit", "memearena.methods.judge_audit", "JudgeAudit", "JudgeAuditConfig")
