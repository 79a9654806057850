//! The dashboard in a real browser: headless Chromium loads pages served on 127.0.0.1 from fake sources,
//! runs the live script, and the test reads the DOM it ends with.
//!
//! The fake orchestrator holds state A (two completed epochs, last loss 4.25) while the page is served;
//! right after the first full response of `/` the test switches it to state B (three epochs, last loss
//! 3.125) and refreshes the snapshot. So B can only reach the DOM through the page's live updates.
//! Chromium runs with `--virtual-time-budget`, which fast-forwards the script's timers and waits for
//! its fetches: no wall-clock timing is involved.
//!
//! Needs Debian's `chromium` (`scripts/setup.sh` installs it; `$CHROMIUM` overrides the binary). Without
//! it the test fails when `CI=true` and is skipped with a printed reason otherwise. Screenshots of every
//! page are saved under `$CARGO_TARGET_TMPDIR/iota-dashboard-browser/` (`training.png`, `network.png`, ...).

mod common;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::Request;
use axum::middleware::Next;
use common::*;
use iota_dashboard::browser::{chromium_or_skip, Headless};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_updates_reach_the_dom_in_headless_chromium() {
	let Some(bin) = chromium_or_skip() else { return };
	let browser = Headless { virtual_time_ms: 8_000, ..Headless::new(bin) };
	let (orch, chain) = recorded();
	let d = dashboard(orch.clone(), chain);
	d.refresh_once().await;

	// After the first full page response, switch the orchestrator to state B and refresh.
	let switched = Arc::new(AtomicBool::new(false));
	let (d2, o2, s2) = (d.clone(), orch.clone(), switched.clone());
	let app = d.router().layer(axum::middleware::from_fn(move |req: Request, next: Next| {
		let (d, o, s) = (d2.clone(), o2.clone(), s2.clone());
		async move {
			let full_page =
				req.uri().path() == "/" && req.uri().query().is_none_or(|q| !q.contains("partial"));
			let res = next.run(req).await;
			if full_page && !s.swap(true, Ordering::SeqCst) {
				o.set(Ok(status("run-a", 20_000, &[5.5, 4.25, 3.125], 1)));
				d.refresh_once().await;
			}
			res
		}
	}));
	let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
	let base = format!("http://{}", listener.local_addr().unwrap());
	let server = tokio::spawn(async move { axum::serve(listener, app).await });

	let dom = browser.dom(&format!("{base}/")).await.unwrap();
	assert!(switched.load(Ordering::SeqCst), "the page was served");
	assert!(
		dom.contains("data-live-updates=\""),
		"the live script replaced the body at least once:\n{dom}"
	);
	assert!(
		dom.contains(r#"<dd id="last-loss">3.1250</dd>"#),
		"state B's loss reached the DOM:\n{dom}"
	);
	assert!(!dom.contains("4.2500"), "state A's loss is gone");
	assert!(dom.contains(r#"<dd id="stage-count">3</dd>"#));
	assert!(dom.contains(r#"<dd id="miners-registered">3</dd>"#));
	assert!(dom.contains(r#"<dd id="current-epoch">3</dd>"#));
	assert!(
		dom.contains(r#"class="ok" id="live-state""#)
			|| dom.contains(r#"id="live-state" class="ok""#),
		"badge says live"
	);

	// The Training page in the browser: four SVG charts and the loss table; and a screenshot of it.
	let dom = browser.dom(&format!("{base}/training")).await.unwrap();
	assert_eq!(dom.matches("<svg").count(), 4, "{dom}");
	assert!(dom.contains(r#"<td class="loss">3.1250</td>"#));
	// A screenshot of every page (the Training page's is named in the docs).
	let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("iota-dashboard-browser");
	std::fs::create_dir_all(&dir).unwrap();
	let miner_page = format!("/miners/{}", miner(1));
	for (name, path) in [
		("training", "/training"),
		("network", "/"),
		("stages", "/stages"),
		("trust", "/trust"),
		("miner", &miner_page),
	] {
		let shot = dir.join(format!("{name}.png"));
		let _ = std::fs::remove_file(&shot);
		browser.screenshot(&format!("{base}{path}"), &shot, 1280, 1500).await.unwrap();
		let png =
			std::fs::read(&shot).unwrap_or_else(|e| panic!("screenshot {}: {e}", shot.display()));
		assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{name}: a PNG");
		eprintln!("screenshot: {}", shot.display());
	}

	// A 404 page renders in the browser too.
	let dom = browser.dom(&format!("{base}/miners/nobody")).await.unwrap();
	assert!(dom.contains("Not found") && dom.contains("is not an SS58 account"));
	server.abort();
}
