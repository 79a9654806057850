//! The protocol's vocabulary: stage and epoch ids, phases, statuses, the run config and content hashes.

use alloc::string::String;
use codec::{Decode, DecodeWithMemTracking, Encode, MaxEncodedLen};
use scale_info::TypeInfo;
use serde::{Deserialize, Serialize};

/// Index of a pipeline stage: 0 is the head (embedding), `stages - 1` the tail (LM head and loss).
pub type StageId = u16;

/// An epoch is one optimizer step of the whole model (docs/design.md §3): a quota of backward passes per stage,
/// then one merge per stage. Stages advance their epoch independently; epoch `e` of the run is complete
/// when every stage has committed its merge for `e`.
pub type Epoch = u32;

/// Validator weight for one miner, as in subtensor's `set_weights` (relative; normalised before use;
/// committed and revealed, [`crate::weights`]).
pub type WeightValue = u16;

/// BLAKE3 hash (32 bytes) of an object in the bucket: activations, gradients, shards, checkpoints.
/// Only these hashes go on chain; the objects live in S3 (docs/design.md §1). SCALE-encodes as 32 raw bytes;
/// serde (genesis JSON, RPC messages) writes and reads 64 hex digits.
#[derive(
	Clone,
	Copy,
	PartialEq,
	Eq,
	PartialOrd,
	Ord,
	Hash,
	Default,
	Encode,
	Decode,
	DecodeWithMemTracking,
	MaxEncodedLen,
	TypeInfo,
)]
#[cfg_attr(feature = "subxt", derive(scale_encode::EncodeAsType, scale_decode::DecodeAsType))]
pub struct ContentHash(pub [u8; 32]);

/// A string that is not 64 hex digits was given where a [`ContentHash`] was expected.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ParseHashError {
	/// The rejected input (cut to 80 characters).
	pub got: String,
}

impl core::fmt::Display for ParseHashError {
	fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
		write!(f, "expected a BLAKE3 hash as 64 hex digits, got {:?}", self.got)
	}
}

#[cfg(feature = "std")]
impl std::error::Error for ParseHashError {}

impl ContentHash {
	/// BLAKE3 of `bytes` (all of them).
	pub fn of(bytes: &[u8]) -> Self {
		Self(*blake3::hash(bytes).as_bytes())
	}

	/// Wrap raw hash bytes, e.g. a hash read from the chain or an RPC message.
	pub const fn from_bytes(bytes: [u8; 32]) -> Self {
		Self(bytes)
	}

	/// The 32 raw bytes.
	pub const fn as_bytes(&self) -> &[u8; 32] {
		&self.0
	}

	/// Lowercase hex, 64 characters.
	pub fn to_hex(&self) -> String {
		String::from(blake3::Hash::from_bytes(self.0).to_hex().as_str())
	}
}

impl From<blake3::Hash> for ContentHash {
	fn from(h: blake3::Hash) -> Self {
		Self(*h.as_bytes())
	}
}

impl core::str::FromStr for ContentHash {
	type Err = ParseHashError;

	/// Parse 64 hex digits (either case).
	///
	/// Errors: [`ParseHashError`] for any other length or a non-hex character.
	fn from_str(s: &str) -> Result<Self, Self::Err> {
		blake3::Hash::from_hex(s)
			.map(Self::from)
			.map_err(|_| ParseHashError { got: s.chars().take(80).collect() })
	}
}

impl core::fmt::Debug for ContentHash {
	fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
		write!(f, "ContentHash({})", blake3::Hash::from_bytes(self.0).to_hex().as_str())
	}
}

impl core::fmt::Display for ContentHash {
	fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
		f.write_str(blake3::Hash::from_bytes(self.0).to_hex().as_str())
	}
}

impl Serialize for ContentHash {
	fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
		s.serialize_str(blake3::Hash::from_bytes(self.0).to_hex().as_str())
	}
}

impl<'de> Deserialize<'de> for ContentHash {
	fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
		struct HexVisitor;
		impl serde::de::Visitor<'_> for HexVisitor {
			type Value = ContentHash;
			fn expecting(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
				f.write_str("a BLAKE3 hash as 64 hex digits")
			}
			fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ContentHash, E> {
				v.parse().map_err(E::custom)
			}
		}
		d.deserialize_str(HexVisitor)
	}
}

