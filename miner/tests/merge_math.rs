//! The butterfly merge's arithmetic: shards reduced from chunk-aligned spans equal the exact weighted
//! mean; replicas stepping with the assembled mean stay bit-identical; tampering and every malformed
//! input is refused with its own error.

use candle_core::{DType, Device, Tensor};
use iota_miner::merge::{
	assemble_mean, chunk_count, chunk_hashes, reduce_shard, shard_bytes, submission_bytes,
	MergeError, ShardInput, SpanInput,
};
use iota_model::{ModelConfig, Stage, StepOptions};
use iota_primitives::butterfly::butterfly_shards;
use iota_primitives::ContentHash;
use iota_rpc::types::{chunk_span, gradient_chunk_elems, MergeCodec, MAX_GRADIENT_CHUNK_ELEMS};

const F: MergeCodec = MergeCodec::F32;
use rand::{Rng, SeedableRng};

struct Sub {
	bytes: Vec<u8>,
	hashes: Vec<ContentHash>,
	samples: u32,
	values: Vec<f32>,
}

fn submission(values: Vec<f32>, samples: u32) -> Sub {
	let bytes = submission_bytes(F, &values).unwrap();
	let hashes = chunk_hashes(F, &bytes, bytes.len() as u64 / 4);
	Sub { bytes, hashes, samples, values }
}

fn random_subs(n: usize, p: usize, seed: u64) -> Vec<Sub> {
	let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
	(0..n)
		.map(|_| {
			let samples = rng.random_range(1..20u32);
			// Sums of `samples` micro-batch gradients, with a wide dynamic range.
			let v = (0..p)
				.map(|_| rng.random_range(-1.0f32..1.0) * 10f32.powi(rng.random_range(-6..3)))
				.collect();
			submission(v, samples)
		})
		.collect()
}

/// What a reducer reads of `sub` for `[start, end)`: the chunk-aligned span.
fn span(sub: &Sub, start: u64, end: u64, p: u64) -> &[u8] {
	let r = chunk_span(F, start, end, p).bytes;
	&sub.bytes[r.start as usize..r.end as usize]
}

/// The reference weighted mean, element by element over whole vectors (not spans).
fn exact_mean(subs: &[Sub], p: usize) -> Vec<f32> {
	let total: f64 = subs.iter().map(|s| f64::from(s.samples)).sum();
	(0..p)
		.map(|j| (subs.iter().map(|s| f64::from(s.values[j])).sum::<f64>() / total) as f32)
		.collect()
}

/// Reduce every butterfly shard (as a reducer would, from spans) and publish it.
fn reduce_all(subs: &[Sub], p: u64, seed: &[u8; 32]) -> Vec<([u64; 2], Vec<u8>, ContentHash)> {
	let table = butterfly_shards(subs.len() as u32, p, seed).unwrap();
	table
		.iter()
		.map(|d| {
			let inputs: Vec<SpanInput<'_>> = subs
				.iter()
				.map(|s| SpanInput {
					samples: s.samples,
					chunk_hashes: &s.hashes,
					span: span(s, d.start, d.end, p),
				})
				.collect();
			let v = reduce_shard(F, &inputs, d.start, d.end, p).unwrap();
			let (b, h) = shard_bytes(F, &v, p).unwrap();
			([d.start, d.end], b, h)
		})
		.collect()
}

fn shard_inputs(shards: &[([u64; 2], Vec<u8>, ContentHash)]) -> Vec<ShardInput<'_>> {
	shards
		.iter()
		.enumerate()
		.map(|(i, (r, b, h))| ShardInput { shard: i as u32, range: *r, hash: h, bytes: b })
		.collect()
}

#[test]
fn reduced_shards_equal_the_exact_weighted_mean_for_n_2_to_6() {
	// Three full chunks and a ragged tail, so shards straddle chunk boundaries.
	let p = 3 * MAX_GRADIENT_CHUNK_ELEMS as usize + 1_237;
	for n in 2..=6usize {
		let subs = random_subs(n, p, 100 + n as u64);
		let want = exact_mean(&subs, p);
		let shards = reduce_all(&subs, p as u64, &[n as u8; 32]);
		assert_eq!(shards.len(), n * (n - 1) / 2);
		let mean = assemble_mean(F, &shard_inputs(&shards), p as u64).unwrap();
		assert_eq!(mean.len(), p);
		let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
		assert_eq!(
			bits(&mean),
			bits(&want),
			"n = {n}: reduced mean differs from the exact weighted mean"
		);
		// And the exact mean is the mean: within f32 rounding of the f64 value.
		let total: f64 = subs.iter().map(|s| f64::from(s.samples)).sum();
		for j in (0..p).step_by(997) {
			let m = subs.iter().map(|s| f64::from(s.values[j])).sum::<f64>() / total;
			assert!((f64::from(mean[j]) - m).abs() <= m.abs() * 6e-8 + 1e-45, "n = {n}, j = {j}");
		}
	}
}

