//! # iota-telemetry
//!
//! The one `/metrics` endpoint of the daemons (orchestrator, miner, validator): the Prometheus text
//! exposition of a daemon's own [`Registry`], served over HTTP with axum. Each daemon keeps its metric
//! definitions; this crate only renders and serves them.

use std::net::SocketAddr;

use prometheus::{Encoder, Registry, TextEncoder};

/// The text exposition (Prometheus format 0.0.4) of every metric in `registry`.
pub fn render(registry: &Registry) -> String {
	let mut buf = Vec::new();
	// Encoding into a Vec cannot fail for metrics the registry accepted.
	let _ = TextEncoder::new().encode(&registry.gather(), &mut buf);
	String::from_utf8(buf).unwrap_or_default()
}

/// Serves `GET /metrics` for `registry` on `addr` (port 0 picks a free one) until the returned task
/// is aborted or the process ends. Returns the bound address and the server task.
///
/// # Errors
/// The bind error when `addr` cannot be listened on.
pub async fn serve(
	addr: SocketAddr,
	registry: Registry,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
	let listener = tokio::net::TcpListener::bind(addr).await?;
	let local = listener.local_addr()?;
	let app = axum::Router::new().route(
		"/metrics",
		axum::routing::get(move || {
			let r = registry.clone();
			async move { render(&r) }
		}),
	);
	let task = tokio::spawn(async move {
		if let Err(e) = axum::serve(listener, app).await {
			tracing::warn!(error = %e, "metrics server stopped");
		}
	});
	Ok((local, task))
}

#[cfg(test)]
mod tests {
	use super::*;

	#[tokio::test]
	async fn serves_the_registry_as_text() {
		let r = Registry::new();
		let c = prometheus::IntCounter::new("iota_test_total", "a test counter").unwrap();
		r.register(Box::new(c.clone())).unwrap();
		c.inc_by(3);
		let (addr, task) = serve("127.0.0.1:0".parse().unwrap(), r).await.unwrap();
		let body = reqwest::get(format!("http://{addr}/metrics"))
			.await
			.unwrap()
			.text()
			.await
			.unwrap();
		assert!(body.contains("iota_test_total 3"), "{body}");
		let missing = reqwest::get(format!("http://{addr}/other")).await.unwrap();
		assert_eq!(missing.status().as_u16(), 404);
		task.abort();
	}
}
