//! Unit and property tests of the state machine.

use super::*;
use iota_rpc::types::TensorRef;

const LEASE: u64 = 1_000;
const SHAPE: [u64; 3] = [2, 4, 8];

fn acc(i: u8) -> AccountId {
	AccountId::from([i; 32])
}

fn cfg(quota: u32, max_leases: u32) -> StateConfig {
	StateConfig {
		run: Id::new("run").unwrap(),
		stages: 3,
		backward_quota: quota,
		lease_ms: LEASE,
		max_leases,
		tokens_per_sample: 8,
		boundary_shape: SHAPE,
		param_counts: vec![10, 20, 30],
		merge_codec: Default::default(),
		accumulate: None,
		max_in_flight: None,
	}
}

/// A state and the events applied to it (to check replay).
struct World {
	st: State,
	log: Vec<Event>,
}

impl World {
	/// Stage `s` has members `m[s]`; all Training at epoch 0.
	fn new(quota: u32, max_leases: u32, members: &[&[u8]]) -> Self {
		let mut w = World { st: State::new(cfg(quota, max_leases)), log: Vec::new() };
		for (s, m) in members.iter().enumerate() {
			w.chain(s as u16, 0, Phase::Training, 0, m, 0);
		}
		w
	}
	fn apply(&mut self, e: Event) {
		self.st.apply(&e);
		self.log.push(e);
	}
	fn chain(
		&mut self,
		stage: u16,
		epoch: u32,
		phase: Phase,
		round: u32,
		members: &[u8],
		now_ms: u64,
	) {
		let members = members.iter().map(|i| acc(*i)).collect();
		self.apply(Event::ChainStage { stage, epoch, phase, round, members, block: 1, now_ms });
	}
	/// getWork, granting the lease if one is planned.
	fn work(&mut self, miner: u8, stage: u16, now: u64) -> WorkPlan {
		self.st.touch(&acc(miner), stage, now);
		let plan = self.st.plan_work(&acc(miner), stage, now).unwrap();
		if let WorkPlan::Lease(e) = &plan {
			self.apply(e.clone());
		}
		plan
	}
	fn lease(&mut self, miner: u8, stage: u16, now: u64) -> Lease {
		match self.work(miner, stage, now) {
			WorkPlan::Lease(Event::LeaseGranted { lease, .. }) => lease,
			other => {
				panic!("expected a lease for miner {miner} at stage {stage}, got {other:?}")
			},
		}
	}
	fn output(&self, l: &Lease) -> Option<TensorRef> {
		l.output_key.as_ref().map(|k| TensorRef {
			key: k.clone(),
			hash: ContentHash::of(k.as_bytes()),
			size: 100,
			shape: SHAPE.to_vec(),
		})
	}
	fn submit(&mut self, l: &Lease, now: u64) {
		let out = self.output(l);
		self.st.check_submit(&l.miner, l.id, out.as_ref(), 0, now, 1 << 20).unwrap();
		self.apply(Event::LeaseCompleted {
			lease: l.id,
			output: out.as_ref().map(TensorRef::object),
			now_ms: now,
			inner_step: 0,
		});
	}
	/// `n` accepted backward passes of `miner` at `stage` in `epoch` at `now` ms, as the server records
	/// them (a lease granted, then completed), for merge tests that run no samples: the passes count
	/// for [`State::accepted_passes`] (a submission's weight) and nothing else (their samples are in no
	/// queue or record).
	fn passes(&mut self, miner: u8, stage: u16, epoch: u32, n: u32, now: u64) {
		for _ in 0..n {
			let id = self.st.next_lease.max(1 << 40);
			let lease = Lease {
				id,
				miner: acc(miner),
				stage,
				epoch,
				sample: u64::MAX - id,
				kind: WorkKind::Backward,
				granted_ms: now,
				expires_at_ms: now + LEASE,
				output_key: None,
				recompute: false,
			};
			self.apply(Event::LeaseGranted { lease, fresh: false });
			self.apply(Event::LeaseCompleted {
				lease: id,
				output: None,
				now_ms: now,
				inner_step: 0,
			});
		}
	}
	fn loss(&mut self, l: &Lease, loss: f32, now: u64) {
		let e = self.st.check_loss(&l.miner, l.id, loss, now).unwrap();
		self.apply(e);
	}
	/// One sample through stages 0..3 with miners (head, mid, tail), forward and backward.
	fn run_sample(&mut self, m: [u8; 3], now: u64) -> u64 {
		let h = self.lease(m[0], 0, now);
		self.submit(&h, now);
		let f1 = self.lease(m[1], 1, now);
		self.submit(&f1, now);
		let t = self.lease(m[2], 2, now);
		self.loss(&t, 2.5, now);
		self.submit(&t, now);
		let b1 = self.lease(m[1], 1, now);
		assert_eq!(b1.kind, WorkKind::Backward);
		self.submit(&b1, now);
		let b0 = self.lease(m[0], 0, now);
		assert_eq!(b0.kind, WorkKind::Backward);
		self.submit(&b0, now);
		h.sample
	}
}

fn code<T: std::fmt::Debug>(r: Result<T, Refusal>) -> ErrorCode {
	r.unwrap_err().code
}

#[test]
fn head_issues_its_epoch_quota_then_idles() {
	let mut w = World::new(3, 8, &[&[1], &[2], &[3]]);
	let samples: Vec<u64> = (0..3).map(|_| w.lease(1, 0, 0).sample).collect();
	assert_eq!(samples, vec![0, 1, 2]);
	assert_eq!(w.work(1, 0, 0), WorkPlan::Idle(IdleReason::QuotaIssued));
	assert_eq!(w.work(2, 1, 0), WorkPlan::Idle(IdleReason::QueueEmpty));
}

#[test]
fn a_head_miner_starts_no_sample_past_its_bound_until_one_is_through_the_heads_backward() {
	let mut w = World {
		st: State::new(StateConfig { max_in_flight: Some(2), ..cfg(10, 8) }),
		log: Vec::new(),
	};
	for (s, m) in [&[1u8, 4][..], &[2], &[3]].iter().enumerate() {
		w.chain(s as u16, 0, Phase::Training, 0, m, 0);
	}
	// One leased (not yet accepted) and one accepted forward: both count.
	let a = w.lease(1, 0, 0);
	w.submit(&a, 0);
	let b = w.lease(1, 0, 0);
	assert_eq!(w.work(1, 0, 0), WorkPlan::Idle(IdleReason::InFlightLimit));
	// Per head miner: another one starts its own samples.
	assert_eq!(w.lease(4, 0, 0).sample, 2);
	// Sample `a` goes through the middle and the tail; its head backward frees a place, and that
	// backward is handed out first.
	w.submit(&b, 0);
	let f1 = w.lease(2, 1, 0);
	assert_eq!(f1.sample, a.sample);
	w.submit(&f1, 0);
	let t = w.lease(3, 2, 0);
	w.loss(&t, 2.5, 0);
	w.submit(&t, 0);
	let b1 = w.lease(2, 1, 0);
	w.submit(&b1, 0);
	// At the bound, the head's backward is still handed out (it is what frees a place).
	let b0 = w.lease(1, 0, 0);
	assert_eq!((b0.kind, b0.sample), (WorkKind::Backward, a.sample));
	w.submit(&b0, 0);
	let c = w.lease(1, 0, 0);
	assert_eq!((c.kind, c.sample), (WorkKind::Forward, 3), "a place freed");
	assert_eq!(w.work(1, 0, 0), WorkPlan::Idle(IdleReason::InFlightLimit));
	// The bound's default: local mode only, the inner step's micro-batches, at least 2.
	assert_eq!(default_max_in_flight(Some(2)), Some(2));
	assert_eq!(default_max_in_flight(Some(1)), Some(2));
	assert_eq!(default_max_in_flight(Some(8)), Some(8));
	assert_eq!(default_max_in_flight(None), None);
}

#[test]
fn in_flight_limit_per_miner() {
	let mut w = World::new(10, 2, &[&[1, 4], &[2], &[3]]);
	w.lease(1, 0, 0);
	w.lease(1, 0, 0);
	assert_eq!(w.work(1, 0, 0), WorkPlan::Idle(IdleReason::InFlightLimit));
	assert_eq!(
		w.lease(4, 0, 0).sample,
		2,
		"another miner is not limited by the first one's leases"
	);
}

#[test]
fn a_sample_flows_forward_and_back_and_lands_in_the_pathway_log() {
	let mut w = World::new(2, 4, &[&[1], &[2], &[3]]);
	let n = w.run_sample([1, 2, 3], 10);
	let s = w.st.sample(n).unwrap();
	assert!(s.complete());
	assert_eq!(s.loss, Some(2.5));
	assert_eq!(w.st.stage(0).unwrap().backward_done, 1);
	assert_eq!(w.st.stage(2).unwrap().backward_done, 1);
	assert_eq!(w.st.report(1), StageReport { backward_done: 1, gradients_submitted: 0 });
	let log = w.st.pathway_log(0);
	log.validate().unwrap();
	assert_eq!(log.records.len(), 1);
	let r = &log.records[0];
	assert_eq!(r.forward, vec![acc(1), acc(2), acc(3)]);
	assert_eq!(r.backward, vec![acc(1), acc(2), acc(3)]);
	assert_eq!(r.backward_outputs[0], None);
	assert!(r.backward_outputs[1].is_some());
	assert_eq!(w.st.totals().0, 8);
}

#[test]
fn bad_submissions_are_refused_with_distinct_codes() {
	let mut w = World::new(2, 4, &[&[1], &[2], &[3]]);
	let l = w.lease(1, 0, 0);
	let good = w.output(&l).unwrap();
	let now = 5;
	assert_eq!(
		code(w.st.check_submit(&acc(1), 999, Some(&good), 0, now, 1 << 20)),
		ErrorCode::Unknown
	);
	assert_eq!(
		code(w.st.check_submit(&acc(2), l.id, Some(&good), 0, now, 1 << 20)),
		ErrorCode::Invalid
	);
	let other_key = TensorRef { key: "v1/runs/run/x".into(), ..good.clone() };
	assert_eq!(
		code(w.st.check_submit(&acc(1), l.id, Some(&other_key), 0, now, 1 << 20)),
		ErrorCode::Invalid
	);
	let bad_shape = TensorRef { shape: vec![2, 4, 9], ..good.clone() };
	assert_eq!(
		code(w.st.check_submit(&acc(1), l.id, Some(&bad_shape), 0, now, 1 << 20)),
		ErrorCode::ShapeMismatch
	);
	let too_big = TensorRef { size: 2 << 20, ..good.clone() };
	assert_eq!(
		code(w.st.check_submit(&acc(1), l.id, Some(&too_big), 0, now, 1 << 20)),
		ErrorCode::ShapeMismatch
	);
	assert_eq!(code(w.st.check_submit(&acc(1), l.id, None, 0, now, 1 << 20)), ErrorCode::Invalid);
	assert_eq!(
		code(w.st.check_submit(&acc(1), l.id, Some(&good), 0, LEASE + 1, 1 << 20)),
		ErrorCode::LeaseExpired
	);
	assert_eq!(
		code(w.st.check_loss(&acc(1), l.id, 1.0, now)),
		ErrorCode::WrongStage,
		"not a tail lease"
	);
	w.submit(&l, now);
	let f1 = w.lease(2, 1, now);
	w.submit(&f1, now);
	let t = w.lease(3, 2, now);
	let tout = w.output(&t).unwrap();
	assert_eq!(
		code(w.st.check_submit(&acc(3), t.id, Some(&tout), 0, now, 1 << 20)),
		ErrorCode::Invalid,
		"loss first"
	);
	assert_eq!(code(w.st.check_loss(&acc(3), t.id, f32::NAN, now)), ErrorCode::Invalid);
	assert_eq!(code(w.st.check_loss(&acc(3), t.id, -1.0, now)), ErrorCode::Invalid);
	w.loss(&t, 1.0, now);
	assert_eq!(
		code(w.st.check_loss(&acc(3), t.id, 1.0, now)),
		ErrorCode::Invalid,
		"reported twice"
	);
	assert_eq!(code(w.st.plan_work(&acc(1), 7, now)), ErrorCode::WrongStage);
}

