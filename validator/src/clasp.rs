//! CLASP: each miner's marginal effect on the loss, estimated from an epoch's pathway log
//! ([`iota_rpc::PathwayLog`], docs/design.md §3 step 7), its outlier flag and its score.
//!
//! The reference's CLASP is not public; this is our open version. Pure: no I/O, no clock, no
//! randomness, so anyone with the log and the spot-check outcomes recomputes the same numbers.
//!
//! ## Model (joint least squares, ridge, sum-to-zero per stage)
//!
//! Every record `r` (one sample) went through one miner per stage: `m(r, s) = forward[s]`, the miner
//! whose forward output was accepted (the activation that reached the loss). With the tail's loss
//! `y_r` (nats), CLASP fits
//!
//! ```text
//! y_r ≈ μ + Σ_s β[m(r, s)]
//! ```
//!
//! by minimising `Σ_r (y_r − μ − Σ_s β[m(r,s)])² + λ Σ_m β_m²` with `λ = `[`RIDGE_LAMBDA`] and `μ`
//! unpenalised. With `μ` free, shifting every `β` of one stage by `c` and `μ` by `−c` leaves the fit
//! unchanged, so the ridge optimum has **exactly `Σ_{m ∈ stage s} β_m = 0` for every stage**
//! (unweighted sum-to-zero coding): `β_m` is the miner's effect relative to the average miner of its
//! stage, in nats. The `(1 + M) × (1 + M)` normal equations are solved by Cholesky in f64.
//!
//! Alongside: the per-miner **mean difference** `d_m = mean{y_r : m(r,s) = m} − mean{y_r : m(r,s) ∈
//! stage s, ≠ m}` (unadjusted for the other stages; `None` when the miner has no peer with samples).
//!
//! ## Outlier flag (robust z-score within a stage)
//!
//! `σ̂ = max(1.4826 · MAD(ẽ), `[`SIGMA_FLOOR`]`)` is the robust noise scale of the fit's
//! leverage-corrected residuals `ẽ_r = e_r / sqrt(1 − h_r)` (`h_r` the diagonal of the ridge hat matrix
//! `H = X (XᵀX + λI')⁻¹ Xᵀ`: a fitted record's residual is shrunk by its own pull on the fit; MAD is the
//! median absolute deviation from the median; 1.4826 makes it σ for Gaussian noise). The residuals carry
//! `ν = n − tr(H)` degrees of freedom; an epoch with `ν < `[`MIN_RESIDUAL_DF`] is **not judged**: `σ̂`
//! from so few degrees of freedom is far too small too often (the devnet's 8-sample e2e epochs leave
//! `ν ≈ 3.5`), so nobody is flagged and nobody is discounted (`q = 1` below). For a miner with `n_m`
//! samples at stage `s`,
//!
//! ```text
//! z_m = (β_m − median{β_k : k ∈ stage s, k ≠ m, n_k > 0}) / (σ̂ · sqrt(1/n_m + 1/n̄))
//! ```
//!
//! where `n̄` is the mean sample count of those peers. The denominator is the standard error of the
//! difference between the miner's mean and one peer's mean; the median of several peers varies less,
//! so it is conservative (fewer false flags). A miner is **flagged** when the epoch is judged,
//! `z_m ≥ `[`Z_FLAG`] and `n_m ≥ `[`MIN_SAMPLES`]; the test is one-sided (only a loss *increase* is suspicious). A miner
//! alone in its stage, or without forward samples, has `z = 0`. With 2 miners per stage (the devnet's
//! 3 × 2) the peer median is the other miner, so the flag is a plain two-sample test with a robust σ.
//!
//! ## Score
//!
//! `items_m` = forward items of the miner at its stage plus backward items it recomputed for another
//! miner's forward (`backward[s] = m ≠ forward[s]`). **Validated throughput** `v_m = items_m` when
//! none of the miner's spot-checks failed this epoch, else `0` ([`CheckStatus::Failed`]); unchecked
//! and passed miners count in full (spot-checks are sampled). Then
//!
//! ```text
//! q_m = 0                                   if flagged
//! q_m = 1                                   if the epoch is not judged (ν < MIN_RESIDUAL_DF)
//! q_m = 1 − min(1, max(0, z_m) / (2·Z_FLAG))  otherwise (so q ∈ [0.5, 1] for unflagged miners)
//! score_m = v_m · q_m
//! ```
//!
//! [`crate::weights::weight_vector`] turns scores into the `u16` vector committed and revealed on chain.

