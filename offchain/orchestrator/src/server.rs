//! The JSON-RPC server: [`Orchestrator`] holds the state, the database, the nonce book, the chain
//! registry and the object store; [`RpcImpl`] implements `iota_rpc::IotaApiServer` on it.
//!
//! Every signed method runs the same pipeline: size limits (`Oversize`) → signature and timestamp window
//! ([`auth`](crate::auth)) → role and stage from the chain registry → under the state lock: nonce unused,
//! the state's check → for submits, the uploaded object is fetched and verified (BLAKE3, wire header,
//! shape, chunk hashes) *outside* the lock, then re-checked under it → the nonce and the events are
//! written to SQLite, then applied, then the answer is sent. A refusal writes nothing and changes
//! nothing; it is counted in the metrics by method and by code.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::Bytes;
use iota_model::wire::{self, Expect, Kind};
use iota_rpc::api::methods;
use iota_rpc::signing::now_ms;
use iota_rpc::types::*;
use iota_rpc::{AccountId, ErrorCode, IotaApiServer, RpcResult, RunSpec, Signed};
use iota_storage::{keys, ObjectStore, PresignedRequest, StorageError};
use jsonrpsee::core::{async_trait, SubscriptionResult};
use jsonrpsee::server::{PendingSubscriptionSink, Server, ServerHandle, SubscriptionMessage};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::broadcast;

use crate::auth::{auth_refusal, MinerStanding, NonceBook, Registry};
use crate::db::Db;
use crate::metrics::Metrics;
use crate::state::{miner_id, Event, Lease, ManifestPlan, Obj, Refusal, State, WorkKind, WorkPlan};

/// Settings of the server.
#[derive(Clone, Debug)]
pub struct ServerConfig {
	/// Accepted clock difference of a request, ms (default 30 000).
	pub window_ms: u64,
	/// Largest JSON-RPC request, bytes (default 256 KiB).
	pub max_request_bytes: u32,
	/// Lifetime of presigned URLs, seconds (at most 900, the embedded server's limit).
	pub presign_secs: u64,
	/// Largest checkpoint or gradient object fetched for verification, bytes.
	pub max_object_bytes: u64,
	/// Idle retry hint, ms: the `retry_after_ms` of an idle `iota_getWork` answer that was not held.
	pub retry_ms: u64,
	/// Longest an idle `iota_getWork` is held open, ms (a long poll): while the answer would be
	/// [`IdleReason::QueueEmpty`], [`IdleReason::InFlightLimit`] or [`IdleReason::QuotaIssued`],
	/// which any newly applied event can turn into work, the request waits for the state to change and
	/// plans again, and answers the moment there is work. A miner that polled instead would wait half
	/// of `retry_ms` on average at every hop of a sample through the pipeline. `0`: never held. Must
	/// stay well below the miners' request timeout (30 s by default).
	pub work_wait_ms: u64,
	/// Maximum connections.
	pub max_connections: u32,
}

impl Default for ServerConfig {
	fn default() -> Self {
		Self {
			window_ms: iota_rpc::signing::DEFAULT_WINDOW_MS,
			max_request_bytes: 256 * 1024,
			presign_secs: 300,
			max_object_bytes: 2 * 1024 * 1024 * 1024,
			retry_ms: 250,
			work_wait_ms: 1_000,
			max_connections: 1024,
		}
	}
}

/// Mutable core, behind one lock (never held across an await).
struct Inner {
	state: State,
	db: Db,
	nonces: NonceBook,
}

/// The orchestrator: state, persistence, registry, storage, metrics.
pub struct Orchestrator {
	inner: Mutex<Inner>,
	registry: RwLock<Registry>,
	store: ObjectStore,
	spec: RunSpec,
	spec_json: String,
	cfg: ServerConfig,
	metrics: Metrics,
	phases: broadcast::Sender<PhaseEvent>,
	refused: Mutex<HashMap<[u8; 32], BTreeMap<&'static str, u64>>>,
	finalized: std::sync::atomic::AtomicU32,
	/// Woken when a stage's call becomes due ([`State::transition_due`]), for the chain driver.
	due: tokio::sync::Notify,
	/// Woken (every waiter) whenever events are applied to the state: the held `iota_getWork`
	/// requests plan again ([`ServerConfig::work_wait_ms`]).
	changed: tokio::sync::Notify,
	/// Per stage: when its call became due (ms), until the driver takes it.
	due_since: Mutex<HashMap<u16, u64>>,
	/// When this process built its state (ms): liveness counts from here ([`State::gone_miners`]).
	started_ms: u64,
	/// Presigned GETs by key, handed out again during the first [`GET_REUSE_SECS`] of their lifetime
	/// (so every URL handed out still outlives a lease: `presign_secs` is the lease plus a minute): a
	/// stage's merge members all ask for the same objects at once (64 members, 64 submissions each:
	/// 4 096 signatures per round without it). A GET URL reads whatever the key holds, and every reader
	/// checks the content hash it is given beside it.
	gets: Mutex<HashMap<String, PresignedRequest>>,
}

/// `iota_getWork`'s plan for `miner` at `stage` at `now` (ms), with the lease event to record when it
/// grants one. The first plan of a request and every plan of a held one ([`Orchestrator::hold_idle`]).
fn plan_decision(
	st: &State,
	miner: &AccountId,
	stage: u16,
	now: u64,
) -> Result<(Vec<Event>, WorkPlan), Refusal> {
	let plan = st.plan_work(miner, stage, now)?;
	Ok(match &plan {
		WorkPlan::Lease(e) => (vec![e.clone()], plan),
		_ => (vec![], plan),
	})
}

/// Whether an idle plan is one that any applied event may turn into work (a sample's activation or
/// gradient accepted, a lease released or expired, an epoch begun), so `iota_getWork` holds it
/// ([`ServerConfig::work_wait_ms`]). Merging, a restart's wait and a forfeit need the miner to act.
fn waits_for_state(plan: &WorkPlan) -> bool {
	matches!(
		plan,
		WorkPlan::Idle(
			IdleReason::QueueEmpty | IdleReason::InFlightLimit | IdleReason::QuotaIssued
		)
	)
}

/// Whether applying `e` may turn a held idle plan into work, so held `iota_getWork` requests plan again.
/// A grant only takes work, and a loss or an inner-step report changes nothing [`State::plan_work`]
/// reads; those are about half of a sample's events. Every other event wakes them (the safe default
/// for one added later).
fn may_make_work(e: &Event) -> bool {
	!matches!(
		e,
		Event::LeaseGranted { .. } | Event::LossReported { .. } | Event::InnerStepReported { .. }
	)
}

/// Most presigned GETs kept for reuse; past it, those past reuse are dropped (all, if none is).
const MAX_CACHED_GETS: usize = 65_536;

/// A cached presigned GET is reused during this many seconds after it was signed (for lifetimes of a
/// minute or more).
const GET_REUSE_SECS: u64 = 30;

/// A nonce to record with an accepted request: (account, nonce, timestamp ms).
type NonceRec = ([u8; 32], u64, u64);

