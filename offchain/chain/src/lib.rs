//! # iota-chain
//!
//! The typed client every off-chain part of iota-rs (orchestrator, miners, validators) uses to talk to the
//! chain: a [subxt] client generated from the runtime's metadata (`metadata/iota.scale`, checked in).
//!
//! - [`IotaClient`]: one typed method per pallet-iota extrinsic (root calls go through sudo), storage
//!   queries of the run (miners, stages, phases, manifests, verdicts, weights, scores, emission splits), and
//!   a stream of pallet-iota events from finalized blocks and one of best blocks; [`IotaClient::submit_calls`] sends what a
//!   daemon has due as one extrinsic (`batch_all`) and waits for inclusion or finality ([`Wait`]).
//! - [`Signer`]: sr25519 keys from secret URIs (`//Alice`, a mnemonic, a `0x` seed) or key files.
//! - [`Error`]: a failed dispatch carries the pallet's error name ([`Error::Pallet`]).
//!
//! Regenerate the metadata after a runtime change with
//! `SKIP_WASM_BUILD=1 cargo run -p iota-runtime --example export-metadata`; the test
//! `runtime/tests/metadata.rs` fails while the checked-in file is stale.

mod client;
mod error;
pub mod failover;
mod signer;

pub use client::{calls, BlockEvents, Included, IotaClient, Pending, Wait};
pub use error::{Error, NotIncluded};
pub use signer::Signer;

/// Code generated from the runtime's metadata: calls (`runtime::tx()`), storage (`runtime::storage()`),
/// events and every runtime type (`runtime::runtime_types`). The types iota-primitives defines are not
/// generated again: calls, storage and events use the primitives' own [`Phase`], [`Verdict`],
/// [`ContentHash`], [`MinerStatus`], [`ValidatorStatus`], [`StageReport`] and [`RunConfig`], so no
/// daemon converts between two copies of one type.
#[subxt::subxt(
	runtime_metadata_path = "metadata/iota.scale",
	derive_for_all_types = "Clone, PartialEq, Eq",
	substitute_type(
		path = "iota_primitives::types::ContentHash",
		with = "::iota_primitives::ContentHash"
	),
	substitute_type(path = "iota_primitives::types::Phase", with = "::iota_primitives::Phase"),
	substitute_type(path = "iota_primitives::types::Verdict", with = "::iota_primitives::Verdict"),
	substitute_type(
		path = "iota_primitives::types::StageReport",
		with = "::iota_primitives::StageReport"
	),
	substitute_type(
		path = "iota_primitives::types::MinerStatus<B>",
		with = "::iota_primitives::MinerStatus<B>"
	),
	substitute_type(
		path = "iota_primitives::types::ValidatorStatus<B>",
		with = "::iota_primitives::ValidatorStatus<B>"
	),
	substitute_type(
		path = "iota_primitives::types::RunConfig<A, B>",
		with = "::iota_primitives::RunConfig<A, B>"
	)
)]
pub mod runtime {}

// The subxt macro reads the metadata without telling cargo; including the bytes makes a regenerated
// `metadata/iota.scale` rebuild this crate instead of leaving the old generated code in the target folder.
const _METADATA: &[u8] = include_bytes!("../metadata/iota.scale");

/// Account id of the chain (32-byte sr25519 public key).
pub type AccountId = subxt::utils::AccountId32;
/// Balance, in the smallest unit (12 decimals: one token is 10^12).
pub type Balance = u128;
/// Block number.
pub type BlockNumber = u32;
/// Block hash.
pub type BlockHash = subxt::utils::H256;
/// A pipeline stage index.
pub type StageId = u16;
/// A training epoch (one optimizer step of the whole model).
pub type Epoch = u32;
/// The subxt config matching the runtime (MultiAddress<AccountId, ()>, u32 block numbers).
pub type ChainConfig = subxt::PolkadotConfig;

pub use iota_primitives::{ContentHash, MinerStatus, Phase, StageReport, ValidatorStatus, Verdict};
/// pallet-iota's event type.
pub use runtime::iota::Event as IotaEvent;
/// A bounded vector as the runtime encodes it.
pub use runtime::runtime_types::bounded_collections::bounded_vec::BoundedVec;
pub use runtime::runtime_types::pallet_iota::types::{
	EmissionSplit, MergeManifest, MinerInfo, ObjectRef, SpotCheck, StageState, ValidatorInfo,
};

/// The run config with the runtime's balance and block number types.
pub type RunConfig = iota_primitives::RunConfig<Balance, BlockNumber>;
