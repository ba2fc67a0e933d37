"""The run config: models, data, limits, and each registered method's section (YAML -> pydantic).

from memearena.config import load_config, RunConfig

The config names no method: each method's section model lives in its own package
(``methods/<name>/config.py``) and is registered with the method (``memearena.engine.registry``).
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from memearena.config.sections import register_section, section_models

if TYPE_CHECKING:
    from memearena.config.run import (
        MAX_BOOTSTRAP,
        ConfigSection,
        DatasetConfig,
        DatasetFormat,
        ImageConfig,
        ModelConfig,
        OpenAIModelConfig,
        Price,
        RunConfig,
        SimModelConfig,
        StrictModel,
        check_numbers,
        check_option_ranges,
        check_wall_time,
        load_config,
        looks_like_key,
        parse_config,
    )

__all__ = [
    "MAX_BOOTSTRAP",
    "ConfigSection",
    "DatasetConfig",
    "DatasetFormat",
    "ImageConfig",
    "ModelConfig",
    "OpenAIModelConfig",
    "Price",
    "RunConfig",
    "SimModelConfig",
    "StrictModel",
    "check_numbers",
    "check_option_ranges",
    "check_wall_time",
    "load_config",
    "looks_like_key",
    "parse_config",
    "register_section",
    "section_models",
]


def __getattr__(name: str) -> Any:
    # Lazy: importing the registry (``import memearena``) must not load pydantic and YAML.
    if name in __all__:
        value = getattr(import_module("memearena.config.run"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'memearena.config' has no attribute {name!r}")