#[test]
fn an_expired_lease_is_relisted_and_its_holder_refused() {
	let mut w = World::new(2, 4, &[&[1, 4], &[2], &[3]]);
	let l = w.lease(1, 0, 0);
	assert!(w.st.expired_leases(LEASE).is_empty(), "not before the deadline");
	let expired = w.st.expired_leases(LEASE + 1);
	assert_eq!(expired, vec![Event::LeaseExpired { lease: l.id }]);
	for e in expired {
		w.apply(e);
	}
	assert_eq!(w.st.leases_expired_total(), 1);
	let out = w.output(&l);
	assert_eq!(
		code(w.st.check_submit(&acc(1), l.id, out.as_ref(), 0, LEASE + 2, 1 << 20)),
		ErrorCode::LeaseExpired
	);
	let again = w.lease(4, 0, LEASE + 2);
	assert_eq!(again.sample, l.sample, "the re-listed item comes before new samples");
	// A release re-lists at once too.
	let e = w.st.check_release(&acc(4), again.id, LEASE + 3).unwrap();
	w.apply(e);
	assert_eq!(w.lease(1, 0, LEASE + 3).sample, l.sample);
}

#[test]
fn backward_goes_to_the_forward_miner_while_live_then_to_anyone() {
	let mut w = World::new(4, 4, &[&[1], &[2, 5], &[3]]);
	let h = w.lease(1, 0, 0);
	w.submit(&h, 0);
	let f = w.lease(2, 1, 0);
	w.submit(&f, 0);
	let t = w.lease(3, 2, 0);
	w.loss(&t, 1.0, 0);
	w.submit(&t, 0);
	// Miner 5 may not take miner 2's backward while miner 2 is live.
	assert_eq!(w.work(5, 1, 10), WorkPlan::Idle(IdleReason::QueueEmpty));
	// Miner 2 went silent for longer than a lease: anyone takes it, and recomputes.
	let b = w.lease(5, 1, 10 + LEASE + 1);
	assert_eq!((b.kind, b.sample), (WorkKind::Backward, h.sample));
	assert_eq!(
		w.st.sample(h.sample).unwrap().forward[1].as_ref().unwrap().0,
		acc(2),
		"forward_by is miner 2"
	);
	// Miner 5 lets it expire: the item is open to anyone, miner 2 included.
	for e in w.st.expired_leases(b.expires_at_ms + 1) {
		w.apply(e);
	}
	let b2 = w.lease(2, 1, b.expires_at_ms + 2);
	assert_eq!(b2.sample, h.sample);
	w.submit(&b2, b.expires_at_ms + 2);
	assert_eq!(w.st.stage(1).unwrap().backward_done, 1);
}

#[test]
fn items_of_a_later_epoch_wait_and_stale_ones_are_dropped() {
	let mut w = World::new(2, 4, &[&[1], &[2], &[3]]);
	// The head merged epoch 0 and is training epoch 1; stage 1 is still in epoch 0.
	w.chain(0, 1, Phase::Training, 0, &[1], 5);
	let h = w.lease(1, 0, 10);
	assert_eq!(h.sample, 2, "epoch 1 starts at sample Q = 2");
	w.submit(&h, 10);
	assert_eq!(w.work(2, 1, 10), WorkPlan::Idle(IdleReason::QueueEmpty), "epoch 1 item waits");
	w.chain(1, 0, Phase::WeightsUploading, 0, &[2], 11);
	assert_eq!(w.work(2, 1, 11), WorkPlan::UploadGradient { epoch: 0 });
	w.chain(1, 1, Phase::Training, 0, &[2], 12);
	// A lease of stage 0 still out when its stage leaves Training cannot count any more.
	let late = w.lease(1, 0, 13);
	w.chain(0, 1, Phase::WeightsUploading, 0, &[1], 14);
	let out = w.output(&late);
	assert_eq!(
		code(w.st.check_submit(&acc(1), late.id, out.as_ref(), 0, 15, 1 << 20)),
		ErrorCode::WrongPhase
	);
	assert_eq!(w.lease(2, 1, 12).sample, 2);
}

fn tensor(key: String, len: u64, tag: &[u8]) -> TensorRef {
	TensorRef { key, hash: ContentHash::of(tag), size: len * 4, shape: vec![len] }
}

#[test]
fn a_member_without_backward_passes_does_not_hold_up_the_upload_phase() {
	// Stage 1 has two miners; only miner 2 gets the epoch's one sample.
	let mut w = World::new(1, 4, &[&[1], &[2, 4], &[3]]);
	w.run_sample([1, 2, 3], 10);
	// Training with the quota done: uploads are open, and miner 4 (no pass) already counts as done.
	assert_eq!(w.st.report(1).gradients_submitted, 1);
	w.chain(1, 0, Phase::WeightsUploading, 0, &[2, 4], 20);
	// Miner 4 has nothing to submit and is counted as done; miner 2's gradient is still awaited.
	assert_eq!(w.st.report(1), StageReport { backward_done: 1, gradients_submitted: 1 });
	let g = tensor(w.st.gradient_key(1, 0, &acc(2)), 20, b"g");
	let e = w.st.check_gradient(&acc(2), 1, 0, &g, &[ContentHash::of(b"c")], 1).unwrap();
	w.apply(e);
	assert_eq!(w.st.report(1).gradients_submitted, 2);
}

#[test]
fn a_submission_weighs_at_most_the_passes_accepted_from_its_miner() {
	// Stage 0 has two miners; each runs one of the epoch's two samples.
	let mut w = World::new(2, 4, &[&[1, 4], &[2], &[3]]);
	w.run_sample([1, 2, 3], 10);
	w.run_sample([4, 2, 3], 20);
	assert_eq!((w.st.accepted_passes(0, 0, &acc(1)), w.st.accepted_passes(0, 0, &acc(4))), (1, 1));
	assert_eq!(w.st.accepted_passes(0, 1, &acc(2)), 2);
	assert_eq!(
		w.st.accepted_passes(0, 2, &acc(3)),
		2,
		"the tail's forwards are its backward passes"
	);
	assert_eq!(w.st.accepted_passes(0, 1, &acc(1)), 0, "another stage's passes");
	w.chain(0, 0, Phase::WeightsUploading, 0, &[1, 4], 30);
	let g = |st: &State, m: u8| tensor(st.gradient_key(0, 0, &acc(m)), 10, &[m]);
	let chunks = vec![ContentHash::of(b"c")];
	// A claim of 1,000 samples for one accepted pass is refused, as is one of 2.
	for claim in [1_000, 2] {
		assert_eq!(
			code(w.st.check_gradient(&acc(1), 0, 0, &g(&w.st, 1), &chunks, claim)),
			ErrorCode::SampleCountMismatch
		);
	}
	for m in [1, 4] {
		let e = w.st.check_gradient(&acc(m), 0, 0, &g(&w.st, m), &chunks, 1).unwrap();
		w.apply(e);
	}
	let st = w.st.stage(0).unwrap();
	let total: u32 = st.merge.submissions.values().map(|(_, s)| s.samples).sum();
	assert_eq!((total, st.backward_done), (2, 2), "the merge weighs the stage's accepted passes");
	// The counts are rebuilt by replay.
	let mut replay = State::new(w.st.config().clone());
	for e in &w.log {
		replay.apply(e);
	}
	assert_eq!(replay, w.st);
}

#[test]
fn a_member_with_accepted_passes_is_awaited_after_the_pathway_log_is_written() {
	// Stage 1 has two miners, each with one of the epoch's two samples; the epoch's pathway log is
	// written (the head's merge is in) before stage 1's slower member submits.
	let mut w = World::new(2, 4, &[&[1], &[2, 5], &[3]]);
	w.run_sample([1, 2, 3], 10);
	w.run_sample([1, 5, 3], 20);
	w.chain(1, 0, Phase::WeightsUploading, 0, &[2, 5], 30);
	let g = |st: &State, m: u8| tensor(st.gradient_key(1, 0, &acc(m)), 20, &[m]);
	let chunks = vec![ContentHash::of(b"c")];
	let e = w.st.check_gradient(&acc(2), 1, 0, &g(&w.st, 2), &chunks, 1).unwrap();
	w.apply(e);
	assert_eq!(w.st.report(1), StageReport { backward_done: 2, gradients_submitted: 1 });
	w.apply(Event::PathwayWritten {
		epoch: 0,
		object: Obj { key: "log".into(), hash: ContentHash::of(b"l"), size: 1 },
	});
	assert!(w.st.samples.is_empty(), "the epoch's sample records left memory");
	assert_eq!(
		w.st.report(1),
		StageReport { backward_done: 2, gradients_submitted: 1 },
		"miner 5 is still awaited, not counted as idle"
	);
	let e = w.st.check_gradient(&acc(5), 1, 0, &g(&w.st, 5), &chunks, 1).unwrap();
	w.apply(e);
	assert_eq!(w.st.report(1).gradients_submitted, 2);
}

