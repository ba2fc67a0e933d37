"""The demo directory holds three methods; its title is the latest method's run name, so every
method the demo runs there carries the directory's name, "demo"."""

from __future__ import annotations

from memearena.demo import adapt_demo_config, demo_config


def test_every_method_of_the_demo_directory_names_it_demo() -> None:
    assert demo_config().run == "demo"  # the Judge audit and the Arena
    assert adapt_demo_config().run == "demo"  # Adapt runs last: its name is the title
    assert adapt_demo_config(null_world=True).run != "demo"  # its own subdirectory
