//! [`IotaClient`]: typed calls, storage queries and block events of pallet-iota.
//!
//! Two ways to wait for an extrinsic ([`Wait`]): best-block inclusion (about one block) on a daemon's
//! work path, finality (GRANDPA, a few blocks more) where money or a restart depends on it. Nonces are
//! counted per signing key in the client (resynced from the node's pool on an error), so a second
//! extrinsic never waits for the first one's finality to get its nonce (docs/design.md §3).

use crate::{
	runtime::{self, runtime_types::sp_runtime::DispatchError as RuntimeDispatchError},
	AccountId, Balance, BlockHash, BlockNumber, BoundedVec, ChainConfig, ContentHash,
	EmissionSplit, Epoch, Error, IotaEvent, MergeManifest, MinerInfo, NotIncluded, RunConfig,
	Signer, SpotCheck, StageId, StageReport, StageState, ValidatorInfo, Verdict,
};
use std::{collections::HashMap, sync::Arc};

use futures_util::{Stream, StreamExt};
use subxt::{
	backend::{legacy::LegacyRpcMethods, rpc::RpcClient},
	config::DefaultExtrinsicParamsBuilder,
	storage::{Address, Storage},
	tx::TxStatus,
	utils::Yes,
	OnlineClient,
};

/// How long a submission waits before it returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
	/// Until the extrinsic is in a best block (about one block time; a reorg may still retract it, and the
	/// node's pool then includes it again). For a daemon's work path: phase changes, commits, verdicts.
	InBlock,
	/// Until a block holding the extrinsic is finalized (GRANDPA; a few blocks after inclusion). For
	/// registration, payouts and anything a restart must find on chain.
	Finalized,
}

/// A pallet-iota extrinsic that made it into a block without a dispatch error.
#[derive(Debug, Clone)]
pub struct Included {
	/// The block that holds the extrinsic: a best block for [`Wait::InBlock`], a finalized one for
	/// [`Wait::Finalized`].
	pub block_hash: BlockHash,
	/// That block's number.
	pub block_number: BlockNumber,
	/// The extrinsic's hash.
	pub extrinsic_hash: BlockHash,
	/// The pallet-iota events the extrinsic emitted, in order (every call's, for a batch).
	pub events: Vec<IotaEvent>,
}

/// An extrinsic the node's pool accepted and that no block holds yet ([`IotaClient::submit_calls_pooled`]).
pub struct Pending {
	client: IotaClient,
	account: AccountId,
	progress: subxt::tx::TxProgress<ChainConfig, OnlineClient<ChainConfig>>,
}

impl Pending {
	/// The extrinsic's hash.
	pub fn extrinsic_hash(&self) -> BlockHash {
		self.progress.extrinsic_hash()
	}

	/// Waits as `wait` says; a failed dispatch (also one inside `sudo`) becomes an [`Error::Pallet`] or
	/// [`Error::Dispatch`]. A retraction from the best chain (`NoLongerInBestBlock`) waits for the
	/// extrinsic's next inclusion.
	///
	/// # Errors
	/// The dispatch failed ([`Error::Pallet`], [`Error::Dispatch`]: nothing of a batch applied); the
	/// extrinsic became invalid, was dropped, or the status subscription closed
	/// ([`Error::NotIncluded`]; the key's nonce counter is resynced, so the next submission is valid
	/// again); the subscription failed ([`Error::Subxt`]). [`Error::is_refusal`] tells the chain's
	/// verdicts from the rest.
	pub async fn wait(mut self, wait: Wait) -> Result<Included, Error> {
		let (client, account) = (self.client.clone(), self.account.clone());
		let extrinsic_hash = self.progress.extrinsic_hash();
		let in_block = loop {
			let status = match self.progress.next().await {
				Some(s) => s,
				None => {
					client.forget_nonce(&account).await;
					return Err(Error::NotIncluded {
						kind: NotIncluded::WatchLost,
						message: "the node closed the extrinsic's status subscription".into(),
					});
				},
			};
			let failed = |kind, message| Error::NotIncluded { kind, message };
			match status {
				Ok(TxStatus::InBestBlock(b)) if wait == Wait::InBlock => break b,
				Ok(TxStatus::InFinalizedBlock(b)) => break b,
				Ok(TxStatus::NoLongerInBestBlock) => {
					tracing::debug!(
						?extrinsic_hash,
						"retracted from the best chain; waiting for it again"
					);
				},
				Ok(TxStatus::Invalid { message }) => {
					client.forget_nonce(&account).await;
					return Err(failed(NotIncluded::Invalid, message));
				},
				Ok(TxStatus::Dropped { message }) => {
					client.forget_nonce(&account).await;
					return Err(failed(NotIncluded::Dropped, message));
				},
				Ok(TxStatus::Error { message }) => {
					client.forget_nonce(&account).await;
					return Err(failed(NotIncluded::NodeError, message));
				},
				Ok(_) => {},
				Err(e) => {
					client.forget_nonce(&account).await;
					return Err(e.into());
				},
			}
		};
		let block_hash = in_block.block_hash();
		let events = in_block.wait_for_success().await?;
		let mut iota = Vec::new();
		for ev in events.iter() {
			match ev?.as_root_event::<runtime::Event>()? {
				runtime::Event::Iota(e) => iota.push(e),
				runtime::Event::Sudo(runtime::sudo::Event::Sudid { sudo_result: Err(e) }) => {
					return Err(client.resolve(e));
				},
				_ => {},
			}
		}
		// The dispatch succeeded: a failed lookup of the block's number must not make it look failed (the
		// caller would send it again); the best block's number is then an upper bound.
		let block_number = match client.api.blocks().at(block_hash).await {
			Ok(b) => b.number(),
			Err(e) => {
				tracing::debug!(?block_hash, error = %e, "block number of an inclusion; using the best block's");
				client.best_number().await.unwrap_or(0)
			},
		};
		tracing::debug!(
			?block_hash,
			block_number,
			?extrinsic_hash,
			?wait,
			events = iota.len(),
			"included"
		);
		Ok(Included { block_hash, block_number, extrinsic_hash, events: iota })
	}
}

