//! # pallet-iota
//!
//! The chain's record of a decentralized training run (docs/design.md §4): who mines which pipeline stage, which
//! phase each stage is in, which merged weights are canonical, what validators found, and who earned what.
//! Nothing large is stored: objects live in S3 and only their BLAKE3 hashes and keys come on chain.
//!
//! ## Terms
//! - **Stage**: a contiguous slice of the model's blocks; each miner holds one, assigned on registration to
//!   the emptiest stage (ties broken by chain randomness).
//! - **Epoch**: one optimizer step of the whole model. Each stage moves `Training → WeightsUploading →
//!   Merging → Training` on its own (never all at once); its epoch advances when the orchestrator commits its
//!   merge manifest. Epoch `e` of the run is *complete* once every stage has committed its merge for `e`.
//! - **Spot-check**: a validator's verdict on a miner's recomputed work. `Fail` verdicts from a quorum of
//!   validator stake slash the miner's whole bond.
//! - **Weights**: a validator's relative scores of miners for an epoch, committed as a hash during the
//!   scoring window (`commit_weights`) and revealed after it (`reveal_weights`), so no validator can copy
//!   another's vector ([`iota_primitives::weights`]). After the reveal window, `finalize_epoch` turns the
//!   revealed vectors into consensus scores (stake-weighted median) and an exact emission split
//!   ([`iota_primitives::epoch_rewards`]), and mints the payouts.
//!
//! ## Assumptions
//! - One orchestrator account (genesis or root) routes work; it is trusted to report progress and commit
//!   manifests, and everything it commits is recomputable from S3 and the primitives.
//! - The `Randomness` source decides stage ties and epoch seeds. A dev chain's block-hash randomness is
//!   biasable by the block author; a production runtime plugs in BABE's VRF randomness (docs/design.md §7).
//! - Bonds and stakes are balance holds (`fungible::MutateHold`); emission is minted (`fungible::Mutate`).
#![cfg_attr(not(feature = "std"), no_std)]
#![cfg_attr(test, allow(clippy::arithmetic_side_effects))]

extern crate alloc;

pub use pallet::*;

#[cfg(feature = "runtime-benchmarks")]
mod benchmarking;
#[cfg(test)]
mod mock;
#[cfg(test)]
mod tests;
pub mod types;
pub mod weights;

pub use types::*;
pub use weights::WeightInfo;

#[polkadot_sdk::frame_support::pallet]
pub mod pallet {
	use super::*;
	use alloc::{collections::BTreeMap, vec::Vec};
	use iota_primitives::{
		assign_stage, complete_merge, derive_seed, epoch_rewards, next_phase, shard_count,
		weights_commitment, weights_window, AssignError, PhaseRefusal, Seed, StageProgress,
		ValidatorVote, WeightsWindow, PPB,
	};
	use polkadot_sdk::{
		frame_support::{
			pallet_prelude::*,
			traits::{
				fungible::{Inspect, InspectHold, Mutate, MutateHold},
				tokens::{Fortitude, Precision},
				Randomness,
			},
		},
		frame_system::pallet_prelude::*,
		sp_runtime::traits::{Saturating, UniqueSaturatedInto, Zero},
	};

	/// Balance type of the configured currency.
	pub type BalanceOf<T> = <<T as Config>::Currency as Inspect<
		<T as polkadot_sdk::frame_system::Config>::AccountId,
	>>::Balance;
	/// The run config with this runtime's balance and block number types.
	pub type RunConfigOf<T> = RunConfig<BalanceOf<T>, BlockNumberFor<T>>;
	/// Miner record of this runtime.
	pub type MinerInfoOf<T> = MinerInfo<BalanceOf<T>, BlockNumberFor<T>>;
	/// Validator record of this runtime.
	pub type ValidatorInfoOf<T> = ValidatorInfo<BalanceOf<T>, BlockNumberFor<T>>;
	/// Bound on the shards of one merge: `n(n-1)/2` for `n = MaxMinersPerStage`.
	pub type MaxShardsOf<T> = MaxShardsFor<<T as Config>::MaxMinersPerStage>;
	/// Merge manifest of this runtime.
	pub type MergeManifestOf<T> = MergeManifest<MaxShardsOf<T>, <T as Config>::MaxKeyLen>;
	/// A validator's weight vector for one epoch: `(miner, weight)` pairs.
	pub type WeightsOf<T> = BoundedVec<
		(<T as polkadot_sdk::frame_system::Config>::AccountId, WeightValue),
		<T as Config>::MaxMiners,
	>;
	/// Emission split of this runtime.
	pub type EmissionSplitOf<T> = EmissionSplit<
		<T as polkadot_sdk::frame_system::Config>::AccountId,
		BalanceOf<T>,
		<T as Config>::MaxMiners,
		<T as Config>::MaxValidators,
	>;

	#[pallet::pallet]
	pub struct Pallet<T>(_);

	/// Configuration of the pallet.
	#[pallet::config]
	pub trait Config: polkadot_sdk::frame_system::Config<RuntimeEvent: From<Event<Self>>> {
		/// The currency bonds and stakes are held in and emission is minted in.
		type Currency: Mutate<Self::AccountId>
			+ MutateHold<Self::AccountId, Reason = Self::RuntimeHoldReason>
			+ InspectHold<Self::AccountId>;
		/// The runtime's hold reason, which includes this pallet's [`HoldReason`].
		type RuntimeHoldReason: From<HoldReason>;
		/// Source of the per-epoch seed and of stage tie-breaks (BABE VRF in production).
		type Randomness: Randomness<Self::Hash, BlockNumberFor<Self>>;
		/// Most pipeline stages a run may have.
		#[pallet::constant]
		type MaxStages: Get<u32>;
		/// Most miners one stage may hold (bounds the butterfly to `n(n-1)/2` shards).
		#[pallet::constant]
		type MaxMinersPerStage: Get<u32>;
		/// Most miner records (active, leaving or unbonding) at once; bounds weight vectors and payouts.
		#[pallet::constant]
		type MaxMiners: Get<u32>;
		/// Validator seats: most active validators at once (a registration beyond them replaces the
		/// one with the least stake); as many unbonding validator records may exist besides.
		#[pallet::constant]
		type MaxValidators: Get<u32>;
		/// Longest S3 key in a manifest, in bytes.
		#[pallet::constant]
		type MaxKeyLen: Get<u32>;
		/// Weights of this pallet's calls.
		type WeightInfo: WeightInfo;
	}

	/// Why this pallet holds funds.
	#[pallet::composite_enum]
	pub enum HoldReason {
		/// A miner's bond, slashed on proven fraud.
		MinerBond,
		/// A validator's stake.
		ValidatorStake,
	}

	/// The run's configuration (stages, quotas, timeouts, emission, bonds).
	#[pallet::storage]
	pub type RunConfiguration<T: Config> = StorageValue<_, RunConfigOf<T>, OptionQuery>;

	/// The account allowed to advance phases and commit merges.
	#[pallet::storage]
	pub type Orchestrator<T: Config> = StorageValue<_, T::AccountId, OptionQuery>;

	/// Miner records by account.
	#[pallet::storage]
	pub type Miners<T: Config> =
		CountedStorageMap<_, Blake2_128Concat, T::AccountId, MinerInfoOf<T>, OptionQuery>;

	/// Accounts holding each stage (active or leaving), in registration order; a member's position here is
	/// its index in the butterfly.
	#[pallet::storage]
	pub type StageMembers<T: Config> = StorageMap<
		_,
		Twox64Concat,
		StageId,
		BoundedVec<T::AccountId, T::MaxMinersPerStage>,
		ValueQuery,
	>;