/// Phase of one stage within its epoch (docs/design.md §3 step 6; per stage, never global - ref fault).
#[derive(
	Clone,
	Copy,
	PartialEq,
	Eq,
	Debug,
	Default,
	Encode,
	Decode,
	DecodeWithMemTracking,
	MaxEncodedLen,
	TypeInfo,
	Serialize,
	Deserialize,
)]
#[cfg_attr(feature = "subxt", derive(scale_encode::EncodeAsType, scale_decode::DecodeAsType))]
pub enum Phase {
	/// Miners run forward and backward passes and accumulate gradients; weights are fixed.
	#[default]
	Training,
	/// The quota is done: each miner uploads its accumulated gradient and sample count.
	WeightsUploading,
	/// Miners reduce their butterfly shards; ends when the orchestrator commits the merge manifest.
	Merging,
}

/// Lifecycle of a miner record.
#[derive(
	Clone,
	Copy,
	PartialEq,
	Eq,
	Debug,
	Encode,
	Decode,
	DecodeWithMemTracking,
	MaxEncodedLen,
	TypeInfo,
	Serialize,
	Deserialize,
)]
#[cfg_attr(feature = "subxt", derive(scale_encode::EncodeAsType, scale_decode::DecodeAsType))]
pub enum MinerStatus<BlockNumber> {
	/// Holds a stage and receives work.
	Active,
	/// Asked to leave; stays in its stage until the stage's next merge commits its gradient, then unbonds.
	Leaving,
	/// Out of its stage; the bond is released by `withdraw_unbonded` at or after block `until`, and only
	/// once `last_epoch` (the last epoch it worked in) is finalized, so fraud in that epoch can still be
	/// proven and slashed during its scoring window however the run's timings are configured.
	Unbonding {
		/// First block at which the bond can be withdrawn.
		until: BlockNumber,
		/// The last epoch the miner worked in.
		last_epoch: crate::Epoch,
	},
}

/// Lifecycle of a validator record.
#[derive(
	Clone,
	Copy,
	PartialEq,
	Eq,
	Debug,
	Encode,
	Decode,
	DecodeWithMemTracking,
	MaxEncodedLen,
	TypeInfo,
	Serialize,
	Deserialize,
)]
#[cfg_attr(feature = "subxt", derive(scale_encode::EncodeAsType, scale_decode::DecodeAsType))]
pub enum ValidatorStatus<BlockNumber> {
	/// May submit spot-checks and weights; earns the validators' part of the emission.
	Active,
	/// Deregistered; the stake is released by `withdraw_unbonded` at or after block `until`.
	Unbonding {
		/// First block at which the stake can be withdrawn.
		until: BlockNumber,
	},
}

/// A validator's finding on one miner's sampled work (docs/design.md §3 step 7).
#[derive(
	Clone,
	Copy,
	PartialEq,
	Eq,
	Debug,
	Encode,
	Decode,
	DecodeWithMemTracking,
	MaxEncodedLen,
	TypeInfo,
	Serialize,
	Deserialize,
)]
#[cfg_attr(feature = "subxt", derive(scale_encode::EncodeAsType, scale_decode::DecodeAsType))]
pub enum Verdict {
	/// The recomputation matched within tolerance.
	Pass,
	/// The recomputation did not match, or the miner's objects were missing: evidence of fraud.
	Fail,
}

/// What the orchestrator reports about a stage when it asks to advance its phase. The chain cannot see
/// the work itself; the numbers are recorded in the `PhaseAdvanced` event so validators can audit them
/// against the pathway log.
#[derive(
	Clone,
	Copy,
	PartialEq,
	Eq,
	Debug,
	Default,
	Encode,
	Decode,
	DecodeWithMemTracking,
	MaxEncodedLen,
	TypeInfo,
	Serialize,
	Deserialize,
)]
#[cfg_attr(feature = "subxt", derive(scale_encode::EncodeAsType, scale_decode::DecodeAsType))]
pub struct StageReport {
	/// Backward passes this stage completed in the current epoch.
	pub backward_done: u32,
	/// Miners of this stage whose accumulated gradient is uploaded (counts in `WeightsUploading`).
	pub gradients_submitted: u32,
}

