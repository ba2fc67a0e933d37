"""The package's version, at the bottom of the layers (the run facts and digests record it)."""

__version__ = "0.1.0"
