//! How parties name stored objects to each other: the object reference (key, BLAKE3, size) that writes
//! return, the orchestrator records and the run spec lists, and the presigned request that lets a
//! credential-less miner or validator read or write exactly one key. The S3 client (`iota-storage`)
//! produces both; the RPC contract (`iota-rpc`) carries them without depending on the S3 stack.

use iota_primitives::ContentHash;
use serde::{Deserialize, Serialize};

/// An object in the bucket: its key, the BLAKE3 of its full contents and its size in bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRef {
	/// The object key.
	pub key: String,
	/// BLAKE3 hash of the full contents.
	pub hash: ContentHash,
	/// Size in bytes.
	pub size: u64,
}

/// HTTP method of a presigned request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Method {
	/// Read the object.
	Get,
	/// Write the object.
	Put,
}

/// A signed request for one object, as sent in an RPC message. Contains no credentials, only a
/// signature valid for this method, key and time window (the S3 presigned-URL contract: send the
/// signed method, the exact URL and every listed header).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PresignedRequest {
	/// Method the signature covers.
	pub method: Method,
	/// The full URL, query string (signature) included.
	pub url: String,
	/// Headers that must be sent as they are (name, value).
	pub headers: Vec<(String, String)>,
	/// When the signature stops being valid, seconds since the Unix epoch (by the signer's clock; the
	/// server decides).
	pub expires_at: u64,
}

impl PresignedRequest {
	/// The URL without its query string (no signature), for logs and error messages.
	pub fn redacted_url(&self) -> &str {
		self.url.split('?').next().unwrap_or_default()
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn redacted_url_drops_the_signature() {
		let r = PresignedRequest {
			method: Method::Get,
			url: "http://s3/b/k?X-Amz-Signature=abc".into(),
			headers: vec![],
			expires_at: 0,
		};
		assert_eq!(r.redacted_url(), "http://s3/b/k");
	}
}
