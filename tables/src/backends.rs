//! The object stores behind URIs: S3 (and S3-compatible servers) through `object_store`'s
//! S3 client (its `aws-base` and `reqwest` features, with `ring` for TLS and signing), HDFS
//! through `hdfs-native-object-store` (the `hdfs` feature), and the local file system. A store
//! is built from the URI's scheme and authority, then the job's `[storage]` settings (which
//! `crate::Io` carries).

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::multipart::MultipartStore;
use object_store::{BackoffConfig, ClientConfigKey, ObjectStore, RetryConfig};
use schemas::StorageConfig;
use schemas::job::storage::Staging;

use crate::error::Error;

/// A store, its multipart uploads where it has them, and whether a run's parts wait for the
/// commit as uploads (see `crate::staging`; the uploads of a store that stages by copies are
/// still there to abort those of a dead run that staged otherwise).
pub(crate) struct Store {
    pub objects: Arc<dyn ObjectStore>,
    pub multipart: Option<Arc<dyn MultipartStore>>,
    pub stage_uploads: bool,
}

/// The store serving `scheme://authority` (`uri` names it in errors).
pub(crate) fn open(uri: &str, scheme: &str, authority: &str, storage: &StorageConfig) -> Result<Store, Error> {
    let opened = |source| Error::Store { what: format!("cannot open {}", schemas::redact(uri)), source };
    match scheme {
        "s3" => {
            let s3 = Arc::new(s3_builder(storage).with_bucket_name(authority).build().map_err(opened)?);
            let multipart = Some(s3.clone() as Arc<dyn MultipartStore>);
            Ok(Store { objects: s3, multipart, stage_uploads: storage.staging == Staging::Multipart })
        }
        "hdfs" | "viewfs" => {
            let objects = Arc::from(hdfs_store(uri, scheme, authority, storage)?);
            Ok(Store { objects, multipart: None, stage_uploads: false })
        }
        _ => {
            let url = url::Url::parse(&format!("{scheme}://{authority}/"))
                .map_err(|source| Error::Uri { uri: schemas::redact(uri), source })?;
            let objects = Arc::from(object_store::parse_url(&url).map_err(opened)?.0);
            Ok(Store { objects, multipart: None, stage_uploads: false })
        }
    }
}

/// The process's TLS cryptography: `ring`'s, installed once before the first client is built.
/// The S3 client's HTTPS (rustls) and its request signing both use `ring`, whose C and assembly
/// build in seconds, instead of the default `aws-lc-rs`, whose CMake build of AWS-LC took
/// 99 s of every cold build (BENCHMARKS.md, section 10). A provider already installed by the
/// embedding program is kept.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// An S3 client: the standard AWS environment (credentials, region, endpoint, allow_http),
/// then what `[storage]` sets.
fn s3_builder(storage: &StorageConfig) -> AmazonS3Builder {
    install_tls_provider();
    let mut builder = AmazonS3Builder::from_env();
    if let Some(endpoint) = &storage.endpoint {
        builder = builder.with_endpoint(endpoint);
    }
    if let Some(region) = &storage.region {
        builder = builder.with_region(region);
    }
    if let Some(allow) = storage.allow_http {
        builder = builder.with_allow_http(allow);
    }
    let retry = RetryConfig {
        backoff: BackoffConfig::default(),
        max_retries: storage.retries,
        retry_timeout: Duration::from_secs_f64(storage.retry_timeout_s),
    };
    // Set key by key: `with_client_options` would drop what the environment set (allow_http).
    let millis = |seconds: f64| format!("{}ms", (seconds * 1000.0).round() as u64);
    builder
        .with_retry(retry)
        .with_config(AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout), millis(storage.connect_timeout_s))
        .with_config(AmazonS3ConfigKey::Client(ClientConfigKey::Timeout), millis(storage.timeout_s))
}

/// An HDFS client for the namenode (or name service) `authority`: the Hadoop configuration
/// files hdfs-native reads (`HADOOP_CONF_DIR`), then `[storage]` retries (failover attempts)
/// and request timeout (socket timeout).
#[cfg(feature = "hdfs")]
fn hdfs_store(
    uri: &str,
    scheme: &str,
    authority: &str,
    storage: &StorageConfig,
) -> Result<Box<dyn ObjectStore>, Error> {
    let settings = [
        ("dfs.client.failover.max.attempts", storage.retries.to_string()),
        ("dfs.client.socket-timeout", ((storage.timeout_s * 1000.0).round() as u64).to_string()),
    ];
    let store = hdfs_native_object_store::HdfsObjectStoreBuilder::new()
        .with_url(format!("{scheme}://{authority}"))
        .with_config(settings)
        .build()
        .map_err(|source| Error::Store { what: format!("cannot open {}", schemas::redact(uri)), source })?;
    Ok(Box::new(store))
}

#[cfg(not(feature = "hdfs"))]
fn hdfs_store(
    uri: &str,
    _scheme: &str,
    _authority: &str,
    _storage: &StorageConfig,
) -> Result<Box<dyn ObjectStore>, Error> {
    Err(Error::Usage(format!(
        "{}: this build cannot read HDFS; build with `cargo build --release --features hdfs`",
        schemas::redact(uri)
    )))
}