	/// Validator records by account.
	#[pallet::storage]
	pub type Validators<T: Config> =
		CountedStorageMap<_, Blake2_128Concat, T::AccountId, ValidatorInfoOf<T>, OptionQuery>;

	/// Phase, epoch and phase start of each stage.
	#[pallet::storage]
	pub type Stages<T: Config> =
		StorageMap<_, Twox64Concat, StageId, StageState<BlockNumberFor<T>>, ValueQuery>;

	/// The seed of each epoch, drawn from `Randomness` when the first stage enters the epoch.
	#[pallet::storage]
	pub type EpochSeeds<T: Config> = StorageMap<_, Twox64Concat, Epoch, Seed, OptionQuery>;

	/// Block at which each epoch completed (every stage committed its merge).
	#[pallet::storage]
	pub type EpochCompletedAt<T: Config> =
		StorageMap<_, Twox64Concat, Epoch, BlockNumberFor<T>, OptionQuery>;

	/// The next epoch `finalize_epoch` will pay out.
	#[pallet::storage]
	pub type NextEpochToFinalize<T: Config> = StorageValue<_, Epoch, ValueQuery>;

	/// Canonical merge result per (epoch, stage).
	#[pallet::storage]
	pub type MergeManifests<T: Config> = StorageDoubleMap<
		_,
		Twox64Concat,
		Epoch,
		Twox64Concat,
		StageId,
		MergeManifestOf<T>,
		OptionQuery,
	>;

	/// Spot-check verdicts per (epoch, miner), one per validator.
	#[pallet::storage]
	pub type SpotChecks<T: Config> = StorageDoubleMap<
		_,
		Twox64Concat,
		Epoch,
		Blake2_128Concat,
		T::AccountId,
		BoundedVec<SpotCheck<T::AccountId>, T::MaxValidators>,
		ValueQuery,
	>;

	/// Commitments to weight vectors per (epoch, validator) ([`iota_primitives::weights_commitment`]),
	/// made during the epoch's scoring window and kept (like the rest of the per-epoch history): with
	/// [`Weights`] it tells who committed and who revealed.
	#[pallet::storage]
	pub type WeightCommits<T: Config> = StorageDoubleMap<
		_,
		Twox64Concat,
		Epoch,
		Blake2_128Concat,
		T::AccountId,
		ContentHash,
		OptionQuery,
	>;

	/// Revealed weight vectors per (epoch, validator): the only ones consensus and payouts read.
	#[pallet::storage]
	pub type Weights<T: Config> = StorageDoubleMap<
		_,
		Twox64Concat,
		Epoch,
		Blake2_128Concat,
		T::AccountId,
		WeightsOf<T>,
		OptionQuery,
	>;

	/// Consensus score per miner for each finalized epoch, in parts per billion (normalised with floor: the
	/// scores sum to between 10^9 minus the miner count and 10^9, or the list is empty).
	#[pallet::storage]
	pub type Scores<T: Config> = StorageMap<
		_,
		Twox64Concat,
		Epoch,
		BoundedVec<(T::AccountId, u32), T::MaxMiners>,
		OptionQuery,
	>;

	/// What each finalized epoch paid to whom.
	#[pallet::storage]
	pub type EmissionSplits<T: Config> =
		StorageMap<_, Twox64Concat, Epoch, EmissionSplitOf<T>, OptionQuery>;

	/// Bonds slashed per (epoch, miner).
	#[pallet::storage]
	pub type Slashes<T: Config> = StorageDoubleMap<
		_,
		Twox64Concat,
		Epoch,
		Blake2_128Concat,
		T::AccountId,
		BalanceOf<T>,
		OptionQuery,
	>;

	/// Everything this pallet has minted as emission (equals the sum of all `EmissionSplits`).
	#[pallet::storage]
	pub type TotalMinted<T: Config> = StorageValue<_, BalanceOf<T>, ValueQuery>;

	/// Genesis: run config, orchestrator and initial validators.
	#[pallet::genesis_config]
	#[derive(polkadot_sdk::frame_support::DefaultNoBound)]
	pub struct GenesisConfig<T: Config> {
		/// The run config; none leaves the run unconfigured until root sets one.
		pub run_config: Option<RunConfigOf<T>>,
		/// The orchestrator account.
		pub orchestrator: Option<T::AccountId>,
		/// Initial validators and their stakes (held from their genesis balances).
		pub validators: Vec<(T::AccountId, BalanceOf<T>)>,
	}

	#[pallet::genesis_build]
	impl<T: Config> BuildGenesisConfig for GenesisConfig<T> {
		fn build(&self) {
			if let Some(cfg) = &self.run_config {
				Pallet::<T>::ensure_valid_config(cfg).expect("genesis run config is invalid");
				RunConfiguration::<T>::put(cfg);
				EpochSeeds::<T>::insert(
					0,
					derive_seed("iota-rs epoch seed v1", &[0; 32], &cfg.encode()),
				);
			}
			if let Some(o) = &self.orchestrator {
				Orchestrator::<T>::put(o);
			}
			for (who, stake) in &self.validators {
				Pallet::<T>::do_register_validator(who, *stake)
					.expect("genesis validator cannot be registered");
			}
		}
	}

	/// Events of pallet-iota.
	#[pallet::event]
	#[pallet::generate_deposit(pub(super) fn deposit_event)]
	pub enum Event<T: Config> {
		/// A miner registered and holds `stage`.
		MinerRegistered { who: T::AccountId, stage: StageId, bond: BalanceOf<T> },
		/// A validator registered with `stake`.
		ValidatorRegistered { who: T::AccountId, stake: BalanceOf<T> },
		/// Every validator seat was taken: `who`, the active validator with the least stake, was
		/// replaced by `by`, which registered with more; `who` is unbonding.
		ValidatorReplaced { who: T::AccountId, by: T::AccountId },
		/// A miner without accepted work since epoch `last_scored` for `max_idle_epochs` finalized
		/// epochs was evicted: it is leaving `stage`, and unbonds at the stage's next merge.
		MinerEvicted { who: T::AccountId, stage: StageId, last_scored: Epoch },
		/// A miner asked to leave; it stays in `stage` until the stage's next merge.
		MinerLeaving { who: T::AccountId, stage: StageId },
		/// A miner or validator left its role; its funds can be withdrawn from block `until`.
		Unbonding { who: T::AccountId, until: BlockNumberFor<T> },
		/// An unbonded bond or stake was released.
		Withdrawn { who: T::AccountId, amount: BalanceOf<T> },
		/// A stage moved phase (`timed_out` when by the timeout fallback), with the orchestrator's report.
		PhaseAdvanced {
			stage: StageId,
			epoch: Epoch,
			from: Phase,
			to: Phase,
			timed_out: bool,
			report: StageReport,
		},
		/// A stage's merge for `epoch` was committed; the stage is now training epoch `epoch + 1`.
		MergeCommitted { stage: StageId, epoch: Epoch, shards: u32, state_hash: ContentHash },
		/// Every stage committed its merge for `epoch`; validators may score it until the window closes.
		EpochCompleted { epoch: Epoch },
		/// A validator recorded a verdict on a miner's work.
		SpotCheckSubmitted {
			epoch: Epoch,
			miner: T::AccountId,
			validator: T::AccountId,
			verdict: Verdict,
		},
		/// A quorum of validator stake found fraud: the miner's bond was burned and it lost its stage.
		MinerSlashed { who: T::AccountId, epoch: Epoch, amount: BalanceOf<T> },
		/// A validator committed (or replaced) the hash of its weights for `epoch`.
		WeightsCommitted { validator: T::AccountId, epoch: Epoch, commitment: ContentHash },
		/// A validator revealed its committed weights for `epoch`: `count` entries.
		WeightsRevealed { validator: T::AccountId, epoch: Epoch, count: u32 },
		/// An epoch was paid out: who got what (also kept in `EmissionSplits`) and the totals.
		EpochFinalized {
			epoch: Epoch,
			miners_paid: BalanceOf<T>,
			validators_paid: BalanceOf<T>,
			split: EmissionSplitOf<T>,
		},
		/// Root replaced the run config.
		RunConfigSet,
		/// Root set the orchestrator account.
		OrchestratorSet { who: T::AccountId },
	}