/// The pallet-iota events of one block (finalized or best, by the stream that yields it).
#[derive(Debug, Clone)]
pub struct BlockEvents {
	/// Block number.
	pub number: BlockNumber,
	/// Block hash.
	pub hash: BlockHash,
	/// pallet-iota's events in this block, in order.
	pub events: Vec<IotaEvent>,
}

/// A connection to an iota-rs node over JSON-RPC (WebSocket).
///
/// The named extrinsic methods sign, submit and wait for finality; [`IotaClient::submit_calls`] sends
/// any calls (several as one `batch_all`) and waits as asked. Storage queries read the latest finalized
/// state, or the block the client is pinned to ([`IotaClient::at_block`]).
#[derive(Clone)]
pub struct IotaClient {
	api: OnlineClient<ChainConfig>,
	rpc: RpcClient,
	/// The next nonce of each key (by account id bytes) this client signed with (the lock is held from nonce to submission, so
	/// two tasks sharing a key never take one nonce). Absent: read `system_accountNextIndex` first.
	nonces: Arc<tokio::sync::Mutex<HashMap<[u8; 32], u64>>>,
	/// Storage reads at this block instead of the latest finalized one.
	at: Option<BlockHash>,
}

/// A runtime call as a transaction payload: encoded as the metadata's outer call enum (the generated
/// code is from the same metadata the node runs, checked by `runtime/tests/metadata.rs`).
struct CallPayload(runtime::Call);

impl subxt::tx::Payload for CallPayload {
	fn encode_call_data_to(
		&self,
		metadata: &subxt::Metadata,
		out: &mut Vec<u8>,
	) -> Result<(), subxt::ext::subxt_core::Error> {
		use subxt::ext::scale_encode::EncodeAsType;
		let ty = metadata.outer_enums().call_enum_ty();
		self.0.encode_as_type_to(ty, metadata.types(), out)?;
		Ok(())
	}
}

/// pallet-iota calls as runtime calls, for [`IotaClient::submit_calls`] (one `batch_all` of several).
pub mod calls {
	use crate::{
		runtime::{self, iota::Call as C},
		AccountId, BoundedVec, ContentHash, Epoch, MergeManifest, StageId, StageReport, Verdict,
	};

	/// `advance_phase(stage, epoch, report)` (orchestrator).
	pub fn advance_phase(stage: StageId, epoch: Epoch, report: StageReport) -> runtime::Call {
		runtime::Call::Iota(C::advance_phase { stage, epoch, report })
	}

	/// `register_miner()` (any funded account): for a caller that waits for the best block only
	/// ([`IotaClient::submit_calls`]); [`IotaClient::register_miner`] waits for finality.
	pub fn register_miner() -> runtime::Call {
		runtime::Call::Iota(C::register_miner {})
	}

	/// `commit_merge(stage, epoch, manifest)` (orchestrator).
	pub fn commit_merge(stage: StageId, epoch: Epoch, manifest: MergeManifest) -> runtime::Call {
		runtime::Call::Iota(C::commit_merge { stage, epoch, manifest })
	}