#[test]
fn merge_bookkeeping_from_gradients_to_commit() {
	let mut w = World::new(1, 4, &[&[7, 6], &[2], &[3]]);
	let (a, b) = (acc(7), acc(6));
	w.passes(7, 0, 0, 3, 50);
	w.passes(6, 0, 0, 3, 50);
	assert_eq!((w.st.accepted_passes(0, 0, &a), w.st.accepted_passes(1, 0, &a)), (3, 0));
	let g = |st: &State, m: &AccountId| tensor(st.gradient_key(0, 0, m), 10, &m.0);
	let chunks = vec![ContentHash::of(b"c")];
	assert_eq!(
		code(w.st.check_gradient(&a, 0, 0, &g(&w.st, &a), &chunks, 1)),
		ErrorCode::WrongPhase
	);
	w.chain(0, 0, Phase::WeightsUploading, 0, &[7, 6], 100);
	assert_eq!(code(w.st.check_gradient(&a, 0, 1, &g(&w.st, &a), &chunks, 1)), ErrorCode::Unknown);
	assert_eq!(code(w.st.check_gradient(&a, 0, 0, &g(&w.st, &a), &chunks, 0)), ErrorCode::Invalid);
	assert_eq!(
		code(w.st.check_gradient(&a, 0, 0, &g(&w.st, &b), &chunks, 1)),
		ErrorCode::Invalid,
		"another's key"
	);
	assert_eq!(
		code(w.st.check_gradient(
			&a,
			0,
			0,
			&tensor(w.st.gradient_key(0, 0, &a), 9, b"x"),
			&chunks,
			1
		)),
		ErrorCode::ShapeMismatch
	);
	assert_eq!(
		code(w.st.check_gradient(&a, 0, 0, &g(&w.st, &a), &[], 1)),
		ErrorCode::ShapeMismatch
	);
	assert_eq!(
		code(w.st.check_gradient(&a, 0, 0, &g(&w.st, &a), &chunks, 4)),
		ErrorCode::SampleCountMismatch,
		"more samples than its accepted passes"
	);
	assert_eq!(
		code(w.st.check_gradient(&acc(9), 0, 0, &g(&w.st, &acc(9)), &chunks, 1)),
		ErrorCode::SampleCountMismatch,
		"no accepted pass at all"
	);
	for m in [&a, &b] {
		let e = w.st.check_gradient(m, 0, 0, &g(&w.st, m), &chunks, 3).unwrap();
		w.apply(e);
	}
	assert_eq!(
		code(w.st.check_gradient(&a, 0, 0, &g(&w.st, &a), &chunks, 3)),
		ErrorCode::Invalid,
		"twice"
	);
	assert_eq!(w.st.report(0).gradients_submitted, 2);
	w.chain(0, 0, Phase::Merging, 0, &[7, 6], 200);
	assert_eq!(code(w.st.plan_of(0, 0)), ErrorCode::Unavailable, "no seed yet");
	w.apply(Event::MergeSeed { stage: 0, epoch: 0, round: 0, epoch_seed: [9; 32] });
	let plan = w.st.plan_of(0, 0).unwrap().clone();
	assert_eq!(plan.members, vec![b.clone(), a.clone()], "sorted by account bytes");
	assert_eq!(plan.shards.len(), 1);
	assert_eq!(
		Ok(&plan),
		iota_protocol::merge_plan(0, 0, 0, &[9; 32], vec![a.clone(), b.clone()], 10).as_ref()
	);
	let shard = |st: &State, m: &AccountId, tag: &[u8]| tensor(st.shard_key(0, 0, 0, m), 10, tag);
	assert_eq!(
		code(w.st.check_shard(&a, 0, 0, 1, 0, &shard(&w.st, &a, b"s"))),
		ErrorCode::Unknown,
		"round"
	);
	assert_eq!(
		code(w.st.check_shard(&a, 0, 0, 0, 5, &shard(&w.st, &a, b"s"))),
		ErrorCode::Unknown,
		"shard"
	);
	assert_eq!(
		code(w.st.check_shard(&acc(9), 0, 0, 0, 0, &shard(&w.st, &acc(9), b"s"))),
		ErrorCode::Invalid,
		"not a member"
	);
	// The two copies disagree: recorded, the merge waits for the resolution.
	let e = w.st.check_shard(&a, 0, 0, 0, 0, &shard(&w.st, &a, b"s")).unwrap();
	w.apply(e);
	assert_eq!(
		code(w.st.check_shard(&a, 0, 0, 0, 0, &shard(&w.st, &a, b"s"))),
		ErrorCode::Invalid,
		"twice"
	);
	let e = w.st.check_shard(&b, 0, 0, 0, 0, &shard(&w.st, &b, b"t")).unwrap();
	w.apply(e);
	assert_eq!(
		w.st.manifest(&a, 0, 0).unwrap(),
		ManifestPlan::Reducing { present: 0, expected: 1 }
	);
	assert_eq!(w.st.disputed(0), vec![(0, 0, 0, [0, 10])]);
	assert_eq!(w.st.audit(0).unwrap().mismatches.len(), 1);
	assert_eq!(
		code(w.st.check_attest(&a, 0, 0, ContentHash::of(b"h"), None)),
		ErrorCode::WrongPhase
	);
	let right = shard(&w.st, &a, b"s").object();
	w.apply(Event::ShardResolved { stage: 0, epoch: 0, round: 0, shard: 0, object: right.clone() });
	let ManifestPlan::Ready { shards, samples, checkpoint_key } =
		w.st.manifest(&plan.checkpoint_by, 0, 0).unwrap()
	else {
		panic!("ready")
	};
	assert_eq!((shards, samples), (vec![(0, [0, 10], right.clone())], 6));
	let ck = checkpoint_key.expect("the chosen replica is asked for the checkpoint");
	let other = if plan.checkpoint_by == a { b.clone() } else { a.clone() };
	assert!(matches!(
		w.st.manifest(&other, 0, 0).unwrap(),
		ManifestPlan::Ready { checkpoint_key: None, .. }
	));
	// Attestations: the chosen replica must bring the checkpoint, the other must not.
	let h = ContentHash::of(b"state");
	let ckt = TensorRef { key: ck, hash: ContentHash::of(b"ck"), size: 5, shape: vec![] };
	assert_eq!(code(w.st.check_attest(&plan.checkpoint_by, 0, 0, h, None)), ErrorCode::Invalid);
	assert_eq!(code(w.st.check_attest(&other, 0, 0, h, Some(&ckt))), ErrorCode::Invalid);
	let e = w.st.check_attest(&other, 0, 0, h, None).unwrap();
	w.apply(e);
	assert_eq!(w.st.commit_plan(0), None, "one member still to attest");
	let e = w.st.check_attest(&plan.checkpoint_by, 0, 0, h, Some(&ckt)).unwrap();
	w.apply(e);
	let c = w.st.commit_plan(0).expect("complete");
	assert_eq!((c.members, c.param_count, c.samples, c.state_hash), (2, 10, 6, h));
	assert_eq!(c.shards, vec![right]);
	// The chain commits: the stage trains epoch 1, and the manifest reads Committed.
	w.chain(0, 1, Phase::Training, 0, &[7, 6], 300);
	assert_eq!(w.st.manifest(&a, 0, 0).unwrap(), ManifestPlan::Committed { state_hash: h });
	assert_eq!(w.st.audit(0).unwrap().submissions.len(), 2);
}

#[test]
fn conflicting_state_hashes_block_the_commit() {
	let mut w = World::new(1, 4, &[&[7, 6], &[2], &[3]]);
	w.passes(7, 0, 0, 1, 0);
	w.passes(6, 0, 0, 1, 0);
	w.chain(0, 0, Phase::WeightsUploading, 0, &[7, 6], 1);
	for m in [acc(7), acc(6)] {
		let t = tensor(w.st.gradient_key(0, 0, &m), 10, b"g");
		let e = w.st.check_gradient(&m, 0, 0, &t, &[ContentHash::of(b"c")], 1).unwrap();
		w.apply(e);
	}
	w.chain(0, 0, Phase::Merging, 0, &[7, 6], 2);
	w.apply(Event::MergeSeed { stage: 0, epoch: 0, round: 0, epoch_seed: [1; 32] });
	for m in [acc(7), acc(6)] {
		let t = tensor(w.st.shard_key(0, 0, 0, &m), 10, b"same");
		let e = w.st.check_shard(&m, 0, 0, 0, 0, &t).unwrap();
		w.apply(e);
	}
	let by = w.st.plan_of(0, 0).unwrap().checkpoint_by.clone();
	for (i, m) in [acc(7), acc(6)].into_iter().enumerate() {
		let ck = (m == by).then(|| TensorRef {
			key: keys::stage_checkpoint(&Id::new("run").unwrap(), 0, 0, &miner_id(&m)),
			hash: ContentHash::of(b"ck"),
			size: 1,
			shape: vec![],
		});
		let e = w.st.check_attest(&m, 0, 0, ContentHash::of(&[i as u8]), ck.as_ref()).unwrap();
		w.apply(e);
	}
	assert!(w.st.attest_conflict(0));
	assert_eq!(w.st.commit_plan(0), None);
	// A timed-out round restarts with fresh submissions.
	w.chain(0, 0, Phase::WeightsUploading, 1, &[7, 6], 3);
	assert!(w.st.stage(0).unwrap().merge.submissions.is_empty(), "fresh submissions");
	assert_eq!(w.work(7, 0, 4), WorkPlan::UploadGradient { epoch: 0 });
}

#[test]
fn replaying_the_event_log_rebuilds_the_same_state() {
	let mut w = World::new(3, 4, &[&[1], &[2], &[3]]);
	w.run_sample([1, 2, 3], 10);
	let l = w.lease(1, 0, 20);
	for e in w.st.expired_leases(l.expires_at_ms + 1) {
		w.apply(e);
	}
	w.run_sample([1, 2, 3], 2_000);
	let mut again = State::new(cfg(3, 4));
	for e in &w.log {
		again.apply(e);
	}
	assert_eq!(again.stage_status(), w.st.stage_status());
	assert_eq!(again.pathway_log(0), w.st.pathway_log(0));
	assert_eq!(again.leases().count(), w.st.leases().count());
	assert_eq!(again.totals(), w.st.totals());
	assert_eq!(again.leases_expired_total(), 1);
	// Lease ids continue after the replayed ones.
	assert_eq!(
		again.plan_work(&acc(1), 0, 3_000).unwrap(),
		w.st.plan_work(&acc(1), 0, 3_000).unwrap()
	);
}

/// One request of the property test below, as a miner (by index) would send it.
#[derive(Clone, Debug)]
enum Step {
	Work(usize),
	Submit(usize, usize),
	Loss(usize, usize, bool),
	Release(usize, usize),
	Gradient(usize, bool),
	Expire(u64),
	Chain(u16, u8, u32),
	Seed(u16),
	Forged(usize, u64),
	Session(usize, u8),
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
	use proptest::prelude::*;
	prop_oneof![
		4 => (0..6usize).prop_map(Step::Work),
		4 => (0..6usize, 0..8usize).prop_map(|(m, l)| Step::Submit(m, l)),
		1 => (0..6usize, 0..8usize, any::<bool>()).prop_map(|(m, l, ok)| Step::Loss(m, l, ok)),
		1 => (0..6usize, 0..8usize).prop_map(|(m, l)| Step::Release(m, l)),
		1 => (0..6usize, any::<bool>()).prop_map(|(m, ok)| Step::Gradient(m, ok)),
		1 => (1..3_000u64).prop_map(Step::Expire),
		1 => (0..3u16, 0..3u8, 0..2u32).prop_map(|(s, p, r)| Step::Chain(s, p, r)),
		1 => (0..3u16).prop_map(Step::Seed),
		1 => (0..6usize, 0..10_000u64).prop_map(|(m, l)| Step::Forged(m, l)),
		1 => (0..6usize, 0..3u8).prop_map(|(m, s)| Step::Session(m, s)),
	]
}