	/// Errors of pallet-iota, one per check.
	#[pallet::error]
	pub enum Error<T> {
		/// No run config has been set.
		NotConfigured,
		/// The origin is not the orchestrator account.
		NotOrchestrator,
		/// The account is already a miner or a validator.
		AlreadyRegistered,
		/// Every stage holds `MaxMinersPerStage` miners.
		AllStagesFull,
		/// `MaxMiners` miner records (or twice `MaxValidators` validator records: seats and unbonding)
		/// exist already.
		TooManyRecords,
		/// The bond or stake could not be held (free balance too low).
		InsufficientBalance,
		/// The validator stake is below the run config's minimum.
		StakeBelowMinimum,
		/// Every validator seat is taken and no active validator holds less stake than offered.
		StakeTooLowToReplace,
		/// The account is neither a miner nor a validator.
		NotRegistered,
		/// The account already left its role.
		AlreadyLeaving,
		/// The account is not unbonding.
		NotUnbonding,
		/// The unbonding period has not passed, or (for a miner) the last epoch it worked in is not finalized.
		StillUnbonding,
		/// The stage id is not below the run's stage count.
		UnknownStage,
		/// The epoch given is not the stage's current epoch.
		WrongEpoch,
		/// Training: fewer backward passes than the quota, and the phase has not timed out.
		QuotaNotReached,
		/// Training timed out without a backward pass.
		NoBackwardPasses,
		/// WeightsUploading: some miners have not uploaded, and the phase has not timed out.
		GradientsMissing,
		/// WeightsUploading timed out without a gradient, or the stage has no miners.
		NoGradients,
		/// Merging ends only by `commit_merge` (or by timeout).
		MergeNotCommitted,
		/// `commit_merge` outside the Merging phase.
		NotMerging,
		/// A manifest's member count is 0 or larger than a stage's seats (`MaxMinersPerStage`).
		InvalidMemberCount,
		/// A manifest's shard count is not `n(n-1)/2` for its member count.
		ShardCountMismatch,
		/// A manifest's vector has fewer elements than shards.
		ParamCountTooSmall,
		/// The account is not an active validator.
		NotValidator,
		/// The account is not a registered miner.
		UnknownMiner,
		/// The epoch has not started yet.
		EpochNotStarted,
		/// This validator already judged this miner in this epoch.
		DuplicateSpotCheck,
		/// The weights version key is older than the run config's.
		IncorrectVersionKey,
		/// The weight vector is empty.
		EmptyWeights,
		/// The weight vector names a miner twice.
		DuplicateMiner,
		/// Every weight is zero.
		AllWeightsZero,
		/// The validator replaced this epoch's commitment less than `weights_rate_limit` blocks after its
		/// last `commit_weights`.
		RateLimited,
		/// Weights may be committed and revealed only for a complete epoch that is not finalized.
		EpochNotScorable,
		/// The epoch's scoring window (its commit window) has closed: nothing can be committed any more.
		CommitWindowClosed,
		/// Reveals are accepted only in the reveal window, after the scoring window and before finalization.
		NotRevealWindow,
		/// This validator committed nothing for this epoch.
		NoCommitment,
		/// The revealed weights, salt, epoch and account do not hash to the commitment.
		CommitmentMismatch,
		/// This validator already revealed its weights for this epoch.
		AlreadyRevealed,
		/// Epochs are finalized in order; this is not the next one.
		EpochNotNext,
		/// Not every stage has committed its merge for this epoch.
		EpochNotComplete,
		/// The scoring or reveal window of this epoch is still open.
		ScoringWindowOpen,
		/// The run config fails validation (zero stages, quota, scoring or reveal window or idle epochs,
		/// shares above 100%, too many stages).
		InvalidRunConfig,
		/// The stage count cannot change while miners are registered or while the stages are at different
		/// epochs (in the middle of an epoch's merges).
		StagesInUse,
	}

	#[pallet::hooks]
	impl<T: Config> Hooks<BlockNumberFor<T>> for Pallet<T> {
		/// Deadlines on chain, so an orchestrator outage never stalls the chain's view of an epoch
		/// (docs/design.md §3): every stage that overran its phase deadline moves on by
		/// [`iota_primitives::next_phase`] with no reported work (the chain vouches for none: a merge
		/// that timed out restarts its round; Training and WeightsUploading wait for the orchestrator's
		/// report), and the next epoch to finalize is finalized once its scoring window has closed
		/// (`finalize_epoch` stays callable by anyone). Bounded: `stages` (at most `MaxStages`) stage
		/// reads and writes and at most one finalization per block.
		fn on_initialize(_n: BlockNumberFor<T>) -> Weight {
			Self::enforce_deadlines()
		}

		#[cfg(feature = "try-runtime")]
		fn try_state(
			_n: BlockNumberFor<T>,
		) -> Result<(), polkadot_sdk::sp_runtime::TryRuntimeError> {
			Self::do_try_state()
		}
	}

	#[pallet::call]
	impl<T: Config> Pallet<T> {
		/// Register the caller as a miner: holds the run config's bond and assigns the stage with the fewest
		/// miners (ties broken by chain randomness). Emits `MinerRegistered`.
		#[pallet::call_index(0)]
		#[pallet::weight(T::WeightInfo::register_miner(T::MaxStages::get()))]
		pub fn register_miner(origin: OriginFor<T>) -> DispatchResult {
			let who = ensure_signed(origin)?;
			let cfg = Self::config()?;
			Self::ensure_unregistered(&who)?;
			ensure!(Miners::<T>::count() < T::MaxMiners::get(), Error::<T>::TooManyRecords);
			let counts: Vec<u32> = (0..cfg.stages)
				.map(|s| StageMembers::<T>::decode_len(s).unwrap_or(0) as u32)
				.collect();
			let seed = Self::random_seed(b"iota-rs assign_stage", &who.encode());
			let stage =
				assign_stage(&counts, T::MaxMinersPerStage::get(), &seed).map_err(|e| match e {
					AssignError::AllStagesFull => Error::<T>::AllStagesFull,
					AssignError::NoStages => Error::<T>::NotConfigured,
				})?;
			T::Currency::hold(&HoldReason::MinerBond.into(), &who, cfg.miner_bond)
				.map_err(|_| Error::<T>::InsufficientBalance)?;
			StageMembers::<T>::try_mutate(stage, |m| m.try_push(who.clone()))
				.map_err(|_| Error::<T>::AllStagesFull)?;
			let now = Self::now();
			Miners::<T>::insert(
				&who,
				MinerInfo {
					stage,
					bond: cfg.miner_bond,
					status: MinerStatus::Active,
					registered_at: now,
					last_scored: Self::current_epoch(&cfg),
				},
			);
			Self::deposit_event(Event::MinerRegistered { who, stage, bond: cfg.miner_bond });
			Ok(())
		}

