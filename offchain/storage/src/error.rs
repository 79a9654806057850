//! The one error type of the object layer.
//!
//! Each failure a caller must react to differently is its own variant (the "bad input" list:
//! missing object, truncated download, hash mismatch, expired URL, object over the size limit, wrong
//! credentials), so a miner can re-request an expired URL, a validator can flag a hash mismatch as fraud,
//! and nobody has to parse messages. Errors name what was expected and what came.

use std::time::Duration;

use crate::hash::ContentHash;
use crate::keys::KeyError;

/// Result of every fallible call in this crate.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;

/// Everything that can go wrong talking to the object store.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
	/// The object does not exist (S3 `NoSuchKey`, or HTTP 404).
	#[error("object {key:?} not found")]
	NotFound {
		/// The key asked for (or the URL's path for a presigned request).
		key: String,
	},

	/// The server refused the credentials themselves: unknown access key (`InvalidAccessKeyId`; stock
	/// s3s servers say `NotSignedUp`) or a signature that does not match (`SignatureDoesNotMatch`, also a presigned URL that was altered).
	#[error("credentials refused ({code}): {message}")]
	InvalidCredentials {
		/// The S3 error code.
		code: String,
		/// The server's message.
		message: String,
	},

	/// A presigned URL is past its expiry (S3 answers 403 `AccessDenied` "Request has expired").
	/// Ask the orchestrator for a fresh URL.
	#[error("presigned URL expired: {message}")]
	UrlExpired {
		/// The server's message.
		message: String,
	},

	/// Valid credentials, but not allowed to do this (403 `AccessDenied` for any other reason).
	#[error("access denied to {key:?}: {message}")]
	AccessDenied {
		/// The key or URL path.
		key: String,
		/// The server's message.
		message: String,
	},

	/// The bytes read do not hash to the expected BLAKE3 hash: the object was altered or corrupted.
	/// Nothing is returned; the caller must not use the object.
	#[error("hash mismatch for {key:?}: expected {expected}, got {actual} ({size} bytes)")]
	HashMismatch {
		/// The key or URL path.
		key: String,
		/// The hash the caller asked for (from the chain or an RPC message).
		expected: ContentHash,
		/// The hash of what arrived.
		actual: ContentHash,
		/// Bytes that arrived.
		size: u64,
	},

	/// The transfer ended before the announced length (`Content-Length`, or the requested range) arrived.
	/// Nothing partial is returned.
	#[error("truncated download of {key:?}: expected {expected} bytes, received {received}")]
	Truncated {
		/// The key or URL path.
		key: String,
		/// Bytes announced (or requested), in bytes.
		expected: u64,
		/// Bytes received before the stream ended, in bytes.
		received: u64,
	},

	/// The object is larger than the configured limit (checked before a PUT is sent, and on GET from the
	/// announced length and again while reading), or the server refused it as too large (`EntityTooLarge`).
	#[error("object {key:?} is {size} bytes, over the limit of {limit} bytes")]
	TooLarge {
		/// The key or URL path.
		key: String,
		/// Size of the object, or bytes seen so far when the announced size was unknown, in bytes.
		size: u64,
		/// The configured limit, in bytes.
		limit: u64,
	},

	/// An attempt took longer than the configured timeout, on the last allowed attempt.
	#[error("timed out on {key:?} after {after:?}")]
	Timeout {
		/// The key or URL path.
		key: String,
		/// The per-attempt timeout that was exceeded.
		after: Duration,
	},

	/// The server kept answering 5xx or throttling (429, `SlowDown`) until the retries ran out.
	#[error("server unavailable for {key:?} after {attempts} attempts: HTTP {status} {message}")]
	Unavailable {
		/// The key or URL path.
		key: String,
		/// The last HTTP status.
		status: u16,
		/// The last message (S3 code and message, if any).
		message: String,
		/// Attempts made, including the first.
		attempts: u32,
	},

	/// The requested byte range is empty or reversed, or the server answered 416 (range beyond the object).
	#[error("invalid range {start}..{end} of {key:?}")]
	InvalidRange {
		/// The key.
		key: String,
		/// First byte, inclusive.
		start: u64,
		/// Last byte, exclusive.
		end: u64,
	},

	/// A multipart upload failed. The upload was aborted (if `aborted`) so no parts are left behind; the
	/// object was not created.
	#[error("multipart upload {upload_id} of {key:?} failed (aborted: {aborted}): {source}")]
	MultipartFailed {
		/// The key.
		key: String,
		/// The S3 upload id.
		upload_id: String,
		/// Whether `AbortMultipartUpload` succeeded.
		aborted: bool,
		/// The error that stopped the upload.
		#[source]
		source: Box<StorageError>,
	},

	/// A key that the layout in [`crate::keys`] does not allow.
	#[error(transparent)]
	Key(#[from] KeyError),

	/// A configuration value is unusable (empty bucket, part size below 5 MiB, presign expiry over 7 days...).
	#[error("invalid configuration: {0}")]
	Config(String),

	/// Reading the local input of an upload failed.
	#[error("reading local data for {key:?}: {source}")]
	Io {
		/// The key being uploaded.
		key: String,
		/// The I/O error.
		#[source]
		source: std::io::Error,
	},

	/// The connection failed (refused, reset, TLS, malformed response) on the last allowed attempt.
	#[error("transport error on {key:?}: {message}")]
	Transport {
		/// The key or URL path.
		key: String,
		/// The underlying error, rendered.
		message: String,
	},

	/// Any other S3 error response.
	#[error("S3 error on {key:?}: HTTP {status} {code}: {message}")]
	Service {
		/// The key or URL path.
		key: String,
		/// HTTP status.
		status: u16,
		/// The S3 error code (empty if the response had no body).
		code: String,
		/// The server's message.
		message: String,
	},
}

