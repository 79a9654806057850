//! The embedded S3 server: an S3-compatible endpoint backed by a local directory, started in-process.
//!
//! This is the local default object store (docs/design.md §1): the orchestrator and the devnet start it with
//! `--embedded-s3 DIR` through [`EmbeddedS3::start`], and the `iota-s3` binary serves a directory on its
//! own. It is `s3s-fs` (objects are plain files under `DIR/{bucket}/{key}`, metadata in hidden JSON files
//! beside them) behind `s3s`'s SigV4 authentication with one static key pair, served by hyper.
//!
//! Behaviour follows S3 for what this project uses: PUT/GET/HEAD/DELETE, ListObjectsV2, multipart
//! upload (parts are written to temporary files and renamed into place on completion, so a reader never
//! sees a partial object), ranged GET, presigned URLs (an expired one is refused with 403 "Request has
//! expired"). Known differences from AWS: the region is not checked; presigned requests dated up to
//! 15 minutes in the future are accepted; ListMultipartUploads is not implemented. One change over
//! stock `s3s-fs`: whole-object GETs stream the file in 1 MiB chunks instead of 4 KiB (about 10x faster,
//! docs/design.md §9).

use std::net::SocketAddr;
use std::path::{Component, Path, PathBuf};

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::auth::SimpleAuth;
use s3s::dto::*;
use s3s::service::S3ServiceBuilder;
use s3s::{S3Request, S3Response, S3Result, S3};
use s3s_fs::FileSystem;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_util::io::ReaderStream;

use crate::config::StoreConfig;

/// Chunk size of whole-object GET bodies, in bytes.
const GET_CHUNK: usize = 1 << 20;

/// How long [`EmbeddedS3::shutdown`] lets open connections finish, in seconds.
const SHUTDOWN_GRACE_SECS: u64 = 5;

/// Why the embedded server could not start.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
	/// The listen address is not a loopback address. The server has static development credentials and
	/// no TLS, so it only listens on 127.0.0.1 / ::1.
	#[error(
		"refusing to listen on {addr}: the embedded S3 server only listens on loopback addresses"
	)]
	NotLoopback {
		/// The rejected address.
		addr: SocketAddr,
	},
	/// The bucket name breaks S3's rules (3-63 characters of `a-z`, `0-9`, `-`, starting and ending with
	/// a letter or digit).
	#[error("invalid bucket name {0:?}: expected 3-63 characters of a-z, 0-9 and '-', starting and ending alphanumeric")]
	InvalidBucket(String),
	/// The access key or secret key is empty.
	#[error("the access key and secret key must not be empty")]
	EmptyCredentials,
	/// The data directory could not be created or opened.
	#[error("data directory {path}: {message}")]
	Directory {
		/// The directory.
		path: PathBuf,
		/// What failed.
		message: String,
	},
	/// The listen address could not be bound (in use, no permission).
	#[error("binding {addr}: {source}")]
	Bind {
		/// The address.
		addr: SocketAddr,
		/// The error.
		#[source]
		source: std::io::Error,
	},
}

/// Settings of an embedded server.
#[derive(Clone, Debug)]
pub struct EmbeddedConfig {
	/// Data directory; created if missing. Objects live under `root/{bucket}/`.
	pub root: PathBuf,
	/// Listen address; must be loopback. Port 0 picks a free port (default `127.0.0.1:0`).
	pub addr: SocketAddr,
	/// The bucket, created on start if missing (default `iota`).
	pub bucket: String,
	/// The one accepted access key (default `iota-dev`).
	pub access_key: String,
	/// Its secret (default `iota-dev-secret`).
	pub secret_key: String,
}

impl EmbeddedConfig {
	/// Defaults for a data directory: `127.0.0.1:0`, bucket `iota`, key pair `iota-dev`/`iota-dev-secret`.
	pub fn new(root: impl Into<PathBuf>) -> Self {
		Self {
			root: root.into(),
			addr: SocketAddr::from(([127, 0, 0, 1], 0)),
			bucket: "iota".into(),
			access_key: "iota-dev".into(),
			secret_key: "iota-dev-secret".into(),
		}
	}
}

/// A running embedded server. Dropping it stops accepting connections (open ones finish in the
/// background); [`EmbeddedS3::shutdown`] also waits for them.
#[derive(Debug)]
pub struct EmbeddedS3 {
	addr: SocketAddr,
	config: EmbeddedConfig,
	stop: Option<oneshot::Sender<()>>,
	task: Option<JoinHandle<()>>,
}