	/// `submit_spot_check(epoch, miner, verdict, evidence)` (validators).
	pub fn submit_spot_check(
		epoch: Epoch,
		miner: AccountId,
		verdict: Verdict,
		evidence: ContentHash,
	) -> runtime::Call {
		runtime::Call::Iota(C::submit_spot_check { epoch, miner, verdict, evidence })
	}

	/// `commit_weights(epoch, commitment)` (validators, during the scoring window):
	/// `commitment` is [`iota_primitives::weights_commitment`] of the vector revealed later.
	pub fn commit_weights(epoch: Epoch, commitment: ContentHash) -> runtime::Call {
		runtime::Call::Iota(C::commit_weights { epoch, commitment })
	}

	/// `reveal_weights(epoch, weights, salt, version_key)` (validators, during the reveal window).
	pub fn reveal_weights(
		epoch: Epoch,
		weights: Vec<(AccountId, u16)>,
		salt: [u8; 32],
		version_key: u64,
	) -> runtime::Call {
		runtime::Call::Iota(C::reveal_weights {
			epoch,
			weights: BoundedVec(weights),
			salt,
			version_key,
		})
	}

	/// `finalize_epoch(epoch)` (anyone).
	pub fn finalize_epoch(epoch: Epoch) -> runtime::Call {
		runtime::Call::Iota(C::finalize_epoch { epoch })
	}
}

impl IotaClient {
	/// Connect to a node, e.g. `ws://127.0.0.1:9944`, or to the first that answers of several given
	/// comma-separated (`ws://a:9944,ws://b:9944`): calls then fail over to the next node whenever
	/// the connection in use is lost, and come back around the list ([`crate::failover`]; one URL
	/// reconnects to itself). Plain `ws://` is accepted (local nodes); errors with [`Error::Connect`]
	/// if no node answers or the metadata cannot be fetched.
	pub async fn connect(url: &str) -> Result<Self, Error> {
		let connect_err =
			|e: subxt::Error| Error::Connect { url: url.to_string(), source: Box::new(e) };
		let urls: Vec<String> = url
			.split(',')
			.map(str::trim)
			.filter(|u| !u.is_empty())
			.map(String::from)
			.collect();
		let rpc = RpcClient::new(
			crate::failover::FailoverRpc::connect(urls)
				.await
				.map_err(|e| connect_err(e.into()))?,
		);
		let api = OnlineClient::<ChainConfig>::from_rpc_client(rpc.clone())
			.await
			.map_err(connect_err)?;
		tracing::debug!(url, spec = api.runtime_version().spec_version, "connected");
		Ok(Self { api, rpc, nonces: Default::default(), at: None })
	}

	/// This client with storage reads at block `hash` (e.g. the best block a daemon acts on) instead of
	/// the latest finalized one; it shares the connection and the nonce counters.
	pub fn at_block(&self, hash: BlockHash) -> Self {
		Self { at: Some(hash), ..self.clone() }
	}

	/// The underlying subxt client, for anything this API does not cover.
	pub fn api(&self) -> &OnlineClient<ChainConfig> {
		&self.api
	}

	// ---- extrinsics -------------------------------------------------------------------------------

	/// `register_miner`: hold the run config's bond and take the emptiest stage (see the
	/// `MinerRegistered` event in [`Included::events`], or [`IotaClient::miner`]).
	pub async fn register_miner(&self, signer: &Signer) -> Result<Included, Error> {
		self.submit(&runtime::tx().iota().register_miner(), signer).await
	}

	/// `register_validator`: hold `stake` (at least the run config's minimum) and become a validator.
	pub async fn register_validator(
		&self,
		signer: &Signer,
		stake: Balance,
	) -> Result<Included, Error> {
		self.submit(&runtime::tx().iota().register_validator(stake), signer).await
	}

	/// `deregister`: leave the miner or validator role (funds unbond after the unbonding period).
	pub async fn deregister(&self, signer: &Signer) -> Result<Included, Error> {
		self.submit(&runtime::tx().iota().deregister(), signer).await
	}

	/// `withdraw_unbonded`: release a bond or stake whose unbonding period has passed.
	pub async fn withdraw_unbonded(&self, signer: &Signer) -> Result<Included, Error> {
		self.submit(&runtime::tx().iota().withdraw_unbonded(), signer).await
	}

