//! Request signing (docs/design.md §7): every state-changing orchestrator call carries the caller's chain
//! account, a nonce, a timestamp and an sr25519 signature over
//! `(method, BLAKE3 of the params, nonce, timestamp, account)`.
//!
//! Fixes over the reference: the timestamp is in **milliseconds** on both sides (the reference mixed
//! seconds and milliseconds), the params are covered by the signature (the reference left query
//! parameters unsigned), and the server keeps the nonces it has seen for as long as their timestamps are
//! inside the window, so a replay is refused either as stale or as a reused nonce.
//!
//! The signed message is domain-separated:
//!
//! ```text
//! BLAKE3( "iota-rpc/v1 request" || u32 LE len(method) || method || BLAKE3(params JSON)
//!         || u64 LE nonce || u64 LE timestamp_ms || account (32 bytes) )
//! ```
//!
//! where `params JSON` is `serde_json::to_vec(&body)` of the typed body (serde_json writes struct fields
//! in declaration order, so both sides produce the same bytes from the same value).

use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};
use subxt_signer::sr25519::{self, Keypair, PublicKey, Signature};

use crate::AccountId;

/// Domain separator of the signed message (changes with the wire format).
pub const DOMAIN: &[u8] = b"iota-rpc/v1 request";

/// Default accepted clock difference between client and server, in milliseconds (30 s).
pub const DEFAULT_WINDOW_MS: u64 = 30_000;

/// A request body with its signature envelope.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Signed<T> {
	/// The caller's chain account (SS58 in JSON).
	pub account: AccountId,
	/// Never reused by this account while `timestamp_ms` is within the server's window.
	pub nonce: u64,
	/// Client clock when signing, milliseconds since the Unix epoch.
	pub timestamp_ms: u64,
	/// sr25519 signature over [`message`], 64 bytes as 128 hex digits.
	#[serde(with = "hex64")]
	pub signature: [u8; 64],
	/// The method's parameters.
	pub body: T,
}

/// Why a signature envelope was refused (the server maps each to its own error code).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
	/// The signature does not verify for this account, method and body.
	#[error("bad signature: not signed by {account} over this method and params")]
	BadSignature {
		/// The account that claims to have signed.
		account: String,
	},
	/// The timestamp is outside the window around the server's clock.
	#[error("stale timestamp: {timestamp_ms} ms is {skew_ms} ms away from the server clock (window {window_ms} ms)")]
	StaleTimestamp {
		/// The request's timestamp.
		timestamp_ms: u64,
		/// Absolute difference to the server clock.
		skew_ms: u64,
		/// The accepted window.
		window_ms: u64,
	},
	/// The body could not be serialized (never happens for the API's types).
	#[error("params cannot be serialized: {0}")]
	Encoding(String),
}

/// Milliseconds since the Unix epoch by this machine's clock.
pub fn now_ms() -> u64 {
	SystemTime::now()
		.duration_since(UNIX_EPOCH)
		.map(|d| d.as_millis() as u64)
		.unwrap_or(0)
}

/// BLAKE3 of the JSON encoding of `body`.
///
/// # Errors
/// [`AuthError::Encoding`] if serde_json refuses the value.
pub fn params_hash<T: Serialize>(body: &T) -> Result<[u8; 32], AuthError> {
	let bytes = serde_json::to_vec(body).map_err(|e| AuthError::Encoding(e.to_string()))?;
	Ok(*blake3::hash(&bytes).as_bytes())
}

/// The 32-byte message that is signed (see the module docs).
pub fn message(
	method: &str,
	params_hash: &[u8; 32],
	nonce: u64,
	timestamp_ms: u64,
	account: &AccountId,
) -> [u8; 32] {
	let mut h = blake3::Hasher::new();
	h.update(DOMAIN);
	h.update(&(method.len() as u32).to_le_bytes());
	h.update(method.as_bytes());
	h.update(params_hash);
	h.update(&nonce.to_le_bytes());
	h.update(&timestamp_ms.to_le_bytes());
	h.update(&account.0);
	*h.finalize().as_bytes()
}

/// Signs `body` for `method` (the full JSON-RPC method name, e.g. `iota_getWork`).
///
/// # Errors
/// [`AuthError::Encoding`] only.
pub fn sign<T: Serialize>(
	keypair: &Keypair,
	method: &str,
	body: T,
	nonce: u64,
	timestamp_ms: u64,
) -> Result<Signed<T>, AuthError> {
	let account: AccountId = keypair.public_key().to_account_id();
	let msg = message(method, &params_hash(&body)?, nonce, timestamp_ms, &account);
	let Signature(signature) = keypair.sign(&msg);
	Ok(Signed { account, nonce, timestamp_ms, signature, body })
}

impl<T: Serialize + DeserializeOwned> Signed<T> {
	/// Checks the signature over `method` and the body, and that `timestamp_ms` is within `window_ms` of
	/// `now_ms`. Nonce reuse is the server's check (it needs the nonces it has seen).
	///
	/// # Errors
	/// [`AuthError::StaleTimestamp`] (checked first: cheap), [`AuthError::BadSignature`].
	pub fn verify(&self, method: &str, now_ms: u64, window_ms: u64) -> Result<(), AuthError> {
		let skew_ms = now_ms.abs_diff(self.timestamp_ms);
		if skew_ms > window_ms {
			return Err(AuthError::StaleTimestamp {
				timestamp_ms: self.timestamp_ms,
				skew_ms,
				window_ms,
			});
		}
		self.verify_signature(method)
	}

