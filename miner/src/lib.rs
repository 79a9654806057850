//! iota-miner: Miner daemon: holds one pipeline stage, trains on work pulled from the orchestrator, joins the butterfly merge. (being built).
