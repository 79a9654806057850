//! Genesis presets by name: `development` (one authority, Alice) and `local_testnet` (Alice, Bob,
//! Charlie and Dave author and finalize). In both, Alice is sudo and the orchestrator, Bob and Charlie are
//! validators, the dev accounts are funded, and the run is configured for the `small` model
//! ([`small_run_config`]).

use crate::{
	AccountId, Balance, BalancesConfig, BlockNumber, IotaConfig, RuntimeGenesisConfig, SudoConfig,
	MINUTES, UNIT,
};
use alloc::{vec, vec::Vec};
use iota_primitives::{ContentHash, RunConfig, PPB};
use polkadot_sdk::{
	frame_support::build_struct_json_patch,
	sp_consensus_aura::sr25519::AuthorityId as AuraId,
	sp_consensus_grandpa::AuthorityId as GrandpaId,
	sp_genesis_builder::{self, PresetId},
	sp_keyring::{Ed25519Keyring, Sr25519Keyring},
	*,
};
use serde_json::Value;

/// Free balance of every funded dev account at genesis: 2^60 units (about 1.15 million tokens).
pub const ENDOWMENT: Balance = 1 << 60;
/// Stake each genesis validator holds: 1 000 tokens.
pub const GENESIS_VALIDATOR_STAKE: Balance = 1_000 * UNIT;

/// The default run config of the dev chains, for the `small` model preset of `iota-model`.
///
/// - 3 pipeline stages, a bottleneck 12 channels wide at each cut: iota-model's `small` preset (d_model
///   384, so 32x width compression, the ratio `bench-compression` chose); root can change it with
///   `set_run_config`;
/// - `model_hash` is BLAKE3 of the bytes `iota-rs model preset small` until the orchestrator commits the
///   hash of the real model config;
/// - 64 backward passes per stage per epoch; 60-second leases; a stage may stay 10 minutes (600 one-second
///   blocks) in one phase before the timeout fallback;
/// - 1 000 tokens minted per finalized epoch, 20% of it to validators;
/// - a miner bonds 10 tokens, a validator stakes at least 100; bonds unbond after 100 blocks;
/// - validators score a complete epoch for 30 blocks, set weights at most every 5 blocks, with version
///   key 1; `Fail` verdicts from half the validator stake slash a miner.
pub fn small_run_config() -> RunConfig<Balance, BlockNumber> {
	RunConfig {
		model_hash: ContentHash::of(b"iota-rs model preset small"),
		stages: 3,
		bottleneck_width: 12,
		backward_quota: 64,
		lease_timeout_secs: 60,
		phase_timeout: 10 * MINUTES,
		emission_per_epoch: 1_000 * UNIT,
		validator_share_ppb: PPB / 5,
		miner_bond: 10 * UNIT,
		min_validator_stake: 100 * UNIT,
		unbonding_period: 100,
		max_idle_epochs: 10,
		scoring_window: 30,
		reveal_window: 20,
		weights_rate_limit: 5,
		weights_version: 1,
		slash_quorum_ppb: PPB / 2,
	}
}

/// The dev accounts funded at genesis: Alice to Ferdie and their stashes.
pub fn endowed_accounts() -> Vec<AccountId> {
	use Sr25519Keyring::*;
	[
		Alice,
		Bob,
		Charlie,
		Dave,
		Eve,
		Ferdie,
		AliceStash,
		BobStash,
		CharlieStash,
		DaveStash,
		EveStash,
		FerdieStash,
	]
	.iter()
	.map(|k| k.to_account_id())
	.collect()
}

fn authority(k: Sr25519Keyring, g: Ed25519Keyring) -> (AuraId, GrandpaId) {
	(k.public().into(), g.public().into())
}

fn testnet_genesis(authorities: Vec<(AuraId, GrandpaId)>) -> Value {
	let alice = Sr25519Keyring::Alice.to_account_id();
	build_struct_json_patch!(RuntimeGenesisConfig {
		balances: BalancesConfig {
			balances: endowed_accounts().into_iter().map(|a| (a, ENDOWMENT)).collect::<Vec<_>>(),
		},
		aura: pallet_aura::GenesisConfig {
			authorities: authorities.iter().map(|x| x.0.clone()).collect::<Vec<_>>()
		},
		grandpa: pallet_grandpa::GenesisConfig {
			authorities: authorities.iter().map(|x| (x.1.clone(), 1)).collect::<Vec<_>>(),
		},
		sudo: SudoConfig { key: Some(alice.clone()) },
		iota: IotaConfig {
			run_config: Some(small_run_config()),
			orchestrator: Some(alice),
			validators: vec![
				(Sr25519Keyring::Bob.to_account_id(), GENESIS_VALIDATOR_STAKE),
				(Sr25519Keyring::Charlie.to_account_id(), GENESIS_VALIDATOR_STAKE),
			],
		},
	})
}

/// `development`: Alice alone authors and finalizes.
pub fn development_config_genesis() -> Value {
	testnet_genesis(vec![authority(Sr25519Keyring::Alice, Ed25519Keyring::Alice)])
}

/// `local_testnet`: Alice, Bob, Charlie and Dave author and finalize (four nodes, e.g. zombienet). Four,
/// not three: GRANDPA finalizes with more than 2/3 of the voters, so 3 of 4 go on finalizing when one node
/// is down, while 3 authorities need all 3.
pub fn local_config_genesis() -> Value {
	testnet_genesis(vec![
		authority(Sr25519Keyring::Alice, Ed25519Keyring::Alice),
		authority(Sr25519Keyring::Bob, Ed25519Keyring::Bob),
		authority(Sr25519Keyring::Charlie, Ed25519Keyring::Charlie),
		authority(Sr25519Keyring::Dave, Ed25519Keyring::Dave),
	])
}

/// The JSON patch of the preset `id`, or `None` for an unknown name.
pub fn get_preset(id: &PresetId) -> Option<Vec<u8>> {
	let patch = match id.as_ref() {
		sp_genesis_builder::DEV_RUNTIME_PRESET => development_config_genesis(),
		sp_genesis_builder::LOCAL_TESTNET_RUNTIME_PRESET => local_config_genesis(),
		_ => return None,
	};
	Some(serde_json::to_string(&patch).expect("a JSON value serializes").into_bytes())
}

/// Names of the presets this runtime offers.
pub fn preset_names() -> Vec<PresetId> {
	vec![
		PresetId::from(sp_genesis_builder::DEV_RUNTIME_PRESET),
		PresetId::from(sp_genesis_builder::LOCAL_TESTNET_RUNTIME_PRESET),
	]
}
