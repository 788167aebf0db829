//! The `[storage]` table: settings of the S3 client, over the standard AWS environment
//! (`AWS_ENDPOINT`, `AWS_REGION`, `AWS_ALLOW_HTTP`, credentials). Credentials are never taken
//! from a job file: it would put secrets in files that get copied and logged.

use super::JobError;

use serde::{Deserialize, Serialize};

/// Retries of a failed request when a job sets none.
pub const DEFAULT_RETRIES: usize = 5;
/// Seconds after a request's first attempt past which no retry starts, when a job sets none.
pub const DEFAULT_RETRY_TIMEOUT_S: f64 = 120.0;
/// Seconds to wait for a connection to the store, when a job sets none.
pub const DEFAULT_CONNECT_TIMEOUT_S: f64 = 5.0;
/// Seconds one request may take, body included, when a job sets none.
pub const DEFAULT_TIMEOUT_S: f64 = 60.0;
/// How a run's parts wait for its commit on S3, when a job sets none.
pub const DEFAULT_STAGING: Staging = Staging::Multipart;

/// How a run's parts wait for its commit on an object store with multipart uploads (S3 and
/// S3-compatible stores); a local disk and HDFS rename, whatever this says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Staging {
    /// Each part is a multipart upload to its own key, completed at the commit: the part
    /// appears whole at once and no byte is copied.
    Multipart,
    /// Each part is written whole under a hidden key and copied into place at the commit (a
    /// server-side copy, then a delete): for stores that keep incomplete uploads from being
    /// completed by another client.
    Copy,
}

/// The `[storage]` table. Every key is optional: a missing one takes the `Default` below.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageConfig {
    /// An S3-compatible endpoint (MinIO, Ceph, moto): `http://host:port`.
    pub endpoint: Option<String>,
    pub region: Option<String>,
    /// Allow a plain-HTTP endpoint.
    pub allow_http: Option<bool>,
    /// Retries of a failed request (timeouts, connection errors, 5xx), with exponential
    /// backoff from 100 ms.
    pub retries: usize,
    /// No retry starts after this many seconds since a request's first attempt.
    pub retry_timeout_s: f64,
    /// Seconds to wait for a connection.
    pub connect_timeout_s: f64,
    /// Seconds one request may take, its body included.
    pub timeout_s: f64,
    /// How a run's parts wait for its commit (S3).
    pub staging: Staging,
}

impl Default for StorageConfig {
    /// The environment decides endpoint, region and plain HTTP; the rest are the constants above.
    fn default() -> Self {
        StorageConfig {
            endpoint: None,
            region: None,
            allow_http: None,
            retries: DEFAULT_RETRIES,
            retry_timeout_s: DEFAULT_RETRY_TIMEOUT_S,
            connect_timeout_s: DEFAULT_CONNECT_TIMEOUT_S,
            timeout_s: DEFAULT_TIMEOUT_S,
            staging: DEFAULT_STAGING,
        }
    }
}

impl StorageConfig {
    pub fn check(&self) -> Result<(), JobError> {
        let times = [self.retry_timeout_s, self.connect_timeout_s, self.timeout_s];
        if times.iter().any(|t| !(t.is_finite() && *t > 0.0)) {
            return Err(JobError::invalid(
                "storage",
                "retry_timeout_s, connect_timeout_s and timeout_s must be positive",
            ));
        }
        Ok(())
    }
}
