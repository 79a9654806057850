//! The HTTP surface: pages, their live partials, the JSON endpoints, the two assets and the 404 page.
//!
//! A page URL with `?partial=1` returns only the page body (what goes into `<main>`) with the snapshot
//! generation in the `x-generation` header; with `&since=G` it answers `204 No Content` while the
//! generation is still `G`. Every response carries a strict content-security policy (same-origin script
//! and style only, no inline code, no other origins) and `nosniff`.

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use iota_rpc::AccountId;
use maud::Markup;
use serde::Deserialize;

use crate::pages::{self, Nav};
use crate::panels;
use crate::state::{Dashboard, Feed};

/// The live script, served as `/assets/live.js`.
pub const LIVE_JS: &str = include_str!("../assets/live.js");
/// The stylesheet, served as `/assets/style.css`.
pub const STYLE_CSS: &str = include_str!("../assets/style.css");

/// The content-security policy of every response.
pub const CSP: &str =
	"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
	connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Query of a page request (live partials).
#[derive(Debug, Default, Deserialize)]
pub struct LiveQuery {
	/// Any value: return only the body.
	pub partial: Option<String>,
	/// The generation the client has.
	pub since: Option<u64>,
}

/// The router over `dashboard` (pages, partials, JSON, assets, 404).
pub fn router(dashboard: Dashboard) -> Router {
	Router::new()
		.route("/", get(network_page))
		.route("/stages", get(stages_page))
		.route("/training", get(training_page))
		.route("/trust", get(trust_page))
		.route("/miners/{account}", get(miner_page))
		.route("/epochs/{epoch}", get(epoch_page))
		.route("/api/network", get(network_api))
		.route("/api/stages", get(stages_api))
		.route("/api/training", get(training_api))
		.route("/api/trust", get(trust_api))
		.route("/api/miners/{account}", get(miner_api))
		.route("/api/epochs/{epoch}", get(epoch_api))
		.route(
			"/assets/live.js",
			get(|| async { ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], LIVE_JS) }),
		)
		.route(
			"/assets/style.css",
			get(|| async { ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE_CSS) }),
		)
		.fallback(not_found)
		.layer(axum::middleware::map_response(security_headers))
		.with_state(dashboard)
}

async fn security_headers(mut res: Response) -> Response {
	let h = res.headers_mut();
	h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
	h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
	h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
	h.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
	res
}

/// A full page, or its body for the live script.
fn page(
	d: &Dashboard,
	q: &LiveQuery,
	generation: u64,
	title: &str,
	nav: Nav,
	body: impl FnOnce() -> Markup,
) -> Response {
	let gen_header = [("x-generation", generation.to_string())];
	if q.partial.is_some() {
		if q.since == Some(generation) {
			return (StatusCode::NO_CONTENT, gen_header).into_response();
		}
		return (gen_header, Html(body().into_string())).into_response();
	}
	let refresh_ms = d.options().refresh.as_millis() as u64;
	(gen_header, Html(pages::layout(title, nav, generation, refresh_ms, body()).into_string()))
		.into_response()
}

fn error_page(d: &Dashboard, status: StatusCode, title: &str, message: &str) -> Response {
	let refresh_ms = d.options().refresh.as_millis() as u64;
	(
		status,
		Html(
			pages::layout(title, Nav::None, 0, refresh_ms, pages::error_page(title, message))
				.into_string(),
		),
	)
		.into_response()
}

fn api_error(status: StatusCode, message: &str) -> Response {
	(status, Json(serde_json::json!({ "error": message }))).into_response()
}

async fn not_found(State(d): State<Dashboard>, uri: axum::http::Uri) -> Response {
	if uri.path().starts_with("/api/") {
		return api_error(StatusCode::NOT_FOUND, "no such endpoint");
	}
	error_page(&d, StatusCode::NOT_FOUND, "Not found", &format!("Nothing lives at {}.", uri.path()))
}

async fn network_page(State(d): State<Dashboard>, Query(q): Query<LiveQuery>) -> Response {
	let (p, g) = d.with_snapshot(|s| (panels::network(s), s.generation)).await;
	page(&d, &q, g, "Network", Nav::Network, || pages::network(&p))
}

async fn stages_page(State(d): State<Dashboard>, Query(q): Query<LiveQuery>) -> Response {
	let (p, g) = d.with_snapshot(|s| (panels::stages(s), s.generation)).await;
	page(&d, &q, g, "Stages", Nav::Stages, || pages::stages(&p))
}

async fn training_page(State(d): State<Dashboard>, Query(q): Query<LiveQuery>) -> Response {
	let (p, g) = d.with_snapshot(|s| (panels::training(s), s.generation)).await;
	page(&d, &q, g, "Training", Nav::Training, || pages::training(&p))
}

