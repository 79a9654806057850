//! `iota-s3`: serve a directory as an S3 bucket on a loopback address, until Ctrl-C.
//!
//! The same server the orchestrator and devnet start in-process with `--embedded-s3 DIR`
//! ([`iota_storage::EmbeddedS3`]). Prints the endpoint and the environment a client needs.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use iota_storage::{EmbeddedConfig, EmbeddedS3};

/// Serve DIR as an S3-compatible endpoint (path-style, SigV4, one static key pair).
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
	/// Data directory (created if missing); objects are files under DIR/BUCKET/.
	#[arg(long)]
	dir: PathBuf,
	/// Listen address: loopback, or private with `--private-network`.
	#[arg(long, default_value = "127.0.0.1:9000")]
	addr: SocketAddr,
	/// Allow `--addr` to be a private address (10/8, 172.16/12, 192.168/16, fc00::/7), for a closed
	/// network of test hosts; the credentials are static, so a public address is always refused.
	#[arg(long)]
	private_network: bool,
	/// Bucket, created on start if missing.
	#[arg(long, default_value = "iota")]
	bucket: String,
	/// Access key id accepted by the server.
	#[arg(long, env = "IOTA_S3_ACCESS_KEY", default_value = "iota-dev")]
	access_key: String,
	/// Secret key accepted by the server.
	#[arg(
		long,
		env = "IOTA_S3_SECRET_KEY",
		default_value = "iota-dev-secret",
		hide_default_value = true
	)]
	secret_key: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
	tracing_subscriber::fmt()
		.with_env_filter(
			tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
		)
		.init();
	let args = Args::parse();
	let config = EmbeddedConfig {
		root: args.dir,
		addr: args.addr,
		bucket: args.bucket,
		access_key: args.access_key,
		secret_key: args.secret_key,
		private_network: args.private_network,
	};
	let server = EmbeddedS3::start(config).await.context("starting the embedded S3 server")?;
	println!("endpoint: {}", server.endpoint());
	println!("bucket:   {}", server.config().bucket);
	println!(
        "client env: AWS_ENDPOINT_URL={} AWS_ACCESS_KEY_ID={} AWS_SECRET_ACCESS_KEY=<secret> AWS_REGION=us-east-1 (path-style)",
        server.endpoint(),
        server.config().access_key
    );
	tokio::signal::ctrl_c().await.context("waiting for Ctrl-C")?;
	server.shutdown().await;
	Ok(())
}
