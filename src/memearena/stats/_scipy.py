"""The scipy routines this module needs, each imported on first use.

`scipy.special` and `scipy.sparse.csgraph` take tenths of a second to import; a notebook or the
CLI that imports `memearena.stats` only to read a report must not pay for them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray


def expit(x: NDArray[np.float64], out: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
    """The logistic function, 1 / (1 + e^−x) (into `out`, which may be `x`, if given).

    scipy's, not numpy's 1 / (1 + np.exp(−x)): numpy's vectorised exp differs from libm's in
    the last bit for some inputs, and fitted ratings must not depend on the CPU's vector unit.
    """
    from scipy.special import expit as logistic

    return np.asarray(logistic(x, out=out) if out is not None else logistic(x), dtype=np.float64)


def ndtr(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """The standard normal distribution function Φ(x)."""
    from scipy.special import ndtr as normal_cdf

    return np.asarray(normal_cdf(x), dtype=np.float64)


def connected_components(adjacency: Any, **kwargs: Any) -> tuple[int, NDArray[np.int32]]:
    """`scipy.sparse.csgraph.connected_components` on a dense or sparse adjacency matrix."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components as components

    n, labels = components(csr_matrix(adjacency), **kwargs)
    return int(n), labels
