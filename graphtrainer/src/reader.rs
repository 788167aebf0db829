//! Reads GraphFlat's record parts (`schemas::Record`, decoded by column name) through
//! `object_store`, local paths and URIs alike, one row group (a *unit*) at a time: nothing here
//! holds more than one row group's records. Every record is checked against the set's metadata
//! and the job; errors name the part file, row and column.
//!
//! Two reads per unit:
//! - [`RecordSet::count`] fetches only the root, split and label columns (a link record set's
//!   split column): what the plan needs (how many records of each split a unit holds, the
//!   largest class) and the label checks;
//! - [`RecordSet::read`] decodes the node records of one [`Pass`] in full, and
//!   [`RecordSet::read_links`] the link records (each endpoint checked as a node record);
//!   [`RecordSet::read_roots`], for a refresh of the control variates' histories, reads the
//!   root of every record besides.

use std::sync::Arc;

use arrow_array::RecordBatch;
use schemas::job::train::MAX_CLASSES;
use schemas::record::{self, FlattenMeta, LinkRecord, MetaError, Tag};
use schemas::{BadInput, Label, LabelKind, Location, Record, Split};
use tables::{Io, ParquetFile, Place};

use crate::error::Error;

/// A record set's part files (in name order) and its flatten settings.
#[derive(Clone)]
pub struct RecordSet {
    pub io: Arc<Io>,
    pub place: Place,
    pub files: Vec<ParquetFile>,
    pub meta: FlattenMeta,
    /// Whether records are read with their nodes' original strings (`node_keys`, in a graph
    /// keyed by strings): only a model with learned rows saves under them, and decoding a
    /// string per node costs an epoch a fifth of its time.
    pub keys: bool,
    /// Decode the records' `root_neighbors` (control variates read them; others skip the
    /// column, 8 bytes an in-edge).
    pub neighbors: bool,
}

/// The roots of a unit's records, as a refresh reads them ([`RecordSet::read_roots`]): ids,
/// feature vectors (row-major, the set's width) and in-degrees, in row order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Roots {
    pub ids: Vec<i64>,
    pub features: Vec<f32>,
    pub in_degrees: Vec<i64>,
}

/// One row group of one part file: the unit of reading, planning and caching.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Unit {
    pub file: usize,
    pub row_group: usize,
}

/// Which labeled records a read takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pass {
    /// Split `train`.
    Train,
    /// Splits `valid` and `test`.
    Evaluate,
}

impl Pass {
    pub fn takes(self, split: Option<Split>) -> bool {
        match self {
            Pass::Train => split == Some(Split::Train),
            Pass::Evaluate => matches!(split, Some(Split::Valid | Split::Test)),
        }
    }

    /// Whether the pass reads a node record of `split`, `labeled` or not: its labeled ones.
    pub fn reads(self, split: Option<Split>, labeled: bool) -> bool {
        labeled && self.takes(split)
    }
}

/// What a unit holds: labeled records (link records: records) per split, and the largest class
/// among them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Counts {
    pub train: u64,
    pub valid: u64,
    pub test: u64,
    /// The largest class id of a labeled record (0 without class labels).
    pub max_class: u64,
}

impl Counts {
    pub fn of(self, pass: Pass) -> u64 {
        match pass {
            Pass::Train => self.train,
            Pass::Evaluate => self.valid + self.test,
        }
    }

    pub fn add(&mut self, other: &Counts) {
        self.train += other.train;
        self.valid += other.valid;
        self.test += other.test;
        self.max_class = self.max_class.max(other.max_class);
    }
}

const TAG_COLUMNS: [&str; 3] = [record::ROOT_ID, record::SPLIT, record::LABEL];

