//! # iota-runtime
//!
//! The WASM runtime of the iota-rs chain: frame-system, timestamp, aura + grandpa consensus, balances,
//! transaction payment, sudo, utility (`batch_all`: one extrinsic for what a daemon has due in a block) and
//! [`pallet_iota`], the record of a decentralized training run.
//!
//! The runtime is tuned for development: one-second aura slots (so one training epoch spans a handful of
//! blocks on a dev chain), and `pallet-insecure-randomness-collective-flip` as pallet-iota's `Randomness`.
//! That source mixes recent parent block hashes: the block author can bias it (by choosing what to include
//! or by withholding a block), so it is only fit for development and testnets. A production runtime plugs
//! BABE's VRF randomness into the same `Randomness` config item (docs/design.md §7).
//!
//! Genesis presets (`development`, `local_testnet`) live in [`genesis_config_presets`]; the default run
//! config for the `small` model is [`genesis_config_presets::small_run_config`].
#![cfg_attr(not(feature = "std"), no_std)]
// `construct_runtime` and `impl_runtime_apis` expand to code that clippy's pedantic lints dislike.
#![allow(clippy::large_enum_variant)]

#[cfg(feature = "std")]
include!(concat!(env!("OUT_DIR"), "/wasm_binary.rs"));

extern crate alloc;

pub mod apis;
#[cfg(feature = "runtime-benchmarks")]
mod benchmarks;
pub mod configs;
pub mod genesis_config_presets;

use alloc::vec::Vec;
#[allow(unused_imports)]
use polkadot_sdk::*;
use polkadot_sdk::{
	sp_runtime::{
		generic, impl_opaque_keys,
		traits::{BlakeTwo256, IdentifyAccount, Verify},
		MultiAddress, MultiSignature,
	},
	sp_version::RuntimeVersion,
};

pub use polkadot_sdk::frame_system::Call as SystemCall;
pub use polkadot_sdk::pallet_balances::Call as BalancesCall;
#[cfg(any(feature = "std", test))]
pub use polkadot_sdk::sp_runtime::BuildStorage;

/// Opaque types the node uses without knowing the runtime's extrinsic format.
pub mod opaque {
	use super::*;
	use polkadot_sdk::sp_runtime::traits::Hash as HashT;

	pub use polkadot_sdk::sp_runtime::OpaqueExtrinsic as UncheckedExtrinsic;

	/// Opaque block header.
	pub type Header = generic::Header<BlockNumber, BlakeTwo256>;
	/// Opaque block.
	pub type Block = generic::Block<Header, UncheckedExtrinsic>;
	/// Opaque block identifier.
	pub type BlockId = generic::BlockId<Block>;
	/// Opaque block hash.
	pub type Hash = <BlakeTwo256 as HashT>::Output;
}

impl_opaque_keys! {
	/// Session keys of a block author: an aura key and a grandpa key.
	pub struct SessionKeys {
		pub aura: Aura,
		pub grandpa: Grandpa,
	}
}

/// Version of this runtime; bump `spec_version` on every change of runtime logic.
#[polkadot_sdk::sp_version::runtime_version]
pub const VERSION: RuntimeVersion = RuntimeVersion {
	spec_name: alloc::borrow::Cow::Borrowed("iota-runtime"),
	impl_name: alloc::borrow::Cow::Borrowed("iota-runtime"),
	authoring_version: 1,
	spec_version: 104,
	impl_version: 1,
	apis: apis::RUNTIME_API_VERSIONS,
	transaction_version: 1,
	system_version: 1,
};

/// Target block time in milliseconds: one block per second (a fast dev chain; one training epoch spans
/// several blocks).
pub const MILLI_SECS_PER_BLOCK: u64 = 1000;
/// Aura slot length in milliseconds (one block per slot).
pub const SLOT_DURATION: u64 = MILLI_SECS_PER_BLOCK;
/// Blocks per minute.
pub const MINUTES: BlockNumber = 60_000 / (MILLI_SECS_PER_BLOCK as BlockNumber);
/// Blocks per hour.
pub const HOURS: BlockNumber = MINUTES * 60;

