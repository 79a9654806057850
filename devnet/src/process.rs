//! Child processes of a local network: each writes stdout and stderr to its own log file, is asked to stop
//! with SIGTERM (so miners hand back their leases and the orchestrator flushes its database), and is
//! killed with SIGKILL if it has not exited after a grace period. Dropping a [`Supervised`] stops it, so a
//! launcher or test that panics leaves nothing running.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Why a process could not be started.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
	/// The binary does not exist.
	#[error(
		"{name}: binary {path} not found (build it first: ./scripts/devnet.sh builds everything)"
	)]
	MissingBinary {
		/// Process name.
		name: String,
		/// Expected path.
		path: PathBuf,
	},
	/// The log file could not be created.
	#[error("{name}: cannot create log {path}: {source}")]
	Log {
		/// Process name.
		name: String,
		/// Log path.
		path: PathBuf,
		/// I/O error.
		source: std::io::Error,
	},
	/// `spawn` failed.
	#[error("{name}: cannot start {path}: {source}")]
	Spawn {
		/// Process name.
		name: String,
		/// Binary.
		path: PathBuf,
		/// I/O error.
		source: std::io::Error,
	},
}

/// A running child process with its log.
#[derive(Debug)]
pub struct Supervised {
	name: String,
	child: Child,
	log: PathBuf,
	program: PathBuf,
	args: Vec<String>,
	envs: Vec<(String, String)>,
	/// A command the program runs under (`ip netns exec <netns>` for a test host), empty for none.
	wrapper: Vec<String>,
}

impl Supervised {
	/// Starts `program args` with extra environment `envs`, stdout and stderr appended to `log`.
	///
	/// # Errors
	/// [`ProcessError`].
	pub fn spawn(
		name: impl Into<String>,
		program: &Path,
		args: &[String],
		envs: &[(String, String)],
		log: &Path,
	) -> Result<Self, ProcessError> {
		Self::spawn_under(name, &[], program, args, envs, log)
	}

	/// [`spawn`](Self::spawn) under `wrapper`, a command that ends by exec-ing the program it is given
	/// (e.g. `ip netns exec <netns>`, [`crate::hosts::Hosts::exec_prefix`]), so the process id, signals
	/// and exit status are the program's own. Restarts run under it again.
	///
	/// # Errors
	/// [`ProcessError`].
	pub fn spawn_under(
		name: impl Into<String>,
		wrapper: &[String],
		program: &Path,
		args: &[String],
		envs: &[(String, String)],
		log: &Path,
	) -> Result<Self, ProcessError> {
		let name = name.into();
		if !program.exists() {
			return Err(ProcessError::MissingBinary { name, path: program.to_path_buf() });
		}
		let child = start(&name, wrapper, program, args, envs, log)?;
		Ok(Self {
			name,
			child,
			log: log.to_path_buf(),
			program: program.to_path_buf(),
			args: args.to_vec(),
			envs: envs.to_vec(),
			wrapper: wrapper.to_vec(),
		})
	}

	/// The process name (e.g. `miner-bob`).
	pub fn name(&self) -> &str {
		&self.name
	}

	/// Its log file.
	pub fn log(&self) -> &Path {
		&self.log
	}

	/// OS process id.
	pub fn pid(&self) -> u32 {
		self.child.id()
	}

	/// `None` while running, else how it exited.
	pub fn exited(&mut self) -> Option<ExitStatus> {
		self.child.try_wait().ok().flatten()
	}

	/// Whether it is still running.
	pub fn is_running(&mut self) -> bool {
		self.exited().is_none()
	}

	/// Sends SIGKILL at once (a crash, for fault tests) and reaps the process.
	pub fn kill9(&mut self) {
		let _ = self.child.kill();
		let _ = self.child.wait();
	}

	/// Starts the same command again (after it exited or was killed), appending to the same log.
	///
	/// # Errors
	/// [`ProcessError`].
	pub fn restart(&mut self) -> Result<(), ProcessError> {
		if self.is_running() {
			self.stop(Duration::from_secs(10));
		}
		self.child =
			start(&self.name, &self.wrapper, &self.program, &self.args, &self.envs, &self.log)?;
		Ok(())
	}

