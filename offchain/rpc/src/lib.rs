//! # iota-rpc
//!
//! The contract between the orchestrator and the parties that pull work from it (docs/design.md §1, §3, §7):
//!
//! | concept | file | what it holds |
//! |---|---|---|
//! | API | [`api`] | the jsonrpsee trait `IotaApi` (`#[rpc(server, client)]`, namespace `iota`) |
//! | messages | [`types`] | work items, submissions, merge views, status; units in the docs |
//! | signing | [`signing`] | the `Signed<T>` envelope: account, nonce, ms timestamp, sr25519 signature |
//! | errors | [`error`] | one JSON-RPC error code per kind of refusal |
//! | pathway log | [`pathway`] | per epoch: which miner ran each stage of each sample, and the loss |
//! | run spec | [`spec`] | model, optimizer, data manifest; its BLAKE3 is the chain's `model_hash` |
//! | client | [`client`] | `SignedClient`, which signs every call |
//!
//! One training step as seen through this API: a miner calls `iota_getWork` and gets a forward or
//! backward item with presigned GETs for its inputs and a presigned PUT for its result; it uploads and
//! completes the lease with `iota_submitActivation` (the tail first reports the loss with
//! `iota_reportLoss`). When its stage's quota is done the stage enters `WeightsUploading`: `getWork`
//! answers `UploadGradient`, the miner uploads its summed gradient and calls `iota_submitGradient`. In
//! `Merging` it asks `iota_getShards`, reduces its butterfly shards (`iota_submitShard`), polls
//! `iota_getManifest` until `Ready`, applies the AdamW step and attests its state with
//! `iota_submitStateHash`; the orchestrator then commits the manifest on chain.

pub mod api;
pub mod client;
pub mod error;
pub mod pathway;
pub mod signing;
pub mod spec;
pub mod types;

pub use api::{IotaApiClient, IotaApiServer, RpcResult};
pub use client::SignedClient;
pub use error::{code_of, ErrorCode};
pub use pathway::{
	InnerStates, ObjectEntry, PathwayError, PathwayLog, PathwayRecord, RecomputedPass,
};
pub use signing::{sign, AuthError, NonceSource, Signed};
pub use spec::{
	DataManifest, HeldOut, InitStage, LrSchedule, RunSpec, SampleLocation, SpecError, SpecObject,
};

/// A chain account (32-byte sr25519 public key; SS58 in JSON), the same type `iota-chain` uses.
pub type AccountId = subxt_core::utils::AccountId32;