impl Orchestrator {
	/// Builds the orchestrator from a state (fresh), a database whose events and nonces are replayed
	/// into it, the store, the spec and its stored JSON.
	///
	/// # Errors
	/// Database errors while replaying.
	pub fn new(
		mut state: State,
		db: Db,
		store: ObjectStore,
		spec: RunSpec,
		spec_json: String,
		cfg: ServerConfig,
		metrics: Metrics,
	) -> Result<Arc<Self>, crate::db::DbError> {
		let events = db.events()?;
		for e in &events {
			state.apply(e);
		}
		let now = now_ms();
		let mut nonces = NonceBook::new(cfg.window_ms);
		for (a, n, ts) in db.nonces(now.saturating_sub(cfg.window_ms))? {
			nonces.insert(a, n, ts, 0);
		}
		tracing::info!(
			events = events.len(),
			nonces = nonces.len(),
			"state restored from the database"
		);
		let (phases, _) = broadcast::channel(256);
		Ok(Arc::new(Self {
			inner: Mutex::new(Inner { state, db, nonces }),
			registry: RwLock::new(Registry::default()),
			store,
			spec,
			spec_json,
			cfg,
			metrics,
			phases,
			refused: Mutex::new(HashMap::new()),
			due: tokio::sync::Notify::new(),
			changed: tokio::sync::Notify::new(),
			due_since: Mutex::new(HashMap::new()),
			started_ms: now,
			gets: Mutex::new(HashMap::new()),
			finalized: std::sync::atomic::AtomicU32::new(0),
		}))
	}

	/// Replaces the registry (chain refresh).
	pub fn set_registry(&self, r: Registry) {
		*self.registry.write().unwrap_or_else(|e| e.into_inner()) = r;
	}

	/// The miners the registry has as leaving (their seat goes at their stage's next commit).
	pub fn leaving_miners(&self) -> std::collections::BTreeSet<[u8; 32]> {
		let r = self.registry.read().unwrap_or_else(|e| e.into_inner());
		r.miners
			.iter()
			.filter(|(_, (_, standing))| *standing == MinerStanding::Leaving)
			.map(|(who, _)| *who)
			.collect()
	}

	/// Records the best finalized block the chain driver has seen (for `iota_status`).
	pub fn set_finalized(&self, block: u32) {
		self.finalized.fetch_max(block, std::sync::atomic::Ordering::Relaxed);
	}

	/// The metrics.
	pub fn metrics(&self) -> &Metrics {
		&self.metrics
	}

	/// The store.
	pub fn store(&self) -> &ObjectStore {
		&self.store
	}

	/// The run spec.
	pub fn spec(&self) -> &RunSpec {
		&self.spec
	}

	/// Runs `f` on the state (read-only).
	pub fn with_state<R>(&self, f: impl FnOnce(&State) -> R) -> R {
		let inner = self.lock();
		f(&inner.state)
	}

	fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
		self.inner.lock().unwrap_or_else(|e| e.into_inner())
	}

	/// Records and applies events that come from the orchestrator itself (chain facts, expiries, resolved
	/// shards, pathway logs); `ChainStage` changes are broadcast to phase subscribers.
	///
	/// # Errors
	/// Database errors (nothing applied then).
	pub fn record(&self, events: Vec<Event>) -> Result<(), crate::db::DbError> {
		if events.is_empty() {
			return Ok(());
		}
		let mut changes = Vec::new();
		{
			let mut inner = self.lock();
			inner.db.record(None, &events)?;
			let due_before = due_stages(&inner.state, &events);
			for e in &events {
				let change = match e {
					Event::ChainStage { stage, epoch, phase, block, .. } => {
						Some((*stage, *epoch, *phase, *block))
					},
					// A prediction or a revert is as of the finalized block the driver knows.
					Event::ChainPredicted { stage, epoch, phase, .. }
					| Event::ChainReverted { stage, epoch, phase, .. } => Some((
						*stage,
						*epoch,
						*phase,
						self.finalized.load(std::sync::atomic::Ordering::Relaxed),
					)),
					_ => None,
				};
				if let Some((stage, epoch, phase, block)) = change {
					let before = inner.state.stage(stage).map(|s| (s.epoch, s.phase));
					if before != Some((epoch, phase)) {
						changes.push(PhaseEvent { stage, epoch, phase, block });
					}
				}
				if matches!(e, Event::LeaseExpired { .. }) {
					self.metrics.leases_expired.inc();
				}
				inner.state.apply(e);
			}
			self.applied(&inner.state, due_before, &events);
		}
		for c in changes {
			let _ = self.phases.send(c);
		}
		Ok(())
	}

	/// Expires overdue leases (re-listing their items), prunes old nonces and refreshes the gauges.
	pub fn tick(&self) {
		let now = now_ms();
		let expired = self.with_state(|s| s.expired_leases(now));
		if !expired.is_empty() {
			tracing::info!(count = expired.len(), "leases expired; items re-listed");
			if let Err(e) = self.record(expired) {
				tracing::warn!(error = %e, "cannot record lease expiry");
			}
		}
		let gone = self.with_state(|s| s.gone_miners(now, self.started_ms));
		for ev in &gone {
			if let Event::MinerGone { miner, stage, epoch, .. } = ev {
				tracing::warn!(
					%miner,
					stage,
					epoch,
					"miner silent for a lease's length with unsubmitted passes: re-listed for recomputation (stage training) or counted lost (uploads open)"
				);
			}
		}
		if !gone.is_empty() {
			if let Err(e) = self.record(gone) {
				tracing::warn!(error = %e, "cannot record a silent miner");
			}
		}
		let inner = self.lock();
		for s in inner.state.stage_status() {
			let st = s.stage.to_string();
			self.metrics
				.queue_depth
				.with_label_values(&[&st, "forward"])
				.set(f64::from(s.forward_queue));
			self.metrics
				.queue_depth
				.with_label_values(&[&st, "backward"])
				.set(f64::from(s.backward_queue));
		}
		self.metrics.tokens_per_sec.set(inner.state.tokens_per_sec(now));
		if let Some(l) = inner.state.last_loss() {
			self.metrics.loss.set(f64::from(l));
		}
		let _ = inner.db.prune_nonces(now.saturating_sub(self.cfg.window_ms));
	}

	fn authenticate<T: Serialize + DeserializeOwned>(
		&self,
		method: &str,
		req: &Signed<T>,
	) -> Result<NonceRec, Refusal> {
		req.verify(method, now_ms(), self.cfg.window_ms).map_err(auth_refusal)?;
		Ok((req.account.0, req.nonce, req.timestamp_ms))
	}

	fn registry(&self) -> std::sync::RwLockReadGuard<'_, Registry> {
		self.registry.read().unwrap_or_else(|e| e.into_inner())
	}

	/// Under the lock: the nonce is unused, then `decide` runs; on success the nonce and the events are
	/// written and applied.
	fn commit<R>(
		&self,
		nonce: NonceRec,
		decide: impl FnOnce(&State) -> Result<(Vec<Event>, R), Refusal>,
	) -> Result<R, Refusal> {
		self.commit_after(Some(nonce), None, |_| Ok(Vec::new()), decide)
	}

	/// [`commit`](Self::commit) of a request that shows its miner live: `(miner, stage, now)` is
	/// recorded as its latest request ([`State::touch`]: backward routing, [`State::gone_miners`])
	/// once the nonce is found unused, before `decide` runs. For the methods a live miner calls:
	/// `getWork`, and `getManifest`, `getShards`, `submitShard` and `submitStateHash` while it merges
	/// (a member busy reducing a restarted round's shards is live).
	fn commit_live<R>(
		&self,
		nonce: NonceRec,
		live: (&AccountId, u16, u64),
		decide: impl FnOnce(&State) -> Result<(Vec<Event>, R), Refusal>,
	) -> Result<R, Refusal> {
		self.commit_after(Some(nonce), Some(live), |_| Ok(Vec::new()), decide)
	}

	/// [`commit`](Self::commit), with the events `first` returns recorded and applied before `decide`
	/// sees the state (under the same lock, after the nonce check; they stay when `decide` refuses),
	/// and the request's liveness recorded as in [`commit_live`](Self::commit_live) when `live` is
	/// given and `first` accepts it (a refusal of `first` marks nobody live). Without a nonce (a held
	/// request planning again, its nonce already recorded) nothing is checked or recorded for it.
	fn commit_after<R>(
		&self,
		nonce: Option<NonceRec>,
		live: Option<(&AccountId, u16, u64)>,
		first: impl FnOnce(&State) -> Result<Vec<Event>, Refusal>,
		decide: impl FnOnce(&State) -> Result<(Vec<Event>, R), Refusal>,
	) -> Result<R, Refusal> {
		let mut inner = self.lock();
		if let Some(nonce) = &nonce {
			inner.nonces.check(&AccountId::from(nonce.0), nonce.1)?;
		}
		let pre = first(&inner.state)?;
		// Only a request `first` accepts shows its miner live: a superseded process's is refused there.
		if let Some((miner, stage, now)) = live {
			inner.state.touch(miner, stage, now);
		}
		if !pre.is_empty() {
			inner
				.db
				.record(None, &pre)
				.map_err(|e| Refusal::new(ErrorCode::Unavailable, format!("database: {e}")))?;
			let due_before = due_stages(&inner.state, &pre);
			for e in &pre {
				inner.state.apply(e);
			}
			self.applied(&inner.state, due_before, &pre);
		}
		let (events, out) = decide(&inner.state)?;
		if nonce.is_some() || !events.is_empty() {
			inner
				.db
				.record(nonce, &events)
				.map_err(|e| Refusal::new(ErrorCode::Unavailable, format!("database: {e}")))?;
		}
		if let Some(nonce) = nonce {
			inner.nonces.insert(nonce.0, nonce.1, nonce.2, now_ms());
		}
		let due_before = due_stages(&inner.state, &events);
		for e in &events {
			inner.state.apply(e);
		}
		self.applied(&inner.state, due_before, &events);
		Ok(out)
	}

	/// Resolves once a stage's call has become due since the last wake (a permit is kept when nobody
	/// waits, so no wake is lost). The chain driver waits on this next to the best-block stream.
	pub async fn call_due(&self) {
		self.due.notified().await
	}

	/// When the call of `stage` became due (the server saw [`State::transition_due`] turn true), if it
	/// did since the last take: the start of the stage's chain wait for it. Taken once.
	pub fn take_due_since(&self, stage: u16) -> Option<u64> {
		self.due_since.lock().unwrap_or_else(|e| e.into_inner()).remove(&stage)
	}

	/// Wakes the chain driver as if a call had become due (an extrinsic of it was included or failed).
	pub fn wake_driver(&self) {
		self.due.notify_one();
	}

	/// After `events` were applied to `state`: held `iota_getWork` requests plan again when one of them
	/// may have made work ([`may_make_work`]), and the chain driver is woken for a stage whose call
	/// turned due (`before`: which were due before, [`due_stages`]).
	fn applied(&self, state: &State, before: Option<Vec<bool>>, events: &[Event]) {
		if events.iter().any(may_make_work) {
			self.changed.notify_waiters();
		}
		let Some(before) = before else { return };
		let now = (0..before.len() as u16).map(|s| state.transition_due(s));
		let turned: Vec<u16> = now
			.zip(before)
			.enumerate()
			.filter(|(_, (n, b))| *n && !*b)
			.map(|(s, _)| s as u16)
			.collect();
		if !turned.is_empty() {
			let at = now_ms();
			let mut due = self.due_since.lock().unwrap_or_else(|e| e.into_inner());
			for s in turned {
				due.entry(s).or_insert(at);
			}
			drop(due);
			self.due.notify_one();
		}
	}

	fn peek<R>(
		&self,
		nonce: &NonceRec,
		f: impl FnOnce(&State) -> Result<R, Refusal>,
	) -> Result<R, Refusal> {
		let inner = self.lock();
		inner.nonces.check(&AccountId::from(nonce.0), nonce.1)?;
		f(&inner.state)
	}

	fn finish<T>(&self, method: &str, account: &AccountId, r: Result<T, Refusal>) -> RpcResult<T> {
		match r {
			Ok(v) => {
				self.metrics.requests.with_label_values(&[method, "ok"]).inc();
				Ok(v)
			},
			Err(e) => {
				self.metrics.requests.with_label_values(&[method, e.code.name()]).inc();
				self.metrics.refusals.with_label_values(&[e.code.name()]).inc();
				*self
					.refused
					.lock()
					.unwrap_or_else(|e| e.into_inner())
					.entry(account.0)
					.or_default()
					.entry(e.code.name())
					.or_default() += 1;
				if method == methods::SUBMIT_GRADIENT || method == methods::SUBMIT_SHARD {
					// A refused merge vector names its sender where an operator looks.
					tracing::warn!(method, %account, code = e.code.name(), message = %e.message, "merge vector refused");
					let stage = self
						.registry()
						.miners
						.get(&account.0)
						.map_or_else(|| "-".to_owned(), |(s, _)| s.to_string());
					self.metrics
						.vectors_refused
						.with_label_values(&[&account.to_string(), &stage, method, e.code.name()])
						.inc();
				} else {
					tracing::debug!(method, %account, code = e.code.name(), message = %e.message, "refused");
				}
				Err(e.code.error(e.message))
			},
		}
	}

	fn expiry(&self) -> Duration {
		Duration::from_secs(self.cfg.presign_secs)
	}

	async fn get_of(&self, o: &Obj) -> Result<ObjectGet, Refusal> {
		let now_s = now_ms() / 1000;
		let left = self.cfg.presign_secs.saturating_sub(GET_REUSE_SECS);
		let lock = || self.gets.lock().unwrap_or_else(|e| e.into_inner());
		// Lifetimes under a minute (tests of expiry) are too coarse for reuse: signed every time.
		let reuse = self.cfg.presign_secs >= 60;
		let cached = lock().get(&o.key).filter(|g| reuse && g.expires_at >= now_s + left).cloned();
		let get = match cached {
			Some(g) => g,
			None => {
				let g =
					self.store.presign_get(&o.key, self.expiry()).await.map_err(storage_refusal)?;
				let mut gets = lock();
				if gets.len() >= MAX_CACHED_GETS {
					gets.retain(|_, g| g.expires_at >= now_s + left);
					if gets.len() >= MAX_CACHED_GETS {
						gets.clear();
					}
				}
				gets.insert(o.key.clone(), g.clone());
				g
			},
		};
		Ok(ObjectGet { key: o.key.clone(), hash: o.hash, size: o.size, get })
	}

	async fn put_of(&self, key: &str) -> Result<ObjectPut, Refusal> {
		let put = self.store.presign_put(key, self.expiry()).await.map_err(storage_refusal)?;
		Ok(ObjectPut { key: key.to_string(), put })
	}

	async fn data_slice(&self, sample: u64) -> Result<DataSlice, Refusal> {
		let d = &self.spec.data;
		let loc = d
			.locate(sample)
			.ok_or_else(|| Refusal::new(ErrorCode::Unavailable, "the run spec has no data"))?;
		let so = d.shards.get(loc.shard as usize).ok_or_else(|| {
			Refusal::new(ErrorCode::Unavailable, "data shard missing from the spec")
		})?;
		let object = self.get_of(so).await?;
		Ok(DataSlice { shard: loc.shard, object, row_offset: loc.row_offset, rows: loc.rows })
	}

	/// Fetches an uploaded object and checks it hashes to `hash` and has `size` bytes.
	async fn fetch_checked(
		&self,
		key: &str,
		hash: &iota_primitives::ContentHash,
		size: u64,
	) -> Result<Bytes, Refusal> {
		if size > self.cfg.max_object_bytes {
			return Err(Refusal::new(
				ErrorCode::Oversize,
				format!("{size} bytes is over the limit of {}", self.cfg.max_object_bytes),
			));
		}
		let bytes = self.store.get(key, hash).await.map_err(|e| match e {
			StorageError::NotFound { .. }
			| StorageError::HashMismatch { .. }
			| StorageError::Truncated { .. } => {
				Refusal::new(ErrorCode::HashMismatch, format!("uploaded object {key}: {e}"))
			},
			other => storage_refusal(other),
		})?;
		if bytes.len() as u64 != size {
			return Err(Refusal::new(
				ErrorCode::ShapeMismatch,
				format!("object {key} has {} bytes, {size} reported", bytes.len()),
			));
		}
		Ok(bytes)
	}

	async fn work_item(
		&self,
		lease: &Lease,
		sample: Option<crate::state::SampleState>,
	) -> Result<Work, Refusal> {
		let s = usize::from(lease.stage);
		let tail = self.spec.model.n_stages().saturating_sub(1);
		let sample =
			sample.ok_or_else(|| Refusal::new(ErrorCode::Unavailable, "sample record missing"))?;
		let input = match s.checked_sub(1).and_then(|p| sample.forward.get(p).cloned().flatten()) {
			Some((_, Some(o))) => Some(self.get_of(&o).await?),
			_ => None,
		};
		let output = match &lease.output_key {
			Some(k) => Some(self.put_of(k).await?),
			None => None,
		};
		match lease.kind {
			WorkKind::Forward => {
				let data = if s == 0 || s == tail {
					Some(self.data_slice(lease.sample).await?)
				} else {
					None
				};
				let output = match output {
					Some(o) => o,
					// A single-stage run: the head is the tail; its result is the loss alone. Give it a PUT
					// of its own (unused) key so the message shape holds.
					None => {
						self.put_of(
							&self
								.with_state(|st| {
									st.output_key(
										lease.stage,
										lease.epoch,
										lease.sample,
										WorkKind::Backward,
										&lease.miner,
									)
								})
								.unwrap_or_default(),
						)
						.await?
					},
				};
				Ok(Work::Forward(ForwardWork {
					lease: lease.id,
					epoch: lease.epoch,
					stage: lease.stage,
					sample: lease.sample,
					input,
					data,
					output,
					expires_at_ms: lease.expires_at_ms,
				}))
			},
			WorkKind::Backward => {
				let forward_by = sample
					.forward
					.get(s)
					.cloned()
					.flatten()
					.map(|(m, _)| m)
					.unwrap_or_else(|| lease.miner.clone());
				let grad = sample
					.backward
					.get(s + 1)
					.cloned()
					.flatten()
					.and_then(|(_, o)| o)
					.ok_or_else(|| {
						Refusal::new(ErrorCode::Unavailable, "gradient from the next stage missing")
					})?;
				let data = if s == 0 { Some(self.data_slice(lease.sample).await?) } else { None };
				Ok(Work::Backward(BackwardWork {
					lease: lease.id,
					epoch: lease.epoch,
					stage: lease.stage,
					sample: lease.sample,
					forward_by,
					input,
					data,
					grad_output: self.get_of(&grad).await?,
					output,
					expires_at_ms: lease.expires_at_ms,
				}))
			},
		}
	}

	// ---- methods ------------------------------------------------------------------------------

	async fn get_work(&self, req: Signed<GetWork>) -> Result<Work, Refusal> {
		let nonce = self.authenticate(methods::GET_WORK, &req)?;
		let stage = self.registry().miner(&req.account, Some(req.body.stage))?;
		let now = now_ms();
		// The miner's restarts before a new session of it is applied (only then read again).
		let restarts = std::cell::Cell::new(None);
		let plan = self.commit_after(
			Some(nonce),
			Some((&req.account, stage, now)),
			// A new session of the miner's process goes in first: a restart frees what the earlier
			// process held before this request is planned.
			|st| {
				let ev = match req.body.session {
					Some(s) => st.check_session(&req.account, stage, s, now)?,
					None => None,
				};
				if ev.is_some() {
					restarts.set(Some(st.restarts(&req.account)));
				}
				Ok(ev.into_iter().collect())
			},
			|st| plan_decision(st, &req.account, stage, now),
		)?;
		let (plan, held) = self.hold_idle(&req.account, stage, req.body.session, plan).await?;
		if restarts
			.get()
			.is_some_and(|r| self.with_state(|s| s.restarts(&req.account)) > r)
		{
			tracing::warn!(miner = %req.account, stage, "miner restarted: its leases are released and its lost passes re-listed");
		}
		match plan {
			WorkPlan::Lease(Event::LeaseGranted { lease, .. }) => {
				let sample = self.with_state(|s| s.sample(lease.sample).cloned());
				self.work_item(&lease, sample).await
			},
			WorkPlan::Lease(_) => {
				Err(Refusal::new(ErrorCode::Unavailable, "internal: unexpected plan"))
			},
			WorkPlan::UploadGradient { epoch } => {
				let key = self.with_state(|s| s.gradient_key(stage, epoch, &req.account));
				Ok(Work::UploadGradient { epoch, output: self.put_of(&key).await? })
			},
			WorkPlan::Idle(reason) => Ok(Work::Idle {
				reason,
				// A held request's miner asks again at once: the next request is held in turn.
				retry_after_ms: if held { 0 } else { self.cfg.retry_ms },
			}),
		}
	}

	/// The long poll of `iota_getWork` ([`ServerConfig::work_wait_ms`]): while `plan` is an idle answer
	/// that new state can turn into work ([`waits_for_state`]), wait until events are applied (or the
	/// hold ends) and plan again for `miner` at `stage`, as a live request of it. Returns the last plan
	/// and whether it is an idle answer the request was held for (its retry hint is then 0; a hold can
	/// also end in work, or in an idle answer never held, `Merging` say, which gets the usual hint).
	///
	/// A request of process `session` ([`GetWork::session`]) stops planning once another session of the
	/// miner has been applied (its process restarted while this request was held): it answers the idle
	/// plan it held, so no lease goes to a process that is gone and the new one's leases are its own;
	/// that last planning does not mark the miner live.
	///
	/// # Errors
	/// A refusal of a later plan (the miner's stage moved, …), as the first plan would have given.
	async fn hold_idle(
		&self,
		miner: &AccountId,
		stage: u16,
		session: Option<u64>,
		mut plan: WorkPlan,
	) -> Result<(WorkPlan, bool), Refusal> {
		if self.cfg.work_wait_ms == 0 || !waits_for_state(&plan) {
			return Ok((plan, false));
		}
		let until = tokio::time::Instant::now() + Duration::from_millis(self.cfg.work_wait_ms);
		loop {
			// Registered before planning again, so no event applied in between is missed.
			let changed = self.changed.notified();
			tokio::pin!(changed);
			changed.as_mut().enable();
			let now = now_ms();
			// Checked in `first`, so a superseded request does not mark the miner live. Only the
			// session check refuses with `SessionSuperseded` (a new session, `Ok(Some(_))`, is one
			// started since: this request's is superseded too).
			let next = self.commit_after(
				None,
				Some((miner, stage, now)),
				|st| match session.map(|s| st.check_session(miner, stage, s, now)) {
					None | Some(Ok(None)) => Ok(Vec::new()),
					Some(Ok(Some(_))) => Err(Refusal::new(
						ErrorCode::SessionSuperseded,
						"another session of this miner has started",
					)),
					Some(Err(r)) => Err(r),
				},
				|st| plan_decision(st, miner, stage, now),
			);
			plan = match next {
				Err(r) if r.code == ErrorCode::SessionSuperseded => return Ok((plan, true)),
				next => next?,
			};
			if !waits_for_state(&plan) {
				return Ok((plan, false));
			}
			tokio::select! {
				() = &mut changed => {},
				() = tokio::time::sleep_until(until) => return Ok((plan, true)),
			}
		}
	}

	async fn submit_activation(&self, req: Signed<SubmitActivation>) -> Result<Ack, Refusal> {
		if let Some(t) = &req.body.output {
			limits(t)?;
		}
		let nonce = self.authenticate(methods::SUBMIT_ACTIVATION, &req)?;
		self.registry().miner(&req.account, None)?;
		let max = boundary_max_bytes(&self.spec);
		let (id, out, step) = (req.body.lease, req.body.output.as_ref(), req.body.inner_step);
		let lease = self.peek(&nonce, |st| {
			st.check_submit(&req.account, id, out, step, now_ms(), max).cloned()
		})?;
		let output = match out {
			Some(t) => {
				let bytes = self.fetch_checked(&t.key, &t.hash, t.size).await?;
				let tail = self.spec.model.n_stages().saturating_sub(1);
				let kind = if lease.kind == WorkKind::Forward && usize::from(lease.stage) != tail {
					Kind::Activation
				} else {
					Kind::Gradient
				};
				let [b, tt, w] = self.spec.boundary_shape();
				let expect = Expect {
					kind,
					shape: vec![Some(b as usize), Some(tt as usize), Some(w as usize)],
					max_bytes: max as usize,
				};
				wire::decode_checked(&bytes, &expect).map_err(|e| {
					Refusal::new(ErrorCode::ShapeMismatch, format!("uploaded tensor: {e}"))
				})?;
				Some(t.object())
			},
			None => None,
		};
		let now = now_ms();
		self.commit(nonce, |st| {
			let l = st.check_submit(&req.account, id, out, step, now, max)?;
			let stage = l.stage;
			let ev = Event::LeaseCompleted { lease: id, output, now_ms: now, inner_step: step };
			let mut after = st.backward_done(stage);
			after += u32::from(
				l.kind == WorkKind::Backward
					|| usize::from(stage) + 1 == usize::from(st.config().stages),
			);
			Ok((vec![ev], Ack { backward_done: after, backward_quota: st.config().backward_quota }))
		})
	}

	async fn report_loss(&self, req: Signed<ReportLoss>) -> Result<(), Refusal> {
		let nonce = self.authenticate(methods::REPORT_LOSS, &req)?;
		self.registry().miner(&req.account, None)?;
		self.commit(nonce, |st| {
			Ok((vec![st.check_loss(&req.account, req.body.lease, req.body.loss, now_ms())?], ()))
		})
	}

	async fn report_inner_step(&self, req: Signed<InnerStepReport>) -> Result<(), Refusal> {
		let nonce = self.authenticate(methods::REPORT_INNER_STEP, &req)?;
		let stage = self.registry().miner(&req.account, None)?;
		let b = &req.body;
		self.commit(nonce, |st| {
			let ev = st.check_inner_report(&req.account, stage, b.epoch, b.step, b.state_hash)?;
			Ok((ev.into_iter().collect(), ()))
		})
	}

	async fn release_lease(&self, req: Signed<ReleaseLease>) -> Result<(), Refusal> {
		let nonce = self.authenticate(methods::RELEASE_LEASE, &req)?;
		self.registry().miner(&req.account, None)?;
		self.commit(nonce, |st| {
			Ok((vec![st.check_release(&req.account, req.body.lease, now_ms())?], ()))
		})
	}

	async fn submit_gradient(&self, req: Signed<GradientSubmission>) -> Result<(), Refusal> {
		limits(&req.body.gradient)?;
		let max_chunks = self.max_chunk_count();
		if req.body.chunk_hashes.len() > max_chunks {
			return Err(Refusal::new(
				ErrorCode::Oversize,
				format!("{} chunk hashes, at most {max_chunks}", req.body.chunk_hashes.len()),
			));
		}
		let nonce = self.authenticate(methods::SUBMIT_GRADIENT, &req)?;
		let stage = self.registry().miner(&req.account, None)?;
		let b = &req.body;
		self.peek(&nonce, |st| {
			st.check_gradient(&req.account, stage, b.epoch, &b.gradient, &b.chunk_hashes, b.samples)
		})?;
		let bytes = self.fetch_checked(&b.gradient.key, &b.gradient.hash, b.gradient.size).await?;
		let (p, round) =
			self.with_state(|st| (st.param_count(stage), st.stage(stage).map_or(0, |s| s.round)));
		if let Err(e) =
			iota_protocol::accept_submission(self.spec.merge_codec, &bytes, &b.chunk_hashes, p)
		{
			let refusal = acceptance_refusal("gradient", e);
			// The object is in the bucket: the refusal is evidence a validator can check (epoch record).
			let evidence = Event::GradientRefused {
				stage,
				epoch: b.epoch,
				round,
				miner: req.account.clone(),
				object: b.gradient.object(),
				chunk_hashes: b.chunk_hashes.clone(),
				samples: b.samples,
				reason: refusal.message.clone(),
			};
			if let Err(e) = self.record(vec![evidence]) {
				tracing::warn!(error = %e, "cannot record a refused gradient");
			}
			return Err(refusal);
		}
		self.commit(nonce, |st| {
			Ok((
				vec![st.check_gradient(
					&req.account,
					stage,
					b.epoch,
					&b.gradient,
					&b.chunk_hashes,
					b.samples,
				)?],
				(),
			))
		})
	}

	/// The most chunk hashes any stage's gradient lists. `chunk_count(P)` is not monotonic in `P` (the
	/// chunk size steps in powers of two), so this is the maximum over the stages, not the count of the
	/// largest stage.
	fn max_chunk_count(&self) -> usize {
		(0..self.spec.model.n_stages())
			.filter_map(|s| self.spec.model.stage_param_count(s).ok())
			.map(|p| chunk_count(p as u64))
			.max()
			.unwrap_or(0)
	}

	async fn get_shards(&self, req: Signed<MergeQuery>) -> Result<ShardAssignment, Refusal> {
		let nonce = self.authenticate(methods::GET_SHARDS, &req)?;
		let stage = self.registry().miner(&req.account, None)?;
		let epoch = req.body.epoch;
		let (plan, subs) = self.commit_live(nonce, (&req.account, stage, now_ms()), |st| {
			let plan = st.plan_of(stage, epoch)?.clone();
			if !plan.members.contains(&req.account) {
				return Err(Refusal::new(
					ErrorCode::Invalid,
					"you submitted no gradient this round",
				));
			}
			Ok((vec![], (plan, st.submissions(stage))))
		})?;
		let mut submissions = Vec::with_capacity(subs.len());
		for (miner, s) in subs {
			submissions.push(self.source_of(&miner, &s).await?);
		}
		let pos = plan.members.iter().position(|m| m == &req.account).unwrap_or(usize::MAX) as u32;
		let mut shards = Vec::new();
		for d in plan.shards.iter().filter(|d| d.is_owned_by(pos)) {
			let key = self.with_state(|st| st.shard_key(stage, epoch, d.index, &req.account));
			shards.push(ShardTask {
				shard: d.index,
				range: [d.start, d.end],
				output: self.put_of(&key).await?,
			});
		}
		Ok(ShardAssignment {
			epoch,
			round: plan.round,
			param_count: plan.param_count,
			submissions,
			shards,
		})
	}

	async fn submit_shard(&self, req: Signed<SubmitShard>) -> Result<(), Refusal> {
		limits(&req.body.reduced)?;
		let nonce = self.authenticate(methods::SUBMIT_SHARD, &req)?;
		let stage = self.registry().miner(&req.account, None)?;
		let b = &req.body;
		self.peek(&nonce, |st| {
			st.check_shard(&req.account, stage, b.epoch, b.round, b.shard, &b.reduced)
		})?;
		let bytes = self.fetch_checked(&b.reduced.key, &b.reduced.hash, b.reduced.size).await?;
		let range = self.with_state(|st| {
			st.plan_of(stage, b.epoch)
				.ok()
				.and_then(|p| p.shards.get(b.shard as usize))
				.map(|d| [d.start, d.end])
		});
		// check_shard above refused an unknown shard; the plan cannot have gone since.
		let range = range.ok_or_else(|| Refusal::new(ErrorCode::Unknown, "no such shard"))?;
		let p = self.with_state(|st| st.param_count(stage));
		iota_protocol::accept_shard(self.spec.merge_codec, &bytes, range, p)
			.map_err(|e| acceptance_refusal("reduced shard", e))?;
		self.commit_live(nonce, (&req.account, stage, now_ms()), |st| {
			Ok((
				vec![st.check_shard(&req.account, stage, b.epoch, b.round, b.shard, &b.reduced)?],
				(),
			))
		})
	}

	async fn get_manifest(&self, req: Signed<MergeQuery>) -> Result<MergeView, Refusal> {
		let nonce = self.authenticate(methods::GET_MANIFEST, &req)?;
		let stage = self.registry().miner(&req.account, None)?;
		let plan = self.commit_live(nonce, (&req.account, stage, now_ms()), |st| {
			Ok((vec![], st.manifest(&req.account, stage, req.body.epoch)?))
		})?;
		Ok(match plan {
			ManifestPlan::Reducing { present, expected } => {
				MergeView::Reducing { present, expected }
			},
			ManifestPlan::Committed { state_hash } => MergeView::Committed { state_hash },
			ManifestPlan::Ready { shards, samples, checkpoint_key } => {
				let mut out = Vec::with_capacity(shards.len());
				for (shard, range, o) in shards {
					out.push(ReducedShard { shard, range, object: self.get_of(&o).await? });
				}
				let checkpoint = match checkpoint_key {
					Some(k) => Some(self.put_of(&k).await?),
					None => None,
				};
				MergeView::Ready { shards: out, samples, checkpoint }
			},
		})
	}

	async fn get_challenges(&self, req: Signed<ChallengeQuery>) -> Result<Challenges, Refusal> {
		let nonce = self.authenticate(methods::GET_CHALLENGES, &req)?;
		let stage = self.registry().miner(&req.account, None)?;
		let epoch = req.body.epoch;
		let drawn =
			self.commit(nonce, |st| Ok((vec![], st.challenges_of(&req.account, stage, epoch)?)))?;
		let Some(drawn) = drawn else {
			return Ok(Challenges { epoch, seeded: false, reveals: Vec::new() });
		};
		let run = self.with_state(|st| st.config().run.clone());
		let me = crate::state::miner_id(&req.account);
		let mut reveals = Vec::with_capacity(drawn.len());
		for c in drawn {
			let mut states = Vec::with_capacity(c.states.len());
			for (j, hash) in c.states {
				let key = keys::inner_state(&run, u64::from(epoch), u32::from(stage), j, &me);
				states.push(RevealedState { state: j, put: self.put_of(&key).await?, hash });
			}
			reveals.push(Reveal { step: c.step, states });
		}
		Ok(Challenges { epoch, seeded: true, reveals })
	}

	async fn submit_state_hash(&self, req: Signed<SubmitStateHash>) -> Result<(), Refusal> {
		if let Some(t) = &req.body.checkpoint {
			limits(t)?;
		}
		let nonce = self.authenticate(methods::SUBMIT_STATE_HASH, &req)?;
		let stage = self.registry().miner(&req.account, None)?;
		let b = &req.body;
		self.peek(&nonce, |st| {
			st.check_attest(&req.account, stage, b.epoch, b.state_hash, b.checkpoint.as_ref())
		})?;
		if let Some(t) = &b.checkpoint {
			self.fetch_checked(&t.key, &t.hash, t.size).await?;
		}
		self.commit_live(nonce, (&req.account, stage, now_ms()), |st| {
			Ok((
				vec![st.check_attest(
					&req.account,
					stage,
					b.epoch,
					b.state_hash,
					b.checkpoint.as_ref(),
				)?],
				(),
			))
		})
	}

	async fn presign_get(&self, req: Signed<PresignGet>) -> Result<Vec<PresignedRequest>, Refusal> {
		if req.body.keys.len() > MAX_PRESIGN_KEYS
			|| req.body.keys.iter().any(|k| k.len() > MAX_KEY_LEN)
		{
			return Err(Refusal::new(
				ErrorCode::Oversize,
				format!("at most {MAX_PRESIGN_KEYS} keys of at most {MAX_KEY_LEN} bytes"),
			));
		}
		let nonce = self.authenticate(methods::PRESIGN_GET, &req)?;
		let miner_stage = {
			let reg = self.registry();
			match reg.validator(&req.account) {
				Ok(()) => None,
				Err(e) => match reg.miner(&req.account, None) {
					Ok(s) => Some(s),
					Err(_) => return Err(e),
				},
			}
		};
		let run = self.with_state(|s| s.config().run.clone());
		for k in &req.body.keys {
			let parsed =
				keys::parse(k).map_err(|e| Refusal::new(ErrorCode::Invalid, e.to_string()))?;
			if !k.starts_with(&keys::run_scope(&run)) {
				return Err(Refusal::new(ErrorCode::Invalid, format!("{k} is outside run {run}")));
			}
			if let Some(stage) = miner_stage {
				let ok = matches!(&parsed, keys::ObjectKey::StageCheckpoint { stage: s, .. }
					| keys::ObjectKey::InitCheckpoint { stage: s, .. } if *s == u32::from(stage));
				if !ok {
					return Err(Refusal::new(
						ErrorCode::WrongRole,
						"miners may presign only their stage's checkpoints and initial weights",
					));
				}
			}
		}
		self.commit(nonce, |_| Ok((vec![], ())))?;
		let mut out = Vec::with_capacity(req.body.keys.len());
		for k in &req.body.keys {
			out.push(self.store.presign_get(k, self.expiry()).await.map_err(storage_refusal)?);
		}
		Ok(out)
	}

	async fn presign_put(&self, req: Signed<PresignPut>) -> Result<ObjectPut, Refusal> {
		if req.body.key.len() > MAX_KEY_LEN {
			return Err(Refusal::new(
				ErrorCode::Oversize,
				format!("key longer than {MAX_KEY_LEN} bytes"),
			));
		}
		let nonce = self.authenticate(methods::PRESIGN_PUT, &req)?;
		self.registry().validator(&req.account)?;
		let run = self.with_state(|s| s.config().run.clone());
		let parsed = keys::parse(&req.body.key)
			.map_err(|e| Refusal::new(ErrorCode::Invalid, e.to_string()))?;
		let me = miner_id(&req.account);
		let ok = matches!(&parsed, keys::ObjectKey::Evidence { run: r, validator, .. } if *r == run && *validator == me);
		if !ok {
			return Err(Refusal::new(
				ErrorCode::Invalid,
				"only your own evidence keys of this run",
			));
		}
		self.commit(nonce, |_| Ok((vec![], ())))?;
		self.put_of(&req.body.key).await
	}

	/// A recorded submission of `miner` as readers get it (a presigned GET of its object).
	async fn source_of(
		&self,
		miner: &AccountId,
		s: &crate::state::Submission,
	) -> Result<SubmissionSource, Refusal> {
		Ok(SubmissionSource {
			miner: miner.clone(),
			samples: s.samples,
			object: self.get_of(&s.object).await?,
			chunk_hashes: s.chunk_hashes.clone(),
		})
	}

	async fn epoch_record(&self, req: Signed<MergeQuery>) -> Result<EpochRecord, Refusal> {
		let nonce = self.authenticate(methods::EPOCH_RECORD, &req)?;
		self.registry().validator(&req.account)?;
		let epoch = req.body.epoch;
		let audit = self.commit(nonce, |st| {
			let a = st.audit(epoch).cloned().ok_or_else(|| {
				Refusal::new(ErrorCode::Unknown, format!("no record of epoch {epoch}"))
			})?;
			Ok((vec![], a))
		})?;
		let pathway_log = match &audit.pathway_log {
			Some(o) => Some(self.get_of(o).await?),
			None => None,
		};
		let mut shard_copies = Vec::new();
		for (stage, round, shard, range, c) in &audit.copies {
			shard_copies.push(ShardCopy {
				stage: *stage,
				round: *round,
				shard: *shard,
				range: *range,
				miner: c.miner.clone(),
				object: self.get_of(&c.object).await?,
			});
		}
		let mut shard_mismatches = Vec::new();
		for (stage, round, shard, range, copies) in &audit.mismatches {
			let mut cs = Vec::new();
			for c in copies {
				cs.push(ShardCopy {
					stage: *stage,
					round: *round,
					shard: *shard,
					range: *range,
					miner: c.miner.clone(),
					object: self.get_of(&c.object).await?,
				});
			}
			shard_mismatches.push(ShardMismatch {
				stage: *stage,
				round: *round,
				shard: *shard,
				copies: cs,
			});
		}
		let mut submissions = Vec::new();
		for (stage, round, miner, s) in &audit.submissions {
			let source = self.source_of(miner, s).await?;
			submissions.push(StageSubmission { stage: *stage, round: *round, source });
		}
		let mut refused_vectors = Vec::new();
		for (stage, round, miner, s, reason) in &audit.refused {
			let source = self.source_of(miner, s).await?;
			let (stage, round, reason) = (*stage, *round, reason.clone());
			refused_vectors.push(RefusedVector { stage, round, source, reason });
		}
		Ok(EpochRecord {
			epoch,
			pathway_log,
			shard_mismatches,
			shard_copies,
			submissions,
			refused_vectors,
		})
	}

	/// `iota_status`.
	pub fn status(&self) -> Status {
		let now = now_ms();
		let refused = self.refused.lock().unwrap_or_else(|e| e.into_inner()).clone();
		let inner = self.lock();
		let st = &inner.state;
		let (tokens_trained, wire_bytes) = st.totals();
		let miners = st
			.miner_activity()
			.into_iter()
			.map(|mut m| {
				if let Some(by_code) = refused.get(&m.account.0) {
					m.refused = by_code.values().sum();
					m.refusals = by_code.iter().map(|(c, n)| ((*c).to_owned(), *n)).collect();
				}
				m
			})
			.collect();
		Status {
			run: st.config().run.to_string(),
			spec_hash: iota_primitives::ContentHash::of(self.spec_json.as_bytes()),
			finalized_block: self.finalized.load(std::sync::atomic::Ordering::Relaxed),
			stages: st.stage_status(),
			last_epoch_loss: st.summaries().last().map(|s| s.loss),
			tokens_trained,
			tokens_per_sec: st.tokens_per_sec(now),
			wire_bytes,
			miners,
			epochs: st.summaries(),
			now_ms: now,
		}
	}
}