/// The run's configuration, set at genesis and by root (`set_run_config`). Block counts are in blocks,
/// balances in the chain's smallest unit, shares in parts per billion ([`crate::PPB`]).
#[derive(
	Clone,
	PartialEq,
	Eq,
	Debug,
	Encode,
	Decode,
	DecodeWithMemTracking,
	MaxEncodedLen,
	TypeInfo,
	Serialize,
	Deserialize,
)]
#[cfg_attr(feature = "subxt", derive(scale_encode::EncodeAsType, scale_decode::DecodeAsType))]
pub struct RunConfig<Balance, BlockNumber> {
	/// BLAKE3 of the model config every miner must build (preset, shapes, cuts, init seed).
	pub model_hash: ContentHash,
	/// Number of pipeline stages (at least 1).
	pub stages: StageId,
	/// Bottleneck width `b` at every stage cut (docs/design.md §5), in channels.
	pub bottleneck_width: u32,
	/// Backward passes per stage per epoch before the stage merges (the epoch's sample quota).
	pub backward_quota: u32,
	/// Off-chain lease on a work item, in seconds (default 60; docs/design.md §3 step 3).
	pub lease_timeout_secs: u32,
	/// Blocks a stage may stay in one phase before the timeout fallback applies ([`crate::next_phase`]).
	pub phase_timeout: BlockNumber,
	/// Balance minted per finalized epoch and split between miners and validators.
	pub emission_per_epoch: Balance,
	/// Validators' share of each epoch's emission, in parts per billion.
	pub validator_share_ppb: u32,
	/// Bond a miner holds while registered.
	pub miner_bond: Balance,
	/// Minimum stake to register as a validator.
	pub min_validator_stake: Balance,
	/// Blocks between leaving and being able to withdraw a bond or stake (fraud can still be proven).
	pub unbonding_period: BlockNumber,
	/// Finalized epochs a miner may go without accepted work (a consensus score above zero) before it
	/// is evicted: moved to leaving, its seat freed at its stage's next merge (at least 1). Epochs in
	/// which no miner scored (no validator revealed weights) do not count against anyone.
	pub max_idle_epochs: crate::Epoch,
	/// Blocks after an epoch completes during which validators judge it and commit their weights
	/// (`commit_weights`; [`crate::weights`]).
	pub scoring_window: BlockNumber,
	/// Blocks after the scoring window during which validators reveal their committed weights
	/// (`reveal_weights`); the epoch can be finalized after it (at least 1).
	pub reveal_window: BlockNumber,
	/// Minimum blocks between two `commit_weights` calls of one validator (replacing a commitment).
	pub weights_rate_limit: BlockNumber,
	/// Lowest weights version key accepted (subtensor's `version_key`): validators on older scoring code
	/// are refused.
	pub weights_version: u64,
	/// Share of active validator stake whose `Fail` verdicts on one (epoch, miner) slash the miner's
	/// bond, in parts per billion.
	pub slash_quorum_ppb: u32,
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn content_hash_hex_round_trip_and_known_value() {
		let h = ContentHash::of(b"");
		// BLAKE3 of the empty input (reference test vector).
		assert_eq!(h.to_hex(), "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262");
		assert_eq!(h.to_hex().parse::<ContentHash>().unwrap(), h);
		assert_eq!(h.to_hex().to_uppercase().parse::<ContentHash>().unwrap(), h);
		assert_eq!(alloc::format!("{h}"), h.to_hex());
	}

	#[test]
	fn content_hash_rejects_bad_hex() {
		assert!("abc".parse::<ContentHash>().is_err());
		let not_hex = "z".repeat(64);
		assert_eq!(not_hex.parse::<ContentHash>().unwrap_err().got, not_hex);
	}

	#[test]
	fn content_hash_codecs() {
		let h = ContentHash::of(b"x");
		assert_eq!(h.encode(), h.0.to_vec(), "SCALE is the raw 32 bytes");
		assert_eq!(ContentHash::decode(&mut &h.encode()[..]).unwrap(), h);
	}
}

#[cfg(test)]
mod serde_tests {
	use super::*;

	#[test]
	fn content_hash_serde_is_hex() {
		let h = ContentHash::of(b"x");
		let json = serde_json::to_string(&h).unwrap();
		assert_eq!(json, alloc::format!("\"{}\"", h.to_hex()));
		assert_eq!(serde_json::from_str::<ContentHash>(&json).unwrap(), h);
		assert!(serde_json::from_str::<ContentHash>("\"00\"").is_err());
		assert!(serde_json::from_str::<ContentHash>("[0,1]").is_err());
	}
}