proptest::proptest! {
	#![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

	/// A random sequence of requests (leases, results, losses, releases, gradients, expiries, chain
	/// phases and seeds, forged lease ids, miner sessions and restarts): every accepted event is applied live and recorded in the
	/// database, after which the state's invariants hold; replaying the database into a fresh state
	/// gives exactly the live state, and every refused request leaves the state and the log as they were.
	#[test]
	fn live_and_replayed_states_agree_and_refusals_change_nothing(
		steps in proptest::collection::vec(step(), 1..120),
	) {
		let miners: [u8; 6] = [1, 2, 3, 4, 5, 6];
		let stage_of = |m: usize| (m % 3) as u16;
		let mut w = World::new(2, 2, &[&[1, 4], &[2, 5], &[3, 6]]);
		let mut db = crate::db::Db::in_memory("run").unwrap();
		db.record(None, &w.log).unwrap();
		let mut held: Vec<Lease> = Vec::new();
		let mut now = 0u64;
		for st in steps {
			now += 7;
			let before = w.st.clone();
			let logged = w.log.len();
			let accepted: Result<Vec<Event>, Refusal> = match st {
				Step::Work(m) => w
					.st
					.plan_work(&acc(miners[m]), stage_of(m), now)
					.map(|p| match p {
						WorkPlan::Lease(e) => vec![e],
						_ => vec![],
					}),
				Step::Submit(m, l) => match held.get(l).cloned() {
					Some(lease) => {
						let out = w.output(&lease);
						w.st
							.check_submit(&acc(miners[m]), lease.id, out.as_ref(), 0, now, 1 << 20)
							.map(|_| {
								vec![Event::LeaseCompleted {
									lease: lease.id,
									output: out.as_ref().map(TensorRef::object),
									now_ms: now,
									inner_step: 0,
								}]
							})
					},
					None => Ok(vec![]),
				},
				Step::Loss(m, l, ok) => match held.get(l) {
					Some(lease) => w
						.st
						.check_loss(&acc(miners[m]), lease.id, if ok { 2.0 } else { f32::NAN }, now)
						.map(|e| vec![e]),
					None => Ok(vec![]),
				},
				Step::Release(m, l) => match held.get(l) {
					Some(lease) => {
						w.st.check_release(&acc(miners[m]), lease.id, now).map(|e| vec![e])
					},
					None => Ok(vec![]),
				},
				Step::Gradient(m, ok) => {
					let stage = stage_of(m);
					let epoch = w.st.stage(stage).map_or(0, |v| v.epoch);
					let key = if ok {
						w.st.gradient_key(stage, epoch, &acc(miners[m]))
					} else {
						"not-the-key".to_string()
					};
					let p = w.st.param_count(stage);
					let t = TensorRef {
						key,
						hash: ContentHash::of(&[miners[m]]),
						size: p * 4,
						shape: vec![p],
					};
					let chunks = vec![ContentHash::of(b"c"); iota_protocol::chunk_count(p)];
					// Its accepted passes (1 where none: refused, as a claim above them is).
					let n = w.st.accepted_passes(epoch, stage, &acc(miners[m])).max(1);
					w.st
						.check_gradient(&acc(miners[m]), stage, epoch, &t, &chunks, n)
						.map(|e| vec![e])
				},
				Step::Expire(dt) => {
					now += dt;
					Ok(w.st.expired_leases(now))
				},
				Step::Chain(stage, phase, round) => {
					let phase = [Phase::Training, Phase::WeightsUploading, Phase::Merging]
						[usize::from(phase)];
					let epoch = w.st.stage(stage).map_or(0, |v| v.epoch);
					let members = vec![acc(miners[usize::from(stage)]), acc(miners[usize::from(stage) + 3])];
					Ok(vec![Event::ChainStage { stage, epoch, phase, round, members, block: 1, now_ms: now }])
				},
				Step::Seed(stage) => {
					let v = w.st.stage(stage).unwrap();
					Ok(vec![Event::MergeSeed {
						stage,
						epoch: v.epoch,
						round: v.round,
						epoch_seed: [7; 32],
					}])
				},
				Step::Forged(m, id) => w.st.check_release(&acc(miners[m]), 100_000 + id, now).map(|e| vec![e]),
				Step::Session(m, session) => w
					.st
					.check_session(&acc(miners[m]), stage_of(m), u64::from(session), now)
					.map(|e| e.into_iter().collect()),
			};
			match accepted {
				Ok(events) => {
					db.record(None, &events).unwrap();
					for e in events {
						if let Event::LeaseGranted { lease, .. } = &e {
							held.push(lease.clone());
						}
						w.apply(e);
					}
					let holds = w.st.check_invariants();
					proptest::prop_assert!(holds.is_ok(), "{:?}", holds);
				},
				Err(_) => {
					proptest::prop_assert!(w.st == before, "a refused request changed the state");
					proptest::prop_assert_eq!(w.log.len(), logged);
				},
			}
		}
		let mut replayed = State::new(cfg(2, 2));
		for e in db.events().unwrap() {
			replayed.apply(&e);
		}
		proptest::prop_assert!(replayed == w.st, "replayed state differs from the live state");
	}
}

#[test]
fn an_epoch_splits_into_training_chain_wait_merge_and_idle() {
	// One sample per epoch through three single-miner stages, at set times (ms).
	let mut w = World::new(1, 4, &[&[1], &[2], &[3]]);
	let h = w.lease(1, 0, 100);
	w.submit(&h, 300);
	let f1 = w.lease(2, 1, 300);
	w.submit(&f1, 500);
	let t = w.lease(3, 2, 500);
	w.loss(&t, 2.5, 500);
	w.submit(&t, 900);
	let b1 = w.lease(2, 1, 900);
	w.submit(&b1, 1_100);
	let b0 = w.lease(1, 0, 1_100);
	w.submit(&b0, 1_300);
	let all = vec![(0, 0), (1, 0), (2, 0)];
	// Three extrinsics (each every stage's phase change or commit): 500, 500 and 400 ms to inclusion.
	w.apply(Event::ChainWait {
		calls: all.clone(),
		submitted_ms: 1_300,
		included_ms: 1_800,
		released: vec![],
	});
	for s in 0..3 {
		w.chain(s, 0, Phase::WeightsUploading, 0, &[s as u8 + 1], 1_900);
	}
	w.apply(Event::ChainWait {
		calls: all.clone(),
		submitted_ms: 2_500,
		included_ms: 3_000,
		released: vec![],
	});
	for s in 0..3 {
		w.chain(s, 0, Phase::Merging, 0, &[s as u8 + 1], 3_100);
	}
	w.apply(Event::ChainWait {
		calls: all,
		submitted_ms: 4_000,
		included_ms: 4_400,
		released: vec![],
	});
	for s in 0..3 {
		w.chain(s, 1, Phase::Training, 0, &[s as u8 + 1], 4_500);
	}
	let e0 = w.st.summaries()[0].clone();
	assert_eq!((e0.epoch, e0.extrinsics, e0.quota_to_start_ms), (0, 3, None));
	assert_eq!(e0.stages.len(), 3);
	for t in &e0.stages {
		// From the epoch's first sample (100) to the commit seen (4 500): leases out 400 ms at each
		// stage, 500 ms waiting while training, the rest of Training (to 1 900) idle; merging from 1 900,
		// 900 ms of it waiting for two extrinsics.
		assert_eq!(
			(t.training_ms, t.chain_wait_ms, t.idle_ms, t.merge_ms),
			(400, 1_400, 900, 1_700),
			"stage {}",
			t.stage
		);
		assert_eq!(t.total_ms(), 4_400);
	}
	// Held-out losses reach the summary whether they come after it (epoch 0) or before it (epoch 1).
	assert_eq!((e0.heldout_loss, w.st.next_heldout_epoch()), (None, 0));
	w.apply(Event::HeldOutEvaluated { epoch: 0, loss: 5.5 });
	w.apply(Event::HeldOutEvaluated { epoch: 1, loss: 5.25 });
	assert_eq!(w.st.summaries()[0].heldout_loss, Some(5.5));
	assert_eq!(w.st.next_heldout_epoch(), 2);
	// Epoch 1 starts at the head 3 700 ms after the last stage's quota (stage 0's backward at 1 300).
	let h = w.lease(1, 0, 5_000);
	w.submit(&h, 5_100);
	let f1 = w.lease(2, 1, 5_100);
	w.submit(&f1, 5_200);
	let t = w.lease(3, 2, 5_200);
	w.loss(&t, 2.0, 5_200);
	w.submit(&t, 5_300);
	let b1 = w.lease(2, 1, 5_300);
	w.submit(&b1, 5_400);
	let b0 = w.lease(1, 0, 5_400);
	w.submit(&b0, 5_500);
	for s in 0..3 {
		w.chain(s, 2, Phase::Training, 0, &[s as u8 + 1], 9_000);
	}
	let e1 = w.st.summaries()[1].clone();
	assert_eq!((e1.epoch, e1.extrinsics, e1.quota_to_start_ms), (1, 0, Some(3_700)));
	assert_eq!(e1.heldout_loss, Some(5.25));
	assert!(e1.stages.iter().all(|t| t.total_ms() == 4_500), "{:?}", e1.stages);
	assert_eq!(e1.stages[0].training_ms, 200);
	// Replay gives the same figures.
	let mut replay = State::new(w.st.config().clone());
	for e in &w.log {
		replay.apply(e);
	}
	assert_eq!(replay.summaries(), w.st.summaries());
}

#[test]
fn uploads_open_at_the_quota_and_the_call_is_due_once_every_gradient_is_in() {
	let mut w = World::new(1, 4, &[&[1], &[2], &[3]]);
	let g = |st: &State, m: &AccountId| tensor(st.gradient_key(0, 0, m), 10, &m.0);
	let chunks = vec![ContentHash::of(b"c")];
	assert_eq!(
		code(w.st.check_gradient(&acc(1), 0, 0, &g(&w.st, &acc(1)), &chunks, 1)),
		ErrorCode::WrongPhase
	);
	assert!(!w.st.transition_due(0));
	w.run_sample([1, 2, 3], 10);
	// Still Training on chain, quota done: the upload is asked for and accepted.
	assert_eq!(w.st.stage(0).unwrap().phase, Phase::Training);
	assert_eq!(w.work(1, 0, 11), WorkPlan::UploadGradient { epoch: 0 });
	assert!(!w.st.transition_due(0), "the member's gradient is not in yet");
	let e = w.st.check_gradient(&acc(1), 0, 0, &g(&w.st, &acc(1)), &chunks, 1).unwrap();
	w.apply(e);
	assert_eq!(w.st.report(0), StageReport { backward_done: 1, gradients_submitted: 1 });
	assert!(w.st.transition_due(0), "both phase changes can go now");
	assert_eq!(w.work(1, 0, 12), WorkPlan::Idle(IdleReason::Merging));
	// The chain moves straight to Merging; the submission of the round stays.
	w.chain(0, 0, Phase::Merging, 0, &[1], 13);
	assert_eq!(w.st.stage(0).unwrap().merge.submissions.len(), 1);
}

/// A [`Event::ChainPredicted`] of `stage` with members `m`.
fn predicted(stage: u16, epoch: u32, phase: Phase, m: &[u8], waited_ms: u64, now_ms: u64) -> Event {
	let members = m.iter().map(|i| acc(*i)).collect();
	Event::ChainPredicted { stage, epoch, phase, round: 0, members, waited_ms, now_ms }
}

