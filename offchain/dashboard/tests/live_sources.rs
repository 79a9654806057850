//! The live sources over real sockets on 127.0.0.1: [`RpcOrchestrator`] against a jsonrpsee server that
//! answers `iota_status`, `iota_runSpec` and `iota_subscribePhases` like the orchestrator does, and both
//! live sources against ports where nothing listens.

mod common;

use std::time::Duration;

use common::*;
use iota_dashboard::{
	ChainReader, ChainSource, Dashboard, DashboardConfig, DashboardError, Feed, OrchestratorSource,
	RpcOrchestrator, SourceError,
};
use iota_primitives::Phase;
use iota_rpc::types::{PhaseEvent, RunSpecText};
use jsonrpsee::server::{RpcModule, Server, SubscriptionMessage};
use jsonrpsee::types::ErrorObjectOwned;

/// A port nothing listens on (bound, then released).
fn closed_port() -> u16 {
	std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn events() -> Vec<PhaseEvent> {
	vec![
		PhaseEvent { stage: 2, epoch: 1, phase: Phase::WeightsUploading, block: 17 },
		PhaseEvent { stage: 2, epoch: 1, phase: Phase::Merging, block: 19 },
	]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_orchestrator_reads_status_spec_and_pushed_phase_changes() {
	let st = status("run-a", 10_000, &[5.5], 3);
	let mut module = RpcModule::new(());
	let s = st.clone();
	module
		.register_method("iota_status", move |_, _, _| Ok::<_, ErrorObjectOwned>(s.clone()))
		.unwrap();
	let text = RunSpecText { json: String::from_utf8(spec("run-a").to_bytes()).unwrap() };
	module
		.register_method("iota_runSpec", move |_, _, _| Ok::<_, ErrorObjectOwned>(text.clone()))
		.unwrap();
	module
		.register_subscription(
			"iota_subscribePhases",
			"iota_phase",
			"iota_unsubscribePhases",
			|_, pending, _, _| async move {
				let sink = pending.accept().await?;
				for ev in events() {
					sink.send(SubscriptionMessage::from_json(&ev)?).await?;
				}
				sink.closed().await;
				Ok(())
			},
		)
		.unwrap();
	let server = Server::builder().build("127.0.0.1:0").await.unwrap();
	let url = format!("ws://{}", server.local_addr().unwrap());
	let handle = server.start(module);

	let src = RpcOrchestrator::new(url.clone(), Duration::from_secs(10));
	assert_eq!(src.status().await.unwrap(), st);
	assert_eq!(src.run_spec().await.unwrap(), spec("run-a"));
	// The two pushed events arrive in order (wait for delivery, bounded).
	let mut got = Vec::new();
	for _ in 0..200 {
		got.extend(src.phase_events().await.unwrap());
		if got.len() >= 2 {
			break;
		}
		tokio::time::sleep(Duration::from_millis(25)).await;
	}
	assert_eq!(got, events());
	assert!(src.phase_events().await.unwrap().is_empty(), "drained");

	// The orchestrator goes away: the source says so, with its address.
	handle.stop().unwrap();
	handle.stopped().await;
	match src.status().await {
		Err(SourceError::Unreachable { url: u, .. }) => assert_eq!(u, url),
		other => panic!("expected Unreachable, got {other:?}"),
	}
}

#[tokio::test]
async fn a_method_error_is_refused_not_unreachable() {
	let mut module = RpcModule::new(());
	module
		.register_method("iota_status", |_, _, _| {
			Err::<(), _>(ErrorObjectOwned::owned(-32050, "<b>unavailable</b>", None::<()>))
		})
		.unwrap();
	module
		.register_method("iota_runSpec", |_, _, _| {
			Ok::<_, ErrorObjectOwned>(RunSpecText { json: "{not json".into() })
		})
		.unwrap();
	let server = Server::builder().build("127.0.0.1:0").await.unwrap();
	let url = format!("ws://{}", server.local_addr().unwrap());
	let handle = server.start(module);
	let src = RpcOrchestrator::new(url, Duration::from_secs(10));
	assert!(
		matches!(src.status().await, Err(SourceError::Refused { reason, .. }) if reason.contains("unavailable"))
	);
	assert!(matches!(src.run_spec().await, Err(SourceError::Invalid { .. })));
	assert!(
		src.phase_events().await.unwrap().is_empty(),
		"no subscription method: no events, no error"
	);
	handle.stop().unwrap();
}

#[tokio::test]
async fn unreachable_live_sources_leave_the_dashboard_serving() {
	let orch_url = format!("ws://127.0.0.1:{}", closed_port());
	let chain_url = format!("ws://127.0.0.1:{}", closed_port());
	let o = RpcOrchestrator::new(orch_url.clone(), Duration::from_secs(5));
	assert!(
		matches!(o.status().await, Err(SourceError::Unreachable { url, .. }) if url == orch_url)
	);
	let c = ChainReader::new(chain_url.clone(), Duration::from_secs(5));
	assert!(
		matches!(c.overview().await, Err(SourceError::Unreachable { url, .. }) if url == chain_url)
	);
	assert!(matches!(c.epoch(0, 3).await, Err(SourceError::Unreachable { .. })));

	let config = DashboardConfig {
		orchestrator_ws_url: orch_url,
		chain_ws_url: chain_url,
		options: options(),
	};
	let d = Dashboard::connect(&config);
	d.refresh_once().await;
	let snap = d.snapshot().await;
	assert!(matches!(snap.orchestrator, Feed::Unavailable { .. }));
	assert!(matches!(snap.chain, Feed::Unavailable { .. }));
	assert_eq!(snap.generation, 1);
}

#[tokio::test]
async fn serve_reports_an_address_in_use() {
	let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
	let addr = taken.local_addr().unwrap();
	let err = iota_dashboard::serve(addr, DashboardConfig::default()).await.unwrap_err();
	assert!(matches!(err, DashboardError::Bind { addr: a, .. } if a == addr), "{err}");
}

/// GET `path` from `addr` over plain HTTP/1.1; returns (status line, body).
async fn http_get(addr: std::net::SocketAddr, path: &str) -> (String, String) {
	use tokio::io::{AsyncReadExt, AsyncWriteExt};
	let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
	s.write_all(
		format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
	)
	.await
	.unwrap();
	let mut raw = Vec::new();
	s.read_to_end(&mut raw).await.unwrap();
	let text = String::from_utf8(raw).unwrap();
	let (head, body) = text.split_once("\r\n\r\n").unwrap();
	(head.lines().next().unwrap().to_string(), body.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_over_http_while_both_sources_are_down() {
	let addr: std::net::SocketAddr = format!("127.0.0.1:{}", closed_port()).parse().unwrap();
	let config = DashboardConfig {
		orchestrator_ws_url: format!("ws://127.0.0.1:{}", closed_port()),
		chain_ws_url: format!("ws://127.0.0.1:{}", closed_port()),
		options: options(),
	};
	let server = tokio::spawn(iota_dashboard::serve(addr, config));
	// Wait (bounded) until it listens and its refresh loop has asked both sources once.
	let mut body = String::new();
	for _ in 0..400 {
		if tokio::net::TcpStream::connect(addr).await.is_ok() {
			let (status, b) = http_get(addr, "/api/network").await;
			assert!(status.contains("200"), "{status}");
			if !b.contains("pending") {
				body = b;
				break;
			}
		}
		tokio::time::sleep(Duration::from_millis(25)).await;
	}
	let v: serde_json::Value = serde_json::from_str(&body).expect("the refresh loop ran");
	assert_eq!(v["orchestrator"]["state"], "unavailable");
	assert_eq!(v["chain"]["state"], "unavailable");
	let (status, html) = http_get(addr, "/stages").await;
	assert!(status.contains("200"), "{status}");
	assert!(html.contains("orchestrator unavailable") && html.contains("chain unavailable"));
	let (status, _) = http_get(addr, "/miners/nobody").await;
	assert!(status.contains("404"), "{status}");
	server.abort();
}
