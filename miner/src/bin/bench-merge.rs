//! `bench-merge`: bytes each miner moves in one butterfly merge, for n miners of one stage, over the
//! real S3 protocol (the embedded S3 server, presigned PUT/GET, ranged GETs of chunk-aligned spans,
//! the miner's own reduce and assemble code), compared with IOTA's scheme for the same model.
//!
//! Per miner and merge: upload the gradient sum (P f32) and its reduced shards; download the spans of
//! every submission for each shard it reduces, then every reduced shard (the mean). Bytes are counted
//! by each miner's HTTP client (payloads only). IOTA's scheme (ref §4, as the reference primer states it): each
//! miner uploads weights + two Adam moments (3P) and downloads the merged 3P. `--iota-butterfly` also
//! runs IOTA's 3P state through this same butterfly (a like-for-like all-reduce of weights + moments).
//!
//! ```sh
//! cargo run -p iota-miner --bin bench-merge --release -- --miners 2,4,8,16
//! cargo run -p iota-miner --bin bench-merge --release -- --chunk-elems 4096   # another chunk size
//! ```

use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use bytes::Bytes;
use clap::Parser;
use iota_miner::merge::{
	self, assemble_mean, chunk_hashes_with, chunk_span_with, reduce_shard_chunked, ShardInput,
	SpanInput,
};
use iota_miner::{HttpIo, ObjectIo};
use iota_model::ModelConfig;
use iota_primitives::butterfly::butterfly_shards;
use iota_primitives::ContentHash;
use iota_rpc::types::gradient_chunk_elems;
use iota_storage::keys::{self, Id};
use iota_storage::{EmbeddedConfig, EmbeddedS3, ObjectStore, RetryPolicy};
use rand::{Rng, SeedableRng};

/// bench-merge studies the exact codec's chunking.
const F: merge::MergeCodec = merge::MergeCodec::F32;

/// Bytes per miner per butterfly merge vs IOTA's weights + moments scheme.
#[derive(Debug, Parser)]
struct Cli {
	/// Miners in the stage, comma-separated.
	#[arg(long, default_value = "2,4,8,16", value_delimiter = ',')]
	miners: Vec<u32>,
	/// Gradient length P in f32 elements (default: the small preset's stage-1 parameter count).
	#[arg(long)]
	param_count: Option<u64>,
	/// Elements per hashed chunk (default: the protocol's `gradient_chunk_elems(P)`).
	#[arg(long)]
	chunk_elems: Option<u64>,
	/// Also run IOTA's 3P state (weights + two moments) through the same butterfly.
	#[arg(long)]
	iota_butterfly: bool,
}

#[derive(Clone, Copy, Debug, Default)]
struct PerMiner {
	up_mean: f64,
	down_mean: f64,
	up_max: u64,
	down_max: u64,
	up_min: u64,
	down_min: u64,
	hash_list_bytes: u64,
}

