"""``memearena sim-serve``: the simulated world behind the OpenAI-compatible server."""

from __future__ import annotations

from memearena.config import DatasetConfig
from memearena.data import demo_annotations, load_dataset
from memearena.sim.catalogue import demo_models
from memearena.sim.world import SimWorld


def demo_world(seed: int = 0) -> SimWorld:
    """The simulated world with the demo catalogue of models and the demo memes' facts."""
    memes = load_dataset(DatasetConfig(format="demo"), check_images=False).memes
    return SimWorld(demo_models(), demo_annotations(memes), seed=seed)


def serve_world(*, host: str, port: int, latency_ms: float, fail_rate: float, seed: int) -> None:
    """Serve the demo world until interrupted."""
    from memearena.sim.server import serve

    serve(
        demo_world(seed),
        host=host,
        port=port,
        latency_ms=latency_ms,
        fail_rate=fail_rate,
        seed=seed,
        models=list(demo_models()),
    )
