//! A merge vector with a NaN, the wrong length or a bad chunk hash is refused at submission with its
//! own code, changes nothing, and the stage's merge completes with the valid submissions: a dev node,
//! the embedded S3 server, the orchestrator (a 40-block phase timeout) and six scripted miners, two per
//! stage, through one epoch of the `tiny` preset.
//!
//! At stage 0 one member first claims 1,000 more samples than its accepted backward passes
//! (`SampleCountMismatch`: a submission weighs at most the passes the orchestrator recorded), then its
//! real count; at stage 1 one member submits only a gradient holding a NaN, its chunk hashes recomputed
//! so that only the finiteness rule can catch it (`NonFinite`); at stage 2 one member first submits a
//! vector one element short (`ShapeMismatch`) and one whose chunk hashes are not its bytes'
//! (`HashMismatch`), then its real gradient, which is accepted (the refusals left nothing behind).
//! Asserted from the chain's manifests and the epoch record: stage 1 merged its honest member alone,
//! every other stage both members; each manifest's sample count is its members' accepted passes (the
//! whole quota at stages 0 and 2); the refusals are counted by code in the metrics, and by sender
//! (`iota_orchestrator_merge_vectors_refused_total{miner, stage, method, code}`); the three refused
//! vectors the orchestrator read are in the epoch record under their senders, and the validator's
//! check of them (`iota_validator::vector_audit`, the same acceptance rule) fails the NaN sender on the
//! vector still in the bucket (its Inf upload overwrote the NaN one at the same key, which is left
//! unjudged, as is the chunk-hash refusal).
//!
//! ```sh
//! cargo build -p iota-orchestrator        # the node binary must exist too (scripts/test.sh builds it)
//! cargo test -p iota-e2e --test merge_bad_submissions -- --ignored --nocapture
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::future::join_all;
use iota_chain::Signer;
use iota_e2e::*;
use iota_protocol::{chunk_hashes, f32le, MergeCodec};

/// Chunk hashes of an f32 submission (the scenario's run uses the exact codec).
fn hashes(bytes: &[u8]) -> Vec<iota_primitives::ContentHash> {
	chunk_hashes(MergeCodec::F32, bytes, bytes.len() as u64 / 4)
}
use iota_rpc::types::*;
use iota_rpc::{code_of, ErrorCode, SignedClient};

const RUN: &str = "e2e-bad-merge";
const T: Duration = Duration::from_secs(180);

