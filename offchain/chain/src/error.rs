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
	/// Anything else from subxt (RPC, decoding, metadata mismatch, ...).
	#[error(transparent)]
	Subxt(Box<subxt::Error>),
}

impl Error {
	/// The pallet error name if this is a pallet error (`Some("NotValidator")`).
	pub fn pallet_error(&self) -> Option<&str> {
		match self {
			Error::Pallet { name, .. } => Some(name),
			_ => None,
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
