//! JSON-RPC error codes of the orchestrator API: one code per kind of refusal, so a client (and a test)
//! can tell them apart without parsing messages. Every refused request changes no state.

use jsonrpsee::types::ErrorObjectOwned;
use serde::{Deserialize, Serialize};

/// The orchestrator's error codes (JSON-RPC server-error range `-32000 ..= -32099`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(i32)]
pub enum ErrorCode {
	/// The signature does not verify for the account, method and params.
	BadSignature = -32001,
	/// The timestamp is outside the accepted window.
	StaleTimestamp = -32002,
	/// This account already used this nonce.
	NonceReused = -32003,
	/// The account is not registered on chain.
	NotRegistered = -32004,
	/// The account is registered in another role (e.g. a validator calling a miner method) or is leaving.
	WrongRole = -32005,
	/// The request names a stage the account does not hold.
	WrongStage = -32006,
	/// No such lease, sample, shard or epoch.
	Unknown = -32007,
	/// The lease expired (the item was re-listed); the result is not accepted.
	LeaseExpired = -32008,
	/// The uploaded object does not hash to the reported hash (or is missing).
	HashMismatch = -32009,
	/// The reported shape or size is not what the stage produces.
	ShapeMismatch = -32010,
	/// The stage is not in the phase this call belongs to.
	WrongPhase = -32011,
	/// A param exceeds its limit (key length, shape rank, vector length).
	Oversize = -32012,
	/// A value is invalid (NaN/Inf loss, wrong key, lease of another miner, duplicate submission).
	Invalid = -32013,
	/// A dependency (chain, object store, database) failed; the request may be retried.
	Unavailable = -32014,
	/// A submitted vector holds a NaN or ±Inf (`iota_protocol::acceptance`).
	NonFinite = -32015,
	/// A merge submission claims more samples than the backward passes the orchestrator accepted from
	/// its miner at that stage in that epoch (the weight of a submission is bounded by recorded work).
	SampleCountMismatch = -32016,
	/// `iota_getWork` from a miner process whose session ([`crate::types::GetWork::session`]) a newer
	/// process of the same account has replaced: the earlier process is taken for gone, so its
	/// requests (a late one in flight, or a second process running the same key) get no work.
	SessionSuperseded = -32017,
}

impl ErrorCode {
	/// Every code, for tests and docs.
	pub const ALL: [ErrorCode; 17] = [
		ErrorCode::BadSignature,
		ErrorCode::StaleTimestamp,
		ErrorCode::NonceReused,
		ErrorCode::NotRegistered,
		ErrorCode::WrongRole,
		ErrorCode::WrongStage,
		ErrorCode::Unknown,
		ErrorCode::LeaseExpired,
		ErrorCode::HashMismatch,
		ErrorCode::ShapeMismatch,
		ErrorCode::WrongPhase,
		ErrorCode::Oversize,
		ErrorCode::Invalid,
		ErrorCode::Unavailable,
		ErrorCode::NonFinite,
		ErrorCode::SampleCountMismatch,
		ErrorCode::SessionSuperseded,
	];

	/// The numeric JSON-RPC code.
	pub fn code(self) -> i32 {
		self as i32
	}

	/// The code for a number, if it is one of ours.
	pub fn from_code(code: i32) -> Option<Self> {
		Self::ALL.into_iter().find(|c| c.code() == code)
	}

	/// A short, stable name (metrics label).
	pub fn name(self) -> &'static str {
		match self {
			ErrorCode::BadSignature => "bad_signature",
			ErrorCode::StaleTimestamp => "stale_timestamp",
			ErrorCode::NonceReused => "nonce_reused",
			ErrorCode::NotRegistered => "not_registered",
			ErrorCode::WrongRole => "wrong_role",
			ErrorCode::WrongStage => "wrong_stage",
			ErrorCode::Unknown => "unknown",
			ErrorCode::LeaseExpired => "lease_expired",
			ErrorCode::HashMismatch => "hash_mismatch",
			ErrorCode::ShapeMismatch => "shape_mismatch",
			ErrorCode::WrongPhase => "wrong_phase",
			ErrorCode::Oversize => "oversize",
			ErrorCode::Invalid => "invalid",
			ErrorCode::Unavailable => "unavailable",
			ErrorCode::NonFinite => "non_finite",
			ErrorCode::SampleCountMismatch => "sample_count_mismatch",
			ErrorCode::SessionSuperseded => "session_superseded",
		}
	}

	/// A JSON-RPC error object with this code and `message`.
	pub fn error(self, message: impl Into<String>) -> ErrorObjectOwned {
		ErrorObjectOwned::owned(self.code(), message.into(), None::<()>)
	}
}

/// The orchestrator error code of a client-side error, if the server answered with one.
pub fn code_of(err: &jsonrpsee::core::ClientError) -> Option<ErrorCode> {
	match err {
		jsonrpsee::core::ClientError::Call(obj) => ErrorCode::from_code(obj.code()),
		_ => None,
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn codes_are_distinct_and_round_trip() {
		let mut seen = std::collections::HashSet::new();
		for c in ErrorCode::ALL {
			assert!(seen.insert(c.code()));
			assert_eq!(ErrorCode::from_code(c.code()), Some(c));
			assert!((-32099..=-32000).contains(&c.code()));
			assert_eq!(c.error("x").code(), c.code());
		}
		assert_eq!(ErrorCode::from_code(-32602), None);
	}
}
