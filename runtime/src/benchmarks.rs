//! The pallets whose benchmarks `iota-node benchmark pallet` can run.

polkadot_sdk::frame_benchmarking::define_benchmarks!(
	[frame_benchmarking, BaselineBench::<Runtime>]
	[frame_system, SystemBench::<Runtime>]
	[pallet_balances, Balances]
	[pallet_timestamp, Timestamp]
	[pallet_sudo, Sudo]
	[pallet_utility, Utility]
	[pallet_iota, Iota]
);