	/// `advance_phase` (orchestrator only): move `stage` on from its phase in `epoch`, with a progress report.
	pub async fn advance_phase(
		&self,
		signer: &Signer,
		stage: StageId,
		epoch: Epoch,
		report: StageReport,
	) -> Result<Included, Error> {
		self.submit(&runtime::tx().iota().advance_phase(stage, epoch, report), signer)
			.await
	}

	/// `commit_merge` (orchestrator only): record the merge manifest of `stage` for `epoch`.
	pub async fn commit_merge(
		&self,
		signer: &Signer,
		stage: StageId,
		epoch: Epoch,
		manifest: MergeManifest,
	) -> Result<Included, Error> {
		self.submit(&runtime::tx().iota().commit_merge(stage, epoch, manifest), signer)
			.await
	}

	/// `submit_spot_check` (validators): a verdict on `miner`'s work in `epoch`, with an evidence hash.
	pub async fn submit_spot_check(
		&self,
		signer: &Signer,
		epoch: Epoch,
		miner: AccountId,
		verdict: Verdict,
		evidence: ContentHash,
	) -> Result<Included, Error> {
		self.submit(
			&runtime::tx().iota().submit_spot_check(epoch, miner, verdict, evidence),
			signer,
		)
		.await
	}

	/// `commit_weights` (validators): commit to relative scores of miners for a complete `epoch`
	/// during its scoring window ([`iota_primitives::weights`]).
	pub async fn commit_weights(
		&self,
		signer: &Signer,
		epoch: Epoch,
		commitment: ContentHash,
	) -> Result<Included, Error> {
		self.submit(&runtime::tx().iota().commit_weights(epoch, commitment), signer)
			.await
	}

	/// `reveal_weights` (validators): reveal the vector committed for `epoch`, with its salt, during
	/// the epoch's reveal window.
	pub async fn reveal_weights(
		&self,
		signer: &Signer,
		epoch: Epoch,
		weights: Vec<(AccountId, u16)>,
		salt: [u8; 32],
		version_key: u64,
	) -> Result<Included, Error> {
		self.submit(
			&runtime::tx()
				.iota()
				.reveal_weights(epoch, BoundedVec(weights), salt, version_key),
			signer,
		)
		.await
	}

	/// `finalize_epoch` (anyone): pay out `epoch` once its scoring and reveal windows have closed.
	pub async fn finalize_epoch(&self, signer: &Signer, epoch: Epoch) -> Result<Included, Error> {
		self.submit(&runtime::tx().iota().finalize_epoch(epoch), signer).await
	}

	/// `set_run_config` (root), sent through `sudo` by the sudo key.
	pub async fn set_run_config(
		&self,
		sudo: &Signer,
		config: RunConfig,
	) -> Result<Included, Error> {
		let call = runtime::Call::Iota(runtime::iota::Call::set_run_config { config });
		self.submit(&runtime::tx().sudo().sudo(call), sudo).await
	}

	/// `set_orchestrator` (root), sent through `sudo` by the sudo key.
	pub async fn set_orchestrator(&self, sudo: &Signer, who: AccountId) -> Result<Included, Error> {
		let call = runtime::Call::Iota(runtime::iota::Call::set_orchestrator { who });
		self.submit(&runtime::tx().sudo().sudo(call), sudo).await
	}

	/// Sends `calls` as one extrinsic signed by `signer` (one call as itself, several as one
	/// `Utility::batch_all`, which dispatches all or none) and waits as `wait` says. An empty list sends
	/// nothing and returns `Ok(None)`.
	///
	/// # Errors
	/// A failed dispatch of any call: [`Error::Pallet`] / [`Error::Dispatch`] (nothing of the batch
	/// applied); an invalid or dropped extrinsic, or a lost watch: [`Error::NotIncluded`]; a lost
	/// connection: [`Error::Subxt`] (the nonce counter is resynced, so the next submission is valid
	/// again).
	pub async fn submit_calls(
		&self,
		signer: &Signer,
		mut calls: Vec<runtime::Call>,
		wait: Wait,
	) -> Result<Option<Included>, Error> {
		match calls.len() {
			0 => Ok(None),
			1 => {
				let call = CallPayload(calls.pop().expect("one call"));
				Ok(Some(self.submit_waiting(&call, signer, wait).await?))
			},
			_ => {
				let batch = runtime::tx().utility().batch_all(calls);
				Ok(Some(self.submit_waiting(&batch, signer, wait).await?))
			},
		}
	}