async fn trust_page(State(d): State<Dashboard>, Query(q): Query<LiveQuery>) -> Response {
	let (p, g) = d.with_snapshot(|s| (panels::trust(s), s.generation)).await;
	page(&d, &q, g, "Trust and rewards", Nav::Trust, || pages::trust(&p))
}

/// Why a miner or epoch URL has no page.
enum Lookup {
	/// Not an account / epoch, or none the sources know: 404.
	Unknown(String),
	/// No source has answered yet, so unknown cannot be told from not-yet-seen: 503.
	NoData,
}

impl Lookup {
	fn page(self, d: &Dashboard) -> Response {
		match self {
			Lookup::Unknown(m) => error_page(d, StatusCode::NOT_FOUND, "Not found", &m),
			Lookup::NoData => error_page(
				d,
				StatusCode::SERVICE_UNAVAILABLE,
				"No data yet",
				"Neither the orchestrator nor the chain has answered yet; try again in a few seconds.",
			),
		}
	}

	fn api(self) -> Response {
		match self {
			Lookup::Unknown(m) => api_error(StatusCode::NOT_FOUND, &m),
			Lookup::NoData => {
				api_error(StatusCode::SERVICE_UNAVAILABLE, "no source has answered yet")
			},
		}
	}
}

async fn find_miner(d: &Dashboard, raw: &str) -> Result<panels::MinerPanel, Lookup> {
	let account: AccountId = raw
		.parse()
		.map_err(|_| Lookup::Unknown(format!("{raw:?} is not an SS58 account.")))?;
	d.with_snapshot(|s| {
		if s.knows_miner(&account) {
			Ok(panels::miner(s, &account))
		} else if s.orchestrator.data().is_none() && s.chain.data().is_none() {
			Err(Lookup::NoData)
		} else {
			Err(Lookup::Unknown(format!("No miner {account} on chain or at the orchestrator.")))
		}
	})
	.await
}

async fn miner_page(
	State(d): State<Dashboard>,
	Path(raw): Path<String>,
	Query(q): Query<LiveQuery>,
) -> Response {
	match find_miner(&d, &raw).await {
		Ok(p) => {
			let title = format!("Miner {}", pages::short(&p.account));
			page(&d, &q, p.generation, &title, Nav::None, || pages::miner(&p))
		},
		Err(l) => l.page(&d),
	}
}

async fn miner_api(State(d): State<Dashboard>, Path(raw): Path<String>) -> Response {
	match find_miner(&d, &raw).await {
		Ok(p) => Json(p).into_response(),
		Err(l) => l.api(),
	}
}

async fn find_epoch(d: &Dashboard, raw: &str) -> Result<panels::EpochPanel, Lookup> {
	let epoch: u32 = raw
		.parse()
		.map_err(|_| Lookup::Unknown(format!("{raw:?} is not an epoch number.")))?;
	match d.with_snapshot(|s| s.top_epoch()).await {
		None => return Err(Lookup::NoData),
		Some(top) if epoch > top => {
			return Err(Lookup::Unknown(format!(
				"Epoch {epoch} has not started (the run is at epoch {top})."
			)))
		},
		Some(_) => {},
	}
	let trust: Feed<_> = d.epoch_trust(epoch).await.into();
	Ok(d.with_snapshot(|s| panels::epoch(s, epoch, trust)).await)
}

async fn epoch_page(
	State(d): State<Dashboard>,
	Path(raw): Path<String>,
	Query(q): Query<LiveQuery>,
) -> Response {
	match find_epoch(&d, &raw).await {
		Ok(p) => {
			let title = format!("Epoch {}", p.epoch);
			page(&d, &q, p.generation, &title, Nav::None, || pages::epoch(&p))
		},
		Err(l) => l.page(&d),
	}
}

async fn epoch_api(State(d): State<Dashboard>, Path(raw): Path<String>) -> Response {
	match find_epoch(&d, &raw).await {
		Ok(p) => Json(p).into_response(),
		Err(l) => l.api(),
	}
}

async fn network_api(State(d): State<Dashboard>) -> Response {
	Json(d.with_snapshot(panels::network).await).into_response()
}

async fn stages_api(State(d): State<Dashboard>) -> Response {
	Json(d.with_snapshot(panels::stages).await).into_response()
}

async fn training_api(State(d): State<Dashboard>) -> Response {
	Json(d.with_snapshot(panels::training).await).into_response()
}

async fn trust_api(State(d): State<Dashboard>) -> Response {
	Json(d.with_snapshot(panels::trust).await).into_response()
}
