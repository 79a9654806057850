//! Persistence (docs/design.md §7: the orchestrator restarts without losing work): an embedded SQLite database
//! holding an append-only log of accepted [`Event`]s (JSON) and the nonce table. Every accepted request
//! writes its events and its nonce in one transaction **before** it is acknowledged; on start the log is
//! replayed through [`crate::state::State::apply`] and the nonces still inside the window are reloaded.
//!
//! WAL journal with `synchronous = NORMAL`: a committed transaction survives the process being killed
//! (kill -9); a power loss may lose the last transactions, never corrupt the database.

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension};

use crate::state::Event;

/// A database failure.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
	/// SQLite failed.
	#[error("sqlite: {0}")]
	Sqlite(#[from] rusqlite::Error),
	/// A stored event does not parse (written by another version?).
	#[error("event {id} does not parse: {reason}")]
	Corrupt {
		/// Row id.
		id: i64,
		/// Why.
		reason: String,
	},
	/// The database belongs to another run.
	#[error("database is for run {found:?}, not {expected:?}")]
	OtherRun {
		/// Run in the database.
		found: String,
		/// Run asked for.
		expected: String,
	},
}

/// The orchestrator database.
pub struct Db {
	conn: Connection,
}

impl Db {
	/// Opens (creating if missing) the database at `path` for run `run`.
	///
	/// # Errors
	/// [`DbError::Sqlite`], [`DbError::OtherRun`].
	pub fn open(path: &Path, run: &str) -> Result<Self, DbError> {
		Self::init(Connection::open(path)?, run)
	}

	/// An in-memory database (tests, benches without durability).
	///
	/// # Errors
	/// [`DbError::Sqlite`].
	pub fn in_memory(run: &str) -> Result<Self, DbError> {
		Self::init(Connection::open_in_memory()?, run)
	}

	fn init(conn: Connection, run: &str) -> Result<Self, DbError> {
		conn.pragma_update(None, "journal_mode", "WAL")?;
		conn.pragma_update(None, "synchronous", "NORMAL")?;
		conn.execute_batch(
			"CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
			 CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY AUTOINCREMENT, json TEXT NOT NULL);
			 CREATE TABLE IF NOT EXISTS nonces (account BLOB NOT NULL, nonce INTEGER NOT NULL, ts INTEGER NOT NULL,
			   PRIMARY KEY (account, nonce));
			 CREATE INDEX IF NOT EXISTS nonces_ts ON nonces (ts);",
		)?;
		let found: Option<String> = conn
			.query_row("SELECT v FROM meta WHERE k = 'run'", [], |r| r.get(0))
			.optional()?;
		match found {
			Some(f) if f != run => {
				return Err(DbError::OtherRun { found: f, expected: run.to_string() })
			},
			Some(_) => {},
			None => {
				conn.execute("INSERT INTO meta (k, v) VALUES ('run', ?1)", params![run])?;
			},
		}
		Ok(Self { conn })
	}

	/// Every event in order.
	///
	/// # Errors
	/// [`DbError::Sqlite`], [`DbError::Corrupt`].
	pub fn events(&self) -> Result<Vec<Event>, DbError> {
		let mut stmt = self.conn.prepare("SELECT id, json FROM events ORDER BY id")?;
		let rows = stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?;
		let mut out = Vec::new();
		for row in rows {
			let (id, json) = row?;
			out.push(
				serde_json::from_str(&json)
					.map_err(|e| DbError::Corrupt { id, reason: e.to_string() })?,
			);
		}
		Ok(out)
	}

	/// Nonces with a timestamp at or after `since_ms`: (account, nonce, timestamp).
	///
	/// # Errors
	/// [`DbError::Sqlite`].
	pub fn nonces(&self, since_ms: u64) -> Result<Vec<([u8; 32], u64, u64)>, DbError> {
		let mut stmt = self.conn.prepare("SELECT account, nonce, ts FROM nonces WHERE ts >= ?1")?;
		let rows = stmt.query_map(params![since_ms as i64], |r| {
			let a: Vec<u8> = r.get(0)?;
			Ok((a, r.get::<_, i64>(1)? as u64, r.get::<_, i64>(2)? as u64))
		})?;
		let mut out = Vec::new();
		for row in rows {
			let (a, n, ts) = row?;
			if let Ok(acc) = <[u8; 32]>::try_from(a.as_slice()) {
				out.push((acc, n, ts));
			}
		}
		Ok(out)
	}

	/// Records a request: its nonce (if any) and its events, in one transaction.
	///
	/// # Errors
	/// [`DbError::Sqlite`] (nothing is written then).
	pub fn record(
		&mut self,
		nonce: Option<([u8; 32], u64, u64)>,
		events: &[Event],
	) -> Result<(), DbError> {
		let tx = self.conn.transaction()?;
		if let Some((acc, n, ts)) = nonce {
			tx.prepare_cached(
				"INSERT OR REPLACE INTO nonces (account, nonce, ts) VALUES (?1, ?2, ?3)",
			)?
			.execute(params![&acc[..], n as i64, ts as i64])?;
		}
		{
			let mut stmt = tx.prepare_cached("INSERT INTO events (json) VALUES (?1)")?;
			for e in events {
				let json = serde_json::to_string(e)
					.map_err(|e| DbError::Corrupt { id: -1, reason: e.to_string() })?;
				stmt.execute(params![json])?;
			}
		}
		tx.commit()?;
		Ok(())
	}

	/// Deletes nonces older than `before_ms`.
	///
	/// # Errors
	/// [`DbError::Sqlite`].
	pub fn prune_nonces(&self, before_ms: u64) -> Result<usize, DbError> {
		Ok(self
			.conn
			.execute("DELETE FROM nonces WHERE ts < ?1", params![before_ms as i64])?)
	}
}

#[cfg(test)]
mod tests {
	use super::*;
	use crate::state::Event;

	#[test]
	fn events_and_nonces_survive_reopen_and_runs_do_not_mix() {
		let dir = tempfile::tempdir().unwrap();
		let path = dir.path().join("o.db");
		{
			let mut db = Db::open(&path, "r1").unwrap();
			db.record(
				Some(([1; 32], 5, 1_000)),
				&[Event::LeaseReleased { lease: 3 }, Event::LeaseExpired { lease: 4 }],
			)
			.unwrap();
			db.record(Some(([1; 32], 6, 50_000)), &[]).unwrap();
		}
		let db = Db::open(&path, "r1").unwrap();
		assert_eq!(
			db.events().unwrap(),
			vec![Event::LeaseReleased { lease: 3 }, Event::LeaseExpired { lease: 4 }]
		);
		assert_eq!(db.nonces(0).unwrap().len(), 2);
		assert_eq!(db.nonces(2_000).unwrap(), vec![([1; 32], 6, 50_000)]);
		assert_eq!(db.prune_nonces(2_000).unwrap(), 1);
		assert_eq!(db.nonces(0).unwrap().len(), 1);
		drop(db);
		assert!(matches!(Db::open(&path, "r2"), Err(DbError::OtherRun { .. })));
	}
}
