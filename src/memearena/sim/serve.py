"""``memearena sim-serve``: the simulated world behind the OpenAI-compatible server."""

from __future__ import annotations

from memearena.config import DatasetConfig, RunConfig, SimModelConfig
from memearena.data import demo_annotations, load_dataset, load_datasets
from memearena.errors import ConfigError
from memearena.sim.catalogue import served_models
from memearena.sim.world import SimWorld


def demo_world(seed: int = 0) -> SimWorld:
    """The simulated world with the demo catalogue of models (every method's registered demo
    models too: ``served_models``) and the demo memes' facts."""
    memes = load_dataset(DatasetConfig(format="demo"), check_images=False).memes
    world = SimWorld(served_models(), demo_annotations(memes), seed=seed)
    world.serve_dataset(memes, None)  # which image shows which meme and caption
    return world


def config_world(cfg: RunConfig) -> tuple[SimWorld, list[str]]:
    """A world serving the demo catalogue plus the config's ``provider: sim`` models (a config
    model of the same name replaces the catalogue's), knowing the facts of its datasets."""
    models: dict[str, SimModelConfig] = served_models()
    models.update({n: m for n, m in cfg.models.items() if isinstance(m, SimModelConfig)})
    memes = load_datasets(cfg.data, cfg.image, check_images=False).memes
    world = SimWorld(models, demo_annotations(memes), seed=cfg.seed)
    world.serve_dataset(memes, cfg.image)
    return world, list(models)


def serve_world(
    *,
    host: str,
    port: int,
    latency_ms: float,
    fail_rate: float,
    seed: int,
    config: RunConfig | None = None,
    banner: str | None = None,
    idempotency: bool = False,
) -> None:
    """Serve the demo world (or ``config``'s simulated models) until interrupted; a request for
    a model the world does not serve gets a 404, as OpenAI answers."""
    from memearena.sim.server import serve

    if not 0.0 <= fail_rate <= 1.0:  # checked before the world is built (it loads datasets)
        raise ConfigError(f"--fail-rate: must be between 0 and 1, got {fail_rate:g}")
    if not 0.0 <= latency_ms <= 600_000:
        raise ConfigError(f"--latency-ms: must be between 0 and 600000, got {latency_ms:g}")

    if config is None:
        world, names = demo_world(seed), list(served_models())
    else:
        world, names = config_world(config)
    serve(
        world,
        host=host,
        port=port,
        latency_ms=latency_ms,
        fail_rate=fail_rate,
        seed=seed,
        models=names,
        banner=banner,
        idempotency=idempotency,
    )
