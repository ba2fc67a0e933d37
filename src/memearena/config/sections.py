"""The method sections a run config accepts, by name: filled by the method registry
(``memearena.engine.registry``), read by :class:`memearena.config.RunConfig`.

The config names no method: a section is registered as ``name -> "module:Class"`` and its
model is imported when a config is first validated. A section model may define hooks the
config calls: ``model_refs()`` (every ``(field, model name)`` it refers to, checked against
``models``), ``resolve_paths(fix)`` (a copy with its relative paths resolved) and
``check_files(source)`` (referenced files exist)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = [
    "register_section",
    "section_model",
    "section_models",
    "section_names",
    "unregister_section",
]

_SECTIONS: dict[str, str | type[BaseModel]] = {}


def register_section(name: str, model: str | type[BaseModel]) -> None:
    """Accept a top-level ``name:`` section validated by ``model`` (or ``module:Class``)."""
    _SECTIONS[name] = model


def unregister_section(name: str) -> None:
    """Stop accepting section ``name``."""
    _SECTIONS.pop(name, None)


def section_models() -> dict[str, type[BaseModel]]:
    """Every registered section's model, by name (imported once)."""
    out: dict[str, type[BaseModel]] = {}
    for name, where in list(_SECTIONS.items()):
        if isinstance(where, str):
            module, _, attr = where.partition(":")
            model: Any = getattr(importlib.import_module(module), attr)
            _SECTIONS[name] = where = model
        out[name] = where  # type: ignore[assignment]
    return out


def section_names() -> list[str]:
    """Every registered section's name (no model imported)."""
    return list(_SECTIONS)


def section_model(name: str) -> type[BaseModel] | None:
    """The model of section ``name`` (imported once), or None when none is registered: a
    config imports only the models of the sections it holds."""
    where = _SECTIONS.get(name)
    if isinstance(where, str):
        module, _, attr = where.partition(":")
        model: Any = getattr(importlib.import_module(module), attr)
        _SECTIONS[name] = where = model
    return where
