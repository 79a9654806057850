//! Prometheus metrics of one miner (`/metrics`, text format 0.0.4), served by [`serve`].

use std::net::SocketAddr;

use prometheus::{Gauge, IntCounter, IntCounterVec, IntGauge, Opts, Registry};

/// The miner's metrics, registered in their own registry. Cheap to clone (shared counters).
#[derive(Clone)]
pub struct Metrics {
	registry: Registry,
	/// Work items completed, by kind (`forward`, `backward`, `tail`).
	pub samples: IntCounterVec,
	/// Payload bytes uploaded through presigned PUTs.
	pub bytes_up: IntCounter,
	/// Payload bytes downloaded through presigned GETs.
	pub bytes_down: IntCounter,
	/// Errors by kind (`MinerError::kind`).
	pub errors: IntCounterVec,
	/// Work items dropped because their lease ran out.
	pub expired: IntCounter,
	/// Last loss reported (tail only), in nats.
	pub loss: Gauge,
	/// The epoch whose global weights the miner holds.
	pub epoch: IntGauge,
	/// Merges applied.
	pub merges: IntCounter,
	/// Local mode: inner AdamW steps applied to this replica.
	pub inner_steps: IntCounter,
	/// Local mode: backward passes through a kept forward graph that saw an earlier inner step's weights.
	pub stale_backwards: IntCounter,
	/// Local mode: weights of an earlier inner step rebuilt from the inner-step log for a backward whose
	/// forward's stash was dropped (`MinerConfig::max_stashes`).
	pub weights_rebuilt: IntCounter,
}

impl Metrics {
	/// Fresh metrics with the `iota_miner_` prefix.
	///
	/// # Errors
	/// A prometheus registration error (only for duplicate names, which this code does not create).
	pub fn new() -> Result<Self, prometheus::Error> {
		let registry = Registry::new();
		let samples = IntCounterVec::new(
			Opts::new("iota_miner_samples_total", "Work items completed, by kind"),
			&["kind"],
		)?;
		let bytes_up = IntCounter::new("iota_miner_bytes_up_total", "Payload bytes uploaded")?;
		let bytes_down =
			IntCounter::new("iota_miner_bytes_down_total", "Payload bytes downloaded")?;
		let errors =
			IntCounterVec::new(Opts::new("iota_miner_errors_total", "Errors, by kind"), &["kind"])?;
		let expired = IntCounter::new(
			"iota_miner_leases_expired_total",
			"Work items dropped after their lease expired",
		)?;
		let loss = Gauge::new("iota_miner_loss", "Last reported loss (tail stage), nats")?;
		let epoch = IntGauge::new("iota_miner_epoch", "Epoch of the global weights held")?;
		let merges = IntCounter::new("iota_miner_merges_total", "Merges applied")?;
		let inner_steps = IntCounter::new(
			"iota_miner_inner_steps_total",
			"Inner AdamW steps applied (local mode)",
		)?;
		let stale_backwards = IntCounter::new(
			"iota_miner_stale_backwards_total",
			"Backward passes whose kept forward saw an earlier inner step's weights (local mode)",
		)?;
		registry.register(Box::new(samples.clone()))?;
		registry.register(Box::new(bytes_up.clone()))?;
		registry.register(Box::new(bytes_down.clone()))?;
		registry.register(Box::new(errors.clone()))?;
		registry.register(Box::new(expired.clone()))?;
		registry.register(Box::new(loss.clone()))?;
		registry.register(Box::new(epoch.clone()))?;
		registry.register(Box::new(merges.clone()))?;
		registry.register(Box::new(inner_steps.clone()))?;
		let weights_rebuilt = IntCounter::new(
			"iota_miner_weights_rebuilt_total",
			"Weights of an earlier inner step rebuilt from the inner-step log for a backward (local mode)",
		)?;
		registry.register(Box::new(stale_backwards.clone()))?;
		registry.register(Box::new(weights_rebuilt.clone()))?;
		Ok(Metrics {
			registry,
			samples,
			bytes_up,
			bytes_down,
			errors,
			expired,
			loss,
			epoch,
			merges,
			inner_steps,
			stale_backwards,
			weights_rebuilt,
		})
	}

	/// The text exposition of every metric ([`iota_telemetry::render`]).
	pub fn render(&self) -> String {
		iota_telemetry::render(&self.registry)
	}
}

/// Serve `GET /metrics` on `addr` until the task is dropped ([`iota_telemetry::serve`]).
///
/// # Errors
/// The bind error when `addr` cannot be listened on.
pub async fn serve(
	addr: SocketAddr,
	metrics: Metrics,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
	Ok(iota_telemetry::serve(addr, metrics.registry.clone()).await?.1)
}