use std::collections::BTreeMap;

use iota_rpc::{AccountId, PathwayLog};
use nalgebra::{DMatrix, DVector};

/// Ridge penalty `λ` on the miner effects, in units of samples (a miner's effect is shrunk as if it had
/// `λ` extra samples at zero effect). Also makes the rank-deficient one-hot system solvable.
pub const RIDGE_LAMBDA: f64 = 1.0;
/// Robust z-score at or above which a miner is flagged (one-sided). At 4, a Gaussian false flag has
/// probability ≈ 3·10⁻⁵ per miner and epoch when `σ̂` is exact; estimated from the residuals it is
/// higher (simulated, 3 × 2 miners, Student-t noise: ~0.5 % of epochs flag someone at 64 samples), which is
/// why [`MIN_RESIDUAL_DF`] keeps small epochs out.
pub const Z_FLAG: f64 = 4.0;
/// Fewest forward samples a miner needs at its stage before it can be flagged.
pub const MIN_SAMPLES: u32 = 4;
/// Fewest residual degrees of freedom `ν` (samples minus the fit's effective parameter count) with which
/// CLASP judges an epoch at all. With fewer, `σ̂` is too noisy to test against: an 8-sample epoch of 3 × 2
/// miners leaves `ν ≈ 3.5`, and honest miners were flagged in about 1 epoch in 20 (simulated, and seen
/// in the e2e happy path).
pub const MIN_RESIDUAL_DF: f64 = 16.0;
/// MAD → σ for Gaussian noise.
pub const MAD_TO_SIGMA: f64 = 1.4826;
/// Smallest noise scale used, in nats (keeps z finite for logs with identical losses).
pub const SIGMA_FLOOR: f64 = 1e-3;

/// How a miner's spot-checks of the epoch came out (input to the validated throughput).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckStatus {
	/// No spot-check drew this miner (or every check was inconclusive).
	Unchecked,
	/// Every conclusive check passed.
	Passed,
	/// At least one check failed: validated throughput is 0.
	Failed,
}

/// CLASP result for one miner at one stage.
#[derive(Clone, Debug, PartialEq)]
pub struct MinerScore {
	/// The miner.
	pub miner: AccountId,
	/// Its stage.
	pub stage: u16,
	/// Forward samples `n_m` through this miner at this stage.
	pub samples: u32,
	/// Work items: forward samples plus backward items recomputed for another miner's forward.
	pub items: u32,
	/// Joint least-squares effect `β_m` on the loss, nats (sum-to-zero within the stage).
	pub effect: f64,
	/// Mean loss of its samples minus mean loss of its stage peers' samples, nats.
	pub mean_diff: Option<f64>,
	/// Robust z-score (module docs).
	pub z: f64,
	/// `z ≥ Z_FLAG` with at least `MIN_SAMPLES` samples.
	pub flagged: bool,
	/// Validated throughput `v_m` (items, or 0 after a failed spot-check).
	pub validated: u32,
	/// `v_m · q_m` (module docs).
	pub score: f64,
}

/// CLASP result for one epoch.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaspReport {
	/// Epoch of the log.
	pub epoch: u32,
	/// Samples in the log.
	pub samples: usize,
	/// Intercept `μ`, nats.
	pub mu: f64,
	/// Robust residual scale `σ̂`, nats.
	pub sigma: f64,
	/// Residual degrees of freedom `ν = n − tr(H)` of the fit (module docs); below
	/// [`MIN_RESIDUAL_DF`] nobody is flagged or discounted.
	pub residual_df: f64,
	/// One entry per (stage, miner) seen in the log, ordered by stage then account bytes.
	pub miners: Vec<MinerScore>,
}