#[test]
fn both_reducers_of_a_shard_produce_the_same_bytes() {
	let p = 2 * MAX_GRADIENT_CHUNK_ELEMS + 5;
	let subs = random_subs(4, p as usize, 9);
	let a = reduce_all(&subs, p, &[1; 32]);
	let b = reduce_all(&subs, p, &[1; 32]);
	assert_eq!(
		a.iter().map(|s| s.2).collect::<Vec<_>>(),
		b.iter().map(|s| s.2).collect::<Vec<_>>()
	);
}

#[test]
fn replicas_stepping_with_the_merged_mean_stay_bit_identical() {
	let cfg = ModelConfig::tiny();
	let dev = Device::Cpu;
	let w = cfg.wire_width();
	for n in 2..=4usize {
		let mut replicas: Vec<Stage> =
			(0..n).map(|_| Stage::new(&cfg, 1, 21, DType::F32, &dev).unwrap()).collect();
		for epoch in 0..2u64 {
			// Each replica accumulates real gradients of its own micro-batches.
			let mut subs = Vec::new();
			for (k, st) in replicas.iter_mut().enumerate() {
				let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(epoch * 100 + k as u64);
				for _ in 0..=k {
					let x: Vec<f32> = (0..2 * 8 * w).map(|_| rng.random_range(-1.0..1.0)).collect();
					let g: Vec<f32> = (0..2 * 8 * w).map(|_| rng.random_range(-1.0..1.0)).collect();
					st.backward_from_input(
						&Tensor::from_vec(x, (2, 8, w), &dev).unwrap(),
						&Tensor::from_vec(g, (2, 8, w), &dev).unwrap(),
					)
					.unwrap();
				}
				let (sum, count) = st.take_gradient().unwrap();
				subs.push(submission(sum, count as u32));
			}
			let p = replicas[0].param_count() as u64;
			let shards = reduce_all(&subs, p, &[epoch as u8; 32]);
			let mean = assemble_mean(F, &shard_inputs(&shards), p).unwrap();
			let samples: u32 = subs.iter().map(|s| s.samples).sum();
			for st in replicas.iter_mut() {
				st.apply_gradient(&mean, &StepOptions::default(), samples as usize).unwrap();
			}
			let h0 = replicas[0].state_hash().unwrap();
			assert!(
				replicas.iter().all(|r| r.state_hash().unwrap() == h0),
				"n = {n}, epoch {epoch}: replicas diverged"
			);
		}
		assert_eq!(replicas[0].adam_state().step, 2);
	}
}

#[test]
fn a_tampered_shard_or_chunk_is_detected_by_hash() {
	let p = 2 * MAX_GRADIENT_CHUNK_ELEMS + 77;
	let subs = random_subs(3, p as usize, 5);
	let mut shards = reduce_all(&subs, p, &[2; 32]);
	shards[1].1[10] ^= 0x01;
	assert!(matches!(
		assemble_mean(F, &shard_inputs(&shards), p),
		Err(MergeError::ShardHash { shard: 1, .. })
	));

	// One flipped bit in one chunk of one submission's span.
	let (start, end) = (MAX_GRADIENT_CHUNK_ELEMS - 3, MAX_GRADIENT_CHUNK_ELEMS + 3);
	let mut bad = span(&subs[2], start, end, p).to_vec();
	let last = bad.len() - 1;
	bad[last] ^= 0x80;
	let inputs = [
		SpanInput {
			samples: subs[0].samples,
			chunk_hashes: &subs[0].hashes,
			span: span(&subs[0], start, end, p),
		},
		SpanInput {
			samples: subs[1].samples,
			chunk_hashes: &subs[1].hashes,
			span: span(&subs[1], start, end, p),
		},
		SpanInput { samples: subs[2].samples, chunk_hashes: &subs[2].hashes, span: &bad },
	];
	let last_chunk = ((end - 1) / gradient_chunk_elems(p)) as usize;
	assert!(
		matches!(reduce_shard(F, &inputs, start, end, p), Err(MergeError::ChunkHash { index: 2, chunk, .. }) if chunk == last_chunk)
	);
}