fn expect_code(r: Result<(), jsonrpsee::core::ClientError>, code: ErrorCode) {
	match r {
		Err(e) => assert_eq!(code_of(&e), Some(code), "{e}"),
		Ok(()) => panic!("expected {code:?}, the submission was accepted"),
	}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node and iota-orchestrator (build both first; see the file's docs)"]
async fn bad_merge_vectors_are_refused_and_the_merge_completes_without_them() {
	let mut node = DevNode::start();
	let client = node.client().await;
	let s3 = S3::start().await;
	let spec = tiny_spec(&s3.store, RUN).await;
	let seated = register_seated(&client, &SIX_MINERS).await;
	assert_eq!(seated.values().map(Vec::len).collect::<Vec<_>>(), vec![2, 2, 2], "{seated:?}");

	let dir = work_dir();
	let orch = OrchestratorProcess::dev_with(
		&node,
		&s3,
		RUN,
		2,
		30_000,
		dir.path(),
		&["--phase-timeout", "40"],
	)
	.await;
	let watcher =
		SignedClient::connect(&orch.url, Signer::dev("bob").unwrap().keypair().clone(), T)
			.await
			.unwrap();
	wait_for("the registry and stages in status", T, || async {
		let s = watcher.status().await.ok()?;
		s.stages.iter().all(|st| st.miners.len() == 2).then_some(())
	})
	.await;
	let mut miners = Vec::new();
	for (stage, uris) in &seated {
		for uri in uris {
			let signer = Signer::from_uri(uri).unwrap();
			miners.push(Miner::connect(&orch.url, signer, *stage, spec.clone(), s3.http()).await);
		}
	}

	// ---- training: every miner pulls work in turn until its stage asks for gradients --------------
	let mut uploads: BTreeMap<usize, ObjectPut> = BTreeMap::new();
	// Backward passes (tail forwards included) each miner had accepted, and the quota.
	let mut passes: BTreeMap<usize, u32> = BTreeMap::new();
	let mut quota = 0;
	let tail = spec.model.n_stages() as u16 - 1;
	let start = std::time::Instant::now();
	while uploads.len() < miners.len() {
		assert!(start.elapsed() < T, "training did not reach the upload phase: {uploads:?}");
		for (i, m) in miners.iter().enumerate() {
			if uploads.contains_key(&i) {
				continue;
			}
			match m.work().await {
				Work::Forward(f) => {
					quota = m.forward(&f, 3.0).await.backward_quota;
					if m.stage == tail {
						*passes.entry(i).or_default() += 1;
					}
				},
				Work::Backward(b) => {
					quota = m.backward(&b).await.backward_quota;
					*passes.entry(i).or_default() += 1;
				},
				Work::UploadGradient { epoch, output } => {
					assert_eq!(epoch, 0);
					uploads.insert(i, output);
				},
				_ => {},
			}
		}
		tokio::time::sleep(Duration::from_millis(100)).await;
	}

	// ---- submissions ----------------------------------------------------------------------------
	let n = |i: usize| passes.get(&i).copied().unwrap_or(0);
	// The member of `stage` with the most accepted passes (at least one: the stage met its quota).
	let busiest = |stage: u16| {
		(0..miners.len())
			.filter(|i| miners[*i].stage == stage)
			.max_by_key(|i| n(*i))
			.unwrap()
	};
	let nan_miner = busiest(1);
	let fixed_miner = busiest(2);
	let inflating_miner = busiest(0);
	let submitted = |stage: u16| {
		let w = &watcher;
		async move { w.status().await.unwrap().stages[usize::from(stage)].gradients_submitted }
	};

	// A NaN with its chunk hashes recomputed: only the finiteness rule catches it.
	let m = &miners[nan_miner];
	let before = submitted(1).await;
	let mut g = m.gradient(2);
	let mid = g.len() / 2;
	g[mid] = f32::NAN;
	let bytes = f32le::to_bytes(&g);
	let chunks = hashes(&bytes);
	expect_code(
		m.submit_gradient_bytes(0, &uploads[&nan_miner], bytes, chunks, n(nan_miner))
			.await,
		ErrorCode::NonFinite,
	);
	let mut inf = m.gradient(2);
	inf[0] = f32::INFINITY;
	let bytes = f32le::to_bytes(&inf);
	let chunks = hashes(&bytes);
	expect_code(
		m.submit_gradient_bytes(0, &uploads[&nan_miner], bytes, chunks, n(nan_miner))
			.await,
		ErrorCode::NonFinite,
	);
	assert_eq!(submitted(1).await, before, "a refused submission counts for nothing");

	// One element short, then chunk hashes that are not the bytes', then the real gradient.
	// A claim above the accepted passes, then the real one.
	let m = &miners[inflating_miner];
	let claim = n(inflating_miner);
	let bytes = m.gradient_bytes(claim);
	expect_code(
		m.submit_gradient_bytes(
			0,
			&uploads[&inflating_miner],
			bytes.clone(),
			hashes(&bytes),
			claim + 1_000,
		)
		.await,
		ErrorCode::SampleCountMismatch,
	);
	m.submit_gradient_bytes(0, &uploads[&inflating_miner], bytes.clone(), hashes(&bytes), claim)
		.await
		.expect("the claim of its accepted passes is accepted");

	let m = &miners[fixed_miner];
	let k = n(fixed_miner);
	let good = f32le::to_bytes(&m.gradient(k));
	let short = good[..good.len() - 4].to_vec();
	let short_chunks = hashes(&short);
	expect_code(
		m.submit_gradient_bytes(0, &uploads[&fixed_miner], short, short_chunks, k).await,
		ErrorCode::ShapeMismatch,
	);
	let mut wrong_chunks = hashes(&good);
	wrong_chunks[0] = iota_primitives::ContentHash::of(b"not this chunk");
	expect_code(
		m.submit_gradient_bytes(0, &uploads[&fixed_miner], good.clone(), wrong_chunks, k)
			.await,
		ErrorCode::HashMismatch,
	);
	m.submit_gradient_bytes(0, &uploads[&fixed_miner], good, hashes(&m.gradient_bytes(k)), k)
		.await
		.expect("the real gradient after two refusals is accepted");

	// Everyone else with an accepted pass submits its gradient (a member without one has nothing to
	// merge and is no member of the round).
	for (i, m) in miners.iter().enumerate() {
		if i != nan_miner && i != fixed_miner && i != inflating_miner && n(i) > 0 {
			m.submit_gradient(0, &uploads[&i], n(i)).await;
		}
	}
	let submitters: Vec<usize> =
		(0..miners.len()).filter(|i| *i != nan_miner && n(*i) > 0).collect();

	// ---- the merge: every submitter reduces its shards, together ---------------------------------
	let mergers: Vec<&Miner> = submitters.iter().map(|i| &miners[*i]).collect();
	let hashes = join_all(mergers.iter().map(|m| m.merge(0, T))).await;
	for stage in 0..=tail {
		let members = submitters.iter().filter(|i| miners[**i].stage == stage).count() as u32;
		let manifest = wait_for("the stage's manifest on chain", T, || async {
			client.merge_manifest(0, stage).await.ok()?
		})
		.await;
		let samples: u32 =
			submitters.iter().filter(|i| miners[**i].stage == stage).map(|i| n(*i)).sum();
		assert_eq!(
			(manifest.members, manifest.samples),
			(members, samples),
			"stage {stage}: merged members and their accepted passes"
		);
		if stage != 1 {
			assert_eq!(manifest.samples, quota, "stage {stage}: every accepted pass is counted");
		}
		let attested: Vec<_> = mergers
			.iter()
			.zip(&hashes)
			.filter(|(m, _)| m.stage == stage)
			.map(|(_, h)| *h)
			.collect();
		assert!(attested.iter().all(|h| h.0 == manifest.state_hash.0), "stage {stage}");
	}
	let record = wait_for("the epoch record", T, || async {
		let r = watcher.epoch_record(0).await.ok()?;
		(r.submissions.len() == submitters.len()).then_some(r)
	})
	.await;
	assert!(
		record.submissions.iter().all(|s| s.source.miner != miners[nan_miner].account()),
		"the NaN miner is in no round"
	);
	assert!(record.shard_mismatches.is_empty());
	// The refused vectors read from the bucket are in the record, each named by its sender: the NaN and
	// Inf gradients and the one with wrong chunk hashes (the inflated claim and the short vector were
	// refused by their declared size and count before their objects were read).
	let refused: Vec<(u16, &iota_rpc::AccountId, &str)> = record
		.refused_vectors
		.iter()
		.map(|v| (v.stage, &v.source.miner, v.reason.as_str()))
		.collect();
	eprintln!("refused vectors in the epoch record: {refused:?}");
	let nan_account = miners[nan_miner].account();
	let fixed_account = miners[fixed_miner].account();
	assert_eq!(record.refused_vectors.len(), 3, "{refused:?}");
	assert_eq!(refused.iter().filter(|r| *r.1 == nan_account).count(), 2);
	assert_eq!(refused.iter().filter(|r| *r.1 == fixed_account).count(), 1);
	// What a validator makes of them with the acceptance rule: the Inf vector (the NaN miner's last
	// upload) fails it; the NaN one was overwritten at the same key by it and the chunk-hash refusal's
	// list is the orchestrator's report, not in the object: neither is judged.
	let http = s3.http();
	let objects = iota_validator::objects::OrchestratorObjects { rpc: &watcher, http: &http };
	let spec_params: Vec<u64> = (0..=usize::from(tail))
		.map(|s| spec.model.stage_param_count(s).unwrap() as u64)
		.collect();
	let audit = iota_validator::vector_audit::audit_refused_vectors(
		&record,
		spec.merge_codec,
		&spec_params,
		&objects,
	)
	.await;
	let failed: Vec<&iota_rpc::AccountId> = audit.findings.iter().map(|f| &f.miner).collect();
	assert_eq!(failed, vec![&nan_account], "{audit:?}");
	assert!(
		audit.findings[0].evidence.refused.contains("non-finite value at element 0"),
		"{audit:?}"
	);
	assert_eq!(audit.unjudged.len(), 2, "{audit:?}");

	let metrics = http_get(&orch.metrics_addr, "/metrics").await;
	// Per sender: the NaN miner's refusals name it and its stage.
	assert!(
		metrics.contains(&format!(
			"iota_orchestrator_merge_vectors_refused_total{{code=\"non_finite\",method=\"iota_submitGradient\",miner=\"{nan_account}\",stage=\"1\"}} 2"
		)),
		"the NaN sender named in the metrics:\n{metrics}"
	);
	for code in ["sample_count_mismatch", "non_finite", "shape_mismatch", "hash_mismatch"] {
		assert!(
			metrics.contains(&format!("iota_orchestrator_refusals_total{{code=\"{code}\"}}")),
			"{code} counted:\n{metrics}"
		);
	}
}
