//! [`ObjectStore`]: the bucket client (aws-sdk-s3) used by the orchestrator and by tools holding credentials.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{
	BehaviorVersion, Region, RequestChecksumCalculation, ResponseChecksumValidation,
};
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use bytes::{Bytes, BytesMut};
use futures_util::{stream, StreamExt, TryStreamExt};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::config::{Credentials, StoreConfig};
use crate::error::{classify, Result, StorageError};
use crate::hash::{ContentHash, Hasher};
use crate::presigned::PresignedRequest;

/// User-metadata name under which [`ObjectStore::put`] records the BLAKE3 hash (`x-amz-meta-blake3`).
/// Informational only: readers check against the hash they were given, never against this.
pub const HASH_METADATA: &str = "blake3";

/// Most parts S3 allows in one multipart upload.
const MAX_PARTS: u64 = 10_000;

/// Longest presigned URL lifetime SigV4 allows (7 days).
pub const MAX_PRESIGN_EXPIRY: Duration = Duration::from_secs(7 * 24 * 3600);

/// What a write produced: the reference that goes on chain and into RPC messages (the protocol's one
/// object reference).
pub use iota_protocol::objects::ObjectRef;

/// What HEAD says about an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectMeta {
	/// Size in bytes.
	pub size: u64,
	/// The hash recorded in metadata by [`ObjectStore::put`]; `None` for objects written another way
	/// (presigned PUT, [`ObjectStore::put_reader`]). Not a substitute for checking the bytes.
	pub recorded_hash: Option<ContentHash>,
}

/// One entry of a listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectSummary {
	/// The object key.
	pub key: String,
	/// Size in bytes.
	pub size: u64,
}

/// A client for one bucket.
///
/// Every write hashes the bytes (BLAKE3) and returns an [`ObjectRef`]; every full read checks the bytes
/// against the hash the caller expects and returns nothing if they differ. Throttling, 5xx and timeouts
/// are retried by the SDK's standard retry mode with the numbers of [`StoreConfig::retry`]. Cheap to
/// clone (the SDK client is shared).
#[derive(Clone, Debug)]
pub struct ObjectStore {
	client: aws_sdk_s3::Client,
	config: StoreConfig,
}

impl ObjectStore {
	/// Builds the client. With [`Credentials::FromEnvironment`] this reads the AWS environment and
	/// profile files; it sends no request.
	///
	/// Settings that matter for S3-compatible servers (docs/design.md §9): path-style addressing when
	/// `force_path_style`, and request/response checksums only "when required", since newer SDKs add
	/// checksum headers some servers reject.
	///
	/// # Errors
	/// [`StorageError::Config`] if [`StoreConfig::validate`] fails.
	pub async fn connect(config: StoreConfig) -> Result<Self> {
		config.validate()?;
		let retry = RetryConfig::standard()
			.with_max_attempts(config.retry.max_attempts)
			.with_initial_backoff(config.retry.initial_backoff)
			.with_max_backoff(config.retry.max_backoff);
		let timeouts = TimeoutConfig::builder()
			.connect_timeout(config.connect_timeout)
			.operation_attempt_timeout(config.attempt_timeout)
			.build();
		let mut loader = aws_config::defaults(BehaviorVersion::latest())
			.region(Region::new(config.region.clone()))
			.retry_config(retry)
			.timeout_config(timeouts);
		if let Credentials::Static { access_key, secret_key } = &config.credentials {
			loader = loader.credentials_provider(aws_sdk_s3::config::Credentials::new(
				access_key,
				secret_key,
				None,
				None,
				"iota-storage-static",
			));
		}
		if let Some(endpoint) = &config.endpoint {
			loader = loader.endpoint_url(endpoint);
		}
		let shared = loader.load().await;
		let s3_config = aws_sdk_s3::config::Builder::from(&shared)
			.force_path_style(config.force_path_style)
			.request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
			.response_checksum_validation(ResponseChecksumValidation::WhenRequired)
			.build();
		Ok(Self { client: aws_sdk_s3::Client::from_conf(s3_config), config })
	}

	/// The settings this client was built with.
	pub fn config(&self) -> &StoreConfig {
		&self.config
	}

	/// The underlying SDK client, for operations this layer does not wrap (tests use it to tamper).
	pub fn sdk(&self) -> &aws_sdk_s3::Client {
		&self.client
	}

	fn bucket(&self) -> &str {
		&self.config.bucket
	}