impl RecordSet {
    /// Opens a finished record set (a local path or a URI) with the job's `io`: it must hold
    /// `_SUCCESS`.
    pub fn open(io: Arc<Io>, uri: &str) -> Result<Self, Error> {
        let place = io.place(uri)?;
        let marker = place.child(schemas::SUCCESS_MARKER);
        marker.refuse_special()?;
        if !io.block_on(marker.found())? {
            return Err(tables::Error::NoInput(format!(
                "{}: no {} marker; the flatten job that writes it did not finish",
                place.shown(),
                schemas::SUCCESS_MARKER
            ))
            .into());
        }
        let files = tables::open_table(&io, &place)?;
        let Some(first) = files.first() else {
            return Err(tables::Error::BadData(format!(
                "{}: a committed record set of no parts: nothing to learn",
                place.shown()
            ))
            .into());
        };
        let meta = FlattenMeta::read(first.arrow.schema().metadata()).map_err(|e| match e {
            MetaError::Missing => {
                tables::Error::NoInput(format!("{}: not a GraphFlat record table (no flatten metadata)", first.name()))
            }
            MetaError::Bad(key) => tables::Error::BadData(format!(
                "{}: the flatten metadata's {key} is missing or not a value GraphFlat writes",
                first.name()
            )),
        })?;
        // Every part holds the columns its metadata promises (the first part's is the set's).
        if let Some(file) = files
            .iter()
            .find(|f| f.arrow.schema().column_with_name(record::ROOT_NEIGHBORS).is_some() != meta.root_neighbors)
        {
            let (has, lacks) = if meta.root_neighbors { ("lacks", "says") } else { ("has", "does not say") };
            return Err(BadInput::new(
                Location::file(file.name()).column(record::ROOT_NEIGHBORS),
                format!("this part {has} the column, and the record set's metadata {lacks} its records list them"),
            )
            .into());
        }
        Ok(RecordSet { io, place, files, meta, keys: true, neighbors: true })
    }

    /// Checks that every process of the job opened one version of the record set (each holds
    /// the one it opened, see `tables::pin`): a flatten that replaced it between two
    /// processes' opens would have them train on two. A retryable error (75) naming both runs,
    /// on every worker alike.
    pub fn one_version(&self, worker: &mut timely::worker::Worker) -> Result<(), Error> {
        let mine = self.files.first().and_then(|f| f.run()).unwrap_or_default().to_owned();
        let mut runs = cluster::all_gather(worker, vec![mine]);
        runs.dedup();
        match runs.len() {
            0 | 1 => Ok(()),
            _ => Err(tables::Error::Retry(format!(
                "{}: the job's processes opened different versions of these records (runs {}): a flatten replaced \
                 them as the job started; run again",
                self.place.shown(),
                runs.join(", ")
            ))
            .into()),
        }
    }

    /// The columns a record read decodes: all of them, or all but `node_keys` without
    /// [`RecordSet::keys`] (`None`: all).
    fn columns(&self, file: &ParquetFile) -> Option<Vec<String>> {
        let schema = file.arrow.schema();
        let skipped = |name: &str| {
            (!self.keys && name == record::NODE_KEYS) || (!self.neighbors && name == record::ROOT_NEIGHBORS)
        };
        let names: Vec<&String> = schema.fields().iter().map(|f| f.name()).collect();
        names.iter().any(|n| skipped(n)).then(|| names.into_iter().filter(|n| !skipped(n)).cloned().collect())
    }

    /// Every (file, row group), in file order then row-group order: numbered alike everywhere.
    pub fn units(&self) -> Vec<Unit> {
        tables::units(&self.files, 0, 1).into_iter().map(|(file, row_group)| Unit { file, row_group }).collect()
    }