impl ClaspReport {
	/// The entries ordered best first: score descending, then effect ascending, then account.
	pub fn ranking(&self) -> Vec<&MinerScore> {
		let mut v: Vec<&MinerScore> = self.miners.iter().collect();
		v.sort_by(|a, b| {
			b.score
				.total_cmp(&a.score)
				.then(a.effect.total_cmp(&b.effect))
				.then(a.miner.0.cmp(&b.miner.0))
		});
		v
	}

	/// Flagged miners.
	pub fn flagged(&self) -> impl Iterator<Item = &MinerScore> {
		self.miners.iter().filter(|m| m.flagged)
	}

	/// Score per miner account (summed if an account appears at more than one stage).
	pub fn scores(&self) -> Vec<(AccountId, f64)> {
		let mut out: BTreeMap<[u8; 32], (AccountId, f64)> = BTreeMap::new();
		for m in &self.miners {
			out.entry(m.miner.0).or_insert_with(|| (m.miner.clone(), 0.0)).1 += m.score;
		}
		out.into_values().collect()
	}
}

/// Why CLASP cannot score a log.
#[derive(Debug, thiserror::Error)]
pub enum ClaspError {
	/// The log fails [`PathwayLog::validate`].
	#[error("malformed pathway log: {0}")]
	Malformed(#[from] iota_rpc::PathwayError),
	/// The log has no records or no stages.
	#[error("pathway log of epoch {epoch} has no samples")]
	Empty {
		/// Epoch of the log.
		epoch: u32,
	},
	/// The normal equations are not positive definite (cannot happen with `λ > 0`; reported, not panicked).
	#[error("least-squares system is not positive definite")]
	Singular,
}

/// Scores an epoch (module docs). `checks` holds the spot-check status per miner; miners absent from
/// it are [`CheckStatus::Unchecked`].
///
/// # Errors
/// [`ClaspError::Malformed`] for a log that fails validation, [`ClaspError::Empty`] for a log without
/// samples or stages, [`ClaspError::Singular`] never in practice.
pub fn score_epoch(
	log: &PathwayLog,
	checks: &BTreeMap<AccountId, CheckStatus>,
) -> Result<ClaspReport, ClaspError> {
	log.validate()?;
	let n = log.records.len();
	let stages = usize::from(log.stages);
	if n == 0 || stages == 0 {
		return Err(ClaspError::Empty { epoch: log.epoch });
	}

	// Units: one column per (stage, miner) seen (forward or backward), in (stage, account bytes) order so
	// results do not depend on record order.
	let mut seen: BTreeMap<(u16, [u8; 32]), AccountId> = BTreeMap::new();
	for r in &log.records {
		for s in 0..stages {
			for acc in [&r.forward[s], &r.backward[s]] {
				seen.entry((s as u16, acc.0)).or_insert_with(|| acc.clone());
			}
		}
	}
	let keys: Vec<(u16, [u8; 32])> = seen.keys().copied().collect();
	let accounts: Vec<AccountId> = seen.into_values().collect();
	let index: BTreeMap<(u16, [u8; 32]), usize> =
		keys.iter().enumerate().map(|(i, k)| (*k, i)).collect();
	let units = keys.len();
	let mut samples = vec![0u32; units];
	let mut items = vec![0u32; units];
	let mut loss_sum = vec![0f64; units];
	let cols: Vec<Vec<usize>> = log
		.records
		.iter()
		.map(|r| (0..stages).map(|s| index[&(s as u16, r.forward[s].0)]).collect())
		.collect();
	for (r, c) in log.records.iter().zip(&cols) {
		for (s, &u) in c.iter().enumerate() {
			samples[u] += 1;
			items[u] += 1;
			loss_sum[u] += f64::from(r.loss);
			if r.backward[s] != r.forward[s] {
				items[index[&(s as u16, r.backward[s].0)]] += 1;
			}
		}
	}

	// Normal equations A x = b, x = [μ, β_0 .. β_{units-1}]; row r of the design matrix X has ones at
	// `idx[r]` (the intercept and the record's forward miner per stage).
	let p = units + 1;
	let rows: Vec<Vec<usize>> = cols
		.iter()
		.map(|c| std::iter::once(0).chain(c.iter().map(|u| u + 1)).collect())
		.collect();
	let mut a = DMatrix::<f64>::zeros(p, p);
	let mut b = DVector::<f64>::zeros(p);
	for (r, idx) in log.records.iter().zip(&rows) {
		let y = f64::from(r.loss);
		for &i in idx {
			b[i] += y;
			for &j in idx {
				a[(i, j)] += 1.0;
			}
		}
	}
	for u in 0..units {
		a[(u + 1, u + 1)] += RIDGE_LAMBDA;
	}
	let chol = a.cholesky().ok_or(ClaspError::Singular)?;
	let x = chol.solve(&b);
	let inverse = chol.inverse();
	let mu = x[0];
	let beta: Vec<f64> = x.iter().skip(1).copied().collect();

	// Leverages h_r = x_rᵀ A⁻¹ x_r (the hat matrix' diagonal); their sum is the fit's effective parameter
	// count, so the residuals carry `n − Σ h_r` degrees of freedom.
	let leverage: Vec<f64> = rows
		.iter()
		.map(|idx| {
			idx.iter()
				.flat_map(|&i| idx.iter().map(move |&j| (i, j)))
				.map(|ij| inverse[ij])
				.sum()
		})
		.collect();
	let residual_df = n as f64 - leverage.iter().sum::<f64>();
	let judged = residual_df >= MIN_RESIDUAL_DF;
	let residuals: Vec<f64> = log
		.records
		.iter()
		.zip(&cols)
		.zip(&leverage)
		.map(|((r, c), h)| {
			let e = f64::from(r.loss) - mu - c.iter().map(|&u| beta[u]).sum::<f64>();
			e / (1.0 - h).max(f64::EPSILON).sqrt()
		})
		.collect();
	let sigma = (MAD_TO_SIGMA * mad(&residuals)).max(SIGMA_FLOOR);

	let mut miners = Vec::with_capacity(units);
	for (u, &(stage, _)) in keys.iter().enumerate() {
		let peers: Vec<usize> =
			(0..units).filter(|&k| k != u && keys[k].0 == stage && samples[k] > 0).collect();
		let mean_diff = {
			let (ps, pn) =
				peers.iter().fold((0.0, 0u32), |(s, n), &k| (s + loss_sum[k], n + samples[k]));
			(samples[u] > 0 && pn > 0)
				.then(|| loss_sum[u] / f64::from(samples[u]) - ps / f64::from(pn))
		};
		let z = if samples[u] == 0 || peers.is_empty() {
			0.0
		} else {
			let centre = median(&peers.iter().map(|&k| beta[k]).collect::<Vec<_>>());
			let n_bar =
				peers.iter().map(|&k| f64::from(samples[k])).sum::<f64>() / peers.len() as f64;
			let se = sigma * (1.0 / f64::from(samples[u]) + 1.0 / n_bar).sqrt();
			(beta[u] - centre) / se
		};
		let flagged = judged && z >= Z_FLAG && samples[u] >= MIN_SAMPLES;
		let account = accounts[u].clone();
		let validated = match checks.get(&account).copied().unwrap_or(CheckStatus::Unchecked) {
			CheckStatus::Failed => 0,
			CheckStatus::Passed | CheckStatus::Unchecked => items[u],
		};
		let q = if flagged {
			0.0
		} else if judged {
			1.0 - (z.max(0.0) / (2.0 * Z_FLAG)).min(1.0)
		} else {
			1.0
		};
		miners.push(MinerScore {
			miner: account,
			stage,
			samples: samples[u],
			items: items[u],
			effect: beta[u],
			mean_diff,
			z,
			flagged,
			validated,
			score: f64::from(validated) * q,
		});
	}
	Ok(ClaspReport { epoch: log.epoch, samples: n, mu, sigma, residual_df, miners })
}

/// Median (mean of the two middle values for an even count); 0 for an empty slice.
pub fn median(v: &[f64]) -> f64 {
	if v.is_empty() {
		return 0.0;
	}
	let mut s = v.to_vec();
	s.sort_by(f64::total_cmp);
	let h = s.len() / 2;
	if s.len() % 2 == 1 {
		s[h]
	} else {
		(s[h - 1] + s[h]) / 2.0
	}
}

/// Median absolute deviation from the median; 0 for an empty slice.
pub fn mad(v: &[f64]) -> f64 {
	let m = median(v);
	median(&v.iter().map(|x| (x - m).abs()).collect::<Vec<_>>())
}

#[cfg(test)]
mod tests {
	use super::*;
	use iota_primitives::ContentHash;
	use iota_rpc::{ObjectEntry, PathwayRecord};
	use rand::{Rng, SeedableRng};
	use rand_chacha::ChaCha8Rng;
	use rand_distr::{Distribution, Normal, StudentT};

