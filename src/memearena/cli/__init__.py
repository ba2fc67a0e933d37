"""The ``memearena`` command line: one module per command group, ``main`` the entry point."""

from memearena.cli.main import app, main

__all__ = ["app", "main"]
