//! Errors of the chain client.

use std::path::PathBuf;

/// What went wrong talking to the chain.
#[derive(Debug, thiserror::Error)]
pub enum Error {
	/// The extrinsic was included but its dispatch failed with a pallet error, e.g. pallet `Iota`, error
	/// `NotValidator`. `docs` is the error's documentation from the metadata.
	#[error("{pallet}::{name} ({docs})")]
	Pallet {
		/// Pallet name in the runtime (`Iota`, `Balances`, ...).
		pallet: String,
		/// Error variant name (`NotValidator`, `InsufficientBalance`, ...).
		name: String,
		/// The error's doc comment.
		docs: String,
	},
	/// The dispatch failed with a non-pallet error (`BadOrigin`, a token or arithmetic error, ...).
	#[error("dispatch failed: {0}")]
	Dispatch(String),
	/// No node answered at `url`.
	#[error("cannot connect to {url}: {source}")]
	Connect {
		/// The endpoint tried.
		url: String,
		/// Why it failed.
		#[source]
		source: Box<subxt::Error>,
	},
	/// A secret URI could not be parsed or turned into a key.
	#[error("invalid secret key URI: {0}")]
	InvalidSecretUri(String),
	/// A key file could not be read.
	#[error("cannot read key file {path}: {source}")]
	KeyFile {
		/// The file.
		path: PathBuf,
		/// The I/O error.
		#[source]
		source: std::io::Error,
	},
	/// The node's watch of a submitted extrinsic ended without a block ([`crate::Pending::wait`]).
	#[error("extrinsic {kind}: {message}")]
	NotIncluded {
		/// How the watch ended.
		kind: NotIncluded,
		/// The node's message.
		message: String,
	},
	/// Anything else from subxt (RPC, decoding, metadata mismatch, ...).
	#[error(transparent)]
	Subxt(Box<subxt::Error>),
}

/// How a submitted extrinsic's watch ended without a block (the transaction pool's final statuses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotIncluded {
	/// The pool found it invalid (a stale nonce, a failed signed extension, a call the runtime's
	/// validation refuses): the node's verdict on it.
	Invalid,
	/// The pool dropped it (full, or replaced): it may still be in another node's pool.
	Dropped,
	/// The node failed while handling it.
	NodeError,
	/// The node closed the status subscription (its connection went, or the node stopped).
	WatchLost,
}

impl std::fmt::Display for NotIncluded {
	fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
		f.write_str(match self {
			NotIncluded::Invalid => "invalid",
			NotIncluded::Dropped => "dropped",
			NotIncluded::NodeError => "failed in the node",
			NotIncluded::WatchLost => "watch lost",
		})
	}
}

impl Error {
	/// The pallet error name if this is a pallet error (`Some("NotValidator")`).
	pub fn pallet_error(&self) -> Option<&str> {
		match self {
			Error::Pallet { name, .. } => Some(name),
			_ => None,
		}
	}

	/// Whether the chain gave its verdict on a submitted call and refused it: its dispatch failed in a
	/// block ([`Error::Pallet`], [`Error::Dispatch`]) or the pool found it invalid. Anything else (a
	/// connection or watch lost, a dropped extrinsic) leaves the call's fate unknown: it may yet land,
	/// or never have reached a node, and sending it again is the caller's remedy.
	pub fn is_refusal(&self) -> bool {
		self.ran_in_block() || matches!(self, Error::NotIncluded { kind: NotIncluded::Invalid, .. })
	}

	/// Whether a submitted call ran in a block and its dispatch failed ([`Error::Pallet`],
	/// [`Error::Dispatch`]), as opposed to a call that never reached a block.
	pub fn ran_in_block(&self) -> bool {
		matches!(self, Error::Pallet { .. } | Error::Dispatch(_))
	}

	/// Whether the connection to the node failed ([`Error::Connect`], or an RPC call lost in transport):
	/// a submission that failed this way may or may not have reached the node.
	pub fn is_transport(&self) -> bool {
		match self {
			Error::Connect { .. } => true,
			Error::Subxt(e) => crate::client::is_transport_error(e),
			_ => false,
		}
	}

	/// Turn a subxt dispatch error into our error, resolving pallet errors to their names.
	pub(crate) fn from_dispatch(e: subxt::error::DispatchError) -> Self {
		match e {
			subxt::error::DispatchError::Module(m) => match m.details() {
				Ok(d) => Error::Pallet {
					pallet: d.pallet.name().to_string(),
					name: d.variant.name.clone(),
					docs: d.variant.docs.join(" "),
				},
				Err(_) => Error::Dispatch(m.details_string()),
			},
			other => Error::Dispatch(other.to_string()),
		}
	}
}

impl From<subxt::Error> for Error {
	fn from(e: subxt::Error) -> Self {
		match e {
			subxt::Error::Runtime(d) => Error::from_dispatch(d),
			other => Error::Subxt(Box::new(other)),
		}
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	#[test]
	fn only_the_chains_verdicts_are_refusals() {
		let not_included = |kind| Error::NotIncluded { kind, message: "m".into() };
		let pallet =
			Error::Pallet { pallet: "Iota".into(), name: "WrongPhase".into(), docs: String::new() };
		assert!(pallet.is_refusal());
		assert!(Error::Dispatch("BadOrigin".into()).is_refusal());
		assert!(not_included(NotIncluded::Invalid).is_refusal());
		assert!(pallet.ran_in_block() && !not_included(NotIncluded::Invalid).ran_in_block());
		for kind in [NotIncluded::Dropped, NotIncluded::NodeError, NotIncluded::WatchLost] {
			assert!(!not_included(kind).is_refusal(), "{kind}");
		}
		let lost = Error::from(subxt::Error::Other("connection reset".into()));
		assert!(!lost.is_refusal());
		assert_eq!(not_included(NotIncluded::WatchLost).to_string(), "extrinsic watch lost: m");
	}
}