impl StorageError {
	/// Whether another attempt may succeed (5xx, throttling, timeouts, connection failures).
	pub fn is_retryable(&self) -> bool {
		matches!(
			self,
			StorageError::Unavailable { .. }
				| StorageError::Timeout { .. }
				| StorageError::Transport { .. }
		)
	}
}

/// Maps an S3 error response (status, code, message) to the typed error. Shared by the SDK client and the
/// presigned-URL helper, so both report the same failure the same way.
pub(crate) fn classify(
	key: &str,
	status: u16,
	code: Option<&str>,
	message: Option<&str>,
) -> StorageError {
	let code_s = code.unwrap_or_default().to_owned();
	let message_s = message.unwrap_or_default().to_owned();
	let key = key.to_owned();
	match (status, code.unwrap_or_default()) {
		(_, "NoSuchKey") | (404, "" | "NotFound") => StorageError::NotFound { key },
		(_, "InvalidAccessKeyId" | "NotSignedUp" | "SignatureDoesNotMatch") => {
			StorageError::InvalidCredentials { code: code_s, message: message_s }
		},
		(403, "AccessDenied") if message_s.to_ascii_lowercase().contains("expired") => {
			StorageError::UrlExpired { message: message_s }
		},
		(403, _) => StorageError::AccessDenied { key, message: format!("{code_s}: {message_s}") },
		(_, "EntityTooLarge") => StorageError::TooLarge { key, size: 0, limit: 0 },
		(_, "RequestTimeout") => StorageError::Timeout { key, after: Duration::ZERO },
		(429 | 500..=599, _) | (_, "SlowDown") => StorageError::Unavailable {
			key,
			status,
			message: format!("{code_s} {message_s}").trim().to_owned(),
			attempts: 1,
		},
		_ => StorageError::Service { key, status, code: code_s, message: message_s },
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn s3_error_codes_map_to_distinct_variants() {
		assert!(matches!(
			classify("k", 404, Some("NoSuchKey"), None),
			StorageError::NotFound { .. }
		));
		assert!(matches!(classify("k", 404, None, None), StorageError::NotFound { .. }));
		assert!(matches!(
			classify("k", 403, Some("SignatureDoesNotMatch"), Some("x")),
			StorageError::InvalidCredentials { .. }
		));
		assert!(matches!(
			classify("k", 403, Some("InvalidAccessKeyId"), None),
			StorageError::InvalidCredentials { .. }
		));
		assert!(matches!(
			classify("k", 403, Some("AccessDenied"), Some("Request has expired")),
			StorageError::UrlExpired { .. }
		));
		assert!(matches!(
			classify("k", 403, Some("AccessDenied"), Some("nope")),
			StorageError::AccessDenied { .. }
		));
		assert!(matches!(
			classify("k", 503, Some("SlowDown"), None),
			StorageError::Unavailable { status: 503, .. }
		));
		assert!(matches!(classify("k", 500, None, None), StorageError::Unavailable { .. }));
		assert!(matches!(
			classify("k", 400, Some("EntityTooLarge"), None),
			StorageError::TooLarge { .. }
		));
		assert!(matches!(
			classify("k", 409, Some("BucketAlreadyExists"), None),
			StorageError::Service { .. }
		));
		assert!(classify("k", 503, None, None).is_retryable());
		assert!(!classify("k", 404, None, None).is_retryable());
	}
}