/// One merge of `n` miners over vectors of `p` elements; bytes per miner.
async fn merge_round(
	store: &ObjectStore,
	n: u32,
	p: u64,
	chunk: u64,
	tag: &str,
) -> anyhow::Result<PerMiner> {
	let run = Id::new(format!("bench-{tag}-{n}"))?;
	let ttl = Duration::from_secs(600);
	let ids: Vec<Id> = (0..n).map(|i| Id::new(format!("m{i:03}"))).collect::<Result<_, _>>()?;
	let ios: Vec<HttpIo> = (0..n)
		.map(|_| HttpIo::new(RetryPolicy::default(), Duration::from_secs(120), 1 << 34))
		.collect::<Result<_, _>>()?;

	// 1. Every miner uploads its gradient sum.
	let mut subs = Vec::new();
	for (i, id) in ids.iter().enumerate() {
		let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(i as u64);
		let values: Vec<f32> = (0..p).map(|_| rng.random_range(-1.0f32..1.0)).collect();
		let bytes = merge::submission_bytes(F, &values)?;
		let hashes = chunk_hashes_with(F, &bytes, p, chunk);
		let key = keys::gradient_submission(&run, 0, 1, id);
		let put = store.presign_put(&key, ttl).await?;
		ios[i].put(&put, Bytes::from(bytes)).await?;
		subs.push((key, hashes, 1 + i as u32));
	}
	// 2. Each reduces its shards from ranged, chunk-checked reads and uploads them.
	let table = butterfly_shards(n, p, &[9; 32]).map_err(|e| anyhow::anyhow!("{e:?}"))?;
	let mut copies: Vec<Vec<(String, ContentHash)>> = vec![Vec::new(); table.len()];
	for (i, id) in ids.iter().enumerate() {
		for d in table.iter().filter(|d| d.is_owned_by(i as u32)) {
			let span = chunk_span_with(F, d.start, d.end, p, chunk).bytes;
			let mut spans = Vec::new();
			for (key, _, _) in &subs {
				let get = store.presign_get(key, ttl).await?;
				spans.push(ios[i].get_range(&get, span.clone()).await?);
			}
			let inputs: Vec<SpanInput<'_>> = subs
				.iter()
				.zip(&spans)
				.map(|((_, h, s), b)| SpanInput { samples: *s, chunk_hashes: h, span: b })
				.collect();
			let values = reduce_shard_chunked(F, &inputs, d.start, d.end, p, chunk)?;
			let (bytes, hash) = merge::shard_bytes(F, &values, p)?;
			let key = keys::reduced_shard(&run, 0, 1, d.index, id);
			let put = store.presign_put(&key, ttl).await?;
			ios[i].put(&put, Bytes::from(bytes)).await?;
			copies[d.index as usize].push((key, hash));
		}
	}
	for (k, c) in copies.iter().enumerate() {
		ensure!(c.iter().all(|x| x.1 == c[0].1), "shard {k}: the copies differ");
	}
	// 3. Every miner downloads every reduced shard (one copy) and assembles the mean.
	for io in &ios {
		let mut blobs = Vec::new();
		for c in &copies {
			let get = store.presign_get(&c[0].0, ttl).await?;
			blobs.push(io.get(&get, &c[0].1).await?);
		}
		let inputs: Vec<ShardInput<'_>> = table
			.iter()
			.zip(&blobs)
			.zip(&copies)
			.map(|((d, b), c)| ShardInput {
				shard: d.index,
				range: [d.start, d.end],
				hash: &c[0].1,
				bytes: b,
			})
			.collect();
		ensure!(assemble_mean(F, &inputs, p)?.len() as u64 == p);
	}
	let ups: Vec<u64> = ios.iter().map(|io| io.bytes.up()).collect();
	let downs: Vec<u64> = ios.iter().map(|io| io.bytes.down()).collect();
	Ok(PerMiner {
		up_mean: ups.iter().sum::<u64>() as f64 / f64::from(n),
		down_mean: downs.iter().sum::<u64>() as f64 / f64::from(n),
		up_max: *ups.iter().max().unwrap_or(&0),
		down_max: *downs.iter().max().unwrap_or(&0),
		up_min: *ups.iter().min().unwrap_or(&0),
		down_min: *downs.iter().min().unwrap_or(&0),
		// getShards lists every submission's chunk hashes (64 hex digits + quotes and comma in JSON).
		hash_list_bytes: u64::from(n) * p.div_ceil(chunk) * 67,
	})
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
	let cli = Cli::parse();
	let p = match cli.param_count {
		Some(p) => p,
		None => ModelConfig::small().stage_param_count(1)? as u64,
	};
	let chunk_elems = cli.chunk_elems.unwrap_or_else(|| gradient_chunk_elems(p));
	ensure!(chunk_elems > 0, "--chunk-elems must be positive");
	let dir = tempfile::tempdir()?;
	let server = EmbeddedS3::start(EmbeddedConfig::new(dir.path()))
		.await
		.context("starting the embedded S3 server")?;
	let store = ObjectStore::connect(server.store_config()).await?;
	let pb = (p * 4) as f64;
	let mib = |b: f64| b / (1024.0 * 1024.0);
	println!(
		"bench-merge: P = {p} f32 ({:.1} MiB per vector), chunk = {} elements, embedded S3 at {}",
		mib(pb),
		chunk_elems,
		server.endpoint()
	);
	println!(
		"IOTA (reference primer's figure): 3P up + 3P down = {:.1} MiB per miner",
		mib(6.0 * pb)
	);
	println!(
		"{:>3} {:>11} {:>11} {:>11} {:>8} {:>8} {:>8} {:>9} {:>10} {:>7}",
		"n",
		"up MiB",
		"down MiB",
		"total MiB",
		"up/P",
		"down/P",
		"total/P",
		"hashes",
		"vs IOTA",
		"time s"
	);
	let mut totals = Vec::new();
	for &n in &cli.miners {
		ensure!(n >= 1, "n must be at least 1");
		let t0 = Instant::now();
		let r = merge_round(&store, n, p, chunk_elems, "ours").await?;
		let total = r.up_mean + r.down_mean;
		totals.push(total);
		println!(
			"{n:>3} {:>11.2} {:>11.2} {:>11.2} {:>8.3} {:>8.3} {:>8.3} {:>8.2}M {:>10.3} {:>7.1}",
			mib(r.up_mean),
			mib(r.down_mean),
			mib(total),
			r.up_mean / pb,
			r.down_mean / pb,
			total / pb,
			mib(r.hash_list_bytes as f64),
			total / (6.0 * pb),
			t0.elapsed().as_secs_f64()
		);
		println!(
			"    per-miner spread: up {:.2}..{:.2} MiB, down {:.2}..{:.2} MiB",
			mib(r.up_min as f64),
			mib(r.up_max as f64),
			mib(r.down_min as f64),
			mib(r.down_max as f64)
		);
		if cli.iota_butterfly {
			let t0 = Instant::now();
			let q = merge_round(
				&store,
				n,
				3 * p,
				cli.chunk_elems.unwrap_or_else(|| gradient_chunk_elems(3 * p)),
				"iota",
			)
			.await?;
			let iota_total = q.up_mean + q.down_mean;
			println!(
				"    IOTA state (3P) through the same butterfly: {:.2} MiB per miner; ours / that = {:.3} ({:.1} s)",
				mib(iota_total),
				total / iota_total,
				t0.elapsed().as_secs_f64()
			);
		}
	}
	let (lo, hi) = totals.iter().fold((f64::MAX, 0f64), |(lo, hi), &t| (lo.min(t), hi.max(t)));
	let mid = (lo + hi) / 2.0;
	println!(
		"flatness: total per miner {:.2}..{:.2} MiB over n = {:?}: ±{:.1}% around the midpoint (goal ±10%)",
		mib(lo),
		mib(hi),
		cli.miners,
		100.0 * (hi - mid) / mid
	);
	server.shutdown().await;
	Ok(())
}