    /// Counts `unit`'s labeled records by split, checking each label: its kind is the set's, a
    /// class id is not negative and (with `classes`) below it.
    pub fn count(&self, unit: Unit, classes: Option<usize>) -> Result<Counts, Error> {
        if self.meta.link.is_some() {
            return self.count_links(unit);
        }
        let file = &self.files[unit.file];
        let name = file.name();
        let mut counts = Counts::default();
        let mut failure = None;
        file.read_columns(&self.io, unit.row_group, Some(&TAG_COLUMNS), |batch, first_row| {
            let result = record::tags(&batch, &name, first_row).and_then(|tags| {
                tags.iter().try_for_each(|(row, tag)| self.tally(&mut counts, tag, classes, &name, *row))
            });
            if let Err(e) = result {
                failure.get_or_insert(e);
            }
            Ok(())
        })?;
        failure.map_or(Ok(counts), |e| Err(e.into()))
    }

    /// Counts `unit`'s link records by split, from the split column alone.
    fn count_links(&self, unit: Unit) -> Result<Counts, Error> {
        let file = &self.files[unit.file];
        let name = file.name();
        let mut counts = Counts::default();
        let mut failure = None;
        file.read_columns(&self.io, unit.row_group, Some(&[record::SPLIT]), |batch, first_row| {
            let result = record::link_splits(&batch, &name, first_row).and_then(|splits| {
                for (row, split) in splits {
                    match split {
                        Some(Split::Train) => counts.train += 1,
                        Some(Split::Valid) => counts.valid += 1,
                        Some(Split::Test) => counts.test += 1,
                        // GraphFlat writes a link record only for an edge with a split.
                        None => {
                            let at = Location::file(&name).row(row).column(record::SPLIT);
                            return Err(BadInput::new(at, "a link record without a split (train, valid or test)"));
                        }
                    }
                }
                Ok(())
            });
            if let Err(e) = result {
                failure.get_or_insert(e);
            }
            Ok(())
        })?;
        failure.map_or(Ok(counts), |e| Err(e.into()))
    }

    fn tally(
        &self,
        counts: &mut Counts,
        tag: &Tag,
        classes: Option<usize>,
        file: &str,
        row: u64,
    ) -> Result<(), BadInput> {
        let Some(label) = &tag.label else { return Ok(()) };
        check_label(tag.root, label, self.meta.label, classes)
            .map_err(|problem| BadInput::new(Location::file(file).row(row).column(record::LABEL), problem))?;
        match tag.split {
            Some(Split::Train) => counts.train += 1,
            Some(Split::Valid) => counts.valid += 1,
            Some(Split::Test) => counts.test += 1,
            None => return Ok(()),
        }
        if let Label::Class(c) = label {
            counts.max_class = counts.max_class.max(*c as u64);
        }
        Ok(())
    }

    /// The labeled records of `unit` that `pass` takes, in row order, each checked: its
    /// structure (see `schemas::record::from_batch_where`) and its features' length.
    pub fn read(&self, unit: Unit, pass: Pass) -> Result<Vec<Record>, Error> {
        self.read_where(unit, |split, labeled| pass.reads(split, labeled), |_, _, _| Ok(()))
    }

    /// For a refresh of the histories: the root of every record of `unit` (any split, labeled
    /// or not), read off the batches without building the records
    /// (`schemas::record::RootColumns`), and the records of any of `passes`, built and checked
    /// as [`RecordSet::read`] builds and checks them; both in row order.
    pub fn read_roots(&self, unit: Unit, passes: &[Pass]) -> Result<(Roots, Vec<Record>), Error> {
        let mut roots = Roots::default();
        let keep = |split, labeled| passes.iter().any(|p| p.reads(split, labeled));
        let records =
            self.read_where(unit, keep, |batch, file, first_row| self.batch_roots(batch, file, first_row, &mut roots))?;
        Ok((roots, records))
    }

