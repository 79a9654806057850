//! sr25519 signers from secret URIs or key files.

use crate::{AccountId, Error};
use std::{path::Path, str::FromStr};
use subxt_signer::{sr25519::Keypair, SecretUri};

/// An sr25519 key that signs extrinsics.
#[derive(Clone)]
pub struct Signer {
	keypair: Keypair,
}

impl std::fmt::Debug for Signer {
	fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
		// Never print the secret.
		f.debug_struct("Signer").field("account", &self.account_id()).finish()
	}
}

impl Signer {
	/// A key from a secret URI: `//Alice` (a dev key), `<mnemonic>//hard/soft///password`, or a `0x` hex
	/// seed. Errors with [`Error::InvalidSecretUri`] (the URI itself is not echoed).
	pub fn from_uri(uri: &str) -> Result<Self, Error> {
		let uri =
			SecretUri::from_str(uri.trim()).map_err(|e| Error::InvalidSecretUri(e.to_string()))?;
		let keypair =
			Keypair::from_uri(&uri).map_err(|e| Error::InvalidSecretUri(e.to_string()))?;
		Ok(Self { keypair })
	}

	/// A key from a file holding one secret URI (as [`Signer::from_uri`]; surrounding whitespace is
	/// ignored). Errors with [`Error::KeyFile`] when unreadable, [`Error::InvalidSecretUri`] when invalid.
	pub fn from_file(path: impl AsRef<Path>) -> Result<Self, Error> {
		let path = path.as_ref();
		let text = std::fs::read_to_string(path)
			.map_err(|source| Error::KeyFile { path: path.to_path_buf(), source })?;
		Self::from_uri(&text)
	}

	/// The well-known dev key `//name` (`alice`, `bob`, ... as in `--alice`).
	pub fn dev(name: &str) -> Result<Self, Error> {
		let mut cap = name.to_string();
		if let Some(first) = cap.get_mut(0..1) {
			first.make_ascii_uppercase();
		}
		Self::from_uri(&format!("//{cap}"))
	}

	/// The account this key signs for.
	pub fn account_id(&self) -> AccountId {
		self.keypair.public_key().to_account_id()
	}

	/// The underlying subxt keypair.
	pub fn keypair(&self) -> &Keypair {
		&self.keypair
	}
}

#[cfg(test)]
mod tests {
	use super::*;

	// Alice's well-known sr25519 public key (subkey inspect //Alice).
	const ALICE: &str = "d43593c715fdd31c61141abd04a99fd6822c8558854ccde39a5684e7a56da27d";

	fn hex(a: &AccountId) -> String {
		a.0.iter().map(|b| format!("{b:02x}")).collect()
	}

	#[test]
	fn dev_uri_gives_the_well_known_key() {
		assert_eq!(hex(&Signer::from_uri("//Alice").unwrap().account_id()), ALICE);
		assert_eq!(hex(&Signer::dev("alice").unwrap().account_id()), ALICE);
		assert_ne!(
			Signer::dev("bob").unwrap().account_id(),
			Signer::dev("alice").unwrap().account_id()
		);
	}

	#[test]
	fn key_file_holds_a_uri() {
		let dir = tempfile::tempdir().unwrap();
		let path = dir.path().join("key");
		std::fs::write(&path, "//Alice\n").unwrap();
		assert_eq!(hex(&Signer::from_file(&path).unwrap().account_id()), ALICE);
	}

	#[test]
	fn bad_inputs_are_typed_errors() {
		assert!(matches!(Signer::from_uri("not a phrase at all"), Err(Error::InvalidSecretUri(_))));
		assert!(matches!(Signer::from_file("/nonexistent/iota/key"), Err(Error::KeyFile { .. })));
		// The debug form never shows the secret.
		let dbg = format!("{:?}", Signer::dev("alice").unwrap());
		assert!(!dbg.contains("Alice") && dbg.contains("Signer"));
	}
}