	fn sdk_error<E>(&self, key: &str, err: SdkError<E, HttpResponse>) -> StorageError
	where
		E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
	{
		match err {
			SdkError::ServiceError(se) => {
				let status = se.raw().status().as_u16();
				let e = se.err();
				match classify(key, status, e.code(), e.message()) {
					StorageError::Unavailable { key, status, message, .. } => {
						StorageError::Unavailable {
							key,
							status,
							message,
							attempts: self.config.retry.max_attempts,
						}
					},
					StorageError::Timeout { key, .. } => {
						StorageError::Timeout { key, after: self.config.attempt_timeout }
					},
					other => other,
				}
			},
			SdkError::TimeoutError(_) => {
				StorageError::Timeout { key: key.into(), after: self.config.attempt_timeout }
			},
			SdkError::DispatchFailure(ref d) if d.is_timeout() => {
				StorageError::Timeout { key: key.into(), after: self.config.connect_timeout }
			},
			other => StorageError::Transport {
				key: key.into(),
				message: DisplayErrorContext(&other).to_string(),
			},
		}
	}

	fn check_size(&self, key: &str, size: u64) -> Result<()> {
		if size > self.config.max_object_size {
			return Err(StorageError::TooLarge {
				key: key.into(),
				size,
				limit: self.config.max_object_size,
			});
		}
		Ok(())
	}

	/// Creates the bucket if it does not exist yet (for local servers and tests; production buckets are
	/// made by the operator).
	///
	/// # Errors
	/// [`StorageError::InvalidCredentials`], [`StorageError::AccessDenied`], or any transport error.
	pub async fn ensure_bucket(&self) -> Result<()> {
		let bucket = self.bucket().to_owned();
		match self.client.head_bucket().bucket(&bucket).send().await {
			Ok(_) => return Ok(()),
			Err(e) => match self.sdk_error(&bucket, e) {
				StorageError::NotFound { .. } => {},
				other => return Err(other),
			},
		}
		match self.client.create_bucket().bucket(&bucket).send().await {
			Ok(_) => Ok(()),
			Err(e) => match self.sdk_error(&bucket, e) {
				StorageError::Service { code, .. } if code.starts_with("BucketAlready") => Ok(()),
				other => Err(other),
			},
		}
	}

	/// Writes `data` under `key` (replacing any object there) and returns its [`ObjectRef`].
	///
	/// Objects of at least `multipart_threshold` bytes go up in parts of `part_size` bytes
	/// (`part_concurrency` at a time); if any part fails after retries the upload is aborted, so no parts
	/// are left behind and no object appears. The hash is also recorded as metadata [`HASH_METADATA`].
	///
	/// # Errors
	/// [`StorageError::TooLarge`] (before sending anything) if `data` exceeds `max_object_size`;
	/// [`StorageError::MultipartFailed`] if a multipart upload failed; otherwise the request's error
	/// ([`StorageError::InvalidCredentials`], [`StorageError::Unavailable`], [`StorageError::Timeout`]...).
	pub async fn put(&self, key: &str, data: Bytes) -> Result<ObjectRef> {
		let size = data.len() as u64;
		self.check_size(key, size)?;
		let hash = ContentHash::of(&data);
		if size < self.config.multipart_threshold {
			self.client
				.put_object()
				.bucket(self.bucket())
				.key(key)
				.metadata(HASH_METADATA, hash.to_hex())
				.body(ByteStream::from(data))
				.send()
				.await
				.map_err(|e| self.sdk_error(key, e))?;
		} else {
			let part_size = self.config.part_size.max(size.div_ceil(MAX_PARTS)) as usize;
			let parts: Vec<Bytes> = (0..data.len())
				.step_by(part_size)
				.map(|s| data.slice(s..(s + part_size).min(data.len())))
				.collect();
			let upload_id = self.create_multipart(key, Some(hash)).await?;
			let result = self
				.upload_parts(key, &upload_id, stream::iter(parts.into_iter().map(Ok)))
				.await;
			self.finish_multipart(key, &upload_id, result).await?;
		}
		Ok(ObjectRef { key: key.into(), size, hash })
	}

