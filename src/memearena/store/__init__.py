"""The run database: calls, artifacts, errors and config snapshots of one run (SQLite, WAL)."""

from memearena.store.lock import LOCK_FILE, RunLock
from memearena.store.runstore import SCHEMA_VERSION, CallRecord, ErrorRecord, RunStore, artifact_key

__all__ = [
    "LOCK_FILE",
    "SCHEMA_VERSION",
    "CallRecord",
    "ErrorRecord",
    "RunLock",
    "RunStore",
    "artifact_key",
]