/// Stage 0 (members 7 and 6, one pass each credited, no samples run) through the merge of `epoch` from `t` ms, every phase
/// change predicted by the driver with `waited` ms of chain wait, up to a complete commit plan.
fn merge_predicted(w: &mut World, epoch: u32, t: u64, waited: u64) -> CommitPlan {
	w.passes(7, 0, epoch, 1, t);
	w.passes(6, 0, epoch, 1, t);
	w.apply(predicted(0, epoch, Phase::WeightsUploading, &[7, 6], waited, t));
	for m in [acc(7), acc(6)] {
		let g = tensor(w.st.gradient_key(0, epoch, &m), 10, b"g");
		let e = w.st.check_gradient(&m, 0, epoch, &g, &[ContentHash::of(b"c")], 1).unwrap();
		w.apply(e);
	}
	w.apply(predicted(0, epoch, Phase::Merging, &[7, 6], waited, t + 100));
	w.apply(Event::MergeSeed { stage: 0, epoch, round: 0, epoch_seed: [3; 32] });
	for m in [acc(7), acc(6)] {
		let s = tensor(w.st.shard_key(0, epoch, 0, &m), 10, b"same");
		let e = w.st.check_shard(&m, 0, epoch, 0, 0, &s).unwrap();
		w.apply(e);
	}
	let by = w.st.plan_of(0, epoch).unwrap().checkpoint_by.clone();
	for m in [acc(7), acc(6)] {
		let ck = (m == by).then(|| TensorRef {
			key: keys::stage_checkpoint(
				&Id::new("run").unwrap(),
				u64::from(epoch),
				0,
				&miner_id(&m),
			),
			hash: ContentHash::of(b"ck"),
			size: 1,
			shape: vec![],
		});
		let e = w.st.check_attest(&m, 0, epoch, ContentHash::of(b"state"), ck.as_ref()).unwrap();
		w.apply(e);
	}
	w.st.commit_plan(0).expect("complete")
}

#[test]
fn a_predicted_commit_moves_the_stage_on_before_its_block() {
	let mut w = World::new(1, 4, &[&[7, 6], &[2], &[3]]);
	let plan = merge_predicted(&mut w, 0, 100, 0);
	// The pool accepted the commit: the stage trains epoch 1 at once, the replicas read Committed.
	w.apply(predicted(0, 1, Phase::Training, &[7, 6], 30, 400));
	assert_eq!(w.st.stage(0).unwrap().epoch, 1);
	assert_eq!(
		w.st.manifest(&acc(7), 0, 0).unwrap(),
		ManifestPlan::Committed { state_hash: plan.state_hash }
	);
	let l = w.lease(7, 0, 400);
	assert_eq!((l.epoch, l.sample), (1, 1), "epoch 1's first sample");
	// The block holds it: the chain's view equals the prediction and changes nothing.
	w.chain(0, 1, Phase::Training, 0, &[7, 6], 1_200);
	assert!(w
		.st
		.check_submit(&acc(7), l.id, w.output(&l).as_ref(), 0, 1_300, 1 << 20)
		.is_ok());
	// Epoch 1: each predicted change waited 40 ms; the extrinsics took 900 ms each to their blocks,
	// which the released stage is not charged for.
	w.submit(&l, 1_300);
	merge_predicted(&mut w, 1, 2_000, 40);
	w.apply(Event::ChainWait {
		calls: vec![(0, 1)],
		submitted_ms: 2_100,
		included_ms: 3_000,
		released: vec![0],
	});
	w.apply(predicted(0, 2, Phase::Training, &[7, 6], 40, 3_000));
	let t =
		w.st.audit(1)
			.unwrap()
			.stage_times
			.iter()
			.find(|t| t.stage == 0)
			.unwrap()
			.clone();
	assert_eq!(t.chain_wait_ms, 120, "three predicted changes, 40 ms each: {t:?}");
	assert_eq!(t.total_ms(), 3_000 - 400);
	// Replaying the log gives the same state.
	let mut replay = State::new(cfg(1, 4));
	for e in &w.log {
		replay.apply(e);
	}
	assert_eq!(replay, w.st);
}

#[test]
fn a_predicted_commit_that_never_lands_is_reverted_to_the_chain() {
	let mut w = World::new(1, 4, &[&[7, 6], &[2], &[3]]);
	let plan = merge_predicted(&mut w, 0, 100, 0);
	w.apply(predicted(0, 1, Phase::Training, &[7, 6], 30, 400));
	let l = w.lease(7, 0, 400);
	// The chain restarted the round by its deadline instead: the stage goes back to epoch 0.
	let members = vec![acc(7), acc(6)];
	w.apply(Event::ChainReverted {
		stage: 0,
		epoch: 0,
		phase: Phase::WeightsUploading,
		round: 1,
		members,
		now_ms: 500,
	});
	let st = w.st.stage(0).unwrap();
	assert_eq!((st.epoch, st.phase, st.round), (0, Phase::WeightsUploading, 1));
	assert_ne!(
		w.st.manifest(&acc(7), 0, 0).unwrap(),
		ManifestPlan::Committed { state_hash: plan.state_hash },
		"no longer reads committed"
	);
	assert_eq!(
		code(w.st.check_submit(&acc(7), l.id, w.output(&l).as_ref(), 0, 500, 1 << 20)),
		ErrorCode::LeaseExpired,
		"epoch 1's lease is void"
	);
	// The restarted round takes fresh submissions.
	assert!(w.st.stage(0).unwrap().merge.submissions.is_empty());
	let g = tensor(w.st.gradient_key(0, 0, &acc(7)), 10, b"g");
	assert!(w.st.check_gradient(&acc(7), 0, 0, &g, &[ContentHash::of(b"c")], 1).is_ok());
	// Epoch 1 never started: once the stage gets there again, the head issues its samples afresh.
	w.chain(0, 1, Phase::Training, 0, &[7, 6], 700);
	let again = w.lease(7, 0, 700);
	assert_eq!((again.epoch, again.sample), (1, 1), "epoch 1's first sample, issued again");
	// A revert to an epoch the stage is not ahead of is an ordinary chain view.
	w.apply(Event::ChainReverted {
		stage: 1,
		epoch: 0,
		phase: Phase::WeightsUploading,
		round: 0,
		members: vec![acc(2)],
		now_ms: 600,
	});
	assert_eq!(w.st.stage(1).unwrap().phase, Phase::WeightsUploading);
}

#[test]
fn a_reverted_head_commit_forgets_the_recomputations_of_its_later_samples_at_every_stage() {
	// The head's commit of epoch 0 is predicted and it trains epoch 1 at once; stages 1 and 2 are in
	// epoch 1 on chain. Miner 2 runs stage 1's pass of epoch 1's first sample, then restarts: the pass
	// is re-listed for recomputation at stage 1.
	let mut w = World::new(2, 4, &[&[7, 6], &[2, 5], &[3]]);
	w.session(2, 1, 1, 0);
	merge_predicted(&mut w, 0, 100, 0);
	w.apply(predicted(0, 1, Phase::Training, &[7, 6], 30, 400));
	w.chain(1, 1, Phase::Training, 0, &[2, 5], 400);
	w.chain(2, 1, Phase::Training, 0, &[3], 400);
	let n = w.run_sample([7, 2, 3], 500);
	assert_eq!(w.st.epoch_of(n), 1);
	w.session(2, 1, 2, 600);
	assert_eq!(w.st.stage_status()[1].backward_queue, 1, "re-listed for recomputation");
	// The head's commit never lands: epoch 1's samples are forgotten at every stage, its
	// recomputations with them (no lease of a sample that has no record any more).
	w.apply(Event::ChainReverted {
		stage: 0,
		epoch: 0,
		phase: Phase::WeightsUploading,
		round: 1,
		members: vec![acc(7), acc(6)],
		now_ms: 700,
	});
	assert!(w.st.sample(n).is_none());
	assert_eq!(w.st.stage_status()[1].backward_queue, 0);
	assert_eq!(w.work(5, 1, 800), WorkPlan::Idle(IdleReason::QueueEmpty));
	w.st.check_invariants().unwrap();
}

impl World {
	/// Local mode: 3 stages, `accumulate` backward passes per inner step.
	fn local(quota: u32, accumulate: u32, members: &[&[u8]]) -> Self {
		let mut w = World {
			st: State::new(StateConfig { accumulate: Some(accumulate), ..cfg(quota, 8) }),
			log: Vec::new(),
		};
		for (s, m) in members.iter().enumerate() {
			w.chain(s as u16, 0, Phase::Training, 0, m, 0);
		}
		w
	}
	fn report(&mut self, miner: u8, stage: u16, step: u32, h: u8) -> Result<(), Refusal> {
		if let Some(e) =
			self.st.check_inner_report(&acc(miner), stage, 0, step, ContentHash([h; 32]))?
		{
			self.apply(e);
		}
		Ok(())
	}
	fn submit_at(&mut self, l: &Lease, step: u32, now: u64) -> Result<(), Refusal> {
		let out = self.output(l);
		self.st.check_submit(&l.miner, l.id, out.as_ref(), step, now, 1 << 20)?;
		self.apply(Event::LeaseCompleted {
			lease: l.id,
			output: out.as_ref().map(TensorRef::object),
			now_ms: now,
			inner_step: step,
		});
		Ok(())
	}
	/// One sample through miners (1, 2, 3), each stage's passes at inner step `k[stage]`.
	fn local_sample(&mut self, k: [u32; 3], now: u64) -> Result<u64, Refusal> {
		let h = self.lease(1, 0, now);
		self.submit_at(&h, k[0], now)?;
		let f1 = self.lease(2, 1, now);
		self.submit_at(&f1, k[1], now)?;
		let t = self.lease(3, 2, now);
		self.loss(&t, 2.5, now);
		self.submit_at(&t, k[2], now)?;
		let b1 = self.lease(2, 1, now);
		self.submit_at(&b1, k[1], now)?;
		let b0 = self.lease(1, 0, now);
		self.submit_at(&b0, k[0], now)?;
		Ok(h.sample)
	}
}