		/// Register the caller as a validator holding `stake` (at least the run config's minimum).
		/// When all `MaxValidators` seats are held by active validators, the caller must hold more
		/// stake than the smallest of them, which is replaced: it starts unbonding (its stake is
		/// released after the unbonding period, as if it had left). Emits `ValidatorReplaced` (then) and
		/// `ValidatorRegistered`.
		///
		/// Errors: `AlreadyRegistered`, `StakeBelowMinimum`, `StakeTooLowToReplace` (seats full and no
		/// active validator holds less), `TooManyRecords` (as many unbonding records as seats),
		/// `InsufficientBalance`.
		#[pallet::call_index(1)]
		#[pallet::weight(T::WeightInfo::register_validator(Pallet::<T>::max_validator_records()))]
		pub fn register_validator(origin: OriginFor<T>, stake: BalanceOf<T>) -> DispatchResult {
			let who = ensure_signed(origin)?;
			Self::do_register_validator(&who, stake)
		}

		/// Leave the caller's role. A miner stays in its stage until the stage's next merge commits the
		/// gradient it holds (never dropping unmerged work), then unbonds; a validator unbonds at once. Funds
		/// are released by `withdraw_unbonded` after the unbonding period.
		#[pallet::call_index(2)]
		#[pallet::weight(T::WeightInfo::deregister())]
		pub fn deregister(origin: OriginFor<T>) -> DispatchResult {
			let who = ensure_signed(origin)?;
			let cfg = Self::config()?;
			if let Some(mut miner) = Miners::<T>::get(&who) {
				ensure!(miner.status == MinerStatus::Active, Error::<T>::AlreadyLeaving);
				miner.status = MinerStatus::Leaving;
				let stage = miner.stage;
				Miners::<T>::insert(&who, miner);
				Self::deposit_event(Event::MinerLeaving { who, stage });
				return Ok(());
			}
			let mut validator = Validators::<T>::get(&who).ok_or(Error::<T>::NotRegistered)?;
			ensure!(validator.status == ValidatorStatus::Active, Error::<T>::AlreadyLeaving);
			let until = Self::now().saturating_add(cfg.unbonding_period);
			validator.status = ValidatorStatus::Unbonding { until };
			Validators::<T>::insert(&who, validator);
			Self::deposit_event(Event::Unbonding { who, until });
			Ok(())
		}

		/// Release the caller's bond or stake once its unbonding period has passed (and, for a miner, once
		/// the last epoch it worked in is finalized, so its work could be judged), and remove its record.
		#[pallet::call_index(3)]
		#[pallet::weight(T::WeightInfo::withdraw_unbonded())]
		pub fn withdraw_unbonded(origin: OriginFor<T>) -> DispatchResult {
			let who = ensure_signed(origin)?;
			let now = Self::now();
			let (reason, amount, until) = if let Some(m) = Miners::<T>::get(&who) {
				let MinerStatus::Unbonding { until, last_epoch } = m.status else {
					return Err(Error::<T>::NotUnbonding.into());
				};
				ensure!(NextEpochToFinalize::<T>::get() > last_epoch, Error::<T>::StillUnbonding);
				(HoldReason::MinerBond, m.bond, until)
			} else {
				let v = Validators::<T>::get(&who).ok_or(Error::<T>::NotRegistered)?;
				let ValidatorStatus::Unbonding { until } = v.status else {
					return Err(Error::<T>::NotUnbonding.into());
				};
				(HoldReason::ValidatorStake, v.stake, until)
			};
			ensure!(now >= until, Error::<T>::StillUnbonding);
			let released =
				T::Currency::release(&reason.into(), &who, amount, Precision::BestEffort)?;
			Miners::<T>::remove(&who);
			Validators::<T>::remove(&who);
			Self::deposit_event(Event::Withdrawn { who, amount: released });
			Ok(())
		}

		/// Orchestrator only: move `stage` (at `epoch`) to its next phase given the work `report`, by the
		/// rules of [`iota_primitives::next_phase`] (quota reached / all gradients uploaded / timeout
		/// fallback). Emits `PhaseAdvanced`.
		#[pallet::call_index(4)]
		#[pallet::weight(T::WeightInfo::advance_phase())]
		pub fn advance_phase(
			origin: OriginFor<T>,
			stage: StageId,
			epoch: Epoch,
			report: StageReport,
		) -> DispatchResult {
			Self::ensure_orchestrator(origin)?;
			let cfg = Self::config()?;
			ensure!(stage < cfg.stages, Error::<T>::UnknownStage);
			let state = Stages::<T>::get(stage);
			ensure!(state.epoch == epoch, Error::<T>::WrongEpoch);
			let now = Self::now();
			let progress = StageProgress {
				phase: state.phase,
				phase_since: state.phase_since.unique_saturated_into(),
				backward_quota: cfg.backward_quota,
				members: StageMembers::<T>::decode_len(stage).unwrap_or(0) as u32,
				report,
			};
			let t = next_phase(
				&progress,
				now.unique_saturated_into(),
				cfg.phase_timeout.unique_saturated_into(),
			)
			.map_err(Self::refusal)?;
			Self::apply_transition(stage, state, t, now, report);
			Ok(())
		}

		/// Orchestrator only: commit the merge of `stage` for `epoch` (the stage must be Merging). Charged
		/// at the worst case (a full stage). The manifest must have `n(n-1)/2` shards for its `n` members. The stage returns to Training at
		/// `epoch + 1`, miners that asked to leave start unbonding, and when this was the last stage to
		/// merge `epoch`, the epoch completes. Emits `MergeCommitted` (and `EpochCompleted`).
		#[pallet::call_index(5)]
		#[pallet::weight(T::WeightInfo::commit_merge(T::MaxMinersPerStage::get()))]
		pub fn commit_merge(
			origin: OriginFor<T>,
			stage: StageId,
			epoch: Epoch,
			manifest: MergeManifestOf<T>,
		) -> DispatchResult {
			Self::ensure_orchestrator(origin)?;
			let cfg = Self::config()?;
			ensure!(stage < cfg.stages, Error::<T>::UnknownStage);
			let mut state = Stages::<T>::get(stage);
			ensure!(state.epoch == epoch, Error::<T>::WrongEpoch);
			let next = complete_merge(state.phase).map_err(Self::refusal)?;
			let members = StageMembers::<T>::get(stage);
			// Bounded by the stage's seats, not by its members now: a member slashed while the round
			// merged was one of the round's members, and its submission is already in the merge the
			// replicas applied, so refusing the commit would leave the stage with no way forward.
			ensure!(
				manifest.members >= 1 && manifest.members <= T::MaxMinersPerStage::get(),
				Error::<T>::InvalidMemberCount
			);
			let k = shard_count(manifest.members).map_err(|_| Error::<T>::InvalidMemberCount)?;
			ensure!(manifest.shards.len() == k as usize, Error::<T>::ShardCountMismatch);
			ensure!(manifest.param_count >= u64::from(k), Error::<T>::ParamCountTooSmall);
			let new_epoch = epoch.checked_add(1).ok_or(Error::<T>::WrongEpoch)?;

			let now = Self::now();
			let until = now.saturating_add(cfg.unbonding_period);
			let mut staying = BoundedVec::<T::AccountId, T::MaxMinersPerStage>::new();
			for who in members {
				match Miners::<T>::get(&who) {
					Some(mut m) if m.status == MinerStatus::Leaving => {
						m.status = MinerStatus::Unbonding { until, last_epoch: epoch };
						Miners::<T>::insert(&who, m);
						Self::deposit_event(Event::Unbonding { who, until });
					},
					// Cannot overflow: `staying` is a subset of a vector with the same bound.
					_ => staying.try_push(who).map_err(|_| Error::<T>::AllStagesFull)?,
				}
			}
			StageMembers::<T>::insert(stage, staying);

			let state_hash = manifest.state_hash;
			MergeManifests::<T>::insert(epoch, stage, manifest);
			state.phase = next;
			state.epoch = new_epoch;
			state.phase_since = now;
			state.round = 0;
			Stages::<T>::insert(stage, state);
			if !EpochSeeds::<T>::contains_key(new_epoch) {
				let seed = Self::random_seed(b"iota-rs epoch seed", &new_epoch.encode());
				EpochSeeds::<T>::insert(new_epoch, seed);
			}
			Self::deposit_event(Event::MergeCommitted { stage, epoch, shards: k, state_hash });
			let all_merged = (0..cfg.stages).all(|s| Stages::<T>::get(s).epoch > epoch);
			if all_merged && !EpochCompletedAt::<T>::contains_key(epoch) {
				EpochCompletedAt::<T>::insert(epoch, now);
				Self::deposit_event(Event::EpochCompleted { epoch });
			}
			Ok(())
		}

