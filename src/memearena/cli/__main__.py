"""``python -m memearena.cli``: the same command line as the ``memearena`` script."""

from memearena.cli.main import main

if __name__ == "__main__":
    main()
