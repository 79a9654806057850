//! `iota-storage-bench`: throughput and latency of the embedded S3 server, as ratios to local file copy.
//!
//! Measures, in one run on one machine:
//! - PUT and GET throughput (MiB/s) of 1 MiB and 16 MiB objects through the embedded server, with
//!   [`ObjectStore`] (the orchestrator's path) and with presigned URLs and [`PresignedHttp`] (the miners'
//!   path), hash computed on PUT and checked on GET as in production; the baseline is copying the same
//!   bytes between two local files (`std::fs::copy`, through the page cache) in the same run;
//! - p50/p99 latency of a 256 KiB activation round trip (PUT then verified GET), through the SDK client
//!   and through presigned URLs with [`PresignedHttp`] (the miner's path; signing is not timed).
//!
//! Run with `cargo run --release -p iota-storage --bin iota-storage-bench`. Debug builds work but measure
//! the unoptimised SDK.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use clap::Parser;
use iota_storage::{EmbeddedConfig, EmbeddedS3, ObjectStore, PresignedHttp, MIB};

/// Benchmark the embedded S3 server against local file copy.
#[derive(Debug, Parser)]
struct Args {
	/// Scratch directory (default: a fresh one under the system temp dir, removed afterwards).
	#[arg(long)]
	dir: Option<PathBuf>,
	/// Objects per throughput measurement at 1 MiB.
	#[arg(long, default_value_t = 64)]
	iters_1mib: usize,
	/// Objects per throughput measurement at 16 MiB.
	#[arg(long, default_value_t = 8)]
	iters_16mib: usize,
	/// Round trips for the 256 KiB latency measurement.
	#[arg(long, default_value_t = 300)]
	round_trips: usize,
}

fn mib_per_s(bytes: u64, elapsed: Duration) -> f64 {
	bytes as f64 / MIB as f64 / elapsed.as_secs_f64()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
	let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
	sorted[idx.min(sorted.len() - 1)]
}

fn payload(len: usize, seed: u8) -> Bytes {
	Bytes::from(
		(0..len)
			.map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(u32::from(seed)) as u8)
			.collect::<Vec<u8>>(),
	)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
	let args = Args::parse();
	let (dir, remove) = match args.dir {
		Some(d) => (d, false),
		None => {
			(std::env::temp_dir().join(format!("iota-storage-bench-{}", std::process::id())), true)
		},
	};
	std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
	let server = EmbeddedS3::start(EmbeddedConfig::new(dir.join("s3"))).await?;
	let store = ObjectStore::connect(server.store_config()).await?;
	let http = PresignedHttp::from_config(store.config())?;
	let profile = if cfg!(debug_assertions) { "debug" } else { "release" };
	println!(
		"iota-storage-bench ({profile} build), embedded S3 at {}, data in {}",
		server.endpoint(),
		dir.display()
	);
	println!();
	println!("Throughput, MiB/s (ratio to local file copy of the same bytes in parentheses):");
	println!(
		"{:<7} {:>5} {:>10} | {:>17} {:>17} | {:>17} {:>17}",
		"size", "count", "file copy", "SDK PUT", "SDK GET", "presigned PUT", "presigned GET"
	);

	for (size, iters) in [(MIB as usize, args.iters_1mib), (16 * MIB as usize, args.iters_16mib)] {
		let data = payload(size, 1);
		let total = (size * iters) as u64;

		// Baseline: copy the same bytes between local files.
		let src = dir.join(format!("src-{size}"));
		std::fs::write(&src, &data)?;
		std::fs::copy(&src, dir.join("warm"))?;
		let t = Instant::now();
		for i in 0..iters {
			std::fs::copy(&src, dir.join(format!("copy-{size}-{i}")))?;
		}
		let copy = mib_per_s(total, t.elapsed());

		let key =
			|path: &str, i: usize| format!("v1/runs/bench/orchestrator/reports/{path}{size}-{i}");
		let warm = store.put("warm", data.clone()).await?;
		store.get("warm", &warm.hash).await?;
		let hash = warm.hash;

		// SDK client (the orchestrator's path).
		let t = Instant::now();
		for i in 0..iters {
			store.put(&key("s", i), data.clone()).await?;
		}
		let sdk_put = mib_per_s(total, t.elapsed());
		let t = Instant::now();
		for i in 0..iters {
			store.get(&key("s", i), &hash).await?;
		}
		let sdk_get = mib_per_s(total, t.elapsed());

		// Presigned URLs (the miners' and validators' path); signing is done before timing.
		let mut puts = Vec::with_capacity(iters);
		let mut gets = Vec::with_capacity(iters);
		for i in 0..iters {
			puts.push(store.presign_put(&key("p", i), Duration::from_secs(600)).await?);
			gets.push(store.presign_get(&key("p", i), Duration::from_secs(600)).await?);
		}
		let t = Instant::now();
		for p in &puts {
			http.put(p, data.clone()).await?;
		}
		let url_put = mib_per_s(total, t.elapsed());
		let t = Instant::now();
		for g in &gets {
			http.get(g, &hash).await?;
		}
		let url_get = mib_per_s(total, t.elapsed());

		let cell = |v: f64| format!("{v:>7.0} ({:>6.3})", v / copy);
		println!(
			"{:<7} {:>5} {:>10.0} | {:>17} {:>17} | {:>17} {:>17}",
			format!("{} MiB", size as u64 / MIB),
			iters,
			copy,
			cell(sdk_put),
			cell(sdk_get),
			cell(url_put),
			cell(url_get)
		);
	}

	println!();
	let data = payload(256 * 1024, 2);
	let hash = iota_storage::ContentHash::of(&data);
	let mut sdk = Vec::with_capacity(args.round_trips);
	let mut presigned = Vec::with_capacity(args.round_trips);
	for i in 0..args.round_trips {
		let key = format!("v1/runs/bench/orchestrator/reports/rt-{i}");
		let t = Instant::now();
		store.put(&key, data.clone()).await?;
		store.get(&key, &hash).await?;
		sdk.push(t.elapsed());

		let key = format!("v1/runs/bench/orchestrator/reports/rtp-{i}");
		let put = store.presign_put(&key, Duration::from_secs(300)).await?;
		let get = store.presign_get(&key, Duration::from_secs(300)).await?;
		let t = Instant::now();
		http.put(&put, data.clone()).await?;
		http.get(&get, &hash).await?;
		presigned.push(t.elapsed());
	}
	// File baseline for the same size: write then read back.
	let mut file = Vec::with_capacity(args.round_trips);
	for i in 0..args.round_trips {
		let p = dir.join(format!("rt-{i}"));
		let t = Instant::now();
		std::fs::write(&p, &data)?;
		let back = std::fs::read(&p)?;
		anyhow::ensure!(back.len() == data.len());
		file.push(t.elapsed());
	}
	println!("256 KiB round trip (PUT then verified GET), {} each:", args.round_trips);
	for (name, v) in [
		("SDK client", &mut sdk),
		("presigned URLs", &mut presigned),
		("local file write+read", &mut file),
	] {
		v.sort();
		println!(
			"  {:<22} p50 {:>8.3} ms   p99 {:>8.3} ms",
			name,
			percentile(v, 0.50).as_secs_f64() * 1e3,
			percentile(v, 0.99).as_secs_f64() * 1e3
		);
	}
	let ratio = percentile(&sdk, 0.5).as_secs_f64() / percentile(&file, 0.5).as_secs_f64();
	println!("  p50 ratio SDK / local file: {ratio:.1}x");

	server.shutdown().await;
	if remove {
		std::fs::remove_dir_all(&dir).ok();
	}
	Ok(())
}