impl EmbeddedS3 {
	/// Creates the data directory and bucket if missing, binds `config.addr` and starts serving on the
	/// current tokio runtime. Returns once the socket is bound (requests can be sent right away).
	///
	/// # Errors
	/// [`EmbeddedError::NotLoopback`], [`EmbeddedError::InvalidBucket`], [`EmbeddedError::EmptyCredentials`],
	/// [`EmbeddedError::Directory`], [`EmbeddedError::Bind`].
	pub async fn start(config: EmbeddedConfig) -> Result<Self, EmbeddedError> {
		if !config.addr.ip().is_loopback() {
			return Err(EmbeddedError::NotLoopback { addr: config.addr });
		}
		if !valid_bucket(&config.bucket) {
			return Err(EmbeddedError::InvalidBucket(config.bucket.clone()));
		}
		if config.access_key.is_empty() || config.secret_key.is_empty() {
			return Err(EmbeddedError::EmptyCredentials);
		}
		let dir_err = |e: std::io::Error| EmbeddedError::Directory {
			path: config.root.clone(),
			message: e.to_string(),
		};
		std::fs::create_dir_all(config.root.join(&config.bucket)).map_err(dir_err)?;
		let root = config.root.canonicalize().map_err(dir_err)?;
		let fs = FileSystem::new(&root).map_err(|e| EmbeddedError::Directory {
			path: config.root.clone(),
			message: format!("{e:?}"),
		})?;

		let mut builder = S3ServiceBuilder::new(FastFs { inner: fs, root });
		builder.set_auth(SimpleAuth::from_single(
			config.access_key.clone(),
			config.secret_key.clone(),
		));
		let service = builder.build();

		let listener = TcpListener::bind(config.addr)
			.await
			.map_err(|source| EmbeddedError::Bind { addr: config.addr, source })?;
		let addr = listener
			.local_addr()
			.map_err(|source| EmbeddedError::Bind { addr: config.addr, source })?;
		let (stop, mut stopped) = oneshot::channel::<()>();
		let task = tokio::spawn(async move {
			let http = ConnBuilder::new(TokioExecutor::new());
			let graceful = hyper_util::server::graceful::GracefulShutdown::new();
			loop {
				tokio::select! {
					res = listener.accept() => match res {
						Ok((socket, _)) => {
							let conn = http.serve_connection(TokioIo::new(socket), service.clone());
							let conn = graceful.watch(conn.into_owned());
							tokio::spawn(async move {
								let _ = conn.await;
							});
						},
						Err(e) => {
							tracing::warn!(error = %e, "embedded S3: accept failed");
							tokio::time::sleep(std::time::Duration::from_millis(10)).await;
						},
					},
					_ = &mut stopped => break,
				}
			}
			drop(listener);
			tokio::select! {
				() = graceful.shutdown() => {},
				() = tokio::time::sleep(std::time::Duration::from_secs(SHUTDOWN_GRACE_SECS)) => {
					tracing::warn!("embedded S3: connections still open after {SHUTDOWN_GRACE_SECS} s, dropping them");
				},
			}
		});
		tracing::info!(%addr, root = %config.root.display(), bucket = %config.bucket, "embedded S3 server listening");
		Ok(Self { addr, config, stop: Some(stop), task: Some(task) })
	}

	/// The bound address (with the real port when 0 was asked for).
	pub fn local_addr(&self) -> SocketAddr {
		self.addr
	}

	/// The endpoint URL, `http://127.0.0.1:PORT`.
	pub fn endpoint(&self) -> String {
		format!("http://{}", self.addr)
	}

	/// The settings this server was started with.
	pub fn config(&self) -> &EmbeddedConfig {
		&self.config
	}

	/// Client settings that reach this server's bucket with its credentials (path-style, `us-east-1`).
	pub fn store_config(&self) -> StoreConfig {
		StoreConfig::s3_compatible(
			self.endpoint(),
			&self.config.bucket,
			&self.config.access_key,
			&self.config.secret_key,
		)
	}

	/// Stops accepting connections and waits up to 5 s for open ones to finish.
	pub async fn shutdown(mut self) {
		if let Some(stop) = self.stop.take() {
			let _ = stop.send(());
		}
		if let Some(task) = self.task.take() {
			let _ = task.await;
		}
		tracing::info!(addr = %self.addr, "embedded S3 server stopped");
	}
}

impl Drop for EmbeddedS3 {
	fn drop(&mut self) {
		if let Some(stop) = self.stop.take() {
			let _ = stop.send(());
		}
	}
}

fn valid_bucket(name: &str) -> bool {
	let b = name.as_bytes();
	(3..=63).contains(&b.len())
		&& b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
		&& b[0].is_ascii_alphanumeric()
		&& b[b.len() - 1].is_ascii_alphanumeric()
}

/// `s3s_fs::FileSystem` with faster whole-object GETs; every other operation is passed through.
struct FastFs {
	inner: FileSystem,
	root: PathBuf,
}

impl FastFs {
	/// Where `s3s-fs` keeps an object (`root/bucket/key`), for keys without `.`/`..`/absolute parts.
	fn object_path(&self, bucket: &str, key: &str) -> Option<PathBuf> {
		let plain = |p: &Path| p.components().all(|c| matches!(c, Component::Normal(_)));
		(plain(Path::new(bucket)) && plain(Path::new(key)))
			.then(|| self.root.join(bucket).join(key))
	}