	/// The next nonce of `account` as the node sees it: its best state plus the extrinsics in its pool.
	async fn pool_nonce(&self, account: &AccountId) -> Result<u64, Error> {
		Ok(LegacyRpcMethods::<ChainConfig>::new(self.rpc.clone())
			.system_account_next_index(account)
			.await
			.map_err(subxt::Error::from)?)
	}

	/// Sign, submit, wait for finalization (see [`IotaClient::submit_waiting`]).
	async fn submit<C: subxt::tx::Payload>(
		&self,
		call: &C,
		signer: &Signer,
	) -> Result<Included, Error> {
		self.submit_waiting(call, signer, Wait::Finalized).await
	}

	/// Sign with the counted nonce, submit, wait as `wait` says (see [`IotaClient::submit_pooled`] and
	/// [`Pending::wait`]).
	async fn submit_waiting<C: subxt::tx::Payload>(
		&self,
		call: &C,
		signer: &Signer,
		wait: Wait,
	) -> Result<Included, Error> {
		self.submit_pooled(call, signer).await?.wait(wait).await
	}

	/// Sends `calls` as one extrinsic like [`IotaClient::submit_calls`], but returns as soon as the node's
	/// pool accepted it (signature, nonce and fees checked), before any block holds it: the caller may act
	/// on its predicted effect and await [`Pending::wait`] elsewhere. An empty list sends nothing.
	///
	/// # Errors
	/// [`Error::Subxt`] when the node refused the submission twice (the nonce counter is resynced).
	pub async fn submit_calls_pooled(
		&self,
		signer: &Signer,
		mut calls: Vec<runtime::Call>,
	) -> Result<Option<Pending>, Error> {
		match calls.len() {
			0 => Ok(None),
			1 => {
				let call = CallPayload(calls.pop().expect("one call"));
				Ok(Some(self.submit_pooled(&call, signer).await?))
			},
			_ => {
				let batch = runtime::tx().utility().batch_all(calls);
				Ok(Some(self.submit_pooled(&batch, signer).await?))
			},
		}
	}

	/// Sign with the counted nonce and submit; returns once the pool accepted the extrinsic. A refused
	/// submission (stale nonce after another client used the key, a full pool) resyncs the counter and is
	/// retried once; one that failed in transport is not (it may have reached the node).
	async fn submit_pooled<C: subxt::tx::Payload>(
		&self,
		call: &C,
		signer: &Signer,
	) -> Result<Pending, Error> {
		let account = signer.account_id();
		let mut nonces = self.nonces.lock().await;
		let mut retried = false;
		loop {
			let nonce = match nonces.get(&account.0) {
				Some(n) => *n,
				None => self.pool_nonce(&account).await?,
			};
			let params = DefaultExtrinsicParamsBuilder::<ChainConfig>::new().nonce(nonce).build();
			let mut tx = self.api.tx().create_partial(call, &account, params).await?;
			match tx.sign(signer.keypair()).submit_and_watch().await {
				Ok(progress) => {
					nonces.insert(account.0, nonce + 1);
					return Ok(Pending { client: self.clone(), account, progress });
				},
				Err(e) => {
					nonces.remove(&account.0);
					// A submission whose connection failed may have reached the node: signing the call
					// again with a fresh nonce could run it twice, so the outcome is left to the caller.
					if retried || is_transport_error(&e) {
						return Err(e.into());
					}
					tracing::debug!(nonce, error = %e, "submission refused; resyncing the nonce");
					retried = true;
				},
			}
		}
	}

	/// Drops the counted nonce of `account` (the next submission reads the pool's).
	async fn forget_nonce(&self, account: &AccountId) {
		self.nonces.lock().await.remove(&account.0);
	}

	/// Resolve a dispatch error carried in an event (sudo's inner result) to names via the metadata.
	fn resolve(&self, e: RuntimeDispatchError) -> Error {
		use subxt::ext::scale_encode::EncodeAsType;
		let metadata = self.api.metadata();
		let Some(ty) = metadata.dispatch_error_ty() else {
			return Error::Dispatch(format!("{e:?}"));
		};
		let bytes = match e.encode_as_type(ty, metadata.types()) {
			Ok(b) => b,
			Err(_) => return Error::Dispatch(format!("{e:?}")),
		};
		match subxt::error::DispatchError::decode_from(bytes, metadata) {
			Ok(d) => Error::from_dispatch(d),
			Err(other) => other.into(),
		}
	}

	// ---- storage (latest finalized block, or the pinned one) ---------------------------------------

	async fn storage(&self) -> Result<Storage<ChainConfig, OnlineClient<ChainConfig>>, Error> {
		Ok(match self.at {
			Some(hash) => self.api.storage().at(hash),
			None => self.api.storage().at_latest().await?,
		})
	}

