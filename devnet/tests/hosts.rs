//! The test-host harness on this machine's kernel (`iota_devnet::hosts`): namespaces with their own
//! addresses reach the cloud's address, a rate-limited link carries what is sent through it (counted
//! on the bridge side), a link taken down carries nothing until it is up again, and everything is
//! removed on drop. Needs root (network namespaces), hence ignored; `scripts/test.sh` runs it as root
//! with the end-to-end tests.
//!
//! ```sh
//! sudo -E cargo test -p iota-devnet --test hosts -- --ignored --nocapture
//! ```

use std::io::Read;
use std::net::TcpListener;
use std::process::Command;
use std::time::{Duration, Instant};

use iota_devnet::{Hosts, HostsError};

/// Runs `script` with bash inside host `name`'s namespace; whether it succeeded.
fn in_host(hosts: &Hosts, name: &str, script: &str) -> bool {
	let prefix = hosts.exec_prefix(name).unwrap();
	Command::new(&prefix[0])
		.args(&prefix[1..])
		.args(["timeout", "20", "bash", "-c", script])
		.status()
		.unwrap()
		.success()
}

/// Accepts one connection on `listener` and returns how many bytes it carried (`None`: nobody
/// connected within `wait`).
fn receive_one(listener: &TcpListener, wait: Duration) -> Option<usize> {
	listener.set_nonblocking(true).unwrap();
	let deadline = Instant::now() + wait;
	loop {
		match listener.accept() {
			Ok((mut s, _)) => {
				s.set_nonblocking(false).unwrap();
				let mut buf = Vec::new();
				s.read_to_end(&mut buf).unwrap();
				return Some(buf.len());
			},
			Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
			Err(_) => return None,
		}
	}
}

fn netns_exists(name: &str) -> bool {
	let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
	String::from_utf8_lossy(&out.stdout)
		.lines()
		.any(|l| l.split_whitespace().next() == Some(name))
}

#[test]
#[ignore = "needs root: creates network namespaces, a bridge and veth pairs"]
fn hosts_reach_the_cloud_through_rate_limited_links_that_go_down_and_up_and_vanish_on_drop() {
	let names = vec!["miner-a".to_string(), "validator-b".to_string()];
	let mut hosts = Hosts::create(&names, Some(20)).expect("root can create test hosts");
	let cloud = hosts.cloud_addr();
	let netns: Vec<String> = hosts.hosts().iter().map(|h| h.netns.clone()).collect();
	assert!(netns.iter().all(|n| netns_exists(n)));
	assert_ne!(hosts.host("miner-a").unwrap().addr, hosts.host("validator-b").unwrap().addr);
	assert!(matches!(hosts.host("nobody"), Err(HostsError::UnknownHost(_))));
	assert!(matches!(hosts.set_rate("miner-a", 0), Err(HostsError::ZeroRate)));

	// Both ends of each link hold the token bucket (download on the bridge side, upload inside).
	for h in hosts.hosts() {
		let show = |args: &[&str]| {
			let out = Command::new("tc").args(args).output().unwrap();
			String::from_utf8_lossy(&out.stdout).into_owned()
		};
		for q in [
			show(&["qdisc", "show", "dev", &h.link]),
			show(&["-n", &h.netns, "qdisc", "show", "dev", "eth0"]),
		] {
			assert!(q.contains("tbf") && q.contains("rate 20Mbit"), "{}: {q}", h.name);
		}
	}
	// 2 MB from the host to a listener on the cloud's address, through the 20 Mbit/s link.
	let listener = TcpListener::bind((cloud, 0)).unwrap();
	let port = listener.local_addr().unwrap().port();
	let before = hosts.bytes("miner-a").unwrap();
	let start = Instant::now();
	let sender = std::thread::spawn({
		let prefix = hosts.exec_prefix("miner-a").unwrap();
		move || {
			Command::new(&prefix[0])
				.args(&prefix[1..])
				.args([
					"bash",
					"-c",
					&format!("head -c 2000000 /dev/zero > /dev/tcp/{cloud}/{port}"),
				])
				.status()
				.unwrap()
				.success()
		}
	});
	let got = receive_one(&listener, Duration::from_secs(20)).expect("the host connected");
	assert!(sender.join().unwrap());
	let secs = start.elapsed().as_secs_f64();
	let after = hosts.bytes("miner-a").unwrap();
	assert_eq!(got, 2_000_000);
	assert!(after.sent - before.sent >= 2_000_000, "{before:?} → {after:?}");
	eprintln!(
		"2 MB up a 20 Mbit/s link in {secs:.2} s ({:.1} Mbit/s); counted {} bytes sent, {} received",
		16.0 / secs,
		after.sent - before.sent,
		after.received - before.received
	);

	// Link down: nothing gets through; up again: it does.
	hosts.set_link("miner-a", false).unwrap();
	assert!(
		!in_host(
			&hosts,
			"miner-a",
			&format!("timeout 3 bash -c 'echo x > /dev/tcp/{cloud}/{port}'")
		),
		"a host whose link is down reached the cloud"
	);
	assert_eq!(receive_one(&listener, Duration::from_millis(500)), None);
	// The other host is not affected.
	assert!(in_host(&hosts, "validator-b", &format!("echo y > /dev/tcp/{cloud}/{port}")));
	assert_eq!(receive_one(&listener, Duration::from_secs(5)), Some(2));
	hosts.set_link("miner-a", true).unwrap();
	assert!(in_host(&hosts, "miner-a", &format!("echo z > /dev/tcp/{cloud}/{port}")));
	assert_eq!(receive_one(&listener, Duration::from_secs(5)), Some(2));

	drop(hosts);
	assert!(netns.iter().all(|n| !netns_exists(n)), "namespaces left behind");
}
