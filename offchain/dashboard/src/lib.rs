//! # iota-dashboard
//!
//! The training network live in a web page (issue 9; docs/design.md §1, §3): which stages exist, who mines each
//! one, which phase each stage is in, how fast tokens flow, whether the loss falls, what validators
//! found and who was paid. Everything that matters for money (verdicts, scores, emission splits, slashes,
//! registrations) is read from chain; throughput, queues, leases and losses come from the orchestrator's
//! public JSON-RPC. The page needs nothing outside the binary: HTML, SVG charts, one stylesheet and one
//! small script are all served from here.
//!
//! ## Running it
//!
//! Mounted by the orchestrator (`iota-orchestrator --dashboard-addr 127.0.0.1:8090`) through [`serve`],
//! or on its own:
//!
//! ```sh
//! iota-dashboard --orchestrator ws://127.0.0.1:9955 --chain-rpc ws://127.0.0.1:9944 --listen 127.0.0.1:8090
//! ```
//!
//! ## Pages and JSON endpoints
//!
//! | page | JSON | shows |
//! |---|---|---|
//! | `/` | `/api/network` | run config (model preset, stages, compression, epoch quota), current epoch, best and finalized block, miners and validators registered, tokens trained, tokens/s |
//! | `/stages` | `/api/stages` | per stage: phase, epoch, queues, leases, merge progress (shards present / expected), miners (status, samples, items/s, last seen); the chain's stage records; recent phase changes |
//! | `/training` | `/api/training` | charts: loss per epoch, loss per tokens, tokens/s per stage over time, wire bytes per token; completed epochs |
//! | `/trust` | `/api/trust` | per recent epoch (from chain): spot-check verdicts, consensus scores, emission split, slashes, merge manifests; validators |
//! | `/miners/{account}` | `/api/miners/{account}` | one miner (SS58): work done, items over time, chain record, verdicts, scores, rewards, slashes |
//! | `/epochs/{epoch}` | `/api/epochs/{epoch}` | one epoch: the orchestrator's summary and the chain's trust record |
//!
//! Each JSON answer is the record the page renders ([`panels`]). A source's part is a [`Feed`]:
//! `{"state": "ok", "data": ...}`, `{"state": "unavailable", "reason": "..."}` or `{"state": "pending"}`.
//! Balances are decimal strings in the chain's smallest unit (12 decimals), scores parts per billion,
//! times milliseconds since the Unix epoch, sizes bytes. Unknown endpoints, accounts or epochs answer 404
//! (`{"error": "..."}` under `/api/`, an HTML page elsewhere); 503 while no source has answered yet.
//!
//! Live updates: each page polls itself with `?partial=1&since=<generation>` every refresh period
//! (default 2 s) and swaps in the new body when the snapshot changed ([`routes`]).
//!
//! ## Map of the crate
//!
//! | module | holds |
//! |---|---|
//! | [`source`] | the [`OrchestratorSource`] and [`ChainSource`] traits; live [`RpcOrchestrator`] (jsonrpsee) and [`ChainReader`] (iota-chain) |
//! | [`views`] | the chain's records as serde types (stages, miners, validators, verdicts, scores, emission, slashes, manifests) |
//! | [`state`] | [`Dashboard`]: the [`Snapshot`] of both sources, the bounded [`History`] of status polls, the refresh loop |
//! | [`panels`] | the record behind each page and JSON endpoint |
//! | [`pages`] | HTML (maud: every spliced value is escaped) |
//! | [`chart`] | SVG line charts drawn on the server |
//! | [`routes`] | the axum router, live partials, security headers, 404s |
//!
//! ## Failure and hostile input
//!
//! A source that does not answer (or answers garbage) turns its panels into "unavailable: reason" while
//! the other source's panels keep working; the live sources reconnect on their own. Text from the network
//! (run ids, object keys, accounts, error messages, the URL itself) is escaped by maud; the
//! content-security policy allows only this origin's script and stylesheet, so even a bug in escaping
//! could not run injected script. HTTP handlers read the in-memory snapshot and never block on a source,
//! except the page of an epoch older than the cached window ([`Options::trust_epochs`]), which asks the
//! chain once with [`Options::source_timeout`].
//!
//! Cost: each refresh reads the chain's overview (two queries per stage, miners, validators) and the
//! trust records of the last [`Options::trust_epochs`] epochs (about `6 + stages` queries each; they are
//! re-read every time because verdicts and slashes may still arrive for a finalized epoch).
//!
//! ## Tests
//!
//! - unit tests next to the code: charts (ticks, mapping, escaping, empty data), the history (throughput
//!   across epoch boundaries, bounds), balances, feeds;
//! - `tests/routes.rs`: the router driven with `tower::ServiceExt::oneshot` against fake sources holding a
//!   recorded network (`tests/common`): every JSON endpoint, 404/503 pages, hostile text escaped on every
//!   page, each source going down alone, live partials, security headers;
//! - `tests/live_sources.rs`: [`RpcOrchestrator`] against a jsonrpsee server on 127.0.0.1, unreachable
//!   sources, bind errors;
//! - `tests/browser.rs`: headless Chromium (`scripts/setup.sh` installs Debian's `chromium`) sees live
//!   updates reach the DOM and saves screenshots of every page; without Chromium it fails when `CI=true`
//!   and is skipped with a printed reason otherwise.
//!
//! Known gaps: per-stage tokens/s is derived from successive status polls (backward passes × tokens per
//! sample), so it needs the run spec and, across epoch boundaries, the chain's quota; per miner the page
//! shows work items/s (forwards and backwards together), not tokens/s; shard copy mismatches are not in
//! `iota_status` and so not shown.

