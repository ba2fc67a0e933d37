"""The run database: calls, artifacts, errors and config snapshots of one run (SQLite, WAL)."""

from memearena.store.runstore import SCHEMA_VERSION, CallRecord, ErrorRecord, RunStore, artifact_key

__all__ = ["SCHEMA_VERSION", "CallRecord", "ErrorRecord", "RunStore", "artifact_key"]