/// One token, in the smallest balance unit (12 decimals).
pub const UNIT: Balance = 1_000_000_000_000;
/// A thousandth of a token.
pub const MILLI_UNIT: Balance = 1_000_000_000;
/// Smallest balance an account may hold.
pub const EXISTENTIAL_DEPOSIT: Balance = MILLI_UNIT;

/// Signature of a transaction.
pub type Signature = MultiSignature;
/// Account id: the public key of the signer (sr25519 for the dev accounts).
pub type AccountId = <<Signature as Verify>::Signer as IdentifyAccount>::AccountId;
/// Balance of an account.
pub type Balance = u128;
/// Transaction counter of an account.
pub type Nonce = u32;
/// Hash of a block.
pub type Hash = polkadot_sdk::sp_core::H256;
/// Block number.
pub type BlockNumber = u32;
/// Address format of a transaction's sender.
pub type Address = MultiAddress<AccountId, ()>;
/// Block header.
pub type Header = generic::Header<BlockNumber, BlakeTwo256>;
/// Block.
pub type Block = generic::Block<Header, UncheckedExtrinsic>;

/// Transaction extensions checked on every signed transaction.
pub type TxExtension = (
	frame_system::CheckNonZeroSender<Runtime>,
	frame_system::CheckSpecVersion<Runtime>,
	frame_system::CheckTxVersion<Runtime>,
	frame_system::CheckGenesis<Runtime>,
	frame_system::CheckEra<Runtime>,
	frame_system::CheckNonce<Runtime>,
	frame_system::CheckWeight<Runtime>,
	pallet_transaction_payment::ChargeTransactionPayment<Runtime>,
	frame_metadata_hash_extension::CheckMetadataHash<Runtime>,
	frame_system::WeightReclaim<Runtime>,
);

/// Extrinsic format of this runtime.
pub type UncheckedExtrinsic =
	generic::UncheckedExtrinsic<Address, RuntimeCall, Signature, TxExtension>;
/// The payload being signed in a transaction.
pub type SignedPayload = generic::SignedPayload<RuntimeCall, TxExtension>;

/// Executive: dispatches calls to the pallets.
pub type Executive = frame_executive::Executive<
	Runtime,
	Block,
	frame_system::ChainContext<Runtime>,
	Runtime,
	AllPalletsWithSystem,
	(),
>;

#[frame_support::runtime]
mod runtime {
	#[runtime::runtime]
	#[runtime::derive(
		RuntimeCall,
		RuntimeEvent,
		RuntimeError,
		RuntimeOrigin,
		RuntimeFreezeReason,
		RuntimeHoldReason,
		RuntimeSlashReason,
		RuntimeLockId,
		RuntimeTask,
		RuntimeViewFunction
	)]
	pub struct Runtime;

	#[runtime::pallet_index(0)]
	pub type System = frame_system;

	#[runtime::pallet_index(1)]
	pub type Timestamp = pallet_timestamp;

	#[runtime::pallet_index(2)]
	pub type Aura = pallet_aura;

	#[runtime::pallet_index(3)]
	pub type Grandpa = pallet_grandpa;

	#[runtime::pallet_index(4)]
	pub type Balances = pallet_balances;

	#[runtime::pallet_index(5)]
	pub type TransactionPayment = pallet_transaction_payment;

	#[runtime::pallet_index(6)]
	pub type Sudo = pallet_sudo;

	#[runtime::pallet_index(7)]
	pub type RandomnessCollectiveFlip = pallet_insecure_randomness_collective_flip;

	#[runtime::pallet_index(8)]
	pub type Iota = pallet_iota;

	#[runtime::pallet_index(9)]
	pub type Utility = pallet_utility;
}