	async fn fetch<A>(&self, address: &A) -> Result<Option<A::Target>, Error>
	where
		A: Address<IsFetchable = Yes>,
	{
		Ok(self.storage().await?.fetch(address).await?)
	}

	async fn fetch_or_default<A>(&self, address: &A) -> Result<A::Target, Error>
	where
		A: Address<IsFetchable = Yes, IsDefaultable = Yes>,
	{
		Ok(self.storage().await?.fetch_or_default(address).await?)
	}

	/// Every entry of a map keyed last by an account (`Blake2_128Concat`), with the account decoded.
	async fn iter_by_account<A>(&self, address: A) -> Result<Vec<(AccountId, A::Target)>, Error>
	where
		A: Address<IsIterable = Yes> + 'static,
		A::Keys: 'static + Sized,
	{
		let mut out = Vec::new();
		let mut entries = self.storage().await?.iter(address).await?;
		while let Some(kv) = entries.next().await {
			let kv = kv?;
			let key = &kv.key_bytes;
			let mut account = [0u8; 32];
			account.copy_from_slice(&key[key.len().saturating_sub(32)..]);
			out.push((AccountId::from(account), kv.value));
		}
		Ok(out)
	}

	/// The run config, if one is set.
	pub async fn run_config(&self) -> Result<Option<RunConfig>, Error> {
		self.fetch(&runtime::storage().iota().run_configuration()).await
	}

	/// The orchestrator account, if one is set.
	pub async fn orchestrator(&self) -> Result<Option<AccountId>, Error> {
		self.fetch(&runtime::storage().iota().orchestrator()).await
	}

	/// The record of miner `who`, if registered.
	pub async fn miner(
		&self,
		who: &AccountId,
	) -> Result<Option<MinerInfo<Balance, BlockNumber>>, Error> {
		self.fetch(&runtime::storage().iota().miners(who.clone())).await
	}

	/// Every miner record.
	pub async fn miners(&self) -> Result<Vec<(AccountId, MinerInfo<Balance, BlockNumber>)>, Error> {
		self.iter_by_account(runtime::storage().iota().miners_iter()).await
	}

	/// The accounts holding `stage`, in butterfly order.
	pub async fn stage_members(&self, stage: StageId) -> Result<Vec<AccountId>, Error> {
		Ok(self.fetch_or_default(&runtime::storage().iota().stage_members(stage)).await?.0)
	}

	/// Phase, epoch and phase start of `stage`.
	pub async fn stage(&self, stage: StageId) -> Result<StageState<BlockNumber>, Error> {
		self.fetch_or_default(&runtime::storage().iota().stages(stage)).await
	}

	/// The record of validator `who`, if registered.
	pub async fn validator(
		&self,
		who: &AccountId,
	) -> Result<Option<ValidatorInfo<Balance, BlockNumber>>, Error> {
		self.fetch(&runtime::storage().iota().validators(who.clone())).await
	}

	/// Every validator record.
	pub async fn validators(
		&self,
	) -> Result<Vec<(AccountId, ValidatorInfo<Balance, BlockNumber>)>, Error> {
		self.iter_by_account(runtime::storage().iota().validators_iter()).await
	}

	/// The 32-byte seed of `epoch`, once drawn.
	pub async fn epoch_seed(&self, epoch: Epoch) -> Result<Option<[u8; 32]>, Error> {
		self.fetch(&runtime::storage().iota().epoch_seeds(epoch)).await
	}

	/// The block at which `epoch` completed (every stage merged), if it has.
	pub async fn epoch_completed_at(&self, epoch: Epoch) -> Result<Option<BlockNumber>, Error> {
		self.fetch(&runtime::storage().iota().epoch_completed_at(epoch)).await
	}

	/// The seed of `epoch`'s inner-step challenges ([`iota_protocol::selection::challenge_seed`] of the
	/// hash of the finalized block at which the epoch completed), once that block is finalized.
	pub async fn challenge_seed(&self, epoch: Epoch) -> Result<Option<[u8; 32]>, Error> {
		let Some(at) = self.epoch_completed_at(epoch).await? else { return Ok(None) };
		if self.finalized_number().await? < at {
			return Ok(None);
		}
		let hash = self.block_hash(at).await?;
		Ok(hash.map(|h| iota_protocol::selection::challenge_seed(epoch, &h.0)))
	}

