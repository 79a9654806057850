//! What the dashboard reads from the chain, as plain serde records (docs/design.md §4: everything that matters for
//! money is read from chain).
//!
//! These are the chain half of the JSON endpoints, so they are kept independent of subxt's generated
//! types: the live source ([`crate::source::ChainReader`]) converts, fake sources in tests build them
//! directly. Balances are in the chain's smallest unit (12 decimals) and serialize as decimal strings
//! (JSON numbers lose precision above 2^53); block numbers are blocks; scores are parts per billion.

use iota_primitives::{ContentHash, MinerStatus, Phase, ValidatorStatus, Verdict};
use iota_rpc::AccountId;
use serde::Serialize;

/// Balance in the chain's smallest unit (one token is 10^12).
pub type Balance = u128;

/// Decimals of the chain's token.
pub const TOKEN_DECIMALS: u32 = 12;

/// Serde helper: a balance as a decimal string.
pub(crate) mod balance_str {
	use serde::Serializer;

	pub fn serialize<S: Serializer>(v: &u128, s: S) -> Result<S::Ok, S::Error> {
		s.collect_str(v)
	}
}

/// Chain-wide state of the run at the latest finalized block.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainOverview {
	/// Best (latest) block number.
	pub best_block: u32,
	/// Latest finalized block number; every other field is read at this block.
	pub finalized_block: u32,
	/// The run config, if root set one.
	pub run_config: Option<RunConfigView>,
	/// Per stage `0 .. run_config.stages`.
	pub stages: Vec<ChainStage>,
	/// Every miner record.
	pub miners: Vec<ChainMiner>,
	/// Every validator record.
	pub validators: Vec<ChainValidator>,
	/// The next epoch `finalize_epoch` pays out (every lower epoch has scores and an emission split).
	pub next_epoch_to_finalize: u32,
	/// Everything pallet-iota minted so far.
	#[serde(with = "balance_str")]
	pub total_minted: Balance,
}

impl ChainOverview {
	/// The highest epoch any stage is in (0 before any merge).
	pub fn top_epoch(&self) -> u32 {
		self.stages.iter().map(|s| s.epoch).max().unwrap_or(0)
	}
}

/// The chain's `RunConfig`, the fields the dashboard shows.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunConfigView {
	/// BLAKE3 of the run spec (equals the orchestrator's `spec_hash`).
	pub model_hash: ContentHash,
	/// Pipeline stages.
	pub stages: u16,
	/// Bottleneck width `b` at each cut, in channels.
	pub bottleneck_width: u32,
	/// Backward passes per stage per epoch (the epoch's sample quota `Q`).
	pub backward_quota: u32,
	/// Lease on a work item, in seconds.
	pub lease_timeout_secs: u32,
	/// Blocks a stage may stay in one phase before the timeout fallback.
	pub phase_timeout: u32,
	/// Minted per finalized epoch.
	#[serde(with = "balance_str")]
	pub emission_per_epoch: Balance,
	/// Validators' share of the emission, parts per billion.
	pub validator_share_ppb: u32,
	/// Bond a miner holds.
	#[serde(with = "balance_str")]
	pub miner_bond: Balance,
	/// Minimum validator stake.
	#[serde(with = "balance_str")]
	pub min_validator_stake: Balance,
	/// Blocks after an epoch completes during which validators commit their weights.
	pub scoring_window: u32,
	/// Blocks after the scoring window during which validators reveal them.
	pub reveal_window: u32,
	/// Share of validator stake whose `Fail` verdicts slash a miner, parts per billion.
	pub slash_quorum_ppb: u32,
}

/// One stage as the chain records it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainStage {
	/// Stage index.
	pub stage: u16,
	/// Phase.
	pub phase: Phase,
	/// The stage's epoch (merges committed so far).
	pub epoch: u32,
	/// Block at which the phase began.
	pub phase_since: u32,
	/// Merge round within the epoch.
	pub round: u32,
	/// Accounts holding the stage, in butterfly order.
	pub members: Vec<AccountId>,
}

/// A miner's chain record.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainMiner {
	/// Account.
	pub account: AccountId,
	/// Stage it holds.
	pub stage: u16,
	/// Bond held.
	#[serde(with = "balance_str")]
	pub bond: Balance,
	/// Lifecycle state.
	pub status: MinerStatus<u32>,
	/// Block of registration.
	pub registered_at: u32,
}

