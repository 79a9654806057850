//! Both genesis presets build a valid genesis state: funded accounts, the authorities, sudo, and
//! pallet-iota's run config, orchestrator and validators (whose stakes the genesis build holds).

use iota_runtime::{
	genesis_config_presets::{
		get_preset, preset_names, small_run_config, ENDOWMENT, GENESIS_VALIDATOR_STAKE,
	},
	AccountId, Runtime, RuntimeGenesisConfig,
};
use polkadot_sdk::{
	frame_support::genesis_builder_helper::build_state,
	pallet_aura, pallet_balances, pallet_grandpa, pallet_sudo,
	sp_genesis_builder::{DEV_RUNTIME_PRESET, LOCAL_TESTNET_RUNTIME_PRESET},
	sp_io::TestExternalities,
	sp_keyring::Sr25519Keyring,
};
use serde_json::Value;

fn account(k: Sr25519Keyring) -> AccountId {
	k.to_account_id()
}

/// Apply a JSON merge patch (RFC 7386 without deletions), as the node does with a preset.
fn merge(base: &mut Value, patch: Value) {
	match (base, patch) {
		(Value::Object(base), Value::Object(patch)) => {
			for (k, v) in patch {
				merge(base.entry(k).or_insert(Value::Null), v);
			}
		},
		(base, patch) => *base = patch,
	}
}

/// Build the genesis state of preset `name` (patched onto the default config) and run `check` in it.
fn with_preset(name: &str, check: impl FnOnce()) {
	let patch = get_preset(&name.to_string()).unwrap_or_else(|| panic!("preset {name} exists"));
	let mut config = serde_json::to_value(RuntimeGenesisConfig::default()).unwrap();
	merge(&mut config, serde_json::from_slice(&patch).unwrap());
	let json = serde_json::to_vec(&config).unwrap();
	TestExternalities::default().execute_with(|| {
		build_state::<RuntimeGenesisConfig>(json)
			.unwrap_or_else(|e| panic!("preset {name} builds: {e}"));
		check();
	});
}

#[test]
fn presets_are_listed() {
	assert_eq!(preset_names(), [DEV_RUNTIME_PRESET, LOCAL_TESTNET_RUNTIME_PRESET]);
	assert!(get_preset(&"no-such-preset".to_string()).is_none());
}

#[test]
fn development_preset_builds() {
	with_preset(DEV_RUNTIME_PRESET, || {
		assert_eq!(pallet_aura::Authorities::<Runtime>::get().len(), 1);
		assert_eq!(pallet_grandpa::Pallet::<Runtime>::grandpa_authorities().len(), 1);
		common_checks();
	});
}

#[test]
fn local_testnet_preset_builds() {
	with_preset(LOCAL_TESTNET_RUNTIME_PRESET, || {
		assert_eq!(pallet_aura::Authorities::<Runtime>::get().len(), 4);
		assert_eq!(pallet_grandpa::Pallet::<Runtime>::grandpa_authorities().len(), 4);
		common_checks();
	});
}

fn common_checks() {
	let alice = account(Sr25519Keyring::Alice);
	assert_eq!(pallet_sudo::Key::<Runtime>::get(), Some(alice.clone()));
	assert_eq!(pallet_iota::Orchestrator::<Runtime>::get(), Some(alice.clone()));
	let cfg = pallet_iota::RunConfiguration::<Runtime>::get().expect("run config at genesis");
	assert_eq!(cfg, small_run_config());
	assert_eq!(cfg.stages, 3);
	assert!(pallet_iota::EpochSeeds::<Runtime>::get(0).is_some(), "epoch 0 has a seed");
	for v in [Sr25519Keyring::Bob, Sr25519Keyring::Charlie] {
		let info = pallet_iota::Validators::<Runtime>::get(account(v)).expect("genesis validator");
		assert_eq!(info.stake, GENESIS_VALIDATOR_STAKE);
		// The stake is held out of the endowment.
		assert_eq!(
			pallet_balances::Pallet::<Runtime>::free_balance(account(v)),
			ENDOWMENT - GENESIS_VALIDATOR_STAKE
		);
	}
	assert_eq!(pallet_iota::Validators::<Runtime>::count(), 2);
	assert_eq!(pallet_balances::Pallet::<Runtime>::free_balance(alice), ENDOWMENT);
	assert!(cfg.min_validator_stake <= GENESIS_VALIDATOR_STAKE);
}
