"""One writer per run directory: an OS file lock held for the whole run."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType

from memearena.errors import RunLockedError, StoreError

__all__ = ["LOCK_FILE", "RunLock"]

LOCK_FILE = "run.lock"
"""The lock file inside a run directory (it holds the pid of the process that owns the run)."""


class RunLock:
    """An exclusive ``flock`` on ``run_dir/run.lock``; a second process gets ``RunLockedError``
    at once, naming the holder's pid.

    The OS releases the lock when the holder exits, however it exits (kill -9 included), so a
    stale lock file never blocks a resume: only a live holder does. Two writers on one directory
    would both pay for every pending call and interleave their outputs."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        """Take the lock or raise ``RunLockedError`` (never waits)."""
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # owner only
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as e:
            raise StoreError(f"{self.path}: cannot open lock file ({e.strerror})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            who = f"pid {holder}" if holder else "another process"
            raise RunLockedError(
                f"{self.path.parent}: run directory in use by {who}; wait for it to finish or "
                "use another --out"
            ) from None
        except OSError as e:
            os.close(fd)
            raise StoreError(f"{self.path}: cannot lock ({e.strerror})") from None
        # The pid is written only while holding the lock, so a reader sees the live holder's.
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Release the lock (idempotent); the file stays, empty of meaning once unlocked."""
        if self._fd is not None:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
