//! Reads GraphFlat's record parts (`schemas::Record`, decoded by column name) through
//! `object_store`, local paths and URIs alike, checking each record against the set's metadata
//! and the job: errors name the part file, row and column.
//!
//! A worker trains on the records whose root it owns (`cluster::owner_key`), whichever part
//! holds them, sorted by root: what a worker sees depends on the records alone, not on how many
//! workers flattened them.

use std::sync::Arc;

use schemas::record::{self, FlattenMeta};
use schemas::{BadInput, Label, LabelKind, Location, Record, Split};
use tables::{Io, ParquetFile, Place};

use crate::error::Error;

/// A record set's part files (in name order) and its flatten settings.
#[derive(Clone)]
pub struct RecordSet {
    io: Arc<Io>,
    pub place: Place,
    pub files: Vec<ParquetFile>,
    pub meta: FlattenMeta,
}

/// Which records a read takes: a split filter and a share of the roots.
#[derive(Debug, Clone, Copy)]
pub struct Share {
    pub worker: usize,
    pub peers: usize,
}

impl Share {
    pub const ALL: Share = Share { worker: 0, peers: 1 };

    pub fn owns(&self, root: i64) -> bool {
        cluster::owner_key(root) % self.peers as u64 == self.worker as u64
    }
}

impl RecordSet {
    /// Opens a finished record set (a local path or a URI): it must hold `_SUCCESS`.
    pub fn open(uri: &str) -> Result<Self, Error> {
        let io = Io::new()?;
        let place = Place::parse(uri)?;
        if !io.block_on(place.child(schemas::SUCCESS_MARKER).exists()) {
            return Err(tables::Error::NoInput(format!(
                "{}: no {} marker; the flatten job that writes it did not finish",
                place.shown(),
                schemas::SUCCESS_MARKER
            ))
            .into());
        }
        let files = tables::open_table(&io, &place)?;
        let first = &files[0];
        let meta = FlattenMeta::from_metadata(first.arrow.schema().metadata()).ok_or_else(|| {
            tables::Error::NoInput(format!("{}: not a GraphFlat record table (no flatten metadata)", first.name()))
        })?;
        Ok(RecordSet { io, place, files, meta })
    }

    /// Every (file, row group), numbered alike on every worker.
    pub fn units(&self) -> Vec<(usize, usize)> {
        tables::units(&self.files, 0, 1)
    }

    /// The records of `share` whose split passes `keep`, sorted by root. Each is checked: its
    /// features have the set's length, its label the set's kind, a class id is not negative and
    /// (with `classes`) below it.
    pub fn read(&self, share: Share, classes: Option<usize>, keep: impl Fn(Option<Split>) -> bool) -> Result<Vec<Record>, Error> {
        let mut out = Vec::new();
        for (f, rg) in self.units() {
            let file = &self.files[f];
            let name = file.name();
            let mut failure = None;
            file.read_row_group(&self.io, rg, |batch, first_row| {
                let kept = |root: i64, split: Option<Split>| share.owns(root) && keep(split);
                let result = record::from_batch_where(&batch, &name, first_row, kept).and_then(|records| {
                    for (row, r) in records {
                        self.check(&r, classes, &name, row)?;
                        out.push(r);
                    }
                    Ok(())
                });
                if let Err(e) = result {
                    failure.get_or_insert(e);
                }
                Ok(())
            })?;
            if let Some(e) = failure {
                return Err(e.into());
            }
        }
        out.sort_unstable_by_key(|r| r.root);
        Ok(out)
    }

    fn check(&self, r: &Record, classes: Option<usize>, file: &str, row: u64) -> Result<(), BadInput> {
        let at = |column: &str| Location::file(file).row(row).column(column);
        if r.dim() != self.meta.feature_dim {
            return Err(BadInput::new(at(record::NODE_FEATURES), format!("root {}: {} features per node, but the set's metadata says {}", r.root, r.dim(), self.meta.feature_dim)));
        }
        match (&r.label, self.meta.label) {
            (None, _) => Ok(()),
            (Some(Label::Class(c)), LabelKind::Class) if *c < 0 => Err(BadInput::new(at(record::LABEL), format!("root {}: class {c} is negative", r.root))),
            (Some(Label::Class(c)), LabelKind::Class) => match classes {
                Some(n) if *c as u64 >= n as u64 => Err(BadInput::new(at(record::LABEL), format!("root {}: class {c} is not below classes = {n}", r.root))),
                _ => Ok(()),
            },
            (Some(Label::Targets(t)), LabelKind::Targets(n)) if t.len() == n => Ok(()),
            (Some(label), kind) => Err(BadInput::new(at(record::LABEL), format!("root {}: a label of {} where the set's metadata says {}", r.root, label_text(label), kind.to_text()))),
        }
    }
}

fn label_text(label: &Label) -> String {
    match label {
        Label::Class(_) => "class".into(),
        Label::Targets(t) => format!("{} targets", t.len()),
    }
}
