//! # iota-orchestrator
//!
//! The daemon that lets unreliable miners form one pipeline (DESIGN §1, §3, §6, §7): it hands out work
//! over signed JSON-RPC (`iota_rpc::IotaApi`), leases it with expiry, brokers presigned S3 URLs, keeps
//! the pathway log, and drives each stage's phases on chain.
//!
//! | concept | file | what it holds |
//! |---|---|---|
//! | state machine | [`state`] | pure: queues, leases, routing, merge bookkeeping, pathway records; events in, decisions out |
//! | persistence | [`db`] | SQLite: append-only event log (replayed on start) and the nonce table |
//! | authentication | [`auth`] | nonce book, chain registry (role and stage of every account) |
//! | server | [`server`] | jsonrpsee `IotaApiServer`: limits → signature → role → nonce → check → verify upload → persist → apply |
//! | chain | [`chain`] | registry refresh, stage sync, `advance_phase`/`commit_merge`, merge seeds, shard disputes, pathway logs |
//! | metrics | [`metrics`] | Prometheus `/metrics` |
//! | data | [`data`] | `prepare-data`: tokenized, hashed corpus shards and the run spec in the bucket |
//!
//! Guarantees: a request is acknowledged only after its events and nonce are in SQLite, so a killed
//! orchestrator restarts with every accepted activation, loss and gradient (events replayed through the
//! same pure [`state::State::apply`]); a refused request writes nothing; every refusal has its own
//! `iota_rpc::ErrorCode` and is counted in the metrics.

pub mod auth;
pub mod chain;
pub mod data;
pub mod db;
pub mod metrics;
pub mod server;
pub mod state;