	/// Streams an object of unknown size from `reader` under `key`, hashing as it goes; memory use is at
	/// most `part_concurrency + 1` parts. Uses one PUT if the input is below `multipart_threshold` bytes,
	/// a multipart upload otherwise (aborted on any failure, including a failing `reader`). No hash
	/// metadata is recorded (it is known only at the end).
	///
	/// # Errors
	/// [`StorageError::TooLarge`] once more than `max_object_size` bytes were read;
	/// [`StorageError::Io`] if `reader` fails before a multipart upload started;
	/// [`StorageError::MultipartFailed`] (with the cause inside) if anything fails during one.
	pub async fn put_reader<R: AsyncRead + Unpin + Send>(
		&self,
		key: &str,
		mut reader: R,
	) -> Result<ObjectRef> {
		let first = read_up_to(&mut reader, self.config.multipart_threshold as usize)
			.await
			.map_err(|source| StorageError::Io { key: key.into(), source })?;
		if (first.len() as u64) < self.config.multipart_threshold {
			return self.put(key, first).await;
		}
		let upload_id = self.create_multipart(key, None).await?;
		let part_size = self.config.part_size as usize;
		let limit = self.config.max_object_size;
		let mut hasher = Hasher::new();
		let mut total: u64 = 0;
		// Parts of the first chunk, then the rest of the reader, part by part.
		let head: Vec<Result<Bytes>> = (0..first.len())
			.step_by(part_size)
			.map(|s| Ok(first.slice(s..(s + part_size).min(first.len()))))
			.collect();
		let tail = stream::try_unfold(reader, move |mut r| async move {
			let part = read_up_to(&mut r, part_size)
				.await
				.map_err(|source| StorageError::Io { key: String::new(), source })?;
			Ok::<_, StorageError>(if part.is_empty() { None } else { Some((part, r)) })
		});
		let key_owned = key.to_owned();
		let parts = stream::iter(head).chain(tail).map(|part| {
			let part = part.map_err(|e| match e {
				StorageError::Io { source, .. } => {
					StorageError::Io { key: key_owned.clone(), source }
				},
				other => other,
			})?;
			total += part.len() as u64;
			if total > limit {
				return Err(StorageError::TooLarge { key: key_owned.clone(), size: total, limit });
			}
			hasher.update(&part);
			Ok(part)
		});
		let result = self.upload_parts(key, &upload_id, parts).await;
		self.finish_multipart(key, &upload_id, result).await?;
		Ok(ObjectRef { key: key.into(), size: total, hash: hasher.finalize() })
	}

	async fn create_multipart(&self, key: &str, hash: Option<ContentHash>) -> Result<String> {
		let mut req = self.client.create_multipart_upload().bucket(self.bucket()).key(key);
		if let Some(h) = hash {
			req = req.metadata(HASH_METADATA, h.to_hex());
		}
		let out = req.send().await.map_err(|e| self.sdk_error(key, e))?;
		out.upload_id.ok_or_else(|| StorageError::Transport {
			key: key.into(),
			message: "CreateMultipartUpload answered without an upload id".into(),
		})
	}

	async fn upload_parts(
		&self,
		key: &str,
		upload_id: &str,
		parts: impl futures_util::Stream<Item = Result<Bytes>>,
	) -> Result<Vec<CompletedPart>> {
		parts
			.enumerate()
			.map(|(i, part)| async move {
				let part = part?;
				let number = i32::try_from(i + 1)
					.map_err(|_| StorageError::Config("too many parts".into()))?;
				let out = self
					.client
					.upload_part()
					.bucket(self.bucket())
					.key(key)
					.upload_id(upload_id)
					.part_number(number)
					.body(ByteStream::from(part))
					.send()
					.await
					.map_err(|e| self.sdk_error(key, e))?;
				Ok(CompletedPart::builder().part_number(number).set_e_tag(out.e_tag).build())
			})
			.buffered(self.config.part_concurrency)
			.try_collect()
			.await
	}

	/// Completes the upload if every part succeeded; otherwise aborts it and wraps the cause.
	async fn finish_multipart(
		&self,
		key: &str,
		upload_id: &str,
		parts: Result<Vec<CompletedPart>>,
	) -> Result<()> {
		let outcome = match parts {
			Ok(parts) => self
				.client
				.complete_multipart_upload()
				.bucket(self.bucket())
				.key(key)
				.upload_id(upload_id)
				.multipart_upload(
					CompletedMultipartUpload::builder().set_parts(Some(parts)).build(),
				)
				.send()
				.await
				.map(|_| ())
				.map_err(|e| self.sdk_error(key, e)),
			Err(e) => Err(e),
		};
		let Err(cause) = outcome else { return Ok(()) };
		let aborted = match self
			.client
			.abort_multipart_upload()
			.bucket(self.bucket())
			.key(key)
			.upload_id(upload_id)
			.send()
			.await
		{
			Ok(_) => true,
			Err(e) => {
				tracing::warn!(key, upload_id, error = %self.sdk_error(key, e), "aborting a failed multipart upload failed");
				false
			},
		};
		Err(StorageError::MultipartFailed {
			key: key.into(),
			upload_id: upload_id.into(),
			aborted,
			source: Box::new(cause),
		})
	}

