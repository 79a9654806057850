//! The validator daemon registers its key with the stake it is given, serves `/metrics`, and keeps
//! running while the orchestrator it is pointed at does not exist; a bad secret URI is refused at start
//! with a clear message.
//!
//! ```sh
//! cargo build -p iota-validator                       # the node binary must exist too
//! cargo test -p iota-e2e --test validator_registration -- --ignored --nocapture
//! ```
//! (`$IOTA_VALIDATOR_BIN` overrides the binary's path.)

use std::process::{Command, Stdio};
use std::time::Duration;

use iota_chain::Signer;
use iota_e2e::*;

fn validator_bin() -> std::path::PathBuf {
	binary("IOTA_VALIDATOR_BIN", "iota-validator", "cargo build -p iota-validator")
}

#[test]
#[ignore = "needs the iota-validator binary (see the file's docs)"]
fn a_bad_secret_uri_is_refused_at_start() {
	let out = Command::new(validator_bin())
		.args(["--suri", "not a key//", "--metrics-addr", &format!("127.0.0.1:{}", free_port())])
		.stdin(Stdio::null())
		.output()
		.unwrap();
	assert!(!out.status.success());
	let err = String::from_utf8_lossy(&out.stderr);
	assert!(err.contains("--suri"), "{err}");
	assert!(!err.contains("not a key"), "the secret is echoed: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "starts iota-node and iota-validator (see the file's docs)"]
async fn registers_with_its_stake_and_survives_a_missing_orchestrator() {
	let mut node = DevNode::start();
	let client = node.client().await;
	let signer = Signer::from_uri("//Bob//stash").unwrap();
	let me = signer.account_id();
	assert!(client.validator(&me).await.unwrap().is_none());
	let min = client.run_config().await.unwrap().unwrap().min_validator_stake;
	let stake = min + 7;

	let dir = work_dir();
	let metrics = format!("127.0.0.1:{}", free_port());
	let args: Vec<String> = [
		"--suri",
		"//Bob//stash",
		"--chain-rpc",
		&node.rpc_url,
		"--poll-ms",
		"500",
		"--orchestrator",
		&format!("ws://127.0.0.1:{}", free_port()),
		"--stake",
		&stake.to_string(),
		"--metrics-addr",
		&metrics,
		"--state-dir",
		&dir.path().join("validator-state").to_string_lossy(),
	]
	.iter()
	.map(|s| s.to_string())
	.collect();
	let mut validator = Daemon::start(
		"iota-validator",
		&validator_bin(),
		&args,
		dir.path().join("validator.log"),
		"info",
	);

	let info = wait_for("the validator's registration", Duration::from_secs(120), || async {
		client.validator(&me).await.ok().flatten()
	})
	.await;
	assert_eq!(info.stake, stake);
	let text =
		wait_for("/metrics", Duration::from_secs(30), || try_http_get(&metrics, "/metrics")).await;
	assert!(text.contains("iota_validator_last_epoch"), "{text}");
	// No epoch completes without an orchestrator; the daemon idles and stays up.
	tokio::time::sleep(Duration::from_secs(5)).await;
	assert!(validator.is_running(), "the validator exited: {}", validator.log_text());
	let text = validator.log_text();
	assert!(text.contains("registered as validator"), "{text}");
}