	fn acc(stage: u16, i: u8) -> AccountId {
		let mut b = [0u8; 32];
		b[0] = stage as u8 + 1;
		b[1] = i;
		AccountId::from(b)
	}

	fn entry() -> ObjectEntry {
		ObjectEntry { key: "k".into(), hash: ContentHash::of(b"k") }
	}

	/// Honest per-sample loss noise: a sample's difficulty varies (Student-t with 5 degrees of freedom,
	/// scale 0.12 nats: heavier tails than Gaussian, as text difficulty has), around 4.5 nats.
	fn honest_loss(rng: &mut ChaCha8Rng) -> f64 {
		let t = StudentT::new(5.0).unwrap();
		4.5 + 0.12 * t.sample(rng)
	}

	/// A synthetic epoch: `stages` stages with `per_stage` miners each, samples routed uniformly at
	/// random (as pull-based work is); `bad` = (stage, miner index) adds `|N(0.25, 0.1)|` nats to the
	/// loss of every sample through it (its noise degrades the activation). About 1 in 10 backward
	/// passes is recomputed by another miner (an expired lease).
	fn synthetic(
		seed: u64,
		epoch: u32,
		q: usize,
		stages: u16,
		per_stage: u8,
		bad: Option<(u16, u8)>,
	) -> PathwayLog {
		let mut rng = ChaCha8Rng::seed_from_u64(seed);
		let harm = Normal::new(0.25, 0.1).unwrap();
		let records = (0..q)
			.map(|i| {
				let forward: Vec<AccountId> =
					(0..stages).map(|s| acc(s, rng.random_range(0..per_stage))).collect();
				let backward: Vec<AccountId> = forward
					.iter()
					.enumerate()
					.map(|(s, f)| {
						if s + 1 < stages as usize && rng.random_bool(0.1) {
							acc(s as u16, rng.random_range(0..per_stage))
						} else {
							f.clone()
						}
					})
					.collect();
				let mut loss = honest_loss(&mut rng);
				if let Some((bs, bi)) = bad {
					if forward[bs as usize] == acc(bs, bi) {
						loss += f64::abs(harm.sample(&mut rng));
					}
				}
				PathwayRecord {
					sample: u64::from(epoch) * q as u64 + i as u64,
					forward,
					backward,
					forward_outputs: vec![entry(); stages as usize],
					backward_outputs: vec![Some(entry()); stages as usize],
					loss: loss.max(0.0) as f32,
					forward_steps: vec![],
					backward_steps: vec![],
					recomputed: vec![],
				}
			})
			.collect();
		PathwayLog { run: "r".into(), epoch, stages, records, inner_states: vec![] }
	}

