//! What the network trained, in Hugging Face form (issue 20 item 1, models without the bottleneck). A
//! whole network (`iota_devnet::Network`: dev node, orchestrator with the embedded S3 server, 3 × 1 real
//! `iota-miner` processes, no validators) trains the `tiny` preset re-cut into 3 stages with the
//! bottleneck off. Once epoch 0 is committed at every stage, `iota-orchestrator export` writes its merged
//! model from the chain's manifests and the bucket's checkpoints.
//!
//! Asserted: the folder holds `config.json`, `model.safetensors`, `generation_config.json` and the run's
//! `tokenizer.json` (byte for byte); read back (`iota_model::hf::import`, cut as the run is) every
//! stage's parameters equal those of the committed checkpoint, loaded only because its state hashes to
//! the manifest's attested hash; `iota-generate --hf` completes a prompt from it; without `--epoch` the
//! export takes an epoch every stage has committed; an unknown run and an epoch not committed are refused
//! naming them. Then a second network (3 × 1 miners and a validator) continues the export
//! (`prepare-data --init-from`): its spec names each stage's initial checkpoint, which holds exactly the
//! export's weights, and the validator, checking epoch 0 at those weights, passes every miner.
//!
//! ```sh
//! ./scripts/fetch-data.sh
//! cargo build --workspace --bins
//! cargo test -p iota-e2e --test network_export -- --ignored --nocapture
//! ```

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use candle_core::{DType, Device};
use iota_e2e::*;
use iota_model::Stage;
use iota_storage::Credentials;