#[test]
fn local_mode_passes_name_reported_inner_steps_and_the_log_carries_them() {
	let mut w = World::local(3, 2, &[&[1], &[2], &[3]]);
	let h = w.lease(1, 0, 1);
	assert_eq!(code(w.submit_at(&h, 0, 1)), ErrorCode::Invalid, "state 0 not reported yet");
	for (m, s) in [(1, 0), (2, 1), (3, 2)] {
		w.report(m, s, 0, 10 * m).unwrap();
	}
	assert_eq!(w.report(1, 0, 0, 10), Ok(()), "the same hash again is a no-op");
	let events = w.log.len();
	assert_eq!(code(w.report(1, 0, 0, 11)), ErrorCode::Invalid, "another hash for state 0");
	assert_eq!(code(w.report(1, 0, 2, 12)), ErrorCode::Invalid, "out of order");
	assert_eq!(code(w.report(1, 0, 1, 12)), ErrorCode::Invalid, "no backward at state 0 yet");
	assert_eq!(
		code(w.st.check_inner_report(&acc(1), 0, 1, 0, ContentHash([1; 32]))),
		ErrorCode::WrongPhase
	);
	assert_eq!(w.log.len(), events, "refusals record nothing");
	w.submit_at(&h, 0, 1).unwrap();
	// Finish sample 0 by hand (its head forward is in), then sample 1, both at state 0.
	let f1 = w.lease(2, 1, 2);
	w.submit_at(&f1, 0, 2).unwrap();
	let t = w.lease(3, 2, 2);
	w.loss(&t, 2.5, 2);
	w.submit_at(&t, 0, 2).unwrap();
	let b1 = w.lease(2, 1, 2);
	w.submit_at(&b1, 0, 2).unwrap();
	let b0 = w.lease(1, 0, 2);
	w.submit_at(&b0, 0, 2).unwrap();
	// Before the merge an inner step takes `accumulate` = 2 backward passes: one is not enough.
	assert_eq!(code(w.report(1, 0, 1, 11)), ErrorCode::Invalid, "a short step before the merge");
	w.local_sample([0, 0, 0], 3).unwrap();
	// Every stage has run `accumulate` = 2 backward passes at state 0: a third one there is refused.
	let h2 = w.lease(1, 0, 4);
	w.submit_at(&h2, 0, 4).unwrap();
	let f2 = w.lease(2, 1, 4);
	w.submit_at(&f2, 0, 4).unwrap(); // a forward adds no gradient
	let t2 = w.lease(3, 2, 4);
	w.loss(&t2, 2.0, 4);
	assert_eq!(code(w.submit_at(&t2, 0, 4)), ErrorCode::Invalid, "a third backward at state 0");
	assert_eq!(code(w.submit_at(&t2, 1, 4)), ErrorCode::Invalid, "state 1 not reported");
	w.report(3, 2, 1, 31).unwrap();
	w.submit_at(&t2, 1, 4).unwrap();
	w.report(2, 1, 1, 21).unwrap();
	let b12 = w.lease(2, 1, 5);
	w.submit_at(&b12, 1, 5).unwrap();
	w.report(1, 0, 1, 11).unwrap();
	let b02 = w.lease(1, 0, 5);
	w.submit_at(&b02, 1, 5).unwrap();
	// A pass at an earlier state than one already in is refused (the middle stage is at state 1 now).
	assert_eq!(code(w.st.check_pass_step(&b12, 0)), ErrorCode::Invalid);
	// The pseudo-gradient waits for the state after the last backward pass; its weight is bounded
	// by the passes accepted (`check_gradient`).
	assert_eq!(code(w.st.check_trail_complete(&acc(3), 2, 0)), ErrorCode::Invalid);
	w.report(3, 2, 2, 32).unwrap();
	w.st.check_trail_complete(&acc(3), 2, 0).unwrap();
	assert_eq!(w.st.accepted_passes(0, 2, &acc(3)), 3);
	assert_eq!(code(w.st.check_trail_complete(&acc(4), 2, 0)), ErrorCode::Invalid, "no trail");

	let log = w.st.pathway_log(0);
	log.validate().unwrap();
	assert_eq!(log.records.len(), 3);
	assert_eq!(log.records[0].forward_steps, vec![0, 0, 0]);
	assert_eq!(log.records[2].forward_steps, vec![0, 0, 1]);
	assert_eq!(log.records[2].backward_steps, vec![1, 1, 1]);
	assert_eq!(log.reported(2, &acc(3)), 3);
	assert_eq!(log.inner_states.len(), 3);
	assert_eq!(
		log.inner_states(0, &acc(1)).unwrap().hashes,
		vec![ContentHash([10; 32]), ContentHash([11; 32])]
	);
	// The trail replays from the events, and leaves memory with the written log.
	let mut again = State::new(w.st.config().clone());
	for e in &w.log {
		again.apply(e);
	}
	assert_eq!(again, w.st);
	// Challenges: none before the seed (and no seed is due while the stages are in epoch 0), then
	// INNER_CHALLENGES distinct steps of each trail, named with the reported hashes around them.
	assert_eq!(w.st.challenges_of(&acc(3), 2, 0), Ok(None));
	assert!(w.st.challenge_seeds_due().is_empty(), "the epoch has not completed");
	w.apply(Event::ChallengeSeed { epoch: 0, seed: [5; 32] });
	let c = w.st.challenges_of(&acc(3), 2, 0).unwrap().unwrap();
	let hashes = [ContentHash([30; 32]), ContentHash([31; 32]), ContentHash([32; 32])];
	assert_eq!(c.len(), 2, "{c:?}");
	assert_ne!(c[0].step, c[1].step);
	for c in &c {
		let k = c.step as usize;
		assert_eq!(c.states, vec![(k as u32, hashes[k]), (k as u32 + 1, hashes[k + 1])]);
	}
	let head = w.st.challenges_of(&acc(1), 0, 0).unwrap().unwrap();
	assert_eq!(head.iter().map(|c| c.step).collect::<Vec<_>>(), vec![0], "one step, one challenge");
	// The keys of every revealed state of the epoch, each once.
	assert_eq!(w.st.challenged_epochs(), vec![0]);
	let keys = w.st.revealed_keys(0);
	let named: usize = log
		.inner_states
		.iter()
		.map(|t| {
			let cs = w.st.challenges_of(&t.miner, t.stage, 0).unwrap().unwrap();
			cs.iter()
				.flat_map(|c| c.states.iter().map(|s| s.0))
				.collect::<BTreeSet<_>>()
				.len()
		})
		.sum();
	assert_eq!(keys.len(), named, "{keys:?}");
	assert!(keys.iter().all(|k| k.contains("/inner/")), "{keys:?}");
	assert!(w.st.revealed_keys(1).is_empty());
	// Every challenge reveals the states the pathway log's rule names (which adds the earlier states
	// of passes through a kept forward, tested in iota-rpc).
	for t in &log.inner_states {
		for c in w.st.challenges_of(&t.miner, t.stage, 0).unwrap().unwrap() {
			let want: Vec<u32> =
				log.revealed_states(t.stage, &t.miner, c.step).into_iter().collect();
			assert_eq!(c.states.iter().map(|s| s.0).collect::<Vec<_>>(), want, "{c:?}");
		}
	}
	assert_eq!(code(w.st.challenges_of(&acc(9), 2, 0)), ErrorCode::Unknown);
	assert!(w.st.inner_trail(0, 2, &acc(3)).is_some(), "kept until the log is written");
	w.apply(Event::PathwayWritten {
		epoch: 0,
		object: Obj { key: "log".into(), hash: ContentHash::of(b"l"), size: 1 },
	});
	assert!(w.st.inner_trail(0, 2, &acc(3)).is_none());
	assert_eq!(
		w.st.challenges_of(&acc(3), 2, 0).unwrap().unwrap(),
		c,
		"challenges outlive the trail"
	);
}

#[test]
fn sync_mode_has_no_inner_steps() {
	let mut w = World::new(2, 4, &[&[1], &[2], &[3]]);
	assert_eq!(code(w.report(1, 0, 0, 1)), ErrorCode::WrongPhase);
	let h = w.lease(1, 0, 1);
	assert_eq!(code(w.submit_at(&h, 1, 1)), ErrorCode::Invalid);
	w.submit_at(&h, 0, 1).unwrap();
	w.st.check_trail_complete(&acc(1), 0, 0).unwrap();
	let log = w.st.pathway_log(0);
	assert!(log.inner_states.is_empty());
	assert_eq!(code(w.st.challenges_of(&acc(1), 0, 0)), ErrorCode::WrongPhase);
	assert!(w.st.challenge_seeds_due().is_empty());
}

#[test]
fn a_lossy_codecs_reduced_shard_is_taken_at_its_int8_length() {
	// Stage 0 merges in int8: its P = 10 elements travel as the chunks' scales and one byte each.
	let mut w = World::new(1, 4, &[&[7], &[2], &[3]]);
	w.st = State::new(StateConfig { merge_codec: iota_protocol::MergeCodec::Int8, ..cfg(1, 4) });
	w.chain(0, 0, Phase::WeightsUploading, 0, &[7], 0);
	w.passes(7, 0, 0, 1, 0);
	let a = acc(7);
	let p = w.st.param_count(0);
	let sub = w.st.gradient_key(0, 0, &a);
	let len = iota_protocol::submission_len(iota_protocol::MergeCodec::Int8, p);
	let chunks = vec![ContentHash::of(b"c"); iota_protocol::chunk_count(p)];
	let g = TensorRef { key: sub, hash: ContentHash::of(b"g"), size: len, shape: vec![p] };
	let e = w.st.check_gradient(&a, 0, 0, &g, &chunks, 1).unwrap();
	w.apply(e);
	w.chain(0, 0, Phase::Merging, 0, &[7], 10);
	w.apply(Event::MergeSeed { stage: 0, epoch: 0, round: 0, epoch_seed: [9; 32] });
	let key = w.st.shard_key(0, 0, 0, &a);
	let int8 = iota_protocol::shard_len(iota_protocol::MergeCodec::Int8, p, p);
	assert!(int8 < p * 4);
	let f32_sized = tensor(key.clone(), p, b"s");
	assert_eq!(code(w.st.check_shard(&a, 0, 0, 0, 0, &f32_sized)), ErrorCode::ShapeMismatch);
	let t = TensorRef { key, hash: ContentHash::of(b"s"), size: int8, shape: vec![p] };
	assert!(w.st.check_shard(&a, 0, 0, 0, 0, &t).is_ok());
}

impl World {
	/// `miner`'s process presents `session` (as `iota_getWork` does), recorded if it is new.
	fn session(&mut self, miner: u8, stage: u16, session: u64, now: u64) -> bool {
		match self.st.check_session(&acc(miner), stage, session, now).unwrap() {
			Some(e) => {
				self.apply(e);
				true
			},
			None => false,
		}
	}
}