	/// SIGTERM, then SIGKILL after `grace` if it is still running; returns how it exited.
	pub fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
		if let Some(status) = self.exited() {
			return Some(status);
		}
		let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM);
		let deadline = Instant::now() + grace;
		while Instant::now() < deadline {
			if let Some(status) = self.exited() {
				return Some(status);
			}
			std::thread::sleep(Duration::from_millis(50));
		}
		tracing::warn!(process = %self.name, "did not stop within {grace:?} of SIGTERM; killing");
		let _ = self.child.kill();
		self.child.wait().ok()
	}

	/// The last `lines` lines of the log (for error messages).
	pub fn log_tail(&self, lines: usize) -> String {
		let text = std::fs::read_to_string(&self.log).unwrap_or_default();
		let all: Vec<&str> = text.lines().collect();
		all[all.len().saturating_sub(lines)..].join("\n")
	}
}

impl Drop for Supervised {
	fn drop(&mut self) {
		self.stop(Duration::from_secs(5));
	}
}

fn start(
	name: &str,
	wrapper: &[String],
	program: &Path,
	args: &[String],
	envs: &[(String, String)],
	log: &Path,
) -> Result<Child, ProcessError> {
	let open =
		|| {
			File::options().create(true).append(true).open(log).map_err(|source| {
				ProcessError::Log { name: name.to_owned(), path: log.to_path_buf(), source }
			})
		};
	let (out, err) = (open()?, open()?);
	let mut command = match wrapper.split_first() {
		Some((first, rest)) => {
			let mut c = Command::new(first);
			c.args(rest).arg(program);
			c
		},
		None => Command::new(program),
	};
	command
		.args(args)
		.envs(envs.iter().map(|(k, v)| (k, v)))
		.stdin(Stdio::null())
		.stdout(out)
		.stderr(err)
		.spawn()
		.map_err(|source| ProcessError::Spawn {
			name: name.to_owned(),
			path: program.to_path_buf(),
			source,
		})
}

/// A free TCP port on 127.0.0.1 (bound and released; a race with another process is possible but rare).
pub fn free_port() -> u16 {
	std::net::TcpListener::bind("127.0.0.1:0")
		.and_then(|l| l.local_addr())
		.map(|a| a.port())
		.unwrap_or(0)
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn stop_sends_sigterm_and_the_log_is_kept() {
		let dir = tempfile::tempdir().unwrap();
		let log = dir.path().join("sh.log");
		// A shell that prints, traps TERM and exits 7: proves SIGTERM (not SIGKILL) reached it.
		let script =
			"trap 'echo got-term; exit 7' TERM; echo started; while true; do sleep 0.05; done"
				.to_string();
		let mut p =
			Supervised::spawn("sh", Path::new("/bin/sh"), &["-c".into(), script], &[], &log)
				.unwrap();
		let start = Instant::now();
		while !std::fs::read_to_string(&log).unwrap_or_default().contains("started") {
			assert!(start.elapsed() < Duration::from_secs(10), "never started");
			std::thread::sleep(Duration::from_millis(20));
		}
		assert!(p.is_running());
		let status = p.stop(Duration::from_secs(10)).unwrap();
		assert_eq!(status.code(), Some(7));
		assert!(p.log_tail(5).contains("got-term"));
		// Restart appends to the same log.
		p.restart().unwrap();
		assert!(p.is_running());
		p.kill9();
		assert!(!p.is_running());
	}

	#[test]
	fn a_missing_binary_is_a_clear_error() {
		let dir = tempfile::tempdir().unwrap();
		let err = Supervised::spawn(
			"x",
			Path::new("/nonexistent/iota-x"),
			&[],
			&[],
			&dir.path().join("l"),
		)
		.unwrap_err();
		assert!(matches!(err, ProcessError::MissingBinary { .. }));
		assert!(err.to_string().contains("scripts/devnet.sh"));
	}
}
