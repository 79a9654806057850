//! The dashboard of a real network in a real browser: a whole network (`iota_devnet::Network`: dev node,
//! orchestrator with the embedded S3 server serving the dashboard on `--dashboard-addr 127.0.0.1:<free
//! port>`, 3 stages × 1 real `iota-miner`, 1 `iota-validator`) trains the `tiny` preset re-cut into 3
//! stages for two epochs; the miners are then frozen (SIGSTOP, so the record holds still) and headless
//! Chromium loads the dashboard.
//!
//! Asserted from the DOM Chromium ends with (its `--virtual-time-budget` lets the page's live script
//! run without wall-clock waits): the Network page shows 3 stages, 3 miners registered on chain and 3 seen
//! by the orchestrator, and a last-epoch loss equal to the one the orchestrator recorded
//! (`Status.epochs`, the page's 4-decimal rendering); the Stages page has one panel per stage and one row
//! per miner, naming every miner's account; the Training page lists both epochs' recorded losses.
//! Screenshots of the three pages are saved under `$CARGO_TARGET_TMPDIR/dashboard_browser/`; with
//! `IOTA_UPDATE_SCREENSHOT=1` the Network page's is copied to `docs/dashboard.png`.
//!
//! Needs Debian's `chromium` (`scripts/setup.sh` installs it; `$CHROMIUM` overrides the binary). Without
//! it the test fails when `CI=true` and is skipped with a printed reason otherwise.
//!
//! ```sh
//! ./scripts/fetch-data.sh
//! cargo build -p iota-orchestrator -p iota-miner -p iota-validator          # and the node
//! cargo test -p iota-e2e --test dashboard_browser -- --ignored --nocapture
//! IOTA_UPDATE_SCREENSHOT=1 cargo test -p iota-e2e --test dashboard_browser -- --ignored   # refresh docs/dashboard.png
//! ```

use std::path::Path;
use std::time::{Duration, Instant};

use iota_dashboard::browser::{chromium_or_skip, Headless};
use iota_e2e::*;

const RUN: &str = "e2e-dashboard";
const QUOTA: u32 = 8;
const TIMEOUT: Duration = Duration::from_secs(900);

/// The text of the element `<tag id="id">…</tag>` in `dom`, if any.
fn by_id<'a>(dom: &'a str, tag: &str, id: &str) -> Option<&'a str> {
	let open = format!("<{tag} id=\"{id}\">");
	let at = dom.find(&open)? + open.len();
	let end = dom[at..].find(&format!("</{tag}>"))?;
	Some(&dom[at..at + end])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "starts iota-node, iota-orchestrator (with its dashboard), three iota-miner processes, iota-validator and headless Chromium (see the file's docs)"]