	#[test]
	fn planted_bad_miner_is_ranked_last_and_flagged_in_10_of_10_seeds() {
		let mut min_bad_z = f64::MAX;
		for seed in 0..10u64 {
			// The devnet shape (3 stages x 2 miners, 64 samples per epoch) and a wider one (3 x 4, 128
			// samples): 32 samples per miner either way.
			for (per_stage, q) in [(2u8, 64), (4, 128)] {
				let bad = (seed as u16 % 3, (seed % u64::from(per_stage)) as u8);
				let log = synthetic(seed, 1, q, 3, per_stage, Some(bad));
				let report = score_epoch(&log, &BTreeMap::new()).unwrap();
				min_bad_z = min_bad_z
					.min(report.miners.iter().find(|m| m.miner == acc(bad.0, bad.1)).unwrap().z);
				let ranking = report.ranking();
				let last = ranking.last().unwrap();
				assert_eq!(
					last.miner,
					acc(bad.0, bad.1),
					"seed {seed}, {per_stage}/stage: {ranking:#?}"
				);
				assert!(last.flagged, "seed {seed}: bad miner not flagged (z = {})", last.z);
				assert_eq!(last.score, 0.0);
				let flagged: Vec<_> = report.flagged().map(|m| m.miner.clone()).collect();
				assert_eq!(flagged, vec![acc(bad.0, bad.1)], "seed {seed}: honest miner flagged");
				// Its effect is the largest, and the plain mean difference agrees in sign.
				let max_effect = report.miners.iter().map(|m| m.effect).fold(f64::MIN, f64::max);
				assert_eq!(last.effect, max_effect);
				assert!(last.mean_diff.unwrap() > 0.0);
			}
		}
		println!("smallest z of a planted bad miner over 10 seeds: {min_bad_z:.2}");
	}

