//! Prometheus metrics of the validator daemon, served at `GET /metrics` ([`serve`]).
//!
//! | metric | labels | meaning |
//! |---|---|---|
//! | `iota_validator_checks_total` | `outcome` = pass, fail, inconclusive | spot-checks run |
//! | `iota_validator_inconclusive_total` | `kind` (e.g. unavailable, garbage_object, bad_input, malformed_log, weights, unconfirmed, manifest_mismatch) | checks and audits without a verdict |
//! | `iota_validator_failures_found_total` | `source` = spot_check, shard_audit, inner_step, refused_vector | failing findings |
//! | `iota_validator_shards_recomputed_total` | | butterfly shards recomputed |
//! | `iota_validator_verdicts_submitted_total` | `verdict` = pass, fail | `submit_spot_check` extrinsics included |
//! | `iota_validator_verdicts_withheld_total` | `reason` = no_work_check, no_conclusive_check, finalized, behind, off_turn | judged miners given no verdict (a `Pass` only from shard audits); epochs let go without weights (no conclusive check of anyone's work by the middle of the scoring window; each earlier retry counts as an `inconclusive` error); epochs finalized while judged (nothing sent); epochs let go unjudged by a validator behind the chain (`behind`), or off its turn with the weights out of reach or its own next turn at stake (`off_turn`; `daemon::let_go`) |
//! | `iota_validator_weights_submitted_total` | | `commit_weights` extrinsics included |
//! | `iota_validator_weights_revealed_total` | | `reveal_weights` extrinsics included |
//! | `iota_validator_epochs_finalized_total` | | `finalize_epoch` extrinsics this validator got included |
//! | `iota_validator_errors_total` | `kind` (chain, orchestrator, store, pathway_log, clasp, weights, evidence, spec) | errors, each logged; the daemon keeps running (also `inconclusive`, `reveals_pending`, and `reveal_task` when the reveal task ended and was started again) |
//! | `iota_validator_last_epoch` | | last epoch fully processed |

use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts, Registry};

/// The daemon's metrics.
#[derive(Clone)]
pub struct Metrics {
	registry: Registry,
	/// Spot-checks by outcome.
	pub checks: IntCounterVec,
	/// Inconclusive checks and audits by kind.
	pub inconclusive: IntCounterVec,
	/// Failing findings by source.
	pub failures: IntCounterVec,
	/// Shards recomputed.
	pub shards: IntCounter,
	/// Verdicts submitted by verdict.
	pub verdicts: IntCounterVec,
	/// Verdicts withheld by reason.
	pub withheld: IntCounterVec,
	/// Weight commitments included.
	pub weights: IntCounter,
	/// Weight vectors revealed.
	pub revealed: IntCounter,
	/// Epochs finalized by this validator.
	pub finalized: IntCounter,
	/// Errors by kind.
	pub errors: IntCounterVec,
	/// Last epoch processed.
	pub last_epoch: IntGauge,
}

impl Metrics {
	/// Registers every metric in a fresh registry.
	///
	/// # Errors
	/// A prometheus error if a metric is invalid (never for these names).
	pub fn new() -> Result<Self, prometheus::Error> {
		let registry = Registry::new();
		let cv =
			|name: &str, help: &str, label: &str| -> Result<IntCounterVec, prometheus::Error> {
				let c = IntCounterVec::new(Opts::new(name, help), &[label])?;
				registry.register(Box::new(c.clone()))?;
				Ok(c)
			};
		let checks = cv("iota_validator_checks_total", "Spot-checks run, by outcome.", "outcome")?;
		let inconclusive = cv(
			"iota_validator_inconclusive_total",
			"Checks and audits without a verdict, by kind.",
			"kind",
		)?;
		let failures =
			cv("iota_validator_failures_found_total", "Failing findings, by source.", "source")?;
		let verdicts = cv(
			"iota_validator_verdicts_submitted_total",
			"Verdicts included on chain.",
			"verdict",
		)?;
		let withheld = cv(
			"iota_validator_verdicts_withheld_total",
			"Judged miners given no verdict, by reason.",
			"reason",
		)?;
		let errors = cv(
			"iota_validator_errors_total",
			"Errors by kind (logged; the daemon keeps running).",
			"kind",
		)?;
		let shards = IntCounter::new(
			"iota_validator_shards_recomputed_total",
			"Butterfly shards recomputed.",
		)?;
		let weights = IntCounter::new(
			"iota_validator_weights_submitted_total",
			"Weight commitments included on chain.",
		)?;
		let revealed = IntCounter::new(
			"iota_validator_weights_revealed_total",
			"Committed weight vectors revealed on chain.",
		)?;
		let finalized = IntCounter::new(
			"iota_validator_epochs_finalized_total",
			"Epochs this validator finalized.",
		)?;
		let last_epoch = IntGauge::new("iota_validator_last_epoch", "Last epoch fully processed.")?;
		registry.register(Box::new(shards.clone()))?;
		registry.register(Box::new(weights.clone()))?;
		registry.register(Box::new(revealed.clone()))?;
		registry.register(Box::new(finalized.clone()))?;
		registry.register(Box::new(last_epoch.clone()))?;
		Ok(Self {
			registry,
			checks,
			inconclusive,
			failures,
			shards,
			verdicts,
			withheld,
			weights,
			revealed,
			finalized,
			errors,
			last_epoch,
		})
	}

	/// Counts an error of `kind`.
	pub fn error(&self, kind: &str) {
		self.errors.with_label_values(&[kind]).inc();
	}

	/// The text exposition of every metric ([`iota_telemetry::render`]).
	pub fn render(&self) -> String {
		iota_telemetry::render(&self.registry)
	}

	/// The registry holding every metric (what `/metrics` serves).
	pub fn registry(&self) -> &Registry {
		&self.registry
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn renders_counters() {
		let m = Metrics::new().unwrap();
		m.checks.with_label_values(&["pass"]).inc();
		m.error("chain");
		m.last_epoch.set(3);
		let text = m.render();
		assert!(text.contains("iota_validator_checks_total{outcome=\"pass\"} 1"));
		assert!(text.contains("iota_validator_errors_total{kind=\"chain\"} 1"));
		assert!(text.contains("iota_validator_last_epoch 3"));
	}
}
