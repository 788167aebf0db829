//! Telling the job's report page (`report.html`, see the `report` crate) from a file someone
//! else put there: only a page of this project is ever replaced or removed.

use crate::error::Error;
use crate::names::{REPORT_MAX_BYTES, REPORT_SIGNATURE};
use crate::place::Place;

/// Whether `place` is a report of this project: a regular file, not larger than any report,
/// that starts with [`REPORT_SIGNATURE`]. Anything else is not read (a FIFO would block).
pub async fn is_report(place: &Place) -> Result<bool, Error> {
    if place.is_special_local_file() {
        return Ok(false);
    }
    Ok(match place.size().await? {
        Some(size) if size <= REPORT_MAX_BYTES => {
            place.get().await?.is_some_and(|bytes| bytes.starts_with(REPORT_SIGNATURE.as_bytes()))
        }
        _ => false,
    })
}
