"""``python -m memearena``: the same command line as the ``memearena`` script."""

from memearena.cli import main

if __name__ == "__main__":
    main()