	async fn fast_get_object(
		&self,
		req: S3Request<GetObjectInput>,
	) -> S3Result<S3Response<GetObjectOutput>> {
		let ours = match (&req.input.range, self.object_path(&req.input.bucket, &req.input.key)) {
			(None, Some(path)) => tokio::fs::File::open(&path).await.ok().map(|f| (path, f)),
			_ => None,
		};
		let mut resp = self.inner.get_object(req).await?;
		if let Some((path, file)) = ours {
			// s3s-fs replaces objects by rename: our handle is the object the inner call described only if
			// the path still names the same file now.
			if let (Ok(a), Ok(b)) = (file.metadata().await, tokio::fs::metadata(&path).await) {
				let same = a.len() == b.len()
					&& a.modified().ok() == b.modified().ok()
					&& same_inode(&a, &b)
					&& i64::try_from(a.len()).ok() == resp.output.content_length;
				if same {
					resp.output.body =
						Some(StreamingBlob::wrap(ReaderStream::with_capacity(file, GET_CHUNK)));
				}
			}
		}
		Ok(resp)
	}
}

#[cfg(unix)]
fn same_inode(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
	use std::os::unix::fs::MetadataExt;
	a.ino() == b.ino() && a.dev() == b.dev()
}

#[cfg(not(unix))]
fn same_inode(_: &std::fs::Metadata, _: &std::fs::Metadata) -> bool {
	true
}

/// Implements `S3` for [`FastFs`]: `get_object` is ours, the listed operations go to `s3s-fs`, the rest
/// answer `NotImplemented` (the trait's default).
macro_rules! s3_passthrough {
    ($($op:ident: $input:ident => $output:ident),* $(,)?) => {
        #[async_trait::async_trait]
        impl S3 for FastFs {
            async fn get_object(&self, req: S3Request<GetObjectInput>) -> S3Result<S3Response<GetObjectOutput>> {
                self.fast_get_object(req).await
            }
            $(
                async fn $op(&self, req: S3Request<$input>) -> S3Result<S3Response<$output>> {
                    self.inner.$op(req).await
                }
            )*
        }
    };
}

s3_passthrough! {
	create_bucket: CreateBucketInput => CreateBucketOutput,
	copy_object: CopyObjectInput => CopyObjectOutput,
	delete_bucket: DeleteBucketInput => DeleteBucketOutput,
	delete_object: DeleteObjectInput => DeleteObjectOutput,
	delete_objects: DeleteObjectsInput => DeleteObjectsOutput,
	get_bucket_location: GetBucketLocationInput => GetBucketLocationOutput,
	head_bucket: HeadBucketInput => HeadBucketOutput,
	head_object: HeadObjectInput => HeadObjectOutput,
	list_buckets: ListBucketsInput => ListBucketsOutput,
	list_objects: ListObjectsInput => ListObjectsOutput,
	list_objects_v2: ListObjectsV2Input => ListObjectsV2Output,
	put_object: PutObjectInput => PutObjectOutput,
	create_multipart_upload: CreateMultipartUploadInput => CreateMultipartUploadOutput,
	upload_part: UploadPartInput => UploadPartOutput,
	upload_part_copy: UploadPartCopyInput => UploadPartCopyOutput,
	list_parts: ListPartsInput => ListPartsOutput,
	complete_multipart_upload: CompleteMultipartUploadInput => CompleteMultipartUploadOutput,
	abort_multipart_upload: AbortMultipartUploadInput => AbortMultipartUploadOutput,
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn bucket_names_follow_s3_rules() {
		for ok in ["iota", "abc", "a-1", &"a".repeat(63)] {
			assert!(valid_bucket(ok), "{ok}");
		}
		for bad in ["", "ab", "Iota", "-ab", "ab-", "a_b", "a.b/c", &"a".repeat(64)] {
			assert!(!valid_bucket(bad), "{bad}");
		}
	}

	#[tokio::test]
	async fn refuses_bad_settings_before_touching_anything() {
		let dir = tempfile::tempdir().unwrap();
		let mut c = EmbeddedConfig::new(dir.path().join("data"));
		c.addr = "0.0.0.0:0".parse().unwrap();
		assert!(matches!(
			EmbeddedS3::start(c.clone()).await,
			Err(EmbeddedError::NotLoopback { .. })
		));
		c.addr = "127.0.0.1:0".parse().unwrap();
		c.bucket = "Bad_Bucket".into();
		assert!(matches!(EmbeddedS3::start(c.clone()).await, Err(EmbeddedError::InvalidBucket(_))));
		c.bucket = "iota".into();
		c.secret_key.clear();
		assert!(matches!(EmbeddedS3::start(c).await, Err(EmbeddedError::EmptyCredentials)));
		assert!(!dir.path().join("data").exists(), "nothing is created for refused settings");
	}

	#[tokio::test]
	async fn bind_conflict_is_reported() {
		let dir = tempfile::tempdir().unwrap();
		let first = EmbeddedS3::start(EmbeddedConfig::new(dir.path())).await.unwrap();
		let mut c = EmbeddedConfig::new(dir.path());
		c.addr = first.local_addr();
		assert!(matches!(EmbeddedS3::start(c).await, Err(EmbeddedError::Bind { .. })));
		first.shutdown().await;
	}
}