    /// Appends the roots of `batch` (rows `first_row..` of `file`) to `roots`, checking their
    /// feature width against the set's.
    fn batch_roots(&self, batch: &RecordBatch, file: &str, first_row: u64, roots: &mut Roots) -> Result<(), BadInput> {
        let columns = record::RootColumns::new(batch, file, first_row)?;
        if columns.dim() != self.meta.feature_dim && !columns.is_empty() {
            let problem =
                format!("{} features per node, but the set's metadata says {}", columns.dim(), self.meta.feature_dim);
            return Err(BadInput::new(Location::file(file).row(first_row).column(record::NODE_FEATURES), problem));
        }
        roots.ids.reserve(columns.len());
        roots.features.reserve(columns.len() * columns.dim());
        roots.in_degrees.reserve(columns.len());
        for row in 0..columns.len() {
            let root = columns.root(row)?;
            roots.ids.push(root.id);
            roots.features.extend_from_slice(root.features);
            roots.in_degrees.push(root.in_degree);
        }
        Ok(())
    }

    /// The records of `unit` for which `keep(split, labeled)` holds, checked; `also` sees each
    /// batch (its file and first row) before its records are built.
    fn read_where(
        &self,
        unit: Unit,
        keep: impl Fn(Option<Split>, bool) -> bool,
        mut also: impl FnMut(&RecordBatch, &str, u64) -> Result<(), BadInput>,
    ) -> Result<Vec<Record>, Error> {
        let file = &self.files[unit.file];
        let name = file.name();
        let mut out = Vec::new();
        let mut failure = None;
        let columns = self.columns(file);
        let columns: Option<Vec<&str>> = columns.as_ref().map(|c| c.iter().map(String::as_str).collect());
        file.read_columns(&self.io, unit.row_group, columns.as_deref(), |batch, first_row| {
            let result = also(&batch, &name, first_row).and_then(|()| {
                let records = record::from_batch_where(&batch, &name, first_row, |_, split| {
                    keep(split, true) || keep(split, false)
                })?;
                out.reserve(records.len());
                for (row, r) in records {
                    if keep(r.split, r.label.is_some()) {
                        self.check_record(&r, None, &name, row)?;
                        out.push(r);
                    }
                }
                Ok(())
            });
            if let Err(e) = result {
                failure.get_or_insert(e);
            }
            Ok(())
        })?;
        failure.map_or(Ok(out), |e| Err(e.into()))
    }

    /// The link records of `unit` that `pass` takes, in row order, each checked: its structure
    /// (see `schemas::record::links_from_batch`), its negatives against the set's metadata, and
    /// every endpoint's layers and feature lengths as a node record's. (The counting pass has
    /// already refused a record without a split.)
    pub fn read_links(&self, unit: Unit, pass: Pass) -> Result<Vec<LinkRecord>, Error> {
        self.read_links_where(unit, |split| pass.takes(split))
    }

    /// The same for the link records whose split `keep` accepts.
    pub fn read_links_where(&self, unit: Unit, keep: impl Fn(Option<Split>) -> bool) -> Result<Vec<LinkRecord>, Error> {
        let file = &self.files[unit.file];
        let name = file.name();
        let mut out = Vec::new();
        let mut failure = None;
        let columns = self.columns(file);
        let columns: Option<Vec<&str>> = columns.as_ref().map(|c| c.iter().map(String::as_str).collect());
        file.read_columns(&self.io, unit.row_group, columns.as_deref(), |batch, first_row| {
            let result = record::links_from_batch(&batch, &name, first_row, &keep).and_then(|links| {
                for (row, link) in links {
                    self.check_negatives(&link, &name, row)?;
                    let ends = self.link_ends();
                    for (i, endpoint) in link.endpoints.iter().enumerate() {
                        let root_type = ends.map(|[src, dst]| if i == 0 { src } else { dst });
                        self.check_record(endpoint, root_type, &name, row)?;
                    }
                    out.push(link);
                }
                Ok(())
            });
            if let Err(e) = result {
                failure.get_or_insert(e);
            }
            Ok(())
        })?;
        failure.map_or(Ok(out), |e| Err(e.into()))
    }

