"""The run config: models, data, limits and each method's section (YAML -> pydantic).

from memearena.config import load_config, RunConfig
"""

from memearena.config.run import (
    CRITERIA,
    MAX_BOOTSTRAP,
    ArenaConfig,
    DatasetConfig,
    DatasetFormat,
    ImageConfig,
    ModelConfig,
    OpenAIModelConfig,
    Price,
    RunConfig,
    SimModelConfig,
    arena_call_estimate,
    check_numbers,
    check_option_ranges,
    check_wall_time,
    load_config,
    looks_like_key,
    parse_config,
)

__all__ = [
    "CRITERIA",
    "MAX_BOOTSTRAP",
    "ArenaConfig",
    "DatasetConfig",
    "DatasetFormat",
    "ImageConfig",
    "ModelConfig",
    "OpenAIModelConfig",
    "Price",
    "RunConfig",
    "SimModelConfig",
    "arena_call_estimate",
    "check_numbers",
    "check_option_ranges",
    "check_wall_time",
    "load_config",
    "looks_like_key",
    "parse_config",
]
