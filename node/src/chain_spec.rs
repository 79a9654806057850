//! Chain specs built from the runtime's genesis presets.

use iota_runtime::WASM_BINARY;
use polkadot_sdk::{sc_service::ChainType, sp_genesis_builder};

/// A chain spec with the runtime's genesis config.
pub type ChainSpec = polkadot_sdk::sc_service::GenericChainSpec;

fn wasm() -> Result<&'static [u8], String> {
	WASM_BINARY
		.ok_or_else(|| "the runtime WASM blob was not built (was SKIP_WASM_BUILD set?)".to_string())
}

/// Properties wallets show: token symbol and decimals.
fn properties() -> polkadot_sdk::sc_service::Properties {
	let mut p = polkadot_sdk::sc_service::Properties::new();
	p.insert("tokenSymbol".into(), "IOTA".into());
	p.insert("tokenDecimals".into(), 12.into());
	p.insert("ss58Format".into(), 42.into());
	p
}

/// `dev`: one authority (Alice), the `development` preset.
pub fn development_chain_spec() -> Result<ChainSpec, String> {
	Ok(ChainSpec::builder(wasm()?, None)
		.with_name("iota-rs Development")
		.with_id("dev")
		.with_chain_type(ChainType::Development)
		.with_properties(properties())
		.with_genesis_config_preset_name(sp_genesis_builder::DEV_RUNTIME_PRESET)
		.build())
}

/// `local`: Alice, Bob, Charlie and Dave author and finalize, the `local_testnet` preset.
pub fn local_chain_spec() -> Result<ChainSpec, String> {
	Ok(ChainSpec::builder(wasm()?, None)
		.with_name("iota-rs Local Testnet")
		.with_id("local_testnet")
		.with_chain_type(ChainType::Local)
		.with_properties(properties())
		.with_genesis_config_preset_name(sp_genesis_builder::LOCAL_TESTNET_RUNTIME_PRESET)
		.build())
}