#[test]
fn malformed_reduce_inputs_are_refused() {
	let p = MAX_GRADIENT_CHUNK_ELEMS + 10;
	let subs = random_subs(2, p as usize, 1);
	fn ok(s: &Sub, p: u64) -> SpanInput<'_> {
		SpanInput { samples: s.samples, chunk_hashes: &s.hashes, span: span(s, 0, 5, p) }
	}

	// Wrong number of chunk hashes.
	let short = &subs[1].hashes[..1];
	let inputs = [ok(&subs[0], p), SpanInput { chunk_hashes: short, ..ok(&subs[1], p) }];
	let want = chunk_count(p);
	assert!(want > 1);
	assert!(
		matches!(reduce_shard(F, &inputs, 0, 5, p), Err(MergeError::ChunkCount { index: 1, expected, got: 1, .. }) if expected == want)
	);

	// A span of the wrong length (cut short, as a truncated ranged read).
	let cut = &span(&subs[1], 0, 5, p)[..100];
	let inputs = [ok(&subs[0], p), SpanInput { span: cut, ..ok(&subs[1], p) }];
	assert!(matches!(
		reduce_shard(F, &inputs, 0, 5, p),
		Err(MergeError::SpanLength { index: 1, got: 100, .. })
	));

	// NaN in a submission whose chunk hashes are honest about it.
	let mut v = subs[0].values.clone();
	v[3] = f32::NAN;
	let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
	let hashes = chunk_hashes(F, &bytes, bytes.len() as u64 / 4);
	let r = chunk_span(F, 0, 5, p).bytes;
	let nan = [SpanInput {
		samples: 1,
		chunk_hashes: &hashes,
		span: &bytes[r.start as usize..r.end as usize],
	}];
	assert!(matches!(reduce_shard(F, &nan, 0, 5, p), Err(MergeError::NonFinite { index: 3, .. })));

	// A mean that overflows f32.
	let big = submission(vec![3.0e38; p as usize], 1);
	let big2 = submission(vec![3.0e38; p as usize], 0);
	let inputs = [
		SpanInput { samples: 1, chunk_hashes: &big.hashes, span: span(&big, 0, 5, p) },
		SpanInput { samples: 0, chunk_hashes: &big2.hashes, span: span(&big2, 0, 5, p) },
	];
	assert!(matches!(reduce_shard(F, &inputs, 0, 5, p), Err(MergeError::NonFinite { .. })));
	assert_eq!(chunk_count(p), want);
}

#[test]
fn shards_that_do_not_tile_or_have_the_wrong_length_are_refused() {
	let p = 1_000u64;
	let subs = random_subs(3, p as usize, 3);
	let shards = reduce_all(&subs, p, &[4; 32]);
	let good = shard_inputs(&shards);
	assert!(assemble_mean(F, &good, p).is_ok());

	// Missing the last shard.
	assert!(matches!(assemble_mean(F, &good[..2], p), Err(MergeError::NotTiling { shard: 2, .. })));
	// Out of order.
	let swapped = [good[1], good[0], good[2]];
	assert!(matches!(assemble_mean(F, &swapped, p), Err(MergeError::NotTiling { shard: 0, .. })));
	// For another stage (another P).
	assert!(matches!(assemble_mean(F, &good, p + 1), Err(MergeError::NotTiling { .. })));
	assert!(matches!(assemble_mean(F, &good, p - 1), Err(MergeError::BadRange { .. })));
	// Bytes of the wrong length for the range (hash of what was sent matches).
	let short = &shards[0].1[..8];
	let short_hash = ContentHash::of(short);
	let wrong = [ShardInput { bytes: short, hash: &short_hash, ..good[0] }, good[1], good[2]];
	assert!(matches!(
		assemble_mean(F, &wrong, p),
		Err(MergeError::ShardLength { shard: 0, got: 8, .. })
	));
	// NaN in a shard whose hash is honest about it.
	let mut nan = shards[2].1.clone();
	nan[0..4].copy_from_slice(&f32::NAN.to_le_bytes());
	let nan_hash = ContentHash::of(&nan);
	let with_nan = [good[0], good[1], ShardInput { bytes: &nan, hash: &nan_hash, ..good[2] }];
	assert!(matches!(assemble_mean(F, &with_nan, p), Err(MergeError::NonFinite { .. })));
	// Nothing at all.
	assert!(matches!(assemble_mean(F, &[], p), Err(MergeError::NotTiling { .. })));
}