	/// Reads the whole object and checks it against `expected` (from the chain or an RPC message).
	///
	/// # Errors
	/// [`StorageError::NotFound`]; [`StorageError::TooLarge`] if the announced or received size exceeds
	/// `max_object_size`; [`StorageError::Truncated`] if the body ended before its `Content-Length`;
	/// [`StorageError::HashMismatch`] if the bytes hash to something else. Nothing is returned in any of
	/// these cases.
	pub async fn get(&self, key: &str, expected: &ContentHash) -> Result<Bytes> {
		let out = self
			.client
			.get_object()
			.bucket(self.bucket())
			.key(key)
			.send()
			.await
			.map_err(|e| self.sdk_error(key, e))?;
		let announced = out.content_length.and_then(|n| u64::try_from(n).ok());
		let data = self.read_body(key, announced, out.body).await?;
		verify(key, data, expected)
	}

	/// Reads bytes `range.start..range.end` (end exclusive) of an object, for shard slices. The length is
	/// checked to be exactly `range.end - range.start` bytes; a slice has no hash of its own, so callers
	/// check slices against hashes they hold, or check the whole object.
	///
	/// # Errors
	/// [`StorageError::InvalidRange`] for an empty range or one that starts beyond the object (HTTP 416);
	/// [`StorageError::Truncated`] if fewer bytes arrived (also when the range runs past the end of the
	/// object); [`StorageError::NotFound`]; [`StorageError::TooLarge`].
	pub async fn get_range(&self, key: &str, range: std::ops::Range<u64>) -> Result<Bytes> {
		if range.start >= range.end {
			return Err(StorageError::InvalidRange {
				key: key.into(),
				start: range.start,
				end: range.end,
			});
		}
		let want = range.end - range.start;
		self.check_size(key, want)?;
		let out = self
			.client
			.get_object()
			.bucket(self.bucket())
			.key(key)
			.range(format!("bytes={}-{}", range.start, range.end - 1))
			.send()
			.await
			.map_err(|e| match self.sdk_error(key, e) {
				StorageError::Service { status: 416, .. } => StorageError::InvalidRange {
					key: key.into(),
					start: range.start,
					end: range.end,
				},
				other => other,
			})?;
		let announced = out.content_length.and_then(|n| u64::try_from(n).ok());
		let data = self.read_body(key, announced, out.body).await?;
		if data.len() as u64 != want {
			return Err(StorageError::Truncated {
				key: key.into(),
				expected: want,
				received: data.len() as u64,
			});
		}
		Ok(data)
	}

	async fn read_body(
		&self,
		key: &str,
		announced: Option<u64>,
		mut body: ByteStream,
	) -> Result<Bytes> {
		let limit = self.config.max_object_size;
		if let Some(n) = announced {
			self.check_size(key, n)?;
		}
		let mut buf = BytesMut::with_capacity(announced.unwrap_or(0) as usize);
		loop {
			// The SDK's attempt timeout ends when the response head arrives; a body that stops
			// flowing is caught here.
			let next = tokio::time::timeout(self.config.attempt_timeout, body.next())
				.await
				.map_err(|_| StorageError::Timeout {
					key: key.into(),
					after: self.config.attempt_timeout,
				})?;
			match next {
				None => break,
				Some(Ok(chunk)) => {
					buf.extend_from_slice(&chunk);
					if buf.len() as u64 > limit {
						return Err(StorageError::TooLarge {
							key: key.into(),
							size: buf.len() as u64,
							limit,
						});
					}
				},
				Some(Err(e)) => {
					let received = buf.len() as u64;
					return Err(match announced {
						Some(expected) if received < expected => {
							StorageError::Truncated { key: key.into(), expected, received }
						},
						_ => StorageError::Transport {
							key: key.into(),
							message: DisplayErrorContext(&e).to_string(),
						},
					});
				},
			}
		}
		let received = buf.len() as u64;
		match announced {
			Some(expected) if received < expected => {
				Err(StorageError::Truncated { key: key.into(), expected, received })
			},
			_ => Ok(buf.freeze()),
		}
	}

	/// Size and recorded hash of an object.
	///
	/// # Errors
	/// [`StorageError::NotFound`], or the request's error. A HEAD response has no body, so S3 cannot say
	/// why it answered 403: refused credentials show as [`StorageError::AccessDenied`] here, not
	/// [`StorageError::InvalidCredentials`].
	pub async fn head(&self, key: &str) -> Result<ObjectMeta> {
		let out = self
			.client
			.head_object()
			.bucket(self.bucket())
			.key(key)
			.send()
			.await
			.map_err(|e| self.sdk_error(key, e))?;
		let recorded_hash = out
			.metadata
			.as_ref()
			.and_then(|m| m.get(HASH_METADATA))
			.and_then(|h| h.parse().ok());
		Ok(ObjectMeta {
			size: out.content_length.and_then(|n| u64::try_from(n).ok()).unwrap_or(0),
			recorded_hash,
		})
	}

