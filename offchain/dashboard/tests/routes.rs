//! The router against fake sources holding a recorded network state: JSON endpoints, pages, 404s,
//! escaping of hostile text, sources going down, live partials and security headers.

mod common;

use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use common::*;
use serde_json::Value;
use tower::ServiceExt;

async fn get(d: &iota_dashboard::Dashboard, uri: &str) -> (StatusCode, HeaderMap, String) {
	let res = d
		.router()
		.oneshot(Request::get(uri).body(Body::empty()).unwrap())
		.await
		.unwrap();
	let status = res.status();
	let headers = res.headers().clone();
	let body = axum::body::to_bytes(res.into_body(), 1 << 24).await.unwrap();
	(status, headers, String::from_utf8(body.to_vec()).unwrap())
}

async fn json(d: &iota_dashboard::Dashboard, uri: &str) -> Value {
	let (status, headers, body) = get(d, uri).await;
	assert_eq!(status, StatusCode::OK, "{uri}: {body}");
	assert!(headers["content-type"].to_str().unwrap().starts_with("application/json"));
	serde_json::from_str(&body).unwrap()
}

async fn ready(
) -> (iota_dashboard::Dashboard, std::sync::Arc<FakeOrchestrator>, std::sync::Arc<FakeChain>) {
	let (o, c) = recorded();
	let d = dashboard(o.clone(), c.clone());
	d.refresh_once().await;
	(d, o, c)
}

