//! iota-orchestrator: Orchestrator daemon: signed JSON-RPC work routing, leases, per-stage phases on chain, butterfly merge bookkeeping, restart-safe (SQLite). (being built).
