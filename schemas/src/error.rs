//! Bad input, located: every error names the file, and where it can, the row and column.

use std::fmt;

/// Where in the input a problem was found. Rows are 0-based within the file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub struct Location {
    pub file: String,
    pub row: Option<u64>,
    pub column: Option<String>,
}

impl Location {
    pub fn file(file: impl Into<String>) -> Self {
        Location { file: file.into(), row: None, column: None }
    }
    pub fn row(mut self, row: u64) -> Self {
        self.row = Some(row);
        self
    }
    pub fn column(mut self, column: impl Into<String>) -> Self {
        self.column = Some(column.into());
        self
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(row) = self.row {
            write!(f, ", row {row}")?;
        }
        if let Some(column) = &self.column {
            write!(f, ", column \"{column}\"")?;
        }
        Ok(())
    }
}

/// One bad input: what is wrong and where.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[error("bad input at {at}: {problem}")]
pub struct BadInput {
    pub at: Location,
    pub problem: String,
}

impl BadInput {
    pub fn new(at: Location, problem: impl Into<String>) -> Self {
        BadInput { at, problem: problem.into() }
    }
}
