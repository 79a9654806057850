//! The embedded S3 server through the AWS CLI (PyPI `awscli`, installed by `scripts/setup.sh` into
//! `.venv/`): what an operator does by hand to a devnet's bucket behaves as on S3. A non-empty bucket is
//! not removed (`rb`: `BucketNotEmpty`); a key with `+` and a space is listed, and removed by a
//! listing-driven `rm --recursive`, as written; an error names its code and S3's message (not
//! "Unknown"); an unknown access key is `InvalidAccessKeyId`.
//!
//! The CLI is `$IOTA_AWS_CLI`, else `.venv/bin/aws`, else `aws` on the `PATH`; without one the test is
//! skipped with the reason printed. Set `IOTA_REQUIRE_AWS_CLI=1` to turn the skip into a failure.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use iota_storage::{EmbeddedConfig, EmbeddedS3};

/// Runs the CLI against `endpoint` as `access_key`, with a config of its own (path-style addressing,
/// no profiles, no instance metadata).
struct Cli {
	exe: PathBuf,
	endpoint: String,
	config: PathBuf,
}

impl Cli {
	fn run(&self, access_key: &str, args: &[&str]) -> Output {
		Command::new(&self.exe)
			.args(args)
			.args(["--endpoint-url", &self.endpoint])
			.env("AWS_ACCESS_KEY_ID", access_key)
			.env("AWS_SECRET_ACCESS_KEY", "iota-dev-secret")
			.env("AWS_DEFAULT_REGION", "us-east-1")
			.env("AWS_CONFIG_FILE", &self.config)
			.env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
			.env("AWS_EC2_METADATA_DISABLED", "true")
			.env_remove("AWS_PROFILE")
			.output()
			.expect("run the AWS CLI")
	}

	/// Runs it as the server's key and expects success; returns stdout.
	fn ok(&self, args: &[&str]) -> String {
		let o = self.run("iota-dev", args);
		assert!(o.status.success(), "aws {args:?} failed: {}", String::from_utf8_lossy(&o.stderr));
		String::from_utf8_lossy(&o.stdout).into_owned()
	}

	/// Runs it as `access_key` and expects a failure; returns stderr.
	fn fails(&self, access_key: &str, args: &[&str]) -> String {
		let o = self.run(access_key, args);
		assert!(
			!o.status.success(),
			"aws {args:?} succeeded: {}",
			String::from_utf8_lossy(&o.stdout)
		);
		String::from_utf8_lossy(&o.stderr).into_owned()
	}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_aws_cli_sees_s3_behaviour() {
	let Some(exe) = common::venv_tool("aws", "IOTA_AWS_CLI", "IOTA_REQUIRE_AWS_CLI") else {
		return;
	};
	let dir = tempfile::tempdir().unwrap();
	let root = dir.path().join("s3");
	let server = EmbeddedS3::start(EmbeddedConfig::new(&root)).await.unwrap();
	let config = dir.path().join("aws-config");
	std::fs::write(&config, "[default]\ns3 =\n    addressing_style = path\n").unwrap();
	let cli = Cli { exe, endpoint: server.endpoint(), config };
	let file = dir.path().join("object");
	std::fs::write(&file, b"hello").unwrap();
	let file = file.to_str().unwrap();
	let object = |key: &str| -> PathBuf { root.join("other").join(key) };

	// Whatever runs the CLI blocks; the server serves from the runtime's other worker.
	tokio::task::block_in_place(|| {
		cli.ok(&["s3", "mb", "s3://other"]);
		cli.ok(&["s3", "cp", file, "s3://other/dir/a+b c"]);
		assert!(object("dir/a+b c").is_file());
		let listed = cli.ok(&["s3", "ls", "s3://other/dir/"]);
		assert!(listed.contains(" a+b c"), "listed as written: {listed:?}");

		// A bucket holding an object is not removed.
		let err = cli.fails("iota-dev", &["s3", "rb", "s3://other"]);
		assert!(err.contains("BucketNotEmpty"), "{err}");
		assert!(object("dir/a+b c").is_file(), "nothing deleted");

		// A listing-driven removal finds the key as written and removes it; then the bucket goes.
		let removed = cli.ok(&["s3", "rm", "--recursive", "s3://other/"]);
		assert!(removed.contains("a+b c"), "{removed:?}");
		assert!(!object("dir/a+b c").exists(), "the object is gone");
		cli.ok(&["s3", "rb", "s3://other"]);
		assert!(!Path::new(&root).join("other").exists());

		// An error names its code and S3's message.
		let out = dir.path().join("out");
		let err = cli.fails(
			"iota-dev",
			&["s3api", "get-object", "--bucket", "iota", "--key", "missing", out.to_str().unwrap()],
		);
		assert!(
			err.contains("NoSuchKey") && err.contains("The specified key does not exist."),
			"{err}"
		);
		assert!(!err.contains("Unknown"), "{err}");

		// An unknown access key.
		let err = cli.fails("nobody", &["s3", "ls", "s3://iota"]);
		assert!(err.contains("InvalidAccessKeyId"), "{err}");
	});
	server.shutdown().await;
}