    /// A typed link record set's endpoint types: its link relation's source type (the source
    /// endpoint's) and destination type (the destination's and the negatives').
    fn link_ends(&self) -> Option<[u8; 2]> {
        let (types, link) = (self.meta.types.as_ref()?, self.meta.link.as_ref()?);
        let relation = &types.relations[usize::from(link.relation?)];
        Some([relation.src, relation.dst])
    }

    /// A record's feature widths (and in a typed set its types, its root of type `root_type`,
    /// by default the target type) against the set's metadata, then its layer rule.
    fn check_record(&self, r: &Record, root_type: Option<u8>, file: &str, row: u64) -> Result<(), BadInput> {
        self.check_features(r, root_type, file, row)?;
        r.check_layers(self.meta.hops)
            .map_err(|(column, problem)| BadInput::new(Location::file(file).row(row).column(column), problem))
    }

    /// A link record's negatives against the set's metadata (`graphflat.negatives`).
    fn check_negatives(&self, link: &LinkRecord, file: &str, row: u64) -> Result<(), BadInput> {
        let expected = self.meta.link.as_ref().map_or(0, |l| l.negatives);
        if link.negatives.len() == expected {
            return Ok(());
        }
        let problem = format!(
            "link ({}, {}): {} negatives, but the set's metadata says {expected}",
            link.src,
            link.dst,
            link.negatives.len()
        );
        Err(BadInput::new(Location::file(file).row(row).column(record::NEGATIVES), problem))
    }

    /// A record's node and edge feature widths against the set's metadata (a record without
    /// edges has no edge width to check).
    fn check_features(&self, r: &Record, root_type: Option<u8>, file: &str, row: u64) -> Result<(), BadInput> {
        let at = Location::file(file).row(row);
        if let Some(types) = &self.meta.types {
            if !r.is_typed() {
                let problem = format!("root {}: a record without node types in a typed record set", r.root);
                return Err(BadInput::new(at.column(record::NODE_TYPES), problem));
            }
            let root_type = root_type.unwrap_or(types.target);
            return types
                .check_record(r, root_type)
                .map_err(|(column, problem)| BadInput::new(at.column(column), problem));
        }
        let describe = |what: &str, found: usize, expected: usize| {
            format!("root {}: {found} {what}, but the set's metadata says {expected}", r.root)
        };
        if r.dim() != self.meta.feature_dim {
            let problem = describe("features per node", r.dim(), self.meta.feature_dim);
            return Err(BadInput::new(at.column(record::NODE_FEATURES), problem));
        }
        if r.num_edges() > 0 && r.edge_dim() != self.meta.edge_dim {
            let problem = describe("edge features per edge", r.edge_dim(), self.meta.edge_dim);
            return Err(BadInput::new(at.column(record::EDGE_FEATURES), problem));
        }
        Ok(())
    }
}

/// What is wrong with a label of `root`, if anything, given the set's label kind.
fn check_label(root: i64, label: &Label, kind: LabelKind, classes: Option<usize>) -> Result<(), String> {
    match (label, kind) {
        (Label::Class(c), LabelKind::Class) if *c < 0 => Err(format!("root {root}: class {c} is negative")),
        (Label::Class(c), LabelKind::Class) => match classes {
            Some(n) if *c as u64 >= n as u64 => Err(format!("root {root}: class {c} is not below classes = {n}")),
            None if *c as u64 >= MAX_CLASSES as u64 => {
                Err(format!("root {root}: class {c} is not below {MAX_CLASSES}, the most classes a model has"))
            }
            _ => Ok(()),
        },
        (Label::Targets(t), LabelKind::Targets(n)) if t.len() == n => Ok(()),
        (label, kind) => Err(format!(
            "root {root}: a label of {} where the set's metadata says {}",
            label_text(label),
            kind.to_text()
        )),
    }
}

fn label_text(label: &Label) -> String {
    match label {
        Label::Class(_) => "class".into(),
        Label::Targets(t) => format!("{} targets", t.len()),
    }
}