/// Largest wire message of one boundary tensor of the run ([`iota_protocol::encoding::max_wire_bytes`]).
pub fn boundary_max_bytes(spec: &RunSpec) -> u64 {
	iota_protocol::encoding::max_wire_bytes(spec.boundary_shape())
}

fn limits(t: &TensorRef) -> Result<(), Refusal> {
	if t.key.len() > MAX_KEY_LEN {
		return Err(Refusal::new(
			ErrorCode::Oversize,
			format!("key of {} bytes, at most {MAX_KEY_LEN}", t.key.len()),
		));
	}
	if t.shape.len() > MAX_SHAPE_RANK {
		return Err(Refusal::new(
			ErrorCode::Oversize,
			format!("shape of rank {}, at most {MAX_SHAPE_RANK}", t.shape.len()),
		));
	}
	Ok(())
}

fn storage_refusal(e: StorageError) -> Refusal {
	Refusal::new(ErrorCode::Unavailable, format!("object store: {e}"))
}

/// The jsonrpsee implementation of `IotaApi` over a shared [`Orchestrator`].
#[derive(Clone)]
pub struct RpcImpl(pub Arc<Orchestrator>);

#[async_trait]
impl IotaApiServer for RpcImpl {
	async fn get_work(&self, req: Signed<GetWork>) -> RpcResult<Work> {
		let a = req.account.clone();
		self.0.finish(methods::GET_WORK, &a, self.0.get_work(req).await)
	}
	async fn submit_activation(&self, req: Signed<SubmitActivation>) -> RpcResult<Ack> {
		let a = req.account.clone();
		self.0
			.finish(methods::SUBMIT_ACTIVATION, &a, self.0.submit_activation(req).await)
	}
	async fn report_loss(&self, req: Signed<ReportLoss>) -> RpcResult<()> {
		let a = req.account.clone();
		self.0.finish(methods::REPORT_LOSS, &a, self.0.report_loss(req).await)
	}
	async fn get_challenges(&self, req: Signed<ChallengeQuery>) -> RpcResult<Challenges> {
		let a = req.account.clone();
		self.0.finish(methods::GET_CHALLENGES, &a, self.0.get_challenges(req).await)
	}
	async fn report_inner_step(&self, req: Signed<InnerStepReport>) -> RpcResult<()> {
		let a = req.account.clone();
		self.0
			.finish(methods::REPORT_INNER_STEP, &a, self.0.report_inner_step(req).await)
	}
	async fn release_lease(&self, req: Signed<ReleaseLease>) -> RpcResult<()> {
		let a = req.account.clone();
		self.0.finish(methods::RELEASE_LEASE, &a, self.0.release_lease(req).await)
	}
	async fn submit_gradient(&self, req: Signed<GradientSubmission>) -> RpcResult<()> {
		let a = req.account.clone();
		self.0.finish(methods::SUBMIT_GRADIENT, &a, self.0.submit_gradient(req).await)
	}
	async fn get_shards(&self, req: Signed<MergeQuery>) -> RpcResult<ShardAssignment> {
		let a = req.account.clone();
		self.0.finish(methods::GET_SHARDS, &a, self.0.get_shards(req).await)
	}
	async fn submit_shard(&self, req: Signed<SubmitShard>) -> RpcResult<()> {
		let a = req.account.clone();
		self.0.finish(methods::SUBMIT_SHARD, &a, self.0.submit_shard(req).await)
	}
	async fn get_manifest(&self, req: Signed<MergeQuery>) -> RpcResult<MergeView> {
		let a = req.account.clone();
		self.0.finish(methods::GET_MANIFEST, &a, self.0.get_manifest(req).await)
	}
	async fn submit_state_hash(&self, req: Signed<SubmitStateHash>) -> RpcResult<()> {
		let a = req.account.clone();
		self.0
			.finish(methods::SUBMIT_STATE_HASH, &a, self.0.submit_state_hash(req).await)
	}
	async fn presign_get(&self, req: Signed<PresignGet>) -> RpcResult<Vec<PresignedRequest>> {
		let a = req.account.clone();
		self.0.finish(methods::PRESIGN_GET, &a, self.0.presign_get(req).await)
	}
	async fn presign_put(&self, req: Signed<PresignPut>) -> RpcResult<ObjectPut> {
		let a = req.account.clone();
		self.0.finish(methods::PRESIGN_PUT, &a, self.0.presign_put(req).await)
	}
	async fn epoch_record(&self, req: Signed<MergeQuery>) -> RpcResult<EpochRecord> {
		let a = req.account.clone();
		self.0.finish(methods::EPOCH_RECORD, &a, self.0.epoch_record(req).await)
	}
	async fn status(&self) -> RpcResult<Status> {
		self.0.metrics.requests.with_label_values(&["iota_status", "ok"]).inc();
		Ok(self.0.status())
	}
	async fn run_spec(&self) -> RpcResult<RunSpecText> {
		Ok(RunSpecText { json: self.0.spec_json.clone() })
	}
	async fn subscribe_phases(&self, pending: PendingSubscriptionSink) -> SubscriptionResult {
		let mut rx = self.0.phases.subscribe();
		let sink = pending.accept().await?;
		loop {
			tokio::select! {
				ev = rx.recv() => match ev {
					Ok(ev) => {
						if sink.send(SubscriptionMessage::from_json(&ev)?).await.is_err() {
							break;
						}
					},
					Err(broadcast::error::RecvError::Lagged(_)) => continue,
					Err(broadcast::error::RecvError::Closed) => break,
				},
				() = sink.closed() => break,
			}
		}
		Ok(())
	}
}