/// A validator's chain record.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChainValidator {
	/// Account.
	pub account: AccountId,
	/// Stake held.
	#[serde(with = "balance_str")]
	pub stake: Balance,
	/// Lifecycle state.
	pub status: ValidatorStatus<u32>,
	/// Block of its last accepted `commit_weights`.
	pub last_weights_at: Option<u32>,
}

/// Everything the chain holds about one epoch's trust and rewards.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EpochTrust {
	/// Epoch.
	pub epoch: u32,
	/// Block at which every stage had committed its merge, if the epoch is complete.
	pub completed_at: Option<u32>,
	/// Whether `finalize_epoch` paid it out (scores and emission split exist).
	pub finalized: bool,
	/// Spot-check verdicts, one per (miner, validator).
	pub verdicts: Vec<VerdictView>,
	/// Consensus scores (finalized epochs), parts per billion.
	pub scores: Vec<ScoreView>,
	/// The emission split (finalized epochs).
	pub emission: Option<EmissionView>,
	/// Bonds slashed in the epoch.
	pub slashes: Vec<Payout>,
	/// Merge manifests committed, per stage.
	pub manifests: Vec<ManifestView>,
}

/// One validator's verdict on one miner.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VerdictView {
	/// The miner checked.
	pub miner: AccountId,
	/// The validator that recomputed.
	pub validator: AccountId,
	/// What it found.
	pub verdict: Verdict,
	/// BLAKE3 of its evidence object.
	pub evidence: ContentHash,
}

/// A miner's consensus score.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScoreView {
	/// Miner.
	pub miner: AccountId,
	/// Score, parts per billion.
	pub ppb: u32,
}

/// An amount paid to (or slashed from) an account.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Payout {
	/// Account.
	pub account: AccountId,
	/// Amount.
	#[serde(with = "balance_str")]
	pub amount: Balance,
}

/// Who a finalized epoch paid.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EmissionView {
	/// Per miner.
	pub miners: Vec<Payout>,
	/// Per validator.
	pub validators: Vec<Payout>,
	/// Not earned by anybody (not minted).
	#[serde(with = "balance_str")]
	pub unallocated: Balance,
}

/// A committed merge manifest.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestView {
	/// Stage.
	pub stage: u16,
	/// Butterfly members `n`.
	pub members: u32,
	/// Gradient length `P`, f32 elements.
	pub param_count: u64,
	/// Samples merged.
	pub samples: u32,
	/// Reduced shards in shard order.
	pub shards: Vec<ObjectView>,
	/// Attested stage-state hash.
	pub state_hash: ContentHash,
	/// The full checkpoint, if one was uploaded.
	pub checkpoint: Option<ObjectView>,
}

/// An object named on chain (key as lossy UTF-8).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectView {
	/// Object key.
	pub key: String,
	/// BLAKE3 of the object.
	pub hash: ContentHash,
}

/// A balance in tokens with up to 4 decimals, e.g. `12.5` for `12.5 · 10^12` units.
pub fn format_balance(v: Balance) -> String {
	let unit = 10u128.pow(TOKEN_DECIMALS);
	let whole = v / unit;
	let frac = (v % unit) / 10u128.pow(TOKEN_DECIMALS - 4);
	if frac == 0 {
		format!("{whole}")
	} else {
		let f = format!("{frac:04}");
		format!("{whole}.{}", f.trim_end_matches('0'))
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn balances_format_in_tokens() {
		assert_eq!(format_balance(0), "0");
		assert_eq!(format_balance(10u128.pow(12)), "1");
		assert_eq!(format_balance(12_500_000_000_000), "12.5");
		assert_eq!(format_balance(1_234_567_000_000), "1.2345");
		// Below 10^-4 tokens shows as 0.
		assert_eq!(format_balance(99_999_999), "0");
	}

	#[test]
	fn balances_serialize_as_strings() {
		let p = Payout { account: AccountId::from([1; 32]), amount: u128::MAX };
		let v = serde_json::to_value(&p).unwrap();
		assert_eq!(v["amount"], u128::MAX.to_string());
	}
}