		/// Active validator only: record a verdict on `miner`'s work in `epoch` with the hash of the
		/// evidence. When `Fail` verdicts reach the slash quorum of active validator stake, the miner's bond
		/// is burned and it loses its stage. Emits `SpotCheckSubmitted` (and `MinerSlashed`).
		#[pallet::call_index(6)]
		#[pallet::weight(T::WeightInfo::submit_spot_check(Pallet::<T>::max_validator_records()))]
		pub fn submit_spot_check(
			origin: OriginFor<T>,
			epoch: Epoch,
			miner: T::AccountId,
			verdict: Verdict,
			evidence: ContentHash,
		) -> DispatchResult {
			let validator = ensure_signed(origin)?;
			let cfg = Self::config()?;
			Self::ensure_active_validator(&validator)?;
			let info = Miners::<T>::get(&miner).ok_or(Error::<T>::UnknownMiner)?;
			ensure!(epoch <= Self::current_epoch(&cfg), Error::<T>::EpochNotStarted);
			let checks = SpotChecks::<T>::try_mutate(epoch, &miner, |checks| {
				ensure!(
					!checks.iter().any(|c| c.validator == validator),
					Error::<T>::DuplicateSpotCheck
				);
				checks
					.try_push(SpotCheck { validator: validator.clone(), verdict, evidence })
					.map_err(|_| Error::<T>::TooManyRecords)?;
				Ok::<_, Error<T>>(checks.clone())
			})?;
			Self::deposit_event(Event::SpotCheckSubmitted {
				epoch,
				miner: miner.clone(),
				validator,
				verdict,
			});

			if verdict == Verdict::Fail {
				let (mut failing, mut total) = (0u128, 0u128);
				for (who, v) in Validators::<T>::iter() {
					if v.status == ValidatorStatus::Active {
						let stake: u128 = v.stake.unique_saturated_into();
						total = total.saturating_add(stake);
						if checks.iter().any(|c| c.validator == who && c.verdict == Verdict::Fail) {
							failing = failing.saturating_add(stake);
						}
					}
				}
				// failing / total ≥ quorum, exactly: floor(failing·PPB / total) ≥ quorum_ppb for an integer
				// quorum. A fraud already punished for this epoch is not slashed again (a miner that
				// registered anew keeps its new bond).
				let reached =
					iota_primitives::slash_quorum_reached(failing, total, cfg.slash_quorum_ppb);
				if reached && !Slashes::<T>::contains_key(epoch, &miner) {
					Self::slash(&miner, &info, epoch)?;
				}
			}
			Ok(())
		}

		/// Active validator only: commit to the caller's weights for a complete `epoch` while its scoring
		/// window is open and it is not finalized: `commitment` is
		/// [`iota_primitives::weights_commitment`]`(epoch, caller, weights, salt)`, revealed later by
		/// `reveal_weights`. Replaces the caller's earlier commitment for that epoch; the rate limit
		/// (`weights_rate_limit` blocks since the caller's last commit) applies to a replacement only, so a
		/// validator's first commitment for an epoch is always taken and epochs that complete faster than
		/// the limit cannot starve each other. Emits `WeightsCommitted`.
		///
		/// Errors: `NotValidator`, `EpochNotScorable` (not complete, or finalized), `CommitWindowClosed`
		/// (the scoring window has passed: reveals may have started), `RateLimited`.
		#[pallet::call_index(7)]
		#[pallet::weight(T::WeightInfo::commit_weights())]
		pub fn commit_weights(
			origin: OriginFor<T>,
			epoch: Epoch,
			commitment: ContentHash,
		) -> DispatchResult {
			let who = ensure_signed(origin)?;
			let cfg = Self::config()?;
			let mut validator = Self::ensure_active_validator(&who)?;
			let completed_at = EpochCompletedAt::<T>::get(epoch)
				.filter(|_| epoch >= NextEpochToFinalize::<T>::get())
				.ok_or(Error::<T>::EpochNotScorable)?;
			let now = Self::now();
			ensure!(
				Self::weights_window_of(&cfg, completed_at, now) == WeightsWindow::Commit,
				Error::<T>::CommitWindowClosed
			);
			if let (true, Some(last)) =
				(WeightCommits::<T>::contains_key(epoch, &who), validator.last_weights_at)
			{
				ensure!(
					now >= last.saturating_add(cfg.weights_rate_limit),
					Error::<T>::RateLimited
				);
			}
			validator.last_weights_at = Some(now);
			Validators::<T>::insert(&who, validator);
			WeightCommits::<T>::insert(epoch, &who, commitment);
			Self::deposit_event(Event::WeightsCommitted { validator: who, epoch, commitment });
			Ok(())
		}

		/// Active validator only: reveal the weights the caller committed for `epoch`, during its reveal
		/// window (the `reveal_window` blocks after the scoring window). The vector must hash with `salt`
		/// to the commitment ([`iota_primitives::weights_commitment`]) and pass subtensor's checks: version
		/// key, non-empty, no duplicates, not all zero. Entries for accounts that are not (or no longer)
		/// registered miners are kept but read as nothing at finalization: a miner slashed between the
		/// commit and the reveal must not void the vector. Only revealed vectors count for consensus and
		/// the validators' share. Emits `WeightsRevealed`.
		///
		/// Errors: `NotValidator`, `EpochNotScorable`, `NotRevealWindow`, `AlreadyRevealed`,
		/// `NoCommitment`, `CommitmentMismatch`, `IncorrectVersionKey`, `EmptyWeights`, `DuplicateMiner`,
		/// `AllWeightsZero`.
		#[pallet::call_index(11)]
		#[pallet::weight(T::WeightInfo::reveal_weights(weights.len() as u32))]
		pub fn reveal_weights(
			origin: OriginFor<T>,
			epoch: Epoch,
			weights: WeightsOf<T>,
			salt: [u8; 32],
			version_key: u64,
		) -> DispatchResult {
			let who = ensure_signed(origin)?;
			let cfg = Self::config()?;
			Self::ensure_active_validator(&who)?;
			let completed_at = EpochCompletedAt::<T>::get(epoch)
				.filter(|_| epoch >= NextEpochToFinalize::<T>::get())
				.ok_or(Error::<T>::EpochNotScorable)?;
			ensure!(
				Self::weights_window_of(&cfg, completed_at, Self::now()) == WeightsWindow::Reveal,
				Error::<T>::NotRevealWindow
			);
			ensure!(!Weights::<T>::contains_key(epoch, &who), Error::<T>::AlreadyRevealed);
			let commitment =
				WeightCommits::<T>::get(epoch, &who).ok_or(Error::<T>::NoCommitment)?;
			ensure!(
				weights_commitment(epoch, &who, &weights[..], &salt) == commitment,
				Error::<T>::CommitmentMismatch
			);
			ensure!(version_key >= cfg.weights_version, Error::<T>::IncorrectVersionKey);
			ensure!(!weights.is_empty(), Error::<T>::EmptyWeights);
			let mut seen = BTreeMap::new();
			for (miner, _) in weights.iter() {
				ensure!(seen.insert(miner, ()).is_none(), Error::<T>::DuplicateMiner);
			}
			ensure!(weights.iter().any(|(_, w)| *w > 0), Error::<T>::AllWeightsZero);
			let count = weights.len() as u32;
			Weights::<T>::insert(epoch, &who, weights);
			Self::deposit_event(Event::WeightsRevealed { validator: who, epoch, count });
			Ok(())
		}