const RUN: &str = "e2e-net-export";
/// The run that continues the first one's export.
const CONTINUED: &str = "e2e-net-continued";
const TIMEOUT: Duration = Duration::from_secs(600);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node, iota-orchestrator and three iota-miner processes (see the file's docs)"]
async fn the_merged_model_of_an_epoch_exports_as_a_hugging_face_folder() {
	let dir = output_dir(Path::new(env!("CARGO_TARGET_TMPDIR")), "network_export");
	let mut options = tiny_network(RUN, &dir, 3, 1, 0, 8);
	options.data.model = options.data.model.clone().with_bottleneck(None);
	let mut net = TestNetwork::start(options).await;
	let chain = net.chain().await.unwrap();
	net.wait("epoch 0 committed at every stage", TIMEOUT, &[], || async {
		chain.epoch_completed_at(0).await.ok()?
	})
	.await;
	let spec = net.prepared.spec.clone();
	let out = dir.join("hf");
	let export = |extra: &[&str]| -> Output {
		let sc = &net.0.store_config;
		let Credentials::Static { access_key, secret_key } = &sc.credentials else {
			panic!("the embedded server has static credentials")
		};
		Command::new(binary(
			"IOTA_ORCHESTRATOR_BIN",
			"iota-orchestrator",
			"cargo build --workspace --bins",
		))
		.args(["export", "--chain-rpc", &net.0.chain_url])
		.args(["--s3-endpoint", sc.endpoint.as_deref().unwrap(), "--s3-bucket", &sc.bucket])
		.args(["--s3-access-key", access_key, "--s3-secret-key", secret_key])
		.args(["--out", out.to_str().unwrap()])
		.args(extra)
		.output()
		.unwrap()
	};
	let text = |o: &Output| {
		format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
	};

	let o = export(&["--run", RUN, "--epoch", "0"]);
	eprintln!("{}", text(&o));
	assert!(o.status.success(), "{}", text(&o));
	let store = net.bucket().await;
	let tok = &spec.data.tokenizer;
	assert_eq!(
		std::fs::read(out.join("tokenizer.json")).unwrap(),
		store.get(&tok.key, &tok.hash).await.unwrap().to_vec(),
		"the run's tokenizer"
	);
	assert!(out.join("generation_config.json").is_file());
	let imported = iota_model::hf::import(&out, Some(spec.model.stages.clone()), None).unwrap();
	for s in 0..3u16 {
		let m = chain.merge_manifest(0, s).await.unwrap().unwrap();
		let ck = m.checkpoint.unwrap();
		let key = String::from_utf8(ck.key.0.clone()).unwrap();
		let bytes = store.get(&key, &ck.content_hash).await.unwrap();
		let mut stage =
			Stage::new(&spec.model, usize::from(s), spec.seed, DType::F32, &Device::Cpu).unwrap();
		stage.train_as(&spec.training);
		stage.load_checkpoint(&bytes, &m.state_hash.0).unwrap();
		assert_eq!(
			imported.stages()[usize::from(s)].flat_params().unwrap(),
			stage.flat_params().unwrap(),
			"stage {s}: the committed checkpoint's parameters"
		);
	}

	// Text from the export.
	let gen = Command::new(binary(
		"IOTA_GENERATE_BIN",
		"iota-generate",
		"cargo build --workspace --bins",
	))
	.args(["--hf", out.to_str().unwrap(), "--prompt", "ROMEO:", "--max-new-tokens", "12"])
	.output()
	.unwrap();
	eprintln!("{}", text(&gen));
	assert!(gen.status.success(), "{}", text(&gen));
	assert!(String::from_utf8_lossy(&gen.stdout).starts_with("ROMEO:"));

	// The default epoch is one every stage committed.
	let o = export(&["--run", RUN]);
	assert!(o.status.success(), "{}", text(&o));
	let said = String::from_utf8_lossy(&o.stdout).to_string();
	let epoch: u32 = said
		.split(" epoch ")
		.nth(1)
		.and_then(|t| t.split(',').next())
		.and_then(|n| n.parse().ok())
		.unwrap_or_else(|| panic!("no epoch in {said:?}"));
	assert!(chain.epoch_completed_at(epoch).await.unwrap().is_some(), "{said}");
	// Refusals name what is wrong.
	let o = export(&["--run", "no-such-run"]);
	assert!(!o.status.success());
	assert!(text(&o).contains("no-such-run"), "{}", text(&o));
	let o = export(&["--run", RUN, "--epoch", "100000"]);
	assert!(!o.status.success());
	assert!(text(&o).contains("epoch 100000 is not committed"), "{}", text(&o));
	net.assert_alive(&[]);
	drop(net);

	// A run that continues the exported model (`prepare-data --init-from`): the spec names each
	// stage's initial checkpoint, holding exactly the export's weights; every replica starts from
	// them, so the validator, which checks epoch 0's work at those weights (work done at the seed's
	// would fail, `spot_check` tests), passes every miner.
	let dir = output_dir(Path::new(env!("CARGO_TARGET_TMPDIR")), "network_export_continued");
	let mut options = tiny_network(CONTINUED, &dir, 3, 1, 1, 8);
	options.data.model = spec.model.clone();
	options.data.init_from = Some(out.clone());
	let mut net = TestNetwork::start(options).await;
	let continued = net.prepared.spec.clone();
	let init = continued.init.clone().expect("the spec names the initial weights");
	let imported =
		iota_model::hf::import(&out, Some(continued.model.stages.clone()), None).unwrap();
	let store = net.bucket().await;
	for (s, i) in init.iter().enumerate() {
		let bytes = store.get(&i.checkpoint.key, &i.checkpoint.hash).await.unwrap();
		let stage = Stage::initial(
			&continued.model,
			s,
			continued.seed,
			&continued.training,
			&Device::Cpu,
			Some((&bytes, &i.state.0)),
		)
		.unwrap();
		assert_eq!(
			stage.flat_params().unwrap(),
			imported.stages()[s].flat_params().unwrap(),
			"stage {s} starts from the export"
		);
	}
	let chain = net.chain().await.unwrap();
	let (miners, validators) = net.accounts();
	let id = |suri: &str| iota_chain::Signer::from_uri(suri).unwrap().account_id();
	let bob = id(validators[0]);
	let judged = net
		.wait("the validator's epoch-0 verdicts on every miner", TIMEOUT, &[], || async {
			let mut all = Vec::new();
			for m in &miners {
				let v = verdicts(&chain, 0, &id(m), &bob).await;
				if v.is_empty() {
					return None;
				}
				all.extend(v);
			}
			Some(all)
		})
		.await;
	eprintln!("continued run: epoch-0 verdicts {judged:?}");
	assert!(judged.iter().all(|v| *v == iota_chain::Verdict::Pass), "{judged:?}");
	net.assert_alive(&[]);
}