	/// Checks the signature alone.
	///
	/// # Errors
	/// [`AuthError::BadSignature`], [`AuthError::Encoding`].
	pub fn verify_signature(&self, method: &str) -> Result<(), AuthError> {
		let msg = message(
			method,
			&params_hash(&self.body)?,
			self.nonce,
			self.timestamp_ms,
			&self.account,
		);
		let public = PublicKey(self.account.0);
		if sr25519::verify(&Signature(self.signature), msg, &public) {
			Ok(())
		} else {
			Err(AuthError::BadSignature { account: self.account.to_string() })
		}
	}
}

/// Client-side nonces: strictly increasing, starting at the current time in microseconds, so a client
/// that restarts does not reuse the nonces of its previous life.
#[derive(Debug)]
pub struct NonceSource(AtomicU64);

impl Default for NonceSource {
	fn default() -> Self {
		Self(AtomicU64::new(now_ms().saturating_mul(1000)))
	}
}

impl NonceSource {
	/// The next nonce.
	pub fn next(&self) -> u64 {
		self.0.fetch_add(1, Ordering::Relaxed)
	}
}

mod hex64 {
	use serde::{de::Error, Deserialize, Deserializer, Serializer};

	pub fn serialize<S: Serializer>(v: &[u8; 64], s: S) -> Result<S::Ok, S::Error> {
		let mut out = String::with_capacity(128);
		for b in v {
			out.push_str(&format!("{b:02x}"));
		}
		s.serialize_str(&out)
	}

	pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u8; 64], D::Error> {
		let s = String::deserialize(d)?;
		let s = s.strip_prefix("0x").unwrap_or(&s);
		if s.len() != 128 || !s.is_ascii() {
			return Err(D::Error::custom(format!(
				"signature must be 128 hex digits, got {} characters",
				s.len()
			)));
		}
		let mut out = [0u8; 64];
		for (i, o) in out.iter_mut().enumerate() {
			*o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16)
				.map_err(|_| D::Error::custom("signature is not hex"))?;
		}
		Ok(out)
	}
}

#[cfg(test)]
mod tests {
	use super::*;
	use std::str::FromStr;
	use subxt_signer::SecretUri;

	fn alice() -> Keypair {
		Keypair::from_uri(&SecretUri::from_str("//Alice").unwrap()).unwrap()
	}
	fn bob() -> Keypair {
		Keypair::from_uri(&SecretUri::from_str("//Bob").unwrap()).unwrap()
	}

	#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
	struct Body {
		sample: u64,
		loss: f32,
	}

	#[test]
	fn signed_request_verifies_and_survives_json() {
		let s =
			sign(&alice(), "iota_reportLoss", Body { sample: 7, loss: 3.25 }, 1, 1_000).unwrap();
		s.verify("iota_reportLoss", 1_500, DEFAULT_WINDOW_MS).unwrap();
		let json = serde_json::to_string(&s).unwrap();
		let back: Signed<Body> = serde_json::from_str(&json).unwrap();
		assert_eq!(back, s);
		back.verify("iota_reportLoss", 1_000, DEFAULT_WINDOW_MS).unwrap();
	}

	#[test]
	fn tampering_with_any_field_breaks_the_signature() {
		let s =
			sign(&alice(), "iota_reportLoss", Body { sample: 7, loss: 3.25 }, 1, 1_000).unwrap();
		let bad = |t: Signed<Body>, m: &str| {
			assert!(matches!(
				t.verify(m, 1_000, DEFAULT_WINDOW_MS),
				Err(AuthError::BadSignature { .. })
			))
		};
		bad(s.clone(), "iota_getWork");
		bad(Signed { body: Body { sample: 8, ..s.body.clone() }, ..s.clone() }, "iota_reportLoss");
		bad(Signed { body: Body { loss: 3.0, ..s.body.clone() }, ..s.clone() }, "iota_reportLoss");
		bad(Signed { nonce: 2, ..s.clone() }, "iota_reportLoss");
		bad(Signed { timestamp_ms: 1_001, ..s.clone() }, "iota_reportLoss");
		bad(Signed { account: bob().public_key().to_account_id(), ..s.clone() }, "iota_reportLoss");
		let mut sig = s.signature;
		sig[0] ^= 1;
		bad(Signed { signature: sig, ..s.clone() }, "iota_reportLoss");
	}

	#[test]
	fn stale_timestamps_are_refused_both_ways() {
		let s = sign(&alice(), "m", Body { sample: 1, loss: 0.0 }, 1, 100_000).unwrap();
		s.verify("m", 130_000, DEFAULT_WINDOW_MS).unwrap();
		s.verify("m", 70_000, DEFAULT_WINDOW_MS).unwrap();
		assert!(matches!(
			s.verify("m", 130_001, DEFAULT_WINDOW_MS),
			Err(AuthError::StaleTimestamp { skew_ms: 30_001, .. })
		));
		assert!(matches!(
			s.verify("m", 69_999, DEFAULT_WINDOW_MS),
			Err(AuthError::StaleTimestamp { .. })
		));
	}

	#[test]
	fn malformed_signature_hex_is_a_decode_error() {
		let s = sign(&alice(), "m", Body { sample: 1, loss: 0.0 }, 1, 1).unwrap();
		let mut v = serde_json::to_value(&s).unwrap();
		v["signature"] = serde_json::json!("abcd");
		assert!(serde_json::from_value::<Signed<Body>>(v.clone()).is_err());
		v["signature"] = serde_json::json!("zz".repeat(64));
		assert!(serde_json::from_value::<Signed<Body>>(v).is_err());
	}

	#[test]
	fn nonces_increase() {
		let n = NonceSource::default();
		let (a, b) = (n.next(), n.next());
		assert!(b > a && a > 1_600_000_000_000_000);
	}
}
