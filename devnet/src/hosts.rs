//! Test hosts on one machine: each miner and validator in its own Linux network namespace with its own
//! address and a rate-limited link to the "cloud" (chain node, orchestrator, S3), so a local network
//! behaves as machines on home links do (issue 18 item 1).
//!
//! Layout, for a harness tagged `t` (the creating process's id) and subnet `10.S.0.0/24`:
//!
//! ```text
//!   root namespace ("cloud": node, orchestrator, S3, the test driver)
//!     bridge iv<t>br  10.S.0.1/24
//!       ├── veth iv<t>h0  ══ eth0 in namespace iota-<t>-<host 0>  10.S.0.2/24, default route via 10.S.0.1
//!       ├── veth iv<t>h1  ══ eth0 in namespace iota-<t>-<host 1>  10.S.0.3/24
//!       └── …
//! ```
//!
//! The cloud is the root namespace, not a namespace of its own, so the driver (a test or `iota-devnet`)
//! reads chain state, the bucket and the orchestrator's status directly, as the operator of those
//! services does; the cloud's services listen on the bridge address. A rate limit is a `tc` token bucket
//! (`tbf`) on both ends of a host's link: on the bridge side it limits what the host downloads, on the
//! host side what it uploads. This kernel has no `netem`, so links add no latency. Link down
//! ([`Hosts::set_link`]) takes the bridge side of the pair down: the host keeps its address and open
//! sockets, and every packet in either direction is dropped until the link is up again, as when a home
//! router loses its uplink.
//!
//! Everything is created with iproute2's `ip` and `tc` (root, or `CAP_NET_ADMIN` and `CAP_SYS_ADMIN`,
//! is needed) and removed on drop; deleting a namespace deletes its end of the pair and with it the
//! other end. A harness whose process died (a killed test) leaves its namespaces behind: every new
//! harness first removes those of tags whose process no longer exists ([`sweep_stale`]).

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Namespace names start with this, then the harness's tag and `-`.
const NETNS_PREFIX: &str = "iota-";
/// Interface names (bridge and bridge-side veth ends) start with this, then the tag. Linux allows 15
/// bytes: `iv` + a process id (at most 7 digits) + a letter + `h` + a host index below 100, or `br`.
const LINK_PREFIX: &str = "iv";
/// Most hosts per harness (addresses `.2` ..= `.101`, interface names within 15 bytes).
pub const MAX_HOSTS: usize = 100;

/// Why the hosts could not be set up or changed.
#[derive(Debug, thiserror::Error)]
pub enum HostsError {
	/// `ip` or `tc` is missing.
	#[error("`{tool}` not found on PATH (iproute2 provides `ip` and `tc`)")]
	MissingTool {
		/// `ip` or `tc`.
		tool: &'static str,
	},
	/// A command failed (typically: not root, so no `CAP_NET_ADMIN`).
	#[error("`{command}` failed: {stderr} (network namespaces need root, or CAP_NET_ADMIN and CAP_SYS_ADMIN)")]
	Command {
		/// The command line.
		command: String,
		/// Its standard error.
		stderr: String,
	},
	/// A host name was used twice, is empty or has characters a namespace name cannot hold.
	#[error("bad host name {0:?}: names are unique, non-empty, ASCII letters, digits and '-'")]
	BadName(String),
	/// More hosts than [`MAX_HOSTS`].
	#[error("{0} hosts requested; at most {MAX_HOSTS}")]
	TooMany(usize),
	/// No host of that name.
	#[error("no host named {0:?}")]
	UnknownHost(String),
	/// A rate of 0 Mbit/s.
	#[error("a link rate must be at least 1 Mbit/s")]
	ZeroRate,
	/// No free `10.S.0.0/24` subnet.
	#[error("no free 10.S.0.0/24 subnet for the hosts' bridge")]
	NoSubnet,
	/// Reading a counter failed.
	#[error("reading {path}: {source}")]
	Counter {
		/// The sysfs file.
		path: PathBuf,
		/// I/O error.
		source: std::io::Error,
	},
}

