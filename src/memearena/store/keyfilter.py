"""A fixed-size set of keys seen in this process: memory that does not grow with the run."""

from __future__ import annotations

from collections.abc import Hashable

__all__ = ["KeyFilter"]


class KeyFilter:
    """The keys added so far, as a Bloom filter of fixed size (1 MiB, three probes). A key
    added is always found; one never added is found with a small probability (about 3% after
    a million keys), so a caller may skip work only for a key reported absent, and treats a
    key reported present as possibly there (a look-up decides).

    The probes come from the key's own hash (double hashing of its 64 bits), which a string
    caches once computed. The hash is salted per process, so a filter is only ever this
    process's memory, never stored."""

    _BITS = 1 << 23
    _MASK = _BITS - 1

    def __init__(self) -> None:
        self._bits = bytearray(self._BITS // 8)

    def add(self, key: Hashable) -> bool:
        """Add ``key``; whether it was (possibly) there already."""
        h = hash(key)
        m = self._MASK
        a, b = h & m, ((h >> 32) | 1) & m
        bits = self._bits
        seen = True
        for p in (a, (a + b) & m, (a + 2 * b) & m):
            bit = 1 << (p & 7)
            if not bits[p >> 3] & bit:
                seen = False
                bits[p >> 3] |= bit
        return seen

    def __contains__(self, key: Hashable) -> bool:
        h = hash(key)
        m = self._MASK
        a, b = h & m, ((h >> 32) | 1) & m
        bits = self._bits
        return all(bits[p >> 3] & (1 << (p & 7)) for p in (a, (a + b) & m, (a + 2 * b) & m))