	#[test]
	fn honest_miners_are_never_flagged_over_20_epochs() {
		let mut max_z = f64::MIN;
		for epoch in 0..20u32 {
			for (per_stage, q) in [(2u8, 64), (3, 96), (4, 128)] {
				let log = synthetic(1000 + u64::from(epoch), epoch, q, 3, per_stage, None);
				let report = score_epoch(&log, &BTreeMap::new()).unwrap();
				for m in &report.miners {
					max_z = max_z.max(m.z);
					assert!(
						!m.flagged,
						"epoch {epoch}: honest {:?} flagged with z = {}",
						m.miner, m.z
					);
					assert!(m.score > 0.0 || m.items == 0);
				}
			}
		}
		println!("largest honest z over 20 epochs x 3 shapes: {max_z:.2}");
		assert!(max_z < Z_FLAG, "largest honest z {max_z}");
	}

	#[test]
	fn tiny_epochs_are_not_judged_so_honest_miners_keep_their_throughput() {
		// The e2e shape: 3 stages x 2 miners, 8 samples per epoch. The fit leaves ν ≈ 3.5 residual
		// degrees of freedom; judged on them, honest miners were flagged in ~1 epoch in 20.
		for epoch in 0..400u32 {
			let log = synthetic(5000 + u64::from(epoch), epoch, 8, 3, 2, None);
			let report = score_epoch(&log, &BTreeMap::new()).unwrap();
			assert!(report.residual_df < MIN_RESIDUAL_DF, "ν = {}", report.residual_df);
			for m in &report.miners {
				assert!(!m.flagged, "epoch {epoch}: {:?} flagged with z = {}", m.miner, m.z);
				assert_eq!(m.score, f64::from(m.items), "epoch {epoch}: {:?} discounted", m.miner);
			}
		}
	}

	#[test]
	fn residual_degrees_of_freedom_are_samples_minus_the_effective_parameters() {
		// 2 stages x 3 miners: μ plus 6 ridge-shrunk effects, of which only 1 + 2·2 are identified, so
		// tr(H) lies in (1, 7) and ν in (n − 7, n − 1); more samples shrink the ridge's pull.
		let small = score_epoch(&synthetic(3, 0, 40, 2, 3, None), &BTreeMap::new()).unwrap();
		let large = score_epoch(&synthetic(3, 0, 400, 2, 3, None), &BTreeMap::new()).unwrap();
		for (r, n) in [(&small, 40.0), (&large, 400.0)] {
			assert!(r.residual_df > n - 7.0 && r.residual_df < n - 1.0, "ν = {}", r.residual_df);
		}
		assert!(400.0 - large.residual_df > 40.0 - small.residual_df);
		assert!(400.0 - large.residual_df < 5.2, "tr(H) = {}", 400.0 - large.residual_df);
	}

