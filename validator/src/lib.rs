//! # iota-validator
//!
//! The validator of iota-rs (docs/design.md §1, §3 steps 7–8, §6, §7): it recomputes sampled work of every
//! completed epoch, audits the butterfly merges, scores miners with CLASP and puts verdicts, weights and
//! finalizations on chain. The reference tracked one miner per validator synchronously, never compared
//! butterfly copies, and kept CLASP private; this validator samples with chain randomness, checks
//! asynchronously after the epoch, audits merges, and publishes an open score.
//!
//! ## Map
//!
//! | concept | file | what it decides or does |
//! |---|---|---|
//! | CLASP | [`clasp`] | per-miner loss effect (ridge joint least squares, sum-to-zero per stage), mean difference, robust z-score flag, score from validated throughput (pure) |
//! | weights | [`weights`] | the `u16` vector for `commit_weights`/`reveal_weights`, within the pallet's rules (pure) |
//! | commit_reveal | [`commit_reveal`] | the committed vectors and salts still to reveal, on disk |
//! | tolerances | [`tolerance`] | per-element bounds by wire encoding, the measured honest-error distribution (pure) |
//! | recomputation | [`recompute`] | forward / tail loss+gradient / body backward of one item with candle (no I/O) |
//! | spot-checks | [`spot_check`] | seeded selection, fetch + recompute + compare, verdict, evidence bundle; what stays inconclusive |
//! | shard audit | [`shard_audit`] | bit-exact butterfly reduction, sampled and mismatched shards, which copy was wrong |
//! | objects | [`objects`] | reading objects by key + BLAKE3 through the orchestrator's presigned GETs (or memory) |
//! | daemon | [`daemon`] | registration, the per-epoch loop over chain + orchestrator, extrinsics, retries |
//! | metrics | [`metrics`] | Prometheus counters and `/metrics` |
//!
//! Binaries: `iota-validator` (the daemon; clap flags with `IOTA_*` env vars) and
//! `measure-honest-error` (the measurement behind [`tolerance`]'s constants).
//!
//! ## Running
//!
//! ```sh
//! cargo run -p iota-validator -- --suri //Bob --chain-rpc ws://127.0.0.1:9944 \
//!     --orchestrator ws://127.0.0.1:9955 --metrics-addr 127.0.0.1:9957
//! cargo test -p iota-validator                                   # unit tests (CLASP, spot-checks, audit)
//! cargo run -p iota-validator --bin measure-honest-error          # the tolerance measurement (~2 min)
//! # end to end (dev node, S3, orchestrator, 3 x 2 miners, one cheating): see tests/tests/validator_cheater.rs
//! ```
//!
//! ## One epoch, as the validator sees it
//!
//! When the chain records `EpochCompletedAt(e)`, the daemon reads `EpochSeeds(e)` and the orchestrator's
//! `iota_epochRecord(e)` (pathway log, shard copies and mismatches, gradient submissions). From the seed it
//! draws (miner, sample) pairs; for each, it downloads the input and output objects named in the log
//! (hash-checked), rebuilds the stage with the global weights of `e` (the checkpoint of `e − 1` named in
//! the chain's merge manifest, or the seeded initialisation at epoch 0), recomputes and compares. It
//! recomputes sampled and disputed butterfly shards bit-exactly. Per judged miner it uploads one evidence
//! object and submits `submit_spot_check` with its BLAKE3; then CLASP over the pathway log, combined with
//! the spot-check outcomes, gives the weight vector, committed during the scoring window
//! (`commit_weights`, its salt kept on disk) and revealed after it (`reveal_weights`). After the reveal
//! window anyone (this daemon too) calls `finalize_epoch`.
//!
//! ## Fairness rules
//!
//! A verdict needs trustworthy inputs: a missing *output* object counts against its writer, but an
//! unreachable orchestrator or store, an object whose bytes do not hash to what the log says, a malformed
//! pathway log, missing or mismatching stage weights, and a shard reduction no honest copy confirms are
//! logged and counted (`iota_validator_inconclusive_total{kind}`) and never become a verdict.
//!
//! ## Assumptions and limits
//!
//! - Stage weights of epoch `e ≥ 1` come from the checkpoint in the manifest of `e − 1`; an epoch whose
//!   manifest names no checkpoint is not spot-checked (inconclusive `weights`).
//! - The head's backward has no output and is not checkable; the tail's backward is its forward item.
//! - The gradient submissions themselves are not recomputed (that would be every sample of the epoch);
//!   wrong activations are caught by spot-checks and wrong reductions by the shard audit.
//! - Recomputation runs on the CPU in f32; tolerances cover other devices' rounding (see [`tolerance`]).

pub mod clasp;
pub mod commit_reveal;
pub mod daemon;
pub mod inner_step;
pub mod metrics;
pub mod objects;
pub mod recompute;
pub mod shard_audit;
pub mod spot_check;
pub mod tolerance;
pub mod vector_audit;
pub mod weights;