	/// Hash of the block numbered `number` on the node's canonical chain (`chain_getBlockHash`), `None`
	/// when it has none yet; for a finalized number the hash never changes (read its state with
	/// [`IotaClient::at_block`]).
	///
	/// # Errors
	/// [`Error`] when the RPC fails.
	pub async fn block_hash(&self, number: BlockNumber) -> Result<Option<BlockHash>, Error> {
		Ok(LegacyRpcMethods::<ChainConfig>::new(self.rpc.clone())
			.chain_get_block_hash(Some(number.into()))
			.await
			.map_err(subxt::Error::from)?)
	}

	/// The next epoch `finalize_epoch` will pay out.
	pub async fn next_epoch_to_finalize(&self) -> Result<Epoch, Error> {
		self.fetch_or_default(&runtime::storage().iota().next_epoch_to_finalize()).await
	}

	/// The merge manifest of (`epoch`, `stage`), once committed.
	pub async fn merge_manifest(
		&self,
		epoch: Epoch,
		stage: StageId,
	) -> Result<Option<MergeManifest>, Error> {
		self.fetch(&runtime::storage().iota().merge_manifests(epoch, stage)).await
	}

	/// Every verdict of `epoch`, per miner (miners nobody checked are absent).
	pub async fn spot_checks_of_epoch(
		&self,
		epoch: Epoch,
	) -> Result<Vec<(AccountId, Vec<SpotCheck<AccountId>>)>, Error> {
		let all = self.iter_by_account(runtime::storage().iota().spot_checks_iter1(epoch)).await?;
		Ok(all.into_iter().map(|(who, checks)| (who, checks.0)).collect())
	}

	/// The validators' verdicts on `miner` in `epoch`.
	pub async fn spot_checks(
		&self,
		epoch: Epoch,
		miner: &AccountId,
	) -> Result<Vec<SpotCheck<AccountId>>, Error> {
		Ok(self
			.fetch_or_default(&runtime::storage().iota().spot_checks(epoch, miner.clone()))
			.await?
			.0)
	}

	/// The commitment `validator` made to its weights for `epoch` (kept after the reveal).
	pub async fn weight_commit(
		&self,
		epoch: Epoch,
		validator: &AccountId,
	) -> Result<Option<ContentHash>, Error> {
		self.fetch(&runtime::storage().iota().weight_commits(epoch, validator.clone()))
			.await
	}

	/// Every validator that committed weights for `epoch`, in storage order.
	pub async fn weight_committers(&self, epoch: Epoch) -> Result<Vec<AccountId>, Error> {
		let all = self
			.iter_by_account(runtime::storage().iota().weight_commits_iter1(epoch))
			.await?;
		Ok(all.into_iter().map(|(who, _)| who).collect())
	}

	/// Every validator that revealed its weights for `epoch`, with the vector.
	pub async fn revealed_weights(
		&self,
		epoch: Epoch,
	) -> Result<Vec<(AccountId, Vec<(AccountId, u16)>)>, Error> {
		let all = self.iter_by_account(runtime::storage().iota().weights_iter1(epoch)).await?;
		Ok(all.into_iter().map(|(who, w)| (who, w.0)).collect())
	}

	/// The weights `validator` revealed for `epoch`.
	pub async fn weights(
		&self,
		epoch: Epoch,
		validator: &AccountId,
	) -> Result<Option<Vec<(AccountId, u16)>>, Error> {
		Ok(self
			.fetch(&runtime::storage().iota().weights(epoch, validator.clone()))
			.await?
			.map(|w| w.0))
	}

	/// Consensus scores of a finalized `epoch`, in parts per billion.
	pub async fn scores(&self, epoch: Epoch) -> Result<Option<Vec<(AccountId, u32)>>, Error> {
		Ok(self.fetch(&runtime::storage().iota().scores(epoch)).await?.map(|s| s.0))
	}

	/// What a finalized `epoch` paid to whom.
	pub async fn emission_split(
		&self,
		epoch: Epoch,
	) -> Result<Option<EmissionSplit<AccountId, Balance>>, Error> {
		self.fetch(&runtime::storage().iota().emission_splits(epoch)).await
	}

	/// Bonds slashed in `epoch`, per miner, in balance units.
	pub async fn slashes(&self, epoch: Epoch) -> Result<Vec<(AccountId, Balance)>, Error> {
		self.iter_by_account(runtime::storage().iota().slashes_iter1(epoch)).await
	}

	/// Everything pallet-iota has minted so far.
	pub async fn total_minted(&self) -> Result<Balance, Error> {
		self.fetch_or_default(&runtime::storage().iota().total_minted()).await
	}