	/// Every object whose key starts with `prefix`, in key order (follows continuation tokens).
	///
	/// # Errors
	/// The request's error.
	pub async fn list(&self, prefix: &str) -> Result<Vec<ObjectSummary>> {
		let mut out = Vec::new();
		let mut token: Option<String> = None;
		loop {
			let page = self
				.client
				.list_objects_v2()
				.bucket(self.bucket())
				.prefix(prefix)
				.set_continuation_token(token.take())
				.send()
				.await
				.map_err(|e| self.sdk_error(prefix, e))?;
			for o in page.contents() {
				if let Some(key) = o.key() {
					out.push(ObjectSummary {
						key: key.into(),
						size: o.size().and_then(|n| u64::try_from(n).ok()).unwrap_or(0),
					});
				}
			}
			match page.next_continuation_token() {
				Some(t) if page.is_truncated() == Some(true) => token = Some(t.into()),
				_ => break,
			}
		}
		Ok(out)
	}

	/// Deletes an object. Deleting a missing object succeeds (S3 semantics).
	///
	/// # Errors
	/// The request's error.
	pub async fn delete(&self, key: &str) -> Result<()> {
		self.client
			.delete_object()
			.bucket(self.bucket())
			.key(key)
			.send()
			.await
			.map_err(|e| self.sdk_error(key, e))?;
		Ok(())
	}

	/// A presigned GET for exactly `key`, valid for `expires_in` (at most 7 days, SigV4's limit). Signing
	/// is local: no request is sent.
	///
	/// # Errors
	/// [`StorageError::Config`] if `expires_in` is zero or over [`MAX_PRESIGN_EXPIRY`].
	pub async fn presign_get(&self, key: &str, expires_in: Duration) -> Result<PresignedRequest> {
		let cfg = presigning(expires_in)?;
		let req = self
			.client
			.get_object()
			.bucket(self.bucket())
			.key(key)
			.presigned(cfg)
			.await
			.map_err(|e| self.sdk_error(key, e))?;
		Ok(crate::presigned::from_sdk(&req, expires_in))
	}

	/// A presigned PUT for exactly `key`, valid for `expires_in` (at most 7 days). The holder can write
	/// this one key and nothing else.
	///
	/// # Errors
	/// [`StorageError::Config`] if `expires_in` is zero or over [`MAX_PRESIGN_EXPIRY`].
	pub async fn presign_put(&self, key: &str, expires_in: Duration) -> Result<PresignedRequest> {
		let cfg = presigning(expires_in)?;
		let req = self
			.client
			.put_object()
			.bucket(self.bucket())
			.key(key)
			.presigned(cfg)
			.await
			.map_err(|e| self.sdk_error(key, e))?;
		Ok(crate::presigned::from_sdk(&req, expires_in))
	}
}

fn presigning(expires_in: Duration) -> Result<PresigningConfig> {
	if expires_in.is_zero() || expires_in > MAX_PRESIGN_EXPIRY {
		return Err(StorageError::Config(format!(
			"presign expiry {expires_in:?} is not in (0, 7 days]"
		)));
	}
	PresigningConfig::builder()
		.start_time(SystemTime::now())
		.expires_in(expires_in)
		.build()
		.map_err(|e| StorageError::Config(format!("presign expiry: {e}")))
}

/// Seconds since the Unix epoch, now.
pub(crate) fn unix_now() -> u64 {
	SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// Returns `data` if it hashes to `expected`.
pub(crate) fn verify(key: &str, data: Bytes, expected: &ContentHash) -> Result<Bytes> {
	let actual = ContentHash::of(&data);
	if &actual != expected {
		return Err(StorageError::HashMismatch {
			key: key.into(),
			expected: *expected,
			actual,
			size: data.len() as u64,
		});
	}
	Ok(data)
}

/// Reads until `n` bytes or end of input.
async fn read_up_to<R: AsyncRead + Unpin>(reader: &mut R, n: usize) -> std::io::Result<Bytes> {
	let mut buf = BytesMut::with_capacity(n);
	while buf.len() < n {
		let mut chunk = (&mut *reader).take((n - buf.len()) as u64);
		if chunk.read_buf(&mut buf).await? == 0 {
			break;
		}
	}
	Ok(buf.freeze())
}