#[tokio::test]
async fn network_endpoint_reports_the_recorded_run() {
	let (d, _, _) = ready().await;
	let v = json(&d, "/api/network").await;
	let o = &v["orchestrator"];
	assert_eq!(o["state"], "ok");
	let o = &o["data"];
	assert_eq!(o["run"], "run-a");
	assert_eq!(o["currentEpoch"], 2);
	assert_eq!(o["epochsCompleted"], 2);
	assert_eq!(o["lastEpochLoss"], 4.25);
	assert_eq!(o["minersSeen"], 3);
	assert_eq!(o["spec"]["preset"], "tiny");
	assert_eq!(o["spec"]["stages"], 3);
	assert_eq!(o["spec"]["tokensPerSample"], 64, "B·T = 2 rows × 32 tokens");
	assert_eq!(o["spec"]["compression"], 16.0, "64/8 width × bf16→u8");
	let c = &v["chain"]["data"];
	assert_eq!(c["bestBlock"], 52);
	assert_eq!(c["finalizedBlock"], 50);
	assert_eq!(c["minersRegistered"], 3);
	assert_eq!(c["validatorsRegistered"], 2);
	assert_eq!(c["runConfig"]["backwardQuota"], 4);
	assert_eq!(c["totalMinted"], "1000000000000000", "balances are decimal strings");
	assert_eq!(v["specHashAgrees"], true);

	let (status, _, html) = get(&d, "/").await;
	assert_eq!(status, StatusCode::OK);
	assert!(html.contains(r#"<dd id="stage-count">3</dd>"#), "{html}");
	assert!(html.contains(r#"<dd id="last-loss">4.2500</dd>"#));
	assert!(html.contains(r#"<dd id="finalized-block">50</dd>"#));
	assert!(html.contains("tiny"));
}

#[tokio::test]
async fn stages_endpoint_lists_each_stage_with_its_miners() {
	let (d, o, _) = ready().await;
	o.events.lock().unwrap().push(iota_rpc::types::PhaseEvent {
		stage: 2,
		epoch: 2,
		phase: iota_primitives::Phase::WeightsUploading,
		block: 49,
	});
	d.refresh_once().await;
	let v = json(&d, "/api/stages").await;
	let stages = v["stages"]["data"].as_array().unwrap();
	assert_eq!(stages.len(), 3);
	for (s, row) in stages.iter().enumerate() {
		assert_eq!(row["stage"], s);
		assert_eq!(row["backwardQuota"], 4);
		let rows = row["minerRows"].as_array().unwrap();
		assert_eq!(rows.len(), 1);
		assert_eq!(rows[0]["account"], miner(s as u16).to_string());
		assert_eq!(rows[0]["chainStatus"], "Active");
		assert_eq!(rows[0]["activity"]["samplesThisEpoch"], 2);
	}
	assert_eq!(stages[2]["phase"], "WeightsUploading");
	assert_eq!(v["chain"]["data"].as_array().unwrap().len(), 3);
	assert_eq!(v["phaseEvents"][0]["block"], 49);

	let (_, _, html) = get(&d, "/stages").await;
	assert_eq!(html.matches(r#"<section class="panel stage""#).count(), 3);
	assert_eq!(html.matches(r#"<tr class="miner">"#).count(), 3);
	assert!(html.contains(&format!(r#"href="/miners/{}""#, miner(1))));
	assert!(html.contains("block 49: stage 2 → WeightsUploading"));
	// What was refused, per miner.
	assert!(html.contains(r#"<td class="refused">0</td>"#));
	assert!(html.contains(r#"<td class="refused">2 (wrong_phase 2)</td>"#));
}

#[tokio::test]
async fn training_endpoint_has_losses_throughput_history_and_wire_bytes_per_token() {
	let (d, o, _) = ready().await;
	// Two seconds later every stage did two more backward passes: 2 × 64 tokens / 2 s = 64 tokens/s.
	o.set(Ok(status("run-a", 12_000, &[5.5, 4.25], 4)));
	d.refresh_once().await;
	// The same status again (clock not advanced) adds no point.
	d.refresh_once().await;
	let v = json(&d, "/api/training").await;
	let t = &v["orchestrator"]["data"];
	let losses: Vec<f64> = t["epochs"]
		.as_array()
		.unwrap()
		.iter()
		.map(|e| e["loss"].as_f64().unwrap())
		.collect();
	assert_eq!(losses, vec![5.5, 4.25]);
	let h = t["history"].as_array().unwrap();
	assert_eq!(h.len(), 2);
	assert_eq!(h[0]["stageTokensPerSec"], serde_json::json!([null, null, null]));
	assert_eq!(h[1]["stageTokensPerSec"], serde_json::json!([64.0, 64.0, 64.0]));
	let tokens = 256.0 * 2.0 + 64.0 * 4.0;
	assert_eq!(t["wireBytesPerToken"], 256.0 * 40.0 * 2.0 / tokens);

	let (_, _, html) = get(&d, "/training").await;
	assert_eq!(html.matches("<svg").count(), 4, "four charts");
	assert!(html.contains("Loss per epoch") && html.contains("Tokens/s per stage over time"));
	assert!(html.contains(r#"<td class="loss">4.2500</td>"#));
	// The merged model's held-out loss: a column and a second line in both loss charts.
	assert!(html.contains(r#"<td class="heldout">4.7500</td>"#), "{html}");
	assert!(html.contains(r#"<td class="heldout">–</td>"#));
	assert_eq!(html.matches("merged model (held-out)").count(), 2, "in both loss charts");
	assert!(html.contains(r#"href="/epochs/1""#));
	// The per-stage time split: three stages of two epochs, and the shares of the latest.
	assert_eq!(html.matches(r#"<tr class="stage-time">"#).count(), 6);
	assert!(html.contains("<td>0.5 s</td><td>0.1 s</td><td>0.1 s</td><td>0.2 s</td><td>0.9 s</td>"));
	assert!(
		html.contains("training 55.6 %, merge 11.1 %, chain wait 5.7 %, idle 27.7 % of stage-time"),
		"{html}"
	);
	assert!(html.contains("<td>0.1 s</td><td>3</td>"), "quota → start and extrinsics of epoch 1");
}

#[tokio::test]
async fn trust_endpoint_reads_verdicts_scores_emission_and_slashes_from_chain() {
	let (d, _, c) = ready().await;
	assert_eq!(*c.asked.lock().unwrap(), vec![2, 1, 0], "newest first, the whole window");
	let v = json(&d, "/api/trust").await;
	let t = &v["chain"]["data"];
	let epochs = t["epochs"].as_array().unwrap();
	assert_eq!(
		epochs.iter().map(|e| e["epoch"].as_u64().unwrap()).collect::<Vec<_>>(),
		vec![2, 1, 0]
	);
	let e0 = &epochs[2];
	assert_eq!(e0["finalized"], true);
	assert_eq!(e0["verdicts"].as_array().unwrap().len(), 3);
	assert_eq!(e0["verdicts"][1]["verdict"], "Fail");
	assert_eq!(e0["scores"][0]["ppb"], 600_000_000);
	assert_eq!(e0["emission"]["miners"][0]["amount"], "540000000000000");
	assert_eq!(e0["slashes"][0]["account"], miner(1).to_string());
	assert_eq!(t["validators"].as_array().unwrap().len(), 2);

	let (_, _, html) = get(&d, "/trust").await;
	assert!(html.contains("FAIL") && html.contains("60.00 %") && html.contains("lost 5"));
	assert!(html.contains(r#"id="epoch-0""#) && html.contains(r#"id="epoch-2""#));
}

#[tokio::test]
async fn miner_page_and_endpoint_show_its_work_verdicts_scores_and_rewards() {
	let (d, _, _) = ready().await;
	let m1 = miner(1);
	let v = json(&d, &format!("/api/miners/{m1}")).await;
	assert_eq!(v["account"], m1.to_string());
	assert_eq!(v["activity"]["data"]["samplesTotal"], 18);
	assert_eq!(v["chain"]["data"]["record"]["stage"], 1);
	let epochs = v["chain"]["data"]["epochs"].as_array().unwrap();
	assert_eq!(epochs.len(), 1, "only epoch 0 concerns it");
	assert_eq!(epochs[0]["verdicts"].as_array().unwrap().len(), 2);
	assert_eq!(epochs[0]["slashed"], "5000000000000");
	assert_eq!(epochs[0]["reward"], Value::Null);

	let m0 = miner(0);
	let v = json(&d, &format!("/api/miners/{m0}")).await;
	assert_eq!(v["chain"]["data"]["epochs"][0]["reward"], "540000000000000");
	assert_eq!(v["chain"]["data"]["epochs"][0]["scorePpb"], 600_000_000);

	let (status, _, html) = get(&d, &format!("/miners/{m1}")).await;
	assert_eq!(status, StatusCode::OK);
	assert!(
		html.contains(&m1.to_string())
			&& html.contains("FAIL")
			&& html.contains("Work items completed")
	);
}

#[tokio::test]
async fn unknown_miners_epochs_and_paths_are_404_pages() {
	let (d, _, _) = ready().await;
	let stranger = account(99);
	for uri in [
		format!("/miners/{stranger}"),
		"/miners/not-an-account".to_string(),
		"/epochs/3".to_string(),
		"/epochs/-1".to_string(),
		"/epochs/99999999999".to_string(),
		"/no/such/page".to_string(),
	] {
		let (status, headers, html) = get(&d, &uri).await;
		assert_eq!(status, StatusCode::NOT_FOUND, "{uri}");
		assert!(headers["content-type"].to_str().unwrap().starts_with("text/html"), "{uri}");
		assert!(html.contains("Not found"), "{uri}: {html}");
	}
	for uri in [
		format!("/api/miners/{stranger}"),
		"/api/epochs/3".into(),
		"/api/epochs/x".into(),
		"/api/nothing".into(),
	] {
		let (status, _, body) = get(&d, &uri).await;
		assert_eq!(status, StatusCode::NOT_FOUND, "{uri}");
		let v: Value = serde_json::from_str(&body).unwrap();
		assert!(v["error"].is_string(), "{uri}: {body}");
	}
	// A known epoch works, also through its JSON.
	let v = json(&d, "/api/epochs/0").await;
	assert_eq!(v["summary"]["data"]["loss"], 5.5);
	assert_eq!(v["trust"]["data"]["finalized"], true);
	let v = json(&d, "/api/epochs/2").await;
	assert_eq!(v["summary"]["data"], Value::Null, "epoch 2 is in progress");
}

#[tokio::test]
async fn before_any_source_answers_lookups_are_503_and_pages_say_waiting() {
	let (o, c) = recorded();
	let d = dashboard(o, c);
	let (status, _, _) = get(&d, &format!("/miners/{}", miner(0))).await;
	assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
	let (status, _, _) = get(&d, "/api/epochs/0").await;
	assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
	let (status, _, html) = get(&d, "/").await;
	assert_eq!(status, StatusCode::OK);
	assert!(html.contains("waiting for the first answer"));
	assert_eq!(json(&d, "/api/network").await["chain"]["state"], "pending");
}

#[tokio::test]
async fn hostile_text_from_the_network_is_escaped_everywhere() {
	let (o, c) = recorded();
	// A run id, an object key, an unreachable source's error text, and the URL itself.
	o.set(Ok(status(HOSTILE, 10_000, &[5.5], 1)));
	*c.manifest_key.lock().unwrap() = HOSTILE.to_string();
	let d = dashboard(o.clone(), c.clone());
	d.refresh_once().await;
	let mut pages = Vec::new();
	for uri in [
		"/",
		"/stages",
		"/training",
		"/trust",
		"/epochs/0",
		"/miners/%3Cscript%3Ealert(1)%3C%2Fscript%3E",
		"/%3Cimg%20src=x%20onerror=alert(1)%3E",
	] {
		pages.push((uri.to_string(), get(&d, uri).await.2));
	}
	c.set(Err(iota_dashboard::SourceError::Refused {
		url: "ws://chain".into(),
		reason: HOSTILE.into(),
	}));
	d.refresh_once().await;
	pages.push(("/ (chain down)".into(), get(&d, "/").await.2));
	pages.push(("/?partial=1".into(), get(&d, "/?partial=1").await.2));
	let mut seen_escaped = 0;
	for (uri, html) in &pages {
		assert!(!html.contains("<script>"), "{uri}: raw script tag\n{html}");
		assert!(!html.contains("<img"), "{uri}: raw img tag");
		assert_eq!(
			html.matches("<script").count(),
			html.matches(r#"<script src="/assets/live.js" defer></script>"#).count(),
			"{uri}"
		);
		if html.contains("&lt;script&gt;") {
			seen_escaped += 1;
		}
	}
	assert!(
		seen_escaped >= 5,
		"the hostile text is shown, escaped, on most pages ({seen_escaped})"
	);
	// JSON carries it as a plain string.
	assert_eq!(json(&d, "/api/network").await["orchestrator"]["data"]["run"], HOSTILE);
}

#[tokio::test]
async fn chain_down_keeps_the_orchestrator_panels_working() {
	let (d, _, c) = ready().await;
	c.set(Err(down("chain")));
	d.refresh_once().await;
	let v = json(&d, "/api/network").await;
	assert_eq!(v["orchestrator"]["state"], "ok");
	assert_eq!(v["chain"]["state"], "unavailable");
	assert!(v["chain"]["reason"].as_str().unwrap().contains("connection refused"));
	assert_eq!(v["specHashAgrees"], Value::Null);
	assert_eq!(json(&d, "/api/trust").await["chain"]["state"], "unavailable");
	for uri in ["/", "/trust", "/stages"] {
		let (status, _, html) = get(&d, uri).await;
		assert_eq!(status, StatusCode::OK, "{uri}");
		assert!(html.contains("chain unavailable"), "{uri}");
	}
	let (_, _, html) = get(&d, "/").await;
	assert!(html.contains(r#"<dd id="run-id">run-a</dd>"#));
	// A miner known to the orchestrator still has a page; its chain part says why it is missing.
	let (status, _, html) = get(&d, &format!("/miners/{}", miner(0))).await;
	assert_eq!(status, StatusCode::OK);
	assert!(html.contains("chain unavailable"));
	// The chain comes back.
	c.set(Ok(overview(2)));
	d.refresh_once().await;
	assert_eq!(json(&d, "/api/network").await["chain"]["state"], "ok");
}

#[tokio::test]
async fn orchestrator_down_keeps_the_chain_panels_working() {
	let (d, o, _) = ready().await;
	o.set(Err(down("orchestrator")));
	d.refresh_once().await;
	let v = json(&d, "/api/network").await;
	assert_eq!(v["orchestrator"]["state"], "unavailable");
	assert_eq!(v["chain"]["state"], "ok");
	assert_eq!(json(&d, "/api/training").await["orchestrator"]["state"], "unavailable");
	assert_eq!(json(&d, "/api/trust").await["chain"]["state"], "ok");
	let (_, _, html) = get(&d, "/training").await;
	assert!(html.contains("orchestrator unavailable"));
	let (_, _, html) = get(&d, "/").await;
	assert!(html.contains(r#"<dd id="best-block">52</dd>"#));
	// Known from chain only: still a page; epochs are known from the chain's stages.
	assert_eq!(get(&d, &format!("/miners/{}", miner(2))).await.0, StatusCode::OK);
	assert_eq!(get(&d, "/epochs/1").await.0, StatusCode::OK);
	assert_eq!(get(&d, "/epochs/3").await.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn an_epoch_outside_the_window_is_asked_from_the_chain() {
	let (o, c) = recorded();
	let mut opts = options();
	opts.trust_epochs = 1;
	let d = iota_dashboard::Dashboard::new(o, c.clone(), opts);
	d.refresh_once().await;
	assert_eq!(*c.asked.lock().unwrap(), vec![2]);
	let v = json(&d, "/api/epochs/0").await;
	assert_eq!(v["trust"]["data"]["slashes"][0]["account"], miner(1).to_string());
	assert_eq!(*c.asked.lock().unwrap(), vec![2, 0]);
}

#[tokio::test]
async fn partials_carry_the_generation_and_are_204_when_unchanged() {
	let (d, o, _) = ready().await;
	let (code, headers, full) = get(&d, "/").await;
	assert_eq!(code, StatusCode::OK);
	assert_eq!(headers["x-generation"], "1");
	assert!(full.starts_with("<!DOCTYPE html>") && full.contains(r#"data-generation="1""#));
	let (code, headers, body) = get(&d, "/?partial=1").await;
	assert_eq!(code, StatusCode::OK);
	assert_eq!(headers["x-generation"], "1");
	assert!(!body.contains("<html") && body.contains(r#"id="run""#));
	let (code, _, body) = get(&d, "/?partial=1&since=1").await;
	assert_eq!(code, StatusCode::NO_CONTENT);
	assert!(body.is_empty());
	o.set(Ok(status("run-a", 11_000, &[5.5, 4.25, 3.125], 0)));
	d.refresh_once().await;
	let (code, headers, body) = get(&d, "/?partial=1&since=1").await;
	assert_eq!(code, StatusCode::OK);
	assert_eq!(headers["x-generation"], "2");
	assert!(body.contains(r#"<dd id="last-loss">3.1250</dd>"#));
	// A bad `since` is a client error, not a crash.
	assert_eq!(get(&d, "/?partial=1&since=abc").await.0, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn every_response_carries_the_security_headers_and_assets_are_served() {
	let (d, _, _) = ready().await;
	for uri in ["/", "/api/network", "/nope", "/assets/live.js", "/assets/style.css"] {
		let (_, h, _) = get(&d, uri).await;
		assert_eq!(h["content-security-policy"], iota_dashboard::routes::CSP, "{uri}");
		assert_eq!(h["x-content-type-options"], "nosniff", "{uri}");
	}
	let (status, h, js) = get(&d, "/assets/live.js").await;
	assert_eq!(status, StatusCode::OK);
	assert!(h["content-type"].to_str().unwrap().starts_with("text/javascript"));
	assert!(js.contains("partial=1") && !js.contains("eval("));
	let (_, h, _) = get(&d, "/assets/style.css").await;
	assert!(h["content-type"].to_str().unwrap().starts_with("text/css"));
}
