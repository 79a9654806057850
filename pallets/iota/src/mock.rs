//! A mock runtime for pallet-iota's tests and benchmarks: frame-system, pallet-balances (u64 balances,
//! existential deposit 1) and pallet-iota, with an `ExtBuilder` that states the world.

use crate as pallet_iota;
use iota_primitives::{ContentHash, RunConfig};
use polkadot_sdk::{
	frame_support::{derive_impl, traits::ConstU32},
	frame_system, pallet_balances,
	sp_core::H256,
	sp_io,
	sp_runtime::{traits::Hash, BuildStorage},
};

type Block = frame_system::mocking::MockBlock<Test>;

polkadot_sdk::frame_support::construct_runtime!(
	pub enum Test {
		System: frame_system,
		Balances: pallet_balances,
		Iota: pallet_iota,
	}
);

#[derive_impl(frame_system::config_preludes::TestDefaultConfig)]
impl frame_system::Config for Test {
	type Block = Block;
	type AccountData = pallet_balances::AccountData<u64>;
}

#[derive_impl(pallet_balances::config_preludes::TestDefaultConfig)]
impl pallet_balances::Config for Test {
	type AccountStore = System;
}

/// Deterministic randomness for tests: the hash of the subject and the block number.
pub struct TestRandomness;

impl polkadot_sdk::frame_support::traits::Randomness<H256, u64> for TestRandomness {
	fn random(subject: &[u8]) -> (H256, u64) {
		let block = System::block_number();
		let mut input = subject.to_vec();
		input.extend_from_slice(&block.to_le_bytes());
		(polkadot_sdk::sp_runtime::traits::BlakeTwo256::hash(&input), block)
	}
}

impl pallet_iota::Config for Test {
	type Currency = Balances;
	type RuntimeHoldReason = RuntimeHoldReason;
	type Randomness = TestRandomness;
	type MaxStages = ConstU32<8>;
	type MaxMinersPerStage = ConstU32<4>;
	type MaxMiners = ConstU32<32>;
	type MaxValidators = ConstU32<8>;
	type MaxKeyLen = ConstU32<96>;
	type WeightInfo = ();
}

/// The orchestrator account.
pub const ORCH: u64 = 100;
/// Starting free balance of every funded account.
pub const INITIAL: u64 = 1_000_000;
/// Miner bond of the default run config.
pub const BOND: u64 = 1_000;
/// Validator stake used by the tests.
pub const STAKE: u64 = 10_000;

/// The default run config of the tests: 3 stages, quota 4, phase timeout 20 blocks, 1 000 000 emitted per
/// epoch with 20% to validators, slash quorum one half of validator stake, weights committed for 5 blocks
/// after an epoch completes and revealed in the 2 after that.
pub fn run_config() -> RunConfig<u64, u64> {
	RunConfig {
		model_hash: ContentHash::of(b"tiny"),
		stages: 3,
		bottleneck_width: 8,
		backward_quota: 4,
		lease_timeout_secs: 60,
		phase_timeout: 20,
		emission_per_epoch: 1_000_000,
		validator_share_ppb: 200_000_000,
		miner_bond: BOND,
		min_validator_stake: 5_000,
		unbonding_period: 10,
		max_idle_epochs: 2,
		scoring_window: 5,
		reveal_window: 2,
		weights_rate_limit: 2,
		weights_version: 1,
		slash_quorum_ppb: 500_000_000,
	}
}

/// The world a test starts in.
pub struct ExtBuilder {
	config: Option<RunConfig<u64, u64>>,
	validators: Vec<(u64, u64)>,
	miners: Vec<u64>,
}

impl Default for ExtBuilder {
	fn default() -> Self {
		Self { config: Some(run_config()), validators: vec![], miners: vec![] }
	}
}

impl ExtBuilder {
	/// Start without a run config.
	pub fn unconfigured(mut self) -> Self {
		self.config = None;
		self
	}

	/// Replace the run config.
	pub fn with_config(mut self, f: impl FnOnce(&mut RunConfig<u64, u64>)) -> Self {
		if let Some(c) = self.config.as_mut() {
			f(c)
		}
		self
	}

	/// Genesis validators with their stakes.
	pub fn with_validators(mut self, v: &[(u64, u64)]) -> Self {
		self.validators = v.to_vec();
		self
	}

	/// Miners registered (through `register_miner`) at block 1, in order.
	pub fn with_miners(mut self, m: &[u64]) -> Self {
		self.miners = m.to_vec();
		self
	}

	/// Build the externalities. Accounts 1..=200 start with [`INITIAL`].
	pub fn build(self) -> sp_io::TestExternalities {
		let mut storage = frame_system::GenesisConfig::<Test>::default().build_storage().unwrap();
		pallet_balances::GenesisConfig::<Test> {
			balances: (1..=200).map(|a| (a, INITIAL)).collect(),
			..Default::default()
		}
		.assimilate_storage(&mut storage)
		.unwrap();
		pallet_iota::GenesisConfig::<Test> {
			run_config: self.config,
			orchestrator: Some(ORCH),
			validators: self.validators,
		}
		.assimilate_storage(&mut storage)
		.unwrap();
		let mut ext = sp_io::TestExternalities::new(storage);
		let miners = self.miners;
		ext.execute_with(|| {
			System::set_block_number(1);
			for m in miners {
				Iota::register_miner(RuntimeOrigin::signed(m)).unwrap();
			}
		});
		ext
	}

	/// Build, run `test`, then check the pallet's invariants.
	pub fn build_and_execute(self, test: impl FnOnce()) {
		self.build().execute_with(|| {
			test();
			Iota::do_try_state().expect("pallet invariants hold");
		})
	}
}
