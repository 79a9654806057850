//! Prometheus metrics, served at `/metrics` on their own address: requests by method and result,
//! refusals by error code, refused merge vectors by sender, leases expired, queue depth per stage and direction, tokens per second, loss.

use std::net::SocketAddr;

use prometheus::{Gauge, GaugeVec, IntCounter, IntCounterVec, Opts, Registry};

/// The orchestrator's metrics.
#[derive(Clone)]
pub struct Metrics {
	/// The registry they live in.
	pub registry: Registry,
	/// `iota_orchestrator_requests_total{method, result}` (result `ok` or an error code name).
	pub requests: IntCounterVec,
	/// `iota_orchestrator_refusals_total{code}`.
	pub refusals: IntCounterVec,
	/// `iota_orchestrator_merge_vectors_refused_total{miner, stage, method, code}`: refused gradient
	/// submissions and shard copies by sender (SS58) and its stage.
	pub vectors_refused: IntCounterVec,
	/// `iota_orchestrator_leases_expired_total`.
	pub leases_expired: IntCounter,
	/// `iota_orchestrator_queue_depth{stage, direction}`.
	pub queue_depth: GaugeVec,
	/// `iota_orchestrator_tokens_per_second` (last minute).
	pub tokens_per_sec: Gauge,
	/// `iota_orchestrator_loss` (last reported tail loss, nats).
	pub loss: Gauge,
}

impl Metrics {
	/// Creates and registers every metric.
	///
	/// # Errors
	/// Prometheus registration errors (never for a fresh registry).
	pub fn new() -> Result<Self, prometheus::Error> {
		let registry = Registry::new();
		let requests = IntCounterVec::new(
			Opts::new("iota_orchestrator_requests_total", "RPC requests by method and result"),
			&["method", "result"],
		)?;
		let refusals = IntCounterVec::new(
			Opts::new("iota_orchestrator_refusals_total", "Refused RPC requests by error code"),
			&["code"],
		)?;
		let vectors_refused = IntCounterVec::new(
			Opts::new(
				"iota_orchestrator_merge_vectors_refused_total",
				"Refused merge vectors (gradients, shard copies) by sender, stage, method and error code",
			),
			&["miner", "stage", "method", "code"],
		)?;
		let leases_expired = IntCounter::new(
			"iota_orchestrator_leases_expired_total",
			"Leases that expired and were re-listed",
		)?;
		let queue_depth = GaugeVec::new(
			Opts::new("iota_orchestrator_queue_depth", "Items waiting per stage and direction"),
			&["stage", "direction"],
		)?;
		let tokens_per_sec = Gauge::new(
			"iota_orchestrator_tokens_per_second",
			"Tokens trained per second over the last minute",
		)?;
		let loss = Gauge::new("iota_orchestrator_loss", "Last reported tail loss (nats)")?;
		registry.register(Box::new(requests.clone()))?;
		registry.register(Box::new(refusals.clone()))?;
		registry.register(Box::new(vectors_refused.clone()))?;
		registry.register(Box::new(leases_expired.clone()))?;
		registry.register(Box::new(queue_depth.clone()))?;
		registry.register(Box::new(tokens_per_sec.clone()))?;
		registry.register(Box::new(loss.clone()))?;
		Ok(Self {
			registry,
			requests,
			refusals,
			vectors_refused,
			leases_expired,
			queue_depth,
			tokens_per_sec,
			loss,
		})
	}

	/// The text exposition of every metric ([`iota_telemetry::render`]).
	pub fn render(&self) -> String {
		iota_telemetry::render(&self.registry)
	}

	/// Serves `/metrics` on `addr` until the returned task is aborted ([`iota_telemetry::serve`]).
	///
	/// # Errors
	/// Binding the address.
	pub async fn serve(
		self,
		addr: SocketAddr,
	) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
		iota_telemetry::serve(addr, self.registry.clone()).await
	}
}