async fn a_two_epoch_network_in_headless_chromium() {
	let Some(bin) = chromium_or_skip() else { return };
	let browser = Headless::new(bin);
	let started = Instant::now();
	let out = output_dir(Path::new(env!("CARGO_TARGET_TMPDIR")), "dashboard_browser");
	let dashboard = format!("127.0.0.1:{}", free_port());
	let mut options = tiny_network(RUN, &out.join("network"), 3, 1, 1, QUOTA);
	options.dashboard_addr = Some(dashboard.clone());
	let mut net = TestNetwork::start(options).await;
	let chain = net.chain().await.unwrap();
	let watcher = net.client_as("//Bob").await;
	let base = format!("http://{dashboard}");

	// Two epochs complete.
	net.wait("two completed epochs", TIMEOUT, &[], || async {
		let done = watcher.status().await.ok()?.epochs.len();
		let committed = chain.stage(2).await.ok()?.epoch;
		(done >= 2 && committed >= 2).then_some(())
	})
	.await;
	eprintln!("two epochs after {:?}", started.elapsed());
	// Freeze the miners (SIGSTOP; let go on any exit from here): epochs of `tiny` end every few seconds,
	// faster than a page load and the dashboard's refresh, so the record must hold still to be compared.
	// A merge already attested may still be committed by the orchestrator; the wait below allows it.
	let thaw = Thaw(net.miners.iter().map(|m| m.pid()).collect());
	for pid in &thaw.0 {
		signal(*pid, "-STOP");
	}

	// The Network page, until the dashboard's snapshot has caught up with the orchestrator's record
	// (it refreshes every few seconds); the loss on the page is the recorded one.
	let (dom, status) = net
		.wait("the Network page to show the recorded loss", TIMEOUT, &[], || async {
			let before = watcher.status().await.ok()?;
			let dom = browser.dom(&format!("{base}/")).await.unwrap();
			let after = watcher.status().await.ok()?;
			let last = after.epochs.last()?;
			let shown = by_id(&dom, "dd", "last-loss")?;
			(before.epochs == after.epochs && shown == format!("{:.4}", last.loss))
				.then_some((dom, after))
		})
		.await;
	let last = status.epochs.last().unwrap();
	assert_eq!(
		status.last_epoch_loss,
		Some(last.loss),
		"the status's last loss is the last epoch's"
	);
	assert_eq!(by_id(&dom, "dd", "stage-count"), Some("3"), "{dom}");
	assert_eq!(by_id(&dom, "dd", "miners-registered"), Some("3"), "{dom}");
	assert_eq!(by_id(&dom, "dd", "miners-seen"), Some("3"), "{dom}");
	assert_eq!(by_id(&dom, "dd", "last-loss"), Some(format!("{:.4}", last.loss).as_str()));
	eprintln!("the page shows epoch {} loss {:.4}", last.epoch, last.loss);

	// The Stages page: one panel per stage, one row per miner, every miner named.
	let dom = browser.dom(&format!("{base}/stages")).await.unwrap();
	assert_eq!(dom.matches("class=\"panel stage\"").count(), 3, "{dom}");
	assert_eq!(dom.matches("<tr class=\"miner\">").count(), 3, "{dom}");
	for st in &status.stages {
		for m in &st.miners {
			assert!(
				dom.contains(&m.to_string()),
				"miner {m} of stage {} on the Stages page",
				st.stage
			);
		}
	}

	// The Training page lists both epochs' recorded losses.
	let dom = browser.dom(&format!("{base}/training")).await.unwrap();
	for e in status.epochs.iter().take(2) {
		let cell = format!("<td class=\"loss\">{:.4}</td>", e.loss);
		assert!(dom.contains(&cell), "epoch {} loss {cell} on the Training page", e.epoch);
	}

	// Screenshots.
	for (name, path, height) in
		[("dashboard", "/", 880), ("stages", "/stages", 1400), ("training", "/training", 1400)]
	{
		let shot = out.join(format!("{name}.png"));
		browser.screenshot(&format!("{base}{path}"), &shot, 1280, height).await.unwrap();
		let png =
			std::fs::read(&shot).unwrap_or_else(|e| panic!("screenshot {}: {e}", shot.display()));
		assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{name}: a PNG");
		eprintln!("screenshot: {}", shot.display());
	}
	if std::env::var("IOTA_UPDATE_SCREENSHOT").is_ok_and(|v| v == "1") {
		let docs = iota_e2e::repo_root().join("docs/dashboard.png");
		std::fs::copy(out.join("dashboard.png"), &docs).unwrap();
		eprintln!("updated {}", docs.display());
	}
	net.assert_alive(&[]);
	eprintln!("done after {:?}", started.elapsed());
}

/// Sends SIGCONT to the frozen processes when dropped (before the network stops them).
struct Thaw(Vec<u32>);

impl Drop for Thaw {
	fn drop(&mut self) {
		for pid in &self.0 {
			let _ = std::process::Command::new("kill").args(["-CONT", &pid.to_string()]).status();
		}
	}
}