	#[test]
	fn sum_to_zero_per_stage_and_exact_effects_without_noise() {
		// Losses exactly μ + β: the fit recovers the effects up to the ridge shrinkage, and every stage's
		// effects sum to zero.
		let mut log = synthetic(7, 0, 200, 2, 3, None);
		let truth = |s: usize, a: &AccountId| -> f64 {
			[[-0.2, 0.0, 0.2], [0.1, -0.1, 0.0]][s][usize::from(a.0[1])]
		};
		for r in &mut log.records {
			r.loss = (3.0 + truth(0, &r.forward[0]) + truth(1, &r.forward[1])) as f32;
		}
		let report = score_epoch(&log, &BTreeMap::new()).unwrap();
		assert!((report.mu - 3.0).abs() < 0.01, "mu {}", report.mu);
		for s in 0..2u16 {
			let sum: f64 = report.miners.iter().filter(|m| m.stage == s).map(|m| m.effect).sum();
			assert!(sum.abs() < 1e-9, "stage {s} sums to {sum}");
		}
		for m in &report.miners {
			let t = truth(usize::from(m.stage), &m.miner);
			assert!((m.effect - t).abs() < 0.01, "{:?}: {} vs {t}", m.miner, m.effect);
		}
	}

	#[test]
	fn failed_spot_check_zeroes_validated_throughput() {
		let log = synthetic(3, 0, 40, 2, 2, None);
		let cheat = acc(1, 0);
		let checks = BTreeMap::from([
			(cheat.clone(), CheckStatus::Failed),
			(acc(1, 1), CheckStatus::Passed),
		]);
		let report = score_epoch(&log, &checks).unwrap();
		for m in &report.miners {
			if m.miner == cheat {
				assert_eq!((m.validated, m.score), (0, 0.0));
			} else {
				assert_eq!(m.validated, m.items);
				assert!(m.score > 0.0);
			}
		}
		// Items count forward samples plus recomputed backwards; every sample is one forward per stage.
		let per_stage: u32 = report.miners.iter().filter(|m| m.stage == 0).map(|m| m.samples).sum();
		assert_eq!(per_stage, 40);
		assert_eq!(report.scores().len(), 4);
	}

	#[test]
	fn bad_logs_are_refused() {
		let mut log = synthetic(1, 0, 10, 2, 2, None);
		log.records[3].forward.pop();
		assert!(matches!(score_epoch(&log, &BTreeMap::new()), Err(ClaspError::Malformed(_))));
		let mut log = synthetic(1, 0, 10, 2, 2, None);
		log.records[0].loss = f32::INFINITY;
		assert!(matches!(score_epoch(&log, &BTreeMap::new()), Err(ClaspError::Malformed(_))));
		let empty = PathwayLog {
			run: "r".into(),
			epoch: 4,
			stages: 2,
			records: vec![],
			inner_states: vec![],
		};
		assert!(matches!(
			score_epoch(&empty, &BTreeMap::new()),
			Err(ClaspError::Empty { epoch: 4 })
		));
	}

	#[test]
	fn lone_miner_is_never_flagged() {
		// One miner per stage: no peer to compare with, z = 0.
		let log = synthetic(5, 0, 30, 3, 1, Some((1, 0)));
		let report = score_epoch(&log, &BTreeMap::new()).unwrap();
		assert!(report.miners.iter().all(|m| m.z == 0.0 && !m.flagged));
	}

	#[test]
	fn robust_statistics() {
		assert_eq!(median(&[]), 0.0);
		assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
		assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
		assert_eq!(mad(&[1.0, 2.0, 3.0, 4.0, 100.0]), 1.0);
	}
}