/// Starts the JSON-RPC server (WebSocket and HTTP) on `addr`.
///
/// # Errors
/// Binding the address.
pub async fn serve(
	orch: Arc<Orchestrator>,
	addr: SocketAddr,
) -> std::io::Result<(SocketAddr, ServerHandle)> {
	let server = Server::builder()
		.max_request_body_size(orch.cfg.max_request_bytes)
		.max_response_body_size(iota_rpc::client::CLIENT_MAX_MESSAGE_BYTES)
		.max_connections(orch.cfg.max_connections)
		.build(addr)
		.await?;
	let local = server.local_addr()?;
	let handle = server.start(RpcImpl(orch).into_rpc());
	Ok((local, handle))
}

/// Which stages have a call due before `events` are applied, if any of them is work that can make one
/// due (a pass completed, a gradient, shard or attestation accepted); `None` otherwise (nothing to check).
fn due_stages(state: &State, events: &[Event]) -> Option<Vec<bool>> {
	let relevant = events.iter().any(|e| {
		matches!(
			e,
			Event::LeaseCompleted { .. }
				| Event::GradientAccepted { .. }
				| Event::ShardAccepted { .. }
				| Event::ShardResolved { .. }
				| Event::StateAttested { .. }
				| Event::MergeSeed { .. }
		)
	});
	relevant.then(|| (0..state.config().stages).map(|s| state.transition_due(s)).collect())
}

/// The RPC refusal of a vector the protocol's acceptance rule refused ([`iota_protocol::acceptance`]):
/// each defect its own code.
fn acceptance_refusal(what: &str, e: iota_protocol::Refused) -> Refusal {
	use iota_protocol::Refused;
	let code = match e {
		Refused::Length { .. } | Refused::ChunkCount { .. } => ErrorCode::ShapeMismatch,
		Refused::ChunkHash { .. } => ErrorCode::HashMismatch,
		Refused::NonFinite { .. } => ErrorCode::NonFinite,
		Refused::Malformed { .. } => ErrorCode::Invalid,
	};
	Refusal::new(code, format!("{what}: {e}"))
}
