//! # iota-protocol
//!
//! The off-chain protocol core: every rule that two parties off chain must agree on, written once and
//! called by the miner, the validator and the orchestrator alike. Pure functions (std, no I/O): bytes,
//! seeds and small records in, values or typed errors out.
//!
//! `iota-primitives` keeps the `no_std` integer rules the pallet runs on chain (phases, stage
//! assignment, butterfly shard table, consensus, emission); this crate holds the f32 merge arithmetic
//! and the off-chain decisions built on them:
//!
//! | module | decision |
//! |---|---|
//! | [`f32le`] | the encoding of flat f32 vectors (submissions, shards, merge vectors) |
//! | [`codec`] | how a merge vector travels: `f32`, `int8` per-chunk scales, top-k, error feedback |
//! | [`chunks`] | hashed chunks of a merge vector, so a ranged read can be checked |
//! | [`merge`] | shard reduction (weighted mean) and mean assembly |
//! | [`acceptance`] | accepting a merge submission (length, chunk hashes, finite values) and a shard |
//! | [`plan`] | the merge plan of a round: members, shards, checkpoint replica |
//! | [`selection`] | spot-check and shard-audit selection |
//! | [`sample`] | a sample's input and target rows |
//! | [`model`] | the model config, its presets and each stage's parameter list (which fixes `P`) |
//! | [`optim`] | the optimizer steps every replica applies (AdamW, clipping, lr schedule; the training mode, the outer Nesterov step and the pseudo-gradient of local mode) |
//! | [`encoding`] | the wire encodings a run spec names, and the largest wire message |
//! | [`objects`] | object references and presigned requests, as parties pass them |
//!
//! docs/design.md explains where each rule comes from.

pub mod acceptance;
pub mod chunks;
pub mod codec;
pub mod encoding;
pub mod f32le;
pub mod merge;
pub mod model;
pub mod objects;
pub mod optim;
pub mod plan;
pub mod sample;
pub mod selection;

pub use acceptance::{accept_shard, accept_submission, check_submission_shape, Refused};
pub use chunks::{
	chunk_count, chunk_hashes, chunk_span, gradient_chunk_elems, shard_len, submission_len,
};
pub use codec::{CodecError, ErrorFeedback, MergeCodec};
pub use merge::{
	assemble_mean, reduce_shard, reduce_shard_bytes, MergeError, ShardInput, SpanInput,
};
pub use model::ModelConfig;
pub use objects::{ObjectRef, PresignedRequest};
pub use plan::{merge_plan, MergePlan};
