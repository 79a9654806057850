//! # iota-storage
//!
//! The object layer of iota-rs. Everything large in a training run (activations, activation gradients,
//! gradient submissions, reduced butterfly shards, stage checkpoints, pathway logs, run reports) lives in
//! one S3 bucket; only BLAKE3 hashes and small records go on chain (docs/design.md §1, §3). Production uses AWS S3,
//! Cloudflare R2 or MinIO; a developer machine uses the embedded server in this crate, so there is
//! nothing to install.
//!
//! ## Who holds what
//!
//! - The **orchestrator** holds the bucket credentials and an [`ObjectStore`]. It never forwards them:
//!   it signs a [`PresignedRequest`] (GET or PUT, one key, short expiry) for each object a miner or
//!   validator may touch, and only for keys that [`keys::writer`] says that miner owns (docs/design.md §7).
//! - **Miners and validators** hold no credentials. They perform presigned requests with
//!   [`PresignedHttp`] and report or check the [`ContentHash`] of what they moved.
//!
//! ## The pieces
//!
//! | concept | file | what it does |
//! |---|---|---|
//! | key layout | [`keys`] | the only place keys are spelled; versioned (`v1/...`), scoped per miner |
//! | content hash | [`hash`] | BLAKE3 of every object, computed on write, checked on read |
//! | client | [`client`] | put/get/head/list/delete, multipart above a threshold, ranged GET, presigning |
//! | presigned URLs | [`presigned`] | the serializable signed request and the reqwest helper that performs it |
//! | settings | [`config`] | endpoint, region, bucket, credentials, limits, timeouts, retries |
//! | errors | [`error`] | one typed variant per failure a caller must handle differently |
//! | embedded server | [`embedded`] | an S3 endpoint over a local directory, started in-process |
//!
//! ## Guarantees
//!
//! - **Nothing partial is read as complete.** A full read returns bytes only if they hash to the hash the
//!   caller expected ([`StorageError::HashMismatch`] otherwise) and all announced bytes arrived
//!   ([`StorageError::Truncated`]). A failed multipart upload is aborted, so no parts linger and no object
//!   appears ([`StorageError::MultipartFailed`]).
//! - **Bounded memory.** Reads and writes over `max_object_size` bytes are refused
//!   ([`StorageError::TooLarge`]) before the bytes are held.
//! - **Retries** with exponential backoff on throttling, 5xx, timeouts and connection errors only
//!   ([`RetryPolicy`]); missing objects, refused credentials and expired URLs fail at once, each with its
//!   own variant ([`StorageError::NotFound`], [`StorageError::InvalidCredentials`],
//!   [`StorageError::UrlExpired`]).
//!
//! ## Using it locally
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use iota_storage::{keys, ContentHash, EmbeddedConfig, EmbeddedS3, ObjectStore, PresignedHttp};
//! use std::time::Duration;
//!
//! let server = EmbeddedS3::start(EmbeddedConfig::new("/tmp/iota-s3")).await?;
//! let store = ObjectStore::connect(server.store_config()).await?;
//! let (run, miner) = (keys::Id::new("run-1")?, keys::Id::new("miner-a")?);
//! let key = keys::gradient_submission(&run, 0, 1, &miner);
//!
//! // Orchestrator side: sign a PUT for the miner's key. Miner side: upload, report the hash.
//! let url = store.presign_put(&key, Duration::from_secs(60)).await?;
//! let http = PresignedHttp::from_config(store.config())?;
//! let hash: ContentHash = http.put(&url, bytes::Bytes::from_static(b"gradient bytes")).await?;
//! // Anyone: read it back, checked against the hash.
//! let data = store.get(&key, &hash).await?;
//! # drop(data); server.shutdown().await; Ok(()) }
//! ```
//!
//! Or run the server on its own: `cargo run -p iota-storage --bin iota-s3 -- --dir ./s3-data`.

pub mod client;
pub mod config;
pub mod embedded;
pub mod error;
pub mod hash;
pub mod keys;
pub mod presigned;

pub use client::{ObjectMeta, ObjectRef, ObjectStore, ObjectSummary};
pub use config::{retry, Credentials, RetryPolicy, StoreConfig, MIB};
pub use embedded::{EmbeddedConfig, EmbeddedError, EmbeddedS3};
pub use error::{Result, StorageError};
pub use hash::ContentHash;
pub use presigned::{Method, PresignedHttp, PresignedRequest};
