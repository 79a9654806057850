//! Credentials from the standard AWS environment (`AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`), the way
//! a production orchestrator is configured. Its own test binary: it sets process environment variables
//! before any runtime thread exists.

use bytes::Bytes;
use iota_storage::{
	Credentials, EmbeddedConfig, EmbeddedS3, ObjectStore, StorageError, StoreConfig,
};

#[test]
fn credentials_come_from_the_aws_environment() {
	// Set before the runtime starts, while this test is the only thread that reads the environment.
	std::env::set_var("AWS_ACCESS_KEY_ID", "env-key");
	std::env::set_var("AWS_SECRET_ACCESS_KEY", "env-secret");
	std::env::remove_var("AWS_SESSION_TOKEN");
	std::env::remove_var("AWS_PROFILE");
	let rt = tokio::runtime::Builder::new_multi_thread()
		.worker_threads(2)
		.enable_all()
		.build()
		.unwrap();
	rt.block_on(async {
		let dir = tempfile::tempdir().unwrap();
		let mut ec = EmbeddedConfig::new(dir.path());
		ec.access_key = "env-key".into();
		ec.secret_key = "env-secret".into();
		let server = EmbeddedS3::start(ec).await.unwrap();

		let mut c = StoreConfig::aws("us-east-1", "iota");
		c.endpoint = Some(server.endpoint());
		c.force_path_style = true;
		assert_eq!(c.credentials, Credentials::FromEnvironment);
		let store = ObjectStore::connect(c.clone()).await.unwrap();
		let r = store
			.put("v1/runs/r/orchestrator/reports/env", Bytes::from_static(b"from env"))
			.await
			.unwrap();
		assert_eq!(&store.get(&r.key, &r.hash).await.unwrap()[..], b"from env");

		// The environment is really what was used: explicit wrong keys are refused by the same server.
		c.credentials = Credentials::Static {
			access_key: "env-key".into(),
			secret_key: "not-the-env-secret".into(),
		};
		let wrong = ObjectStore::connect(c).await.unwrap();
		assert!(matches!(
			wrong.get(&r.key, &r.hash).await,
			Err(StorageError::InvalidCredentials { .. })
		));
		server.shutdown().await;
	});
}