/// One test host: a network namespace with one link to the cloud.
#[derive(Clone, Debug)]
pub struct Host {
	/// The name given (e.g. `miner-dave`).
	pub name: String,
	/// Its network namespace (`ip netns exec <netns> …`).
	pub netns: String,
	/// The bridge-side end of its link, in the root namespace.
	pub link: String,
	/// Its address.
	pub addr: Ipv4Addr,
	/// Its link's rate in both directions, in Mbit/s (`None`: unlimited).
	pub mbit: Option<u32>,
}

/// Bytes through a host's link since it was created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkBytes {
	/// Bytes the host sent (uploads: activations, gradients, merge shards, requests), Ethernet frames
	/// included.
	pub sent: u64,
	/// Bytes the host received (downloads), Ethernet frames included.
	pub received: u64,
}

/// A set of test hosts joined to the root namespace by a bridge; removed on drop.
#[derive(Debug)]
pub struct Hosts {
	tag: String,
	bridge: String,
	gateway: Ipv4Addr,
	hosts: Vec<Host>,
}

fn run(program: &'static str, args: &[&str]) -> Result<String, HostsError> {
	let out = Command::new(program).args(args).output().map_err(|e| {
		if e.kind() == std::io::ErrorKind::NotFound {
			HostsError::MissingTool { tool: program }
		} else {
			HostsError::Command {
				command: format!("{program} {}", args.join(" ")),
				stderr: e.to_string(),
			}
		}
	})?;
	if out.status.success() {
		Ok(String::from_utf8_lossy(&out.stdout).into_owned())
	} else {
		Err(HostsError::Command {
			command: format!("{program} {}", args.join(" ")),
			stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
		})
	}
}