#[test]
fn a_restarted_miner_frees_its_leases_at_once_and_its_lost_passes_are_recomputed() {
	// Stage 1 has two miners; miner 2 runs the epoch's first two samples, then holds a forward lease.
	let mut w = World::new(4, 4, &[&[1], &[2, 5], &[3]]);
	assert!(w.session(2, 1, 7, 0), "the first session is recorded");
	assert!(!w.session(2, 1, 7, 1), "the same session again records nothing");
	let (a, b) = (w.run_sample([1, 2, 3], 10), w.run_sample([1, 2, 3], 20));
	let h = w.lease(1, 0, 30);
	w.submit(&h, 30);
	let held = w.lease(2, 1, 30);
	assert_eq!((held.kind, held.sample), (WorkKind::Forward, h.sample));
	assert_eq!((w.st.accepted_passes(0, 1, &acc(2)), w.st.stage(1).unwrap().backward_done), (2, 2));

	// Miner 2's process is killed and comes back under another session, well inside the lease.
	assert!(w.session(2, 1, 8, 40));
	assert_eq!(w.st.restarts(&acc(2)), 1);
	assert_eq!(w.st.leases().filter(|l| l.miner == acc(2)).count(), 0, "released, not expired");
	// A request of the earlier process that arrives now (sent before the restart) is refused, not
	// taken for a restart back to session 7.
	assert_eq!(
		code(w.st.check_session(&acc(2), 1, 7, 41)),
		ErrorCode::SessionSuperseded,
		"the replaced session"
	);
	assert_eq!(w.st.restarts(&acc(2)), 1);
	assert_eq!(w.st.leases_expired_total(), 0);
	assert_eq!(
		code(w.st.check_submit(&acc(2), held.id, w.output(&held).as_ref(), 0, 41, 1 << 20)),
		ErrorCode::LeaseExpired,
		"the earlier process's lease is void"
	);
	// Its two passes reached no merge submission: the stage counts them undone and lists them.
	assert_eq!((w.st.accepted_passes(0, 1, &acc(2)), w.st.stage(1).unwrap().backward_done), (0, 0));
	// Miner 5 recomputes both (before the re-listed forward), each counting as its pass.
	for (n, t) in [(a, 50), (b, 60)] {
		let r = w.lease(5, 1, t);
		assert_eq!((r.kind, r.sample, r.recompute), (WorkKind::Backward, n, true));
		w.submit(&r, t);
	}
	assert_eq!(w.lease(5, 1, 70).sample, h.sample, "then the released forward");
	assert_eq!((w.st.accepted_passes(0, 1, &acc(5)), w.st.stage(1).unwrap().backward_done), (2, 2));
	let r = w.st.sample(a).unwrap();
	assert_eq!(r.backward[1].as_ref().unwrap().0, acc(2), "the record the other stages used stays");
	assert_eq!(w.st.counted_by(r, 1), Some(acc(5)));
	assert_eq!(w.st.audits[&0].recomputed, 2);
	let log = w.st.pathway_log(0);
	log.validate().unwrap();
	assert_eq!(log.records[0].recomputed.len(), 1);
	assert_eq!(log.records[0].recomputed[0].miner, acc(5));
	assert!(log.records[0].recomputed[0].output.is_some());
	assert_eq!(w.st.stage_status()[1].backward_queue, 0);
	// Replay rebuilds it all.
	let mut again = State::new(w.st.config().clone());
	for e in &w.log {
		again.apply(e);
	}
	assert_eq!(again, w.st);
}

/// A miner's replaced sessions are refused, the last `RETIRED_SESSIONS` of them (bounded), and the
/// record of them is rebuilt by replaying the events; a process that comes back under a session
/// replaced longer ago than that is taken for a new process again.
#[test]
fn replaced_sessions_are_refused_up_to_the_bound_and_survive_a_replay() {
	let mut w = World::new(4, 4, &[&[1], &[2, 5], &[3]]);
	let n = super::restart::RETIRED_SESSIONS as u64;
	for s in 0..=n + 1 {
		assert!(w.session(2, 1, 100 + s, s));
	}
	// Sessions 100 ..= 100 + n are replaced; the oldest of them fell out of the bound.
	for s in 101..=100 + n {
		assert_eq!(
			code(w.st.check_session(&acc(2), 1, s, 50)),
			ErrorCode::SessionSuperseded,
			"{s}"
		);
	}
	assert_eq!(w.st.check_session(&acc(2), 1, 101 + n, 50).unwrap(), None, "the live one");
	assert!(w.st.check_session(&acc(2), 1, 100, 50).unwrap().is_some(), "forgotten: new again");
	assert!(w.st.check_session(&acc(5), 1, 101, 50).unwrap().is_some(), "another miner's own");
	let mut again = State::new(w.st.config().clone());
	for e in &w.log {
		again.apply(e);
	}
	assert_eq!(again, w.st);
}

#[test]
fn a_second_restart_re_lists_the_new_passes_not_those_already_being_recomputed() {
	// Miner 2 runs sample `a` at stage 1 and restarts: `a` is re-listed, and miner 5 takes its
	// recomputation. Miner 2's new process runs sample `b`, then restarts again.
	let mut w = World::new(4, 4, &[&[1], &[2, 5], &[3]]);
	w.session(2, 1, 7, 0);
	let a = w.run_sample([1, 2, 3], 10);
	w.session(2, 1, 8, 20);
	let r = w.lease(5, 1, 30);
	assert_eq!((r.sample, r.recompute), (a, true));
	let b = w.run_sample([1, 2, 3], 40);
	assert_eq!(w.st.accepted_passes(0, 1, &acc(2)), 1);
	w.session(2, 1, 9, 50);
	// Its one pass since is `b`: `b` is re-listed (`a` is being recomputed already), and both
	// recomputations count.
	assert_eq!(w.st.stage(1).unwrap().backward_done, 0);
	let r2 = w.lease(5, 1, 60);
	assert_eq!((r2.sample, r2.recompute), (b, true));
	w.submit(&r, 70);
	w.submit(&r2, 70);
	assert_eq!((w.st.accepted_passes(0, 1, &acc(5)), w.st.stage(1).unwrap().backward_done), (2, 2));
	w.st.check_invariants().unwrap();
}

#[test]
fn a_restarted_tail_and_head_have_their_passes_recomputed_too() {
	let mut w = World::new(2, 4, &[&[1, 4], &[2], &[3, 6]]);
	w.session(3, 2, 1, 0);
	w.session(1, 0, 1, 0);
	let n = w.run_sample([1, 2, 3], 10);
	w.session(3, 2, 2, 20);
	w.session(1, 0, 2, 20);
	assert_eq!(w.st.stage(2).unwrap().backward_done, 0);
	assert_eq!(w.st.stage(0).unwrap().backward_done, 0);
	// The tail's pass is its forward (loss reported first); the head's a backward.
	let t = w.lease(6, 2, 30);
	assert_eq!((t.kind, t.sample, t.recompute), (WorkKind::Forward, n, true));
	w.loss(&t, 2.0, 30);
	w.submit(&t, 30);
	let h = w.lease(4, 0, 30);
	assert_eq!((h.kind, h.sample, h.recompute), (WorkKind::Backward, n, true));
	w.submit(&h, 30);
	let r = w.st.sample(n).unwrap();
	assert_eq!((r.loss, r.forward[2].as_ref().unwrap().0.clone()), (Some(2.5), acc(3)));
	assert_eq!(w.st.accepted_passes(0, 2, &acc(6)), 1);
	assert_eq!(w.st.accepted_passes(0, 0, &acc(4)), 1);
	assert_eq!(w.st.stage_status()[1].backward_queue, 0, "nothing went downstream again");
	assert_eq!(w.st.totals().0, 8, "the sample completed once");
}

#[test]
fn a_restart_after_its_stage_left_training_loses_its_passes_and_the_merge_does_not_wait() {
	let mut w = World::new(2, 4, &[&[1], &[2, 5], &[3]]);
	w.session(2, 1, 1, 0);
	w.run_sample([1, 2, 3], 10);
	w.run_sample([1, 5, 3], 20);
	w.chain(1, 0, Phase::WeightsUploading, 0, &[2, 5], 30);
	let g = tensor(w.st.gradient_key(1, 0, &acc(5)), 20, b"g");
	let e = w.st.check_gradient(&acc(5), 1, 0, &g, &[ContentHash::of(b"c")], 1).unwrap();
	w.apply(e);
	assert_eq!(w.st.report(1).gradients_submitted, 1, "miner 2's gradient is awaited");
	w.session(2, 1, 2, 40);
	assert_eq!(w.st.report(1).gradients_submitted, 2, "no longer: it died with its process");
	assert_eq!((w.st.audits[&0].lost, w.st.audits[&0].recomputed), (1, 0));
	assert!(w.st.stage(1).unwrap().recompute.is_empty());
	// A restart after its gradient is in loses nothing.
	w.session(5, 1, 1, 50);
	w.session(5, 1, 2, 51);
	assert_eq!(w.st.audits[&0].lost, 1);
}

#[test]
fn a_miner_silent_for_a_lease_is_gone_and_its_passes_are_recomputed() {
	// Miner 2 (stage 1) runs samples a and b, forwards c (whose backward then waits for it), takes a
	// forward lease of d at 30 ms and falls silent.
	let mut w = World::new(4, 4, &[&[1], &[2, 5], &[3]]);
	w.session(2, 1, 7, 0);
	let (a, b) = (w.run_sample([1, 2, 3], 10), w.run_sample([1, 2, 3], 20));
	let hc = w.lease(1, 0, 30);
	w.submit(&hc, 30);
	let fc = w.lease(2, 1, 30);
	w.submit(&fc, 30);
	let hd = w.lease(1, 0, 30);
	w.submit(&hd, 30);
	let held = w.lease(2, 1, 30);
	assert_eq!((held.kind, held.sample), (WorkKind::Forward, hd.sample));
	let tc = w.lease(3, 2, 30);
	w.loss(&tc, 2.5, 30);
	w.submit(&tc, 30);
	let c = hc.sample;
	assert!(!w.st.stages[1].backward_queue[&c].open, "c's backward waits for miner 2");
	// The others keep asking for work.
	let alive = |w: &mut World, t: u64| {
		for (m, s) in [(1, 0), (5, 1), (3, 2)] {
			w.st.touch(&acc(m), s, t);
		}
	};
	alive(&mut w, 1_020);
	assert!(w.st.gone_miners(1_020, 0).is_empty(), "it holds a live lease");
	alive(&mut w, 1_031);
	for e in w.st.expired_leases(1_031) {
		w.apply(e);
	}
	assert!(w.st.leases().all(|l| l.id != held.id));
	alive(&mut w, 2_031);
	// Silence is counted from this orchestrator's start as well.
	assert!(
		w.st.gone_miners(2_031, 1_500).is_empty(),
		"within a lease of the orchestrator's start"
	);
	let gone = w.st.gone_miners(2_031, 0);
	assert_eq!(gone, vec![Event::MinerGone { miner: acc(2), stage: 1, epoch: 0, now_ms: 2_031 }]);
	w.apply(gone[0].clone());
	assert!(w.st.gone_miners(2_031, 0).is_empty(), "once");
	assert_eq!((w.st.accepted_passes(0, 1, &acc(2)), w.st.stage(1).unwrap().backward_done), (0, 0));
	assert!(w.st.stages[1].backward_queue[&c].open, "c's backward goes to anyone now");
	// It comes back: it takes no more work in the epoch (its gradient is void), and nothing waits for
	// it although it is live again; miner 5 recomputes its passes, then takes c's backward and d.
	assert_eq!(w.work(2, 1, 2_040), WorkPlan::Idle(IdleReason::Forfeited));
	for (n, t) in [(a, 2_050), (b, 2_060)] {
		let r = w.lease(5, 1, t);
		assert_eq!((r.kind, r.sample, r.recompute), (WorkKind::Backward, n, true));
		w.submit(&r, t);
	}
	let bc = w.lease(5, 1, 2_065);
	assert_eq!((bc.kind, bc.sample, bc.recompute), (WorkKind::Backward, c, false));
	// A MinerGone that no longer holds (miner 5 took a lease since) changes nothing.
	w.apply(Event::MinerGone { miner: acc(5), stage: 1, epoch: 0, now_ms: 2_066 });
	assert_eq!(w.st.accepted_passes(0, 1, &acc(5)), 2);
	assert!(w.st.miner_activity().iter().all(|m| m.account != acc(5) || m.gone == 0));
	assert_eq!(w.lease(5, 1, 2_070).sample, held.sample, "then the expired forward");
	// Once uploads open it is still told its passes are forfeited, never to upload (it has nothing
	// to submit).
	w.chain(1, 0, Phase::WeightsUploading, 0, &[2, 5], 2_075);
	assert_eq!(w.st.plan_work(&acc(2), 1, 2_075).unwrap(), WorkPlan::Idle(IdleReason::Forfeited));
	assert_eq!(w.st.plan_work(&acc(5), 1, 2_075).unwrap(), WorkPlan::UploadGradient { epoch: 0 });
	assert_eq!(w.st.accepted_passes(0, 1, &acc(5)), 2);
	assert_eq!((w.st.audits[&0].recomputed, w.st.audits[&0].lost), (2, 0));
	let status = w.st.miner_activity();
	let it = status.iter().find(|m| m.account == acc(2)).unwrap();
	assert_eq!((it.gone, it.restarts, it.backward_this_epoch), (1, 0, 0));
	// Replay rebuilds it all (but liveness, which is not persisted).
	let mut again = State::new(w.st.config().clone());
	for e in &w.log {
		again.apply(e);
	}
	assert_eq!(again.stage(1), w.st.stage(1));
	assert_eq!(again.pathway_log(0), w.st.pathway_log(0));
	assert_eq!(again.audits, w.st.audits);
	assert_eq!(again.plan_work(&acc(2), 1, 2_090).unwrap(), WorkPlan::Idle(IdleReason::Forfeited));
	let gone_of = |s: &State| {
		s.miner_activity()
			.iter()
			.map(|m| (m.gone, m.backward_this_epoch))
			.collect::<Vec<_>>()
	};
	assert_eq!(gone_of(&again), gone_of(&w.st));
	// A new process of it may work again (it holds no gradient of the epoch).
	w.session(2, 1, 9, 2_095);
	assert_eq!(w.work(2, 1, 2_095), WorkPlan::UploadGradient { epoch: 0 });
}