		/// Anyone: pay out the next complete epoch once its scoring and reveal windows have passed. Computes
		/// consensus scores and the exact split of the epoch's emission from the active validators' revealed
		/// weights ([`iota_primitives::epoch_rewards`]; miners and voters in account order), mints the
		/// payouts and records them; a commitment never revealed earns nothing. A payout that cannot be minted counts as unallocated. Emits `EpochFinalized`.
		#[pallet::call_index(8)]
		#[pallet::weight(T::WeightInfo::finalize_epoch(
			T::MaxMiners::get(),
			Pallet::<T>::max_validator_records()
		))]
		pub fn finalize_epoch(origin: OriginFor<T>, epoch: Epoch) -> DispatchResult {
			ensure_signed(origin)?;
			let cfg = Self::config()?;
			Self::do_finalize_epoch(&cfg, epoch)
		}

		/// Root only: replace the run config. The stage count can change only with no miners registered and
		/// every stage at the same epoch; added stages start Training at that epoch.
		/// Emits `RunConfigSet`.
		#[pallet::call_index(9)]
		#[pallet::weight(T::WeightInfo::set_run_config())]
		pub fn set_run_config(origin: OriginFor<T>, config: RunConfigOf<T>) -> DispatchResult {
			ensure_root(origin)?;
			Self::ensure_valid_config(&config)?;
			if let Some(old) = RunConfiguration::<T>::get() {
				if old.stages != config.stages {
					// Only between epochs: a dropped stage that had not merged the current epoch would
					// leave it incomplete forever, and epochs are finalized in order.
					ensure!(Miners::<T>::count() == 0, Error::<T>::StagesInUse);
					let epoch = Stages::<T>::get(0).epoch;
					ensure!(
						(1..old.stages).all(|s| Stages::<T>::get(s).epoch == epoch),
						Error::<T>::StagesInUse
					);
					// Added stages join at the run's epoch, in Training.
					let now = Self::now();
					for s in old.stages..config.stages {
						let state = StageState {
							phase: Phase::Training,
							epoch,
							phase_since: now,
							round: 0,
						};
						Stages::<T>::insert(s, state);
					}
				}
			}
			if !EpochSeeds::<T>::contains_key(0) {
				EpochSeeds::<T>::insert(
					0,
					derive_seed("iota-rs epoch seed v1", &[0; 32], &config.encode()),
				);
			}
			RunConfiguration::<T>::put(config);
			Self::deposit_event(Event::RunConfigSet);
			Ok(())
		}

		/// Root only: set the orchestrator account. Emits `OrchestratorSet`.
		#[pallet::call_index(10)]
		#[pallet::weight(T::WeightInfo::set_orchestrator())]
		pub fn set_orchestrator(origin: OriginFor<T>, who: T::AccountId) -> DispatchResult {
			ensure_root(origin)?;
			Orchestrator::<T>::put(&who);
			Self::deposit_event(Event::OrchestratorSet { who });
			Ok(())
		}
	}

	impl<T: Config> Pallet<T> {
		/// The run config, or `NotConfigured`.
		/// `finalize_epoch`'s work (the call and the `on_initialize` deadline share it): consensus over
		/// the active validators' weights, the exact split, payouts minted, `Scores` and
		/// `EmissionSplits` written, `NextEpochToFinalize` advanced.
		///
		/// Errors: `EpochNotNext`, `EpochNotComplete`, `ScoringWindowOpen`, `TooManyRecords`.
		fn do_finalize_epoch(cfg: &RunConfigOf<T>, epoch: Epoch) -> DispatchResult {
			ensure!(epoch == NextEpochToFinalize::<T>::get(), Error::<T>::EpochNotNext);
			let completed_at =
				EpochCompletedAt::<T>::get(epoch).ok_or(Error::<T>::EpochNotComplete)?;
			ensure!(
				Self::weights_window_of(cfg, completed_at, Self::now()) == WeightsWindow::Closed,
				Error::<T>::ScoringWindowOpen
			);
			let next = epoch.checked_add(1).ok_or(Error::<T>::EpochNotNext)?;

			let mut miners: Vec<T::AccountId> = Miners::<T>::iter_keys().collect();
			miners.sort();
			let index: BTreeMap<&T::AccountId, usize> =
				miners.iter().enumerate().map(|(i, m)| (m, i)).collect();
			// Only the current active validators vote (at most twice `MaxValidators` reads): vectors left by
			// validators that have since withdrawn stay in storage but are never read.
			let mut voters: Vec<(T::AccountId, ValidatorVote)> = Validators::<T>::iter()
				.filter(|(_, v)| v.status == ValidatorStatus::Active)
				.filter_map(|(validator, info)| {
					let weights = Weights::<T>::get(epoch, &validator)?;
					let mut dense = alloc::vec![0u128; miners.len()];
					for (miner, w) in weights.iter() {
						if let Some(&i) = index.get(miner) {
							dense[i] = u128::from(*w);
						}
					}
					Some((
						validator,
						ValidatorVote { stake: info.stake.unique_saturated_into(), weights: dense },
					))
				})
				.collect();
			voters.sort_by(|a, b| a.0.cmp(&b.0));
			let votes: Vec<ValidatorVote> = voters.iter().map(|(_, v)| v.clone()).collect();
			let pool: u128 = cfg.emission_per_epoch.unique_saturated_into();
			let rewards = epoch_rewards(pool, cfg.validator_share_ppb, miners.len(), &votes);
			// Accepted work, and eviction of idle miners; an epoch nobody scored judges nobody idle.
			if rewards.consensus.iter().any(|&s| s > 0) {
				for (miner, &score) in miners.iter().zip(&rewards.consensus) {
					Self::note_work(cfg, miner, epoch, score > 0);
				}
			}

			let mut split = EmissionSplitOf::<T> {
				miners: BoundedVec::new(),
				validators: BoundedVec::new(),
				unallocated: rewards.unallocated.unique_saturated_into(),
			};
			let mut scores = BoundedVec::<(T::AccountId, u32), T::MaxMiners>::new();
			for (miner, &score) in miners.iter().zip(&rewards.consensus) {
				if score > 0 {
					scores
						.try_push((miner.clone(), score))
						.map_err(|_| Error::<T>::TooManyRecords)?;
				}
			}
			let mut miners_paid = BalanceOf::<T>::zero();
			for (miner, &amount) in miners.iter().zip(&rewards.miner_payouts) {
				if let Some(paid) = Self::mint_payout(miner, amount, &mut split.unallocated) {
					miners_paid = miners_paid.saturating_add(paid);
					split
						.miners
						.try_push((miner.clone(), paid))
						.map_err(|_| Error::<T>::TooManyRecords)?;
				}
			}
			let mut validators_paid = BalanceOf::<T>::zero();
			for ((validator, _), &amount) in voters.iter().zip(&rewards.validator_payouts) {
				if let Some(paid) = Self::mint_payout(validator, amount, &mut split.unallocated) {
					validators_paid = validators_paid.saturating_add(paid);
					split
						.validators
						.try_push((validator.clone(), paid))
						.map_err(|_| Error::<T>::TooManyRecords)?;
				}
			}
			TotalMinted::<T>::mutate(|t| {
				*t = t.saturating_add(miners_paid).saturating_add(validators_paid)
			});
			Scores::<T>::insert(epoch, scores);
			EmissionSplits::<T>::insert(epoch, split.clone());
			NextEpochToFinalize::<T>::put(next);
			Self::deposit_event(Event::EpochFinalized {
				epoch,
				miners_paid,
				validators_paid,
				split,
			});
			Ok(())
		}

		/// Moves `stage` (in `state`) by the transition `t` at block `now`: leaving Merging starts the
		/// next merge round; writes the stage and emits `PhaseAdvanced` with `report`. The one place
		/// `advance_phase` and the `on_initialize` deadlines change a phase.
		fn apply_transition(
			stage: StageId,
			mut state: StageState<BlockNumberFor<T>>,
			t: iota_primitives::Transition,
			now: BlockNumberFor<T>,
			report: StageReport,
		) {
			let from = state.phase;
			if from == Phase::Merging {
				state.round = state.round.saturating_add(1);
			}
			state.phase = t.to;
			state.phase_since = now;
			let epoch = state.epoch;
			Stages::<T>::insert(stage, state);
			Self::deposit_event(Event::PhaseAdvanced {
				stage,
				epoch,
				from,
				to: t.to,
				timed_out: t.timed_out,
				report,
			});
		}

		/// What `on_initialize`'s deadline scan over `stages` stages is charged (a finalization on top is
		/// charged as `finalize_epoch`): the `on_initialize_deadlines` benchmark's worst case, every stage
		/// overran a merge and restarts its round, with the finalization check's reads.
		pub fn deadlines_weight(stages: u32) -> Weight {
			T::WeightInfo::on_initialize_deadlines(stages)
		}

		/// The `on_initialize` deadlines (see the hook's docs); returns the weight used.
		pub(crate) fn enforce_deadlines() -> Weight {
			let Some(cfg) = RunConfiguration::<T>::get() else {
				return T::DbWeight::get().reads(1);
			};
			let now = Self::now();
			for stage in 0..cfg.stages {
				let state = Stages::<T>::get(stage);
				if now < state.phase_since.saturating_add(cfg.phase_timeout) {
					continue;
				}
				let progress = StageProgress {
					phase: state.phase,
					phase_since: state.phase_since.unique_saturated_into(),
					backward_quota: cfg.backward_quota,
					members: StageMembers::<T>::decode_len(stage).unwrap_or(0) as u32,
					report: StageReport::default(),
				};
				let Ok(t) = next_phase(
					&progress,
					now.unique_saturated_into(),
					cfg.phase_timeout.unique_saturated_into(),
				) else {
					continue;
				};
				Self::apply_transition(stage, state, t, now, StageReport::default());
			}
			let mut weight = Self::deadlines_weight(u32::from(cfg.stages));
			let next = NextEpochToFinalize::<T>::get();
			if let Some(at) = EpochCompletedAt::<T>::get(next) {
				if Self::weights_window_of(&cfg, at, now) == WeightsWindow::Closed {
					// All or nothing: a refusal half-way (`TooManyRecords`) must not leave payouts
					// without their record; the epoch then waits for a `finalize_epoch` call.
					let _ = polkadot_sdk::frame_support::storage::with_storage_layer(|| {
						Self::do_finalize_epoch(&cfg, next)
					});
					weight = weight.saturating_add(T::WeightInfo::finalize_epoch(
						Miners::<T>::count(),
						Validators::<T>::count(),
					));
				}
			}
			weight
		}

		pub fn config() -> Result<RunConfigOf<T>, Error<T>> {
			RunConfiguration::<T>::get().ok_or(Error::<T>::NotConfigured)
		}

		/// The most advanced stage epoch: the newest epoch in which any work can exist.
		pub fn current_epoch(cfg: &RunConfigOf<T>) -> Epoch {
			(0..cfg.stages).map(|s| Stages::<T>::get(s).epoch).max().unwrap_or(0)
		}

		/// The seed of `epoch`, if the epoch has started.
		pub fn epoch_seed(epoch: Epoch) -> Option<Seed> {
			EpochSeeds::<T>::get(epoch)
		}

		/// [`iota_primitives::weights_window`] of an epoch completed at `completed_at`, at `now`, under `cfg`.
		fn weights_window_of(
			cfg: &RunConfigOf<T>,
			completed_at: BlockNumberFor<T>,
			now: BlockNumberFor<T>,
		) -> WeightsWindow {
			weights_window(
				completed_at.unique_saturated_into(),
				cfg.scoring_window.unique_saturated_into(),
				cfg.reveal_window.unique_saturated_into(),
				now.unique_saturated_into(),
			)
		}

		fn now() -> BlockNumberFor<T> {
			polkadot_sdk::frame_system::Pallet::<T>::block_number()
		}

		fn random_seed(domain: &[u8], context: &[u8]) -> Seed {
			let (output, _) = T::Randomness::random(&(domain, context).encode());
			derive_seed("iota-rs chain randomness v1", &[0; 32], &output.encode())
		}

		fn ensure_orchestrator(origin: OriginFor<T>) -> DispatchResult {
			let who = ensure_signed(origin)?;
			ensure!(Orchestrator::<T>::get().as_ref() == Some(&who), Error::<T>::NotOrchestrator);
			Ok(())
		}

		fn ensure_unregistered(who: &T::AccountId) -> DispatchResult {
			ensure!(
				!Miners::<T>::contains_key(who) && !Validators::<T>::contains_key(who),
				Error::<T>::AlreadyRegistered
			);
			Ok(())
		}

		fn ensure_active_validator(who: &T::AccountId) -> Result<ValidatorInfoOf<T>, Error<T>> {
			Validators::<T>::get(who)
				.filter(|v| v.status == ValidatorStatus::Active)
				.ok_or(Error::<T>::NotValidator)
		}

		/// Validate a run config against this runtime's bounds.
		pub fn ensure_valid_config(cfg: &RunConfigOf<T>) -> Result<(), Error<T>> {
			ensure!(
				cfg.stages >= 1
					&& u32::from(cfg.stages) <= T::MaxStages::get()
					&& cfg.backward_quota >= 1
					&& cfg.bottleneck_width >= 1
					&& !cfg.scoring_window.is_zero()
					&& !cfg.reveal_window.is_zero()
					&& cfg.max_idle_epochs >= 1
					&& cfg.validator_share_ppb <= PPB
					&& cfg.slash_quorum_ppb >= 1
					&& cfg.slash_quorum_ppb <= PPB,
				Error::<T>::InvalidRunConfig
			);
			Ok(())
		}

		/// Records whether `who` did accepted work (`scored`) in the finalized `epoch`; an active miner
		/// idle for `max_idle_epochs` epochs since its last score (or registration) starts leaving.
		fn note_work(cfg: &RunConfigOf<T>, who: &T::AccountId, epoch: Epoch, scored: bool) {
			let Some(mut m) = Miners::<T>::get(who) else { return };
			if scored {
				if m.last_scored < epoch {
					m.last_scored = epoch;
					Miners::<T>::insert(who, m);
				}
			} else if m.status == MinerStatus::Active
				&& epoch >= m.last_scored.saturating_add(cfg.max_idle_epochs)
			{
				m.status = MinerStatus::Leaving;
				let (stage, last_scored) = (m.stage, m.last_scored);
				Miners::<T>::insert(who, m);
				Self::deposit_event(Event::MinerEvicted { who: who.clone(), stage, last_scored });
			}
		}

		/// Most validator records at once: `MaxValidators` seats (active validators) and as many
		/// unbonding records (left or replaced, until withdrawn).
		pub fn max_validator_records() -> u32 {
			T::MaxValidators::get().saturating_mul(2)
		}

		/// Register a validator (call and genesis): takes a free seat, or replaces the active validator
		/// with the least stake (ties: the highest account id) when the caller holds more.
		pub(crate) fn do_register_validator(
			who: &T::AccountId,
			stake: BalanceOf<T>,
		) -> DispatchResult {
			let cfg = Self::config()?;
			Self::ensure_unregistered(who)?;
			ensure!(stake >= cfg.min_validator_stake, Error::<T>::StakeBelowMinimum);
			ensure!(
				Validators::<T>::count() < Self::max_validator_records(),
				Error::<T>::TooManyRecords
			);
			let mut active = 0u32;
			let mut weakest: Option<(T::AccountId, ValidatorInfoOf<T>)> = None;
			for (v, info) in Validators::<T>::iter() {
				if info.status != ValidatorStatus::Active {
					continue;
				}
				active = active.saturating_add(1);
				let weaker = weakest.as_ref().is_none_or(|(w, wi)| {
					info.stake < wi.stake || (info.stake == wi.stake && v > *w)
				});
				if weaker {
					weakest = Some((v, info));
				}
			}
			let replaced = match weakest {
				Some((w, mut info)) if active >= T::MaxValidators::get() => {
					ensure!(stake > info.stake, Error::<T>::StakeTooLowToReplace);
					let until = Self::now().saturating_add(cfg.unbonding_period);
					info.status = ValidatorStatus::Unbonding { until };
					Some((w, info, until))
				},
				_ => None,
			};
			T::Currency::hold(&HoldReason::ValidatorStake.into(), who, stake)
				.map_err(|_| Error::<T>::InsufficientBalance)?;
			if let Some((w, info, until)) = replaced {
				Validators::<T>::insert(&w, info);
				Self::deposit_event(Event::ValidatorReplaced { who: w.clone(), by: who.clone() });
				Self::deposit_event(Event::Unbonding { who: w, until });
			}
			Validators::<T>::insert(
				who,
				ValidatorInfo { stake, status: ValidatorStatus::Active, last_weights_at: None },
			);
			Self::deposit_event(Event::ValidatorRegistered { who: who.clone(), stake });
			Ok(())
		}

		fn refusal(r: PhaseRefusal) -> Error<T> {
			match r {
				PhaseRefusal::QuotaNotReached { .. } => Error::<T>::QuotaNotReached,
				PhaseRefusal::NoBackwardPasses => Error::<T>::NoBackwardPasses,
				PhaseRefusal::GradientsMissing { .. } => Error::<T>::GradientsMissing,
				PhaseRefusal::NoGradients => Error::<T>::NoGradients,
				PhaseRefusal::MergeNotCommitted => Error::<T>::MergeNotCommitted,
				PhaseRefusal::NotMerging => Error::<T>::NotMerging,
			}
		}

		/// Burn a miner's bond, remove it from its stage and its record.
		fn slash(who: &T::AccountId, info: &MinerInfoOf<T>, epoch: Epoch) -> DispatchResult {
			let burned = T::Currency::burn_held(
				&HoldReason::MinerBond.into(),
				who,
				info.bond,
				Precision::BestEffort,
				Fortitude::Force,
			)?;
			StageMembers::<T>::mutate(info.stage, |m| m.retain(|x| x != who));
			Miners::<T>::remove(who);
			Slashes::<T>::insert(epoch, who, burned);
			Self::deposit_event(Event::MinerSlashed { who: who.clone(), epoch, amount: burned });
			Ok(())
		}

		/// Mint `amount` to `who`; what cannot be minted is added to `unallocated`. Returns the amount
		/// minted when it is not zero.
		fn mint_payout(
			who: &T::AccountId,
			amount: u128,
			unallocated: &mut BalanceOf<T>,
		) -> Option<BalanceOf<T>> {
			let amount: BalanceOf<T> = amount.unique_saturated_into();
			if amount.is_zero() {
				return None;
			}
			match T::Currency::mint_into(who, amount) {
				Ok(paid) => Some(paid),
				Err(_) => {
					*unallocated = unallocated.saturating_add(amount);
					None
				},
			}
		}

		/// Invariants, checked by `try_state` and after every unit test:
		/// - the sum of all recorded emission splits equals `TotalMinted`;
		/// - stage membership and miner records agree (every member has a record for that stage with status
		///   Active or Leaving, no account twice, no members beyond the stage count, and every Active or
		///   Leaving miner is a member);
		/// - every miner's and validator's held balance equals its recorded bond or stake;
		/// - every revealed weight vector has its commitment;
		/// - record counts stay within their bounds, and active validators within the seats.
		#[cfg(any(feature = "try-runtime", test))]
		pub fn do_try_state() -> Result<(), polkadot_sdk::sp_runtime::TryRuntimeError> {
			let paid = EmissionSplits::<T>::iter_values().fold(BalanceOf::<T>::zero(), |acc, s| {
				s.miners
					.iter()
					.chain(s.validators.iter())
					.fold(acc, |a, (_, b)| a.saturating_add(*b))
			});
			ensure!(paid == TotalMinted::<T>::get(), "emission paid differs from TotalMinted");

			let stages = RunConfiguration::<T>::get().map(|c| c.stages).unwrap_or(0);
			let mut members_total = 0usize;
			let mut seen = alloc::collections::BTreeSet::new();
			for (stage, members) in StageMembers::<T>::iter() {
				ensure!(stage < stages || members.is_empty(), "members beyond the stage count");
				for who in members.iter() {
					ensure!(seen.insert(who.clone()), "an account holds two stage seats");
					let m = Miners::<T>::get(who).ok_or("stage member without a miner record")?;
					ensure!(m.stage == stage, "miner record names another stage");
					ensure!(
						matches!(m.status, MinerStatus::Active | MinerStatus::Leaving),
						"unbonding miner still holds a stage seat"
					);
				}
				members_total = members_total.saturating_add(members.len());
			}
			let seated = Miners::<T>::iter_values()
				.filter(|m| matches!(m.status, MinerStatus::Active | MinerStatus::Leaving))
				.count();
			ensure!(seated == members_total, "an active miner has no stage seat");

			for (who, m) in Miners::<T>::iter() {
				let held = T::Currency::balance_on_hold(&HoldReason::MinerBond.into(), &who);
				ensure!(held == m.bond, "miner hold differs from its bond");
			}
			for (who, v) in Validators::<T>::iter() {
				let held = T::Currency::balance_on_hold(&HoldReason::ValidatorStake.into(), &who);
				ensure!(held == v.stake, "validator hold differs from its stake");
			}
			for (epoch, who) in Weights::<T>::iter_keys() {
				ensure!(
					WeightCommits::<T>::contains_key(epoch, &who),
					"a revealed vector without a commitment"
				);
			}
			ensure!(Miners::<T>::count() <= T::MaxMiners::get(), "too many miner records");
			ensure!(
				Validators::<T>::count() <= Self::max_validator_records(),
				"too many validator records"
			);
			let active = Validators::<T>::iter_values()
				.filter(|v| v.status == ValidatorStatus::Active)
				.count();
			ensure!(
				active <= T::MaxValidators::get() as usize,
				"more active validators than seats"
			);
			Ok(())
		}
	}
}