pub mod browser;
pub mod chart;
pub mod pages;
pub mod panels;
pub mod routes;
pub mod source;
pub mod state;
pub mod views;

use std::net::SocketAddr;
use std::sync::Arc;

pub use source::{ChainReader, ChainSource, OrchestratorSource, RpcOrchestrator, SourceError};
pub use state::{Dashboard, Feed, History, Options, Snapshot};

/// Where the dashboard listens unless told otherwise.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8090";

/// What [`serve`] needs.
#[derive(Clone, Debug, PartialEq)]
pub struct DashboardConfig {
	/// The orchestrator's JSON-RPC WebSocket, e.g. `ws://127.0.0.1:9955`.
	pub orchestrator_ws_url: String,
	/// A chain node's RPC WebSocket, e.g. `ws://127.0.0.1:9944`.
	pub chain_ws_url: String,
	/// Refresh period, source timeout, history length, trust window.
	pub options: Options,
}

impl Default for DashboardConfig {
	fn default() -> Self {
		Self {
			orchestrator_ws_url: "ws://127.0.0.1:9955".into(),
			chain_ws_url: "ws://127.0.0.1:9944".into(),
			options: Options::default(),
		}
	}
}

/// Why the dashboard could not serve.
#[derive(Debug, thiserror::Error)]
pub enum DashboardError {
	/// The listen address could not be bound.
	#[error("cannot listen on {addr}: {source}")]
	Bind {
		/// The address.
		addr: SocketAddr,
		/// The I/O error.
		#[source]
		source: std::io::Error,
	},
	/// The HTTP server stopped with an error.
	#[error("dashboard server failed: {0}")]
	Serve(#[source] std::io::Error),
}

impl Dashboard {
	/// A dashboard over the live sources of `config` (nothing is connected until the first refresh).
	pub fn connect(config: &DashboardConfig) -> Self {
		let timeout = config.options.source_timeout;
		Dashboard::new(
			Arc::new(RpcOrchestrator::new(config.orchestrator_ws_url.clone(), timeout)),
			Arc::new(ChainReader::new(config.chain_ws_url.clone(), timeout)),
			config.options.clone(),
		)
	}

	/// The HTTP router ([`routes::router`]).
	pub fn router(&self) -> axum::Router {
		routes::router(self.clone())
	}
}

/// Serve the dashboard on `addr` until the server fails: binds, starts the refresh loop, serves.
/// Run it as a task (`tokio::spawn(iota_dashboard::serve(addr, config))`).
///
/// Errors: [`DashboardError::Bind`] if `addr` cannot be bound, [`DashboardError::Serve`] if the server
/// stops.
pub async fn serve(addr: SocketAddr, config: DashboardConfig) -> Result<(), DashboardError> {
	let listener = tokio::net::TcpListener::bind(addr)
		.await
		.map_err(|source| DashboardError::Bind { addr, source })?;
	let dashboard = Dashboard::connect(&config);
	let refresh = dashboard.spawn_refresh();
	tracing::info!(addr = %listener.local_addr().unwrap_or(addr), "dashboard listening");
	let r = axum::serve(listener, dashboard.router()).await.map_err(DashboardError::Serve);
	refresh.abort();
	r
}