	/// Free balance of `who`.
	pub async fn free_balance(&self, who: &AccountId) -> Result<Balance, Error> {
		Ok(self
			.fetch_or_default(&runtime::storage().system().account(who.clone()))
			.await?
			.data
			.free)
	}

	/// Number of the latest finalized block.
	pub async fn finalized_number(&self) -> Result<BlockNumber, Error> {
		Ok(self.api.blocks().at_latest().await?.number())
	}

	/// Number of the best (latest, not necessarily finalized) block, from the node's `chain_getHeader`.
	pub async fn best_number(&self) -> Result<BlockNumber, Error> {
		let header = LegacyRpcMethods::<ChainConfig>::new(self.rpc.clone())
			.chain_get_header(None)
			.await
			.map_err(subxt::Error::from)?;
		header.map(|h| h.number).ok_or_else(|| {
			subxt::Error::Other("the node returned no best block header".into()).into()
		})
	}

	/// The best block's number and hash, read together: the number is that hash's block's, even when a
	/// new best block arrives between the two reads. For reads consistent with the head the node will
	/// build on ([`IotaClient::at_block`] with the hash), where finality lags.
	pub async fn best_block(&self) -> Result<(BlockNumber, BlockHash), Error> {
		let hash = self.best_hash().await?;
		let number = self.api.blocks().at(hash).await?.number();
		Ok((number, hash))
	}

	/// Hash of the best block (`chain_getBlockHash` without a number), e.g. for [`IotaClient::at_block`].
	pub async fn best_hash(&self) -> Result<BlockHash, Error> {
		let hash = LegacyRpcMethods::<ChainConfig>::new(self.rpc.clone())
			.chain_get_block_hash(None)
			.await
			.map_err(subxt::Error::from)?;
		hash.ok_or_else(|| {
			subxt::Error::Other("the node returned no best block hash".into()).into()
		})
	}

	// ---- events -----------------------------------------------------------------------------------

	/// pallet-iota's events, block by block, from the next finalized block on. Blocks without pallet-iota
	/// events are yielded too (with no events), so the stream also tracks finality.
	pub async fn finalized_events(
		&self,
	) -> Result<impl Stream<Item = Result<BlockEvents, Error>> + Send + Unpin, Error> {
		Ok(Self::events_of(self.api.blocks().subscribe_finalized().await?))
	}

	/// Each new best block as `(number, hash)` (the chain's head as this node sees it: a later block may
	/// replace it, and numbers may repeat or skip after a reorg). Items are ready as soon as the node
	/// announces a block, so a consumer that fell behind can skip to the newest one; read its events with
	/// [`IotaClient::events_at`] and its state with [`IotaClient::at_block`].
	pub async fn best_blocks(
		&self,
	) -> Result<impl Stream<Item = Result<(BlockNumber, BlockHash), Error>> + Send + Unpin, Error>
	{
		let blocks = self.api.blocks().subscribe_best().await?;
		Ok(blocks.map(|b| b.map(|b| (b.number(), b.hash())).map_err(Error::from)).boxed())
	}

	/// pallet-iota's events in block `hash`, in order.
	pub async fn events_at(&self, hash: BlockHash) -> Result<Vec<IotaEvent>, Error> {
		let mut events = Vec::new();
		for ev in self.api.events().at(hash).await?.iter() {
			if let runtime::Event::Iota(e) = ev?.as_root_event::<runtime::Event>()? {
				events.push(e);
			}
		}
		Ok(events)
	}

	fn events_of(
		blocks: subxt::backend::StreamOfResults<
			subxt::blocks::Block<ChainConfig, OnlineClient<ChainConfig>>,
		>,
	) -> impl Stream<Item = Result<BlockEvents, Error>> + Send + Unpin {
		blocks
			.then(|block| async move {
				let block = block?;
				let mut events = Vec::new();
				for ev in block.events().await?.iter() {
					if let runtime::Event::Iota(e) = ev?.as_root_event::<runtime::Event>()? {
						events.push(e);
					}
				}
				Ok(BlockEvents { number: block.number(), hash: block.hash(), events })
			})
			.boxed()
	}
}

/// Whether a subxt error is the connection failing (the node may or may not have received the call), not
/// the node refusing it.
pub(crate) fn is_transport_error(e: &subxt::Error) -> bool {
	use subxt::ext::subxt_rpcs::Error as Rpc;
	matches!(
		e,
		subxt::Error::Rpc(subxt::error::RpcError::ClientError(
			Rpc::Client(_) | Rpc::DisconnectedWillReconnect(_)
		))
	)
}