fn valid_name(name: &str) -> bool {
	!name.is_empty()
		&& name.len() <= 40
		&& name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// Whether process `pid` exists.
fn alive(pid: u32) -> bool {
	Path::new(&format!("/proc/{pid}")).exists()
}

/// The process id a name's tag starts with (`1234a-miner-dave` → 1234).
fn tag_pid(rest: &str) -> Option<u32> {
	let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
	rest[..digits].parse().ok()
}

/// Removes the namespaces and bridges of harnesses whose process no longer exists (a test killed
/// before its harness was dropped; a daemon it left running keeps its namespace's link until it
/// exits). Tags are process ids, so every harness on the machine must share one PID namespace (true
/// for the tests and the devnet; not for containers sharing the host's network). Returns how many
/// namespaces were removed.
///
/// # Errors
/// [`HostsError`] when `ip` cannot list them (one that cannot be deleted is left).
pub fn sweep_stale() -> Result<usize, HostsError> {
	let mut removed = 0;
	for line in run("ip", &["netns", "list"])?.lines() {
		let name = line.split_whitespace().next().unwrap_or_default();
		let Some(rest) = name.strip_prefix(NETNS_PREFIX) else { continue };
		let Some(pid) = tag_pid(rest) else { continue };
		// Another harness may be sweeping the same leftovers: a name gone meanwhile is fine.
		if !alive(pid) && run("ip", &["netns", "delete", name]).is_ok() {
			removed += 1;
		}
	}
	for line in run("ip", &["-o", "link", "show", "type", "bridge"])?.lines() {
		// "7: iv123br: <…>"
		let Some(name) = line.split(':').nth(1).map(str::trim) else { continue };
		let Some(pid) =
			name.strip_prefix(LINK_PREFIX).filter(|r| r.ends_with("br")).and_then(tag_pid)
		else {
			continue;
		};
		if !alive(pid) {
			let _ = run("ip", &["link", "delete", name]);
		}
	}
	Ok(removed)
}

/// The second octet of a free `10.S.0.0/24` (one no interface of the root namespace has an address
/// in), starting from one derived from `tag` so concurrent harnesses seldom try the same (two started
/// within the same instant with tags equal modulo 56 could still pick one subnet).
fn free_subnet(tag: u32) -> Result<u8, HostsError> {
	let used = run("ip", &["-4", "-o", "addr", "show"])?;
	(0..56u32)
		.map(|i| (200 + (tag + i) % 56) as u8)
		.find(|s| !used.contains(&format!(" 10.{s}.")))
		.ok_or(HostsError::NoSubnet)
}

impl Hosts {
	/// Creates one host per name, each with a link of `mbit` Mbit/s both ways (`None`: unlimited).
	///
	/// # Errors
	/// [`HostsError`]; whatever was created is removed again.
	pub fn create(names: &[String], mbit: Option<u32>) -> Result<Self, HostsError> {
		if names.len() > MAX_HOSTS {
			return Err(HostsError::TooMany(names.len()));
		}
		for (i, n) in names.iter().enumerate() {
			if !valid_name(n) || names[..i].contains(n) {
				return Err(HostsError::BadName(n.clone()));
			}
		}
		if mbit == Some(0) {
			return Err(HostsError::ZeroRate);
		}
		sweep_stale()?;
		// The process id and a letter, so harnesses of one process (tests) never share names.
		static NEXT: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
		let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 26;
		let pid = std::process::id();
		let tag = format!("{pid}{}", char::from(b'a' + n));
		let subnet = free_subnet(pid * 26 + u32::from(n))?;
		let gateway = Ipv4Addr::new(10, subnet, 0, 1);
		let bridge = format!("{LINK_PREFIX}{tag}br");
		// The bridge first: `Hosts` (whose drop deletes it) exists only once it is this harness's.
		run("ip", &["link", "add", &bridge, "type", "bridge"])?;
		let mut hosts = Hosts { tag, bridge: bridge.clone(), gateway, hosts: Vec::new() };
		run("ip", &["addr", "add", &format!("{gateway}/24"), "dev", &bridge])?;
		run("ip", &["link", "set", &bridge, "up"])?;
		for (i, name) in names.iter().enumerate() {
			let addr = Ipv4Addr::new(10, subnet, 0, 2 + i as u8);
			let host = hosts.add_host(i, name, addr)?;
			hosts.hosts.push(host);
			if let Some(m) = mbit {
				hosts.set_rate(name, m)?;
			}
		}
		Ok(hosts)
	}

	fn add_host(&self, i: usize, name: &str, addr: Ipv4Addr) -> Result<Host, HostsError> {
		let netns = format!("{NETNS_PREFIX}{}-{name}", self.tag);
		let link = format!("{LINK_PREFIX}{}h{i}", self.tag);
		run("ip", &["netns", "add", &netns])?;
		// From here on the namespace exists: on an error it is deleted with the others on drop, but
		// only hosts in `self.hosts` are, so delete it here.
		let setup = || -> Result<(), HostsError> {
			run(
				"ip",
				&["link", "add", &link, "type", "veth", "peer", "name", "eth0", "netns", &netns],
			)?;
			run("ip", &["link", "set", &link, "master", &self.bridge, "up"])?;
			run("ip", &["-n", &netns, "addr", "add", &format!("{addr}/24"), "dev", "eth0"])?;
			run("ip", &["-n", &netns, "link", "set", "eth0", "up"])?;
			run("ip", &["-n", &netns, "link", "set", "lo", "up"])?;
			run(
				"ip",
				&["-n", &netns, "route", "add", "default", "via", &self.gateway.to_string()],
			)?;
			Ok(())
		};
		if let Err(e) = setup() {
			let _ = run("ip", &["netns", "delete", &netns]);
			return Err(e);
		}
		Ok(Host { name: name.to_owned(), netns, link, addr, mbit: None })
	}

	/// The cloud's address on the hosts' bridge: the chain node, orchestrator and S3 server listen here.
	pub fn cloud_addr(&self) -> Ipv4Addr {
		self.gateway
	}

	/// Every host, in creation order.
	pub fn hosts(&self) -> &[Host] {
		&self.hosts
	}

	/// The host named `name`.
	///
	/// # Errors
	/// [`HostsError::UnknownHost`].
	pub fn host(&self, name: &str) -> Result<&Host, HostsError> {
		self.hosts
			.iter()
			.find(|h| h.name == name)
			.ok_or_else(|| HostsError::UnknownHost(name.into()))
	}

	/// The command prefix that runs a program in host `name`'s namespace: `ip netns exec <netns>`
	/// (`ip` execs the program after entering the namespace, so the process id is the program's and
	/// signals reach it).
	///
	/// # Errors
	/// [`HostsError::UnknownHost`].
	pub fn exec_prefix(&self, name: &str) -> Result<Vec<String>, HostsError> {
		let h = self.host(name)?;
		Ok(vec!["ip".into(), "netns".into(), "exec".into(), h.netns.clone()])
	}

	/// Sets host `name`'s link to `mbit` Mbit/s in both directions: a token bucket of 1/50 s of traffic
	/// (at least 32 KiB) with a queue of at most 100 ms, on each end.
	///
	/// # Errors
	/// [`HostsError::ZeroRate`], [`HostsError::UnknownHost`], or `tc` failing.
	pub fn set_rate(&mut self, name: &str, mbit: u32) -> Result<(), HostsError> {
		if mbit == 0 {
			return Err(HostsError::ZeroRate);
		}
		let h = self.host(name)?.clone();
		let rate = format!("{mbit}mbit");
		let burst = format!("{}", (u64::from(mbit) * 1_000_000 / 8 / 50).max(32 * 1024));
		let qdisc = ["root", "tbf", "rate", &rate, "burst", &burst, "latency", "100ms"];
		let mut down = vec!["qdisc", "replace", "dev", &h.link];
		down.extend(qdisc);
		run("tc", &down)?;
		let mut up = vec!["-n", &h.netns, "qdisc", "replace", "dev", "eth0"];
		up.extend(qdisc);
		run("tc", &up)?;
		if let Some(x) = self.hosts.iter_mut().find(|x| x.name == name) {
			x.mbit = Some(mbit);
		}
		Ok(())
	}

	/// Takes host `name`'s link down (`up = false`: every packet both ways is dropped, sockets stay
	/// open) or up again.
	///
	/// # Errors
	/// [`HostsError::UnknownHost`], or `ip` failing.
	pub fn set_link(&self, name: &str, up: bool) -> Result<(), HostsError> {
		let h = self.host(name)?;
		run("ip", &["link", "set", &h.link, if up { "up" } else { "down" }])?;
		Ok(())
	}

	/// Bytes through host `name`'s link so far (the bridge side's counters: what it transmits the host
	/// received, and the other way round).
	///
	/// # Errors
	/// [`HostsError::UnknownHost`], [`HostsError::Counter`].
	pub fn bytes(&self, name: &str) -> Result<LinkBytes, HostsError> {
		let h = self.host(name)?;
		let read = |counter: &str| -> Result<u64, HostsError> {
			let path = PathBuf::from(format!("/sys/class/net/{}/statistics/{counter}", h.link));
			let text = std::fs::read_to_string(&path)
				.map_err(|source| HostsError::Counter { path: path.clone(), source })?;
			text.trim().parse().map_err(|e| HostsError::Counter {
				path,
				source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
			})
		};
		Ok(LinkBytes { sent: read("rx_bytes")?, received: read("tx_bytes")? })
	}
}

impl Drop for Hosts {
	fn drop(&mut self) {
		for h in &self.hosts {
			if let Err(e) = run("ip", &["netns", "delete", &h.netns]) {
				tracing::warn!(netns = %h.netns, "could not remove the host's namespace: {e}");
			}
		}
		if let Err(e) = run("ip", &["link", "delete", &self.bridge]) {
			tracing::warn!(bridge = %self.bridge, "could not remove the hosts' bridge: {e}");
		}
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn bad_names_and_rates_are_refused_before_anything_is_created() {
		let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
		for bad in [names(&["a", "a"]), names(&[""]), names(&["x y"]), names(&["a/b"])] {
			assert!(matches!(Hosts::create(&bad, None), Err(HostsError::BadName(_))), "{bad:?}");
		}
		assert!(matches!(Hosts::create(&names(&["a"]), Some(0)), Err(HostsError::ZeroRate)));
		let many: Vec<String> = (0..=MAX_HOSTS).map(|i| format!("h{i}")).collect();
		assert!(matches!(Hosts::create(&many, None), Err(HostsError::TooMany(101))));
	}
}