#[test]
fn a_member_silent_since_uploads_opened_is_gone_and_the_merge_does_not_wait() {
	// Stage 1: miners 2 and 5 each run a sample; the quota (2) is reached at 20 ms, uploads open.
	let mut w = World::new(2, 4, &[&[1], &[2, 5], &[3]]);
	w.run_sample([1, 2, 3], 10);
	w.run_sample([1, 5, 3], 20);
	assert_eq!(w.work(2, 1, 25), WorkPlan::UploadGradient { epoch: 0 }, "asked at 25 ms");
	let g = tensor(w.st.gradient_key(1, 0, &acc(5)), 20, b"g");
	let e = w.st.check_gradient(&acc(5), 1, 0, &g, &[ContentHash::of(b"c")], 1).unwrap();
	w.apply(e);
	assert!(!w.st.transition_due(1), "miner 2's gradient is awaited");
	// The other stages' miners keep asking (for their own uploads).
	for (m, s) in [(1, 0), (3, 2)] {
		w.st.touch(&acc(m), s, 30 + LEASE);
	}
	// Miner 2 then says nothing: a lease's length after its last request it is gone (a member that
	// may be uploading gets that long, counted from when uploads opened at the earliest).
	assert!(w.st.gone_miners(25 + LEASE, 0).is_empty());
	let gone = w.st.gone_miners(26 + LEASE, 0);
	assert_eq!(
		gone,
		vec![Event::MinerGone { miner: acc(2), stage: 1, epoch: 0, now_ms: 26 + LEASE }]
	);
	// Miner 5, submitted, is never gone; nor anyone while a restarted orchestrator is young.
	assert!(w.st.gone_miners(30 + LEASE, 500).is_empty());
	w.apply(gone[0].clone());
	assert!(w.st.gone_miners(30 + LEASE, 0).is_empty(), "once");
	// Its pass cannot join the merge (miner 5's gradient is in): lost, and nothing waits for it.
	assert_eq!((w.st.audits[&0].lost, w.st.audits[&0].recomputed), (1, 0));
	assert!(w.st.stage(1).unwrap().recompute.is_empty());
	assert!(w.st.transition_due(1), "the stage moves on without it");
	// Back, it is told its passes are forfeited, and its late gradient gets a typed refusal.
	assert_eq!(w.work(2, 1, 50 + LEASE), WorkPlan::Idle(IdleReason::Forfeited));
	let late = tensor(w.st.gradient_key(1, 0, &acc(2)), 20, b"l");
	assert_eq!(
		code(w.st.check_gradient(&acc(2), 1, 0, &late, &[ContentHash::of(b"c")], 1)),
		ErrorCode::LeaseExpired
	);
	// Through the merge too (told `merging`, it would enter it with the gradient it kept and ask for
	// shards of a round it is not in); the member is told the stage merges.
	w.chain(1, 0, Phase::Merging, 0, &[2, 5], 60 + LEASE);
	assert_eq!(w.work(2, 1, 60 + LEASE), WorkPlan::Idle(IdleReason::Forfeited));
	assert_eq!(w.work(5, 1, 60 + LEASE), WorkPlan::Idle(IdleReason::Merging));
	// Replay rebuilds it.
	let mut again = State::new(w.st.config().clone());
	for e in &w.log {
		again.apply(e);
	}
	assert_eq!(again.audits, w.st.audits);
	assert!(again.transition_due(1) == w.st.transition_due(1));
}

#[test]
fn a_member_silent_before_uploads_opened_gets_a_lease_from_their_opening() {
	// Miner 2's last request was long before the quota was reached: silence is counted from when
	// uploads opened, so it gets a lease's length to ask for its upload; and only once another
	// member's gradient is in.
	let mut w = World::new(2, 4, &[&[1], &[2, 5], &[3]]);
	w.run_sample([1, 2, 3], 10);
	w.run_sample([1, 5, 3], 5_000);
	for (m, s) in [(1, 0), (5, 1), (3, 2)] {
		w.st.touch(&acc(m), s, 5_500);
	}
	// Nobody's gradient is in yet: the merge would hold nothing without miner 2's, so it is awaited.
	assert!(w.st.gone_miners(5_001 + LEASE, 0).is_empty());
	let g = tensor(w.st.gradient_key(1, 0, &acc(5)), 20, b"g");
	let e = w.st.check_gradient(&acc(5), 1, 0, &g, &[ContentHash::of(b"c")], 1).unwrap();
	w.apply(e);
	assert!(w.st.gone_miners(5_000 + LEASE, 0).is_empty());
	let gone = w.st.gone_miners(5_001 + LEASE, 0);
	assert_eq!(
		gone,
		vec![Event::MinerGone { miner: acc(2), stage: 1, epoch: 0, now_ms: 5_001 + LEASE }]
	);
}

#[test]
fn no_miner_is_gone_in_local_mode() {
	// Local mode: a pass belongs to its miner's trail; nobody else can recompute it.
	let mut w = World::local(4, 2, &[&[1], &[2, 5], &[3]]);
	for (m, s) in [(1, 0), (2, 1), (3, 2)] {
		w.report(m, s, 0, 1).unwrap();
	}
	w.local_sample([0, 0, 0], 10).unwrap();
	assert_eq!(w.st.accepted_passes(0, 1, &acc(2)), 1);
	assert!(w.st.local_mode());
	assert!(w.st.gone_miners(10_000, 0).is_empty());
}

#[test]
fn local_mode_a_restart_ends_the_miners_trail_for_the_epoch() {
	let mut w = World::local(4, 2, &[&[1], &[2], &[3]]);
	for (m, s) in [(1, 0), (2, 1), (3, 2)] {
		w.session(m, s, 1, 0);
		w.report(m, s, 0, 10 * m).unwrap();
	}
	w.local_sample([0, 0, 0], 1).unwrap();
	w.session(2, 1, 2, 5);
	let t = w.st.inner_trail(0, 1, &acc(2)).unwrap();
	assert!(t.closed && t.restarted);
	assert_eq!(w.work(2, 1, 6), WorkPlan::Idle(IdleReason::Restarted));
	assert_eq!(code(w.report(2, 1, 0, 20)), ErrorCode::WrongPhase);
	assert_eq!(w.st.accepted_passes(0, 1, &acc(2)), 0);
	assert_eq!(w.st.audits[&0].lost, 1, "its pass belonged to its inner-step trail");
	assert_eq!(w.st.stage(1).unwrap().backward_done, 1, "a lost pass is not trained again");
	// The trail stays in the pathway log as it was reported (its states were challengeable).
	assert_eq!(w.st.pathway_log(0).reported(1, &acc(2)), 1);
}

#[test]
fn local_mode_the_backward_of_a_restarted_miners_forward_goes_to_another_member() {
	let mut w = World::local(4, 2, &[&[1], &[2, 5], &[3]]);
	for (m, s) in [(1, 0), (2, 1), (5, 1), (3, 2)] {
		w.session(m, s, 1, 0);
		w.report(m, s, 0, 10 * m).unwrap();
	}
	// Miner 2 runs a whole sample, then stage 1's forward of the next; it restarts before that
	// sample's backward reaches stage 1. (With no backward pass in, its trail would go on: the new
	// process starts from the same state 0.)
	w.local_sample([0, 0, 0], 1).unwrap();
	let h = w.lease(1, 0, 1);
	w.submit_at(&h, 0, 1).unwrap();
	let f = w.lease(2, 1, 1);
	w.submit_at(&f, 0, 1).unwrap();
	w.session(2, 1, 2, 2);
	let t = w.lease(3, 2, 3);
	w.loss(&t, 2.0, 3);
	w.submit_at(&t, 0, 3).unwrap();
	// Miner 2 polls (so it looks live) but sits the epoch out; miner 5 takes the backward.
	assert_eq!(w.work(2, 1, 4), WorkPlan::Idle(IdleReason::Restarted));
	let b = w.lease(5, 1, 4);
	assert_eq!((b.kind, b.sample), (WorkKind::Backward, h.sample));
}

#[test]
fn refused_gradients_are_kept_as_evidence_up_to_a_bound_per_sender() {
	let mut w = World::new(2, 4, &[&[1], &[2, 5], &[3]]);
	let refused = |m: u8, i: u8| Event::GradientRefused {
		stage: 1,
		epoch: 0,
		round: 0,
		miner: acc(m),
		object: Obj { key: format!("g{m}-{i}"), hash: ContentHash::of(&[m, i]), size: 80 },
		chunk_hashes: vec![ContentHash::of(b"c")],
		samples: 1,
		reason: "gradient: non-finite value at element 0".into(),
	};
	for i in 0..6 {
		w.apply(refused(2, i));
	}
	w.apply(refused(5, 0));
	let kept = &w.st.audit(0).unwrap().refused;
	let by = |m: u8| kept.iter().filter(|r| r.2 == acc(m)).count();
	assert_eq!((by(2), by(5)), (iota_rpc::types::MAX_REFUSED_VECTORS_PER_MINER, 1));
	assert!(w.st.stage(1).unwrap().merge.submissions.is_empty(), "evidence, not a submission");
	let mut again = State::new(w.st.config().clone());
	for e in &w.log {
		again.apply(e);
	}
	assert_eq!(again, w.st);
}
