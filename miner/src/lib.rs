//! # iota-miner
//!
//! The miner daemon (DESIGN §1, §3, §6): it holds one pipeline stage of the model, pulls forward and
//! backward work for it from the orchestrator, streams activations and gradients through presigned S3
//! URLs, and at the end of each epoch joins its stage's butterfly all-reduce so every replica applies
//! the same AdamW step to the same averaged gradient and attests the same state hash.
//!
//! ## Map
//!
//! | concept | file | what it holds |
//! |---|---|---|
//! | merge arithmetic | [`merge`] | pure: submission bytes and chunk hashes, [`merge::reduce_shard`] (f64 sums in listed order, ÷ total samples, → f32), [`merge::assemble_mean`] (hash-checked shards tiling `0..P`) |
//! | the loop | [`miner`] | [`Miner`]: one [`Miner::step`] at a time (resync → train → merge), [`Miner::run`] with backoff and clean shutdown |
//! | orchestrator | [`orchestrator`] | the [`Orchestrator`] trait and [`RpcOrchestrator`] (signed calls, reconnect after a restart, retries) |
//! | objects | [`transfer`] | the [`ObjectIo`] trait and [`HttpIo`] (presigned GET/PUT, ranged GET for shard spans, byte counts) |
//! | data | [`data`] | the head's and tail's tokens: data shard checked against the run spec, hash-checked, cached |
//! | chain | [`chain`] | registration, `model_hash`, the stage's epoch and committed manifests ([`ChainView`]) |
//! | metrics | [`metrics`] | Prometheus counters and `/metrics` |
//! | errors | [`error`] | [`MinerError`]: one variant per reaction (retry, skip the item, resync) |
//!
//! Binaries: `iota-miner` (the daemon; `--help` lists every option and its environment variable) and
//! `bench-merge` (bytes per miner per merge for n = 2..16 over the embedded S3 server, against IOTA's
//! weights + two Adam moments scheme).
//!
//! ## One epoch, as a miner
//!
//! 1. **Start-up** (`iota-miner`): sr25519 key from `--suri`/`--key-file`; `register_miner` if the
//!    account is not registered; its stage from the chain; the run spec from `iota_runSpec`, checked
//!    against the chain's `model_hash`; the stage built from the spec's seed. The first step resyncs: at
//!    epoch 0 the seed's weights are the global weights; later, the checkpoint of the stage's latest
//!    committed manifest is loaded only if its state hashes to the attested hash. If no usable checkpoint
//!    exists the miner waits (it never trains on unverified weights).
//! 2. **Training**: forward items (the tail: forward, loss, backward at once, `reportLoss`, then the input
//!    gradient) and backward items (using the kept graph when this miner ran the forward, else recomputing
//!    from the input); every input is hash-checked and shape-checked, every output checked for NaN/Inf;
//!    results past their lease are dropped. Parameter gradients are summed for accepted items only.
//! 3. **Merge**: `UploadGradient` → upload the sum (f32 LE) with its chunk hashes, `submitGradient`;
//!    reduce the assigned shards from ranged, chunk-checked reads, `submitShard`; when the manifest is
//!    `Ready`, download every reduced shard, apply `Stage::apply_gradient` (CPU f32 AdamW), upload the
//!    checkpoint if asked, `submitStateHash`; when `Committed` with our hash, go on at epoch + 1.
//!
//! ## Guarantees
//! - Nothing unverified is used: objects are hash-checked (whole objects by BLAKE3, ranges by chunk
//!   hashes), tensors by shape/dtype/size/NaN, merge views by stage-scoped shard keys and exact tiling of
//!   `0..P`, checkpoints by the attested state hash. A bad item is released with a logged reason.
//! - Replicas stay bit-identical: the reduction order and rounding are fixed, and the step is the model
//!   crate's plain-Rust AdamW; a replica whose hash differs from the committed one resyncs.
//! - Features: `cuda` (candle's CUDA backend for forward/backward; `--device cuda` without it is an
//!   error), `fault-injection` (tests only: `--fault perturb=A` adds noise to uploaded activations).

pub mod chain;
pub mod data;
pub mod error;
pub mod merge;
pub mod metrics;
pub mod miner;
pub mod orchestrator;
pub mod transfer;

pub use chain::{ChainView, Committed};
pub use error::{MinerError, Result};
pub use metrics::Metrics;
pub use miner::{Fault, MergeState, Miner, MinerConfig, Outcome, Phase};
pub use orchestrator::{Orchestrator, RpcOrchestrator, RpcRetry};
pub use transfer::{ByteCounter, HttpIo, ObjectIo};
