//! Node ids as data teams write them: integers (any width, read as `int64`: [`crate::columns`])
//! or strings (`utf8`, `large_utf8`, `utf8_view`, or a dictionary of any of them: pandas'
//! `category`). Every stage computes on `int64` internal ids; a string id is given one here.
//!
//! # A string's internal id
//!
//! Two independent hashes of its bytes: `h`, 54 bits, and a 64-bit fingerprint `g`
//! ([`StringHash`]). The internal id is `h`, except for strings whose `h` another node's string
//! also has: the map step finds those at `h`'s owner (every string with one `h` meets there),
//! keeps `h` for the one with the smallest `g`, and numbers the others from 2^54 up, in `(h, g)`
//! order over the whole table ([`StringIds`]). So two node strings never share an internal id,
//! no process holds every string (only the few collided pairs travel to every worker, about 28
//! at a billion ids), and the numbering is the same on any cluster shape, so records, samples
//! and scores are too. It depends on the table, though: a new string that shares an existing
//! string's `h` with a smaller `g` takes `h` from it, and the older string's samples change
//! (learned rows are found by their strings, not by these ids). Ids stay below 2^55, inside a
//! typed graph's range (`crate::typed`).
//!
//! Two node strings whose `h` and `g` both agree (118 bits: about 10^-18 at a billion ids, or
//! strings crafted to) cannot be told apart by an edge's reader, which sees only the hashes:
//! the map step then stops with exit 65 naming both rows, and never merges them.
//!
//! The internal id is a hash, not a dense rank: a rank (0..N) would need a global sort of the
//! strings and a join of every edge endpoint against it (a shuffle of 2E strings); a hash is
//! computed where each edge is read.

use std::borrow::Cow;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::DataType;
use serde::{Deserialize, Serialize};

use crate::columns;
use crate::error::{BadInput, Location};
use crate::mix::{IdMap, mix64};

/// The first internal id given to a collided string (every `h` is below it).
pub const COLLIDED_BASE: i64 = 1 << 54;

/// Whether a table's id columns hold integers or strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum IdKind {
    Int,
    String,
}

impl IdKind {
    /// The kind of a column of `data_type`, or `None` for a type ids cannot have.
    pub fn of(data_type: &DataType) -> Option<IdKind> {
        match data_type {
            DataType::Dictionary(_, values) => IdKind::of(values),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Some(IdKind::String),
            t if t.is_integer() => Some(IdKind::Int),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            IdKind::Int => "integers",
            IdKind::String => "strings",
        }
    }
}

/// A string's two hashes (see the module's doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct StringHash {
    /// 54 bits: the internal id of every string that does not collide.
    pub h: i64,
    /// 64 bits, independent of `h`: tells apart strings that share `h`.
    pub g: u64,
}

const H_SEED: u64 = 0x243f_6a88_85a3_08d3;
const G_SEED: u64 = 0x1319_8a2e_0370_7344;

/// [`mix64`] folded over the bytes (8 at a time, little-endian, the last word zero-padded) and
/// the length, from `seed`. Each step is a bijection of the state, so two strings of one length
/// that differ in one word never agree.
fn fold(seed: u64, bytes: &[u8]) -> u64 {
    let mut state = mix64(seed);
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        state = mix64(state ^ u64::from_le_bytes(word.try_into().expect("8 bytes")));
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        state = mix64(state ^ u64::from_le_bytes(last));
    }
    mix64(state ^ bytes.len() as u64)
}

impl StringHash {
    pub fn of(s: &str) -> StringHash {
        StringHash { h: (fold(H_SEED, s.as_bytes()) >> 10) as i64, g: fold(G_SEED, s.as_bytes()) }
    }
}

/// The strings that share `h` with another node's string, with their internal ids: the same
/// table on every worker (see the module's doc).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StringIds {
    collided: IdMap<StringHash, i64>,
}

impl StringIds {
    /// The table from every collided string's hashes (except each `h`'s smallest `g`, which
    /// keeps `h`), in any order: they are numbered from [`COLLIDED_BASE`] in `(h, g)` order.
    pub fn from_collided(mut collided: Vec<StringHash>) -> StringIds {
        collided.sort_unstable();
        collided.dedup();
        let ids = collided.into_iter().enumerate().map(|(i, hash)| (hash, COLLIDED_BASE + i as i64));
        StringIds { collided: ids.collect() }
    }

    /// The internal id of a string whose hashes are `hash`.
    pub fn id(&self, hash: StringHash) -> i64 {
        if self.collided.is_empty() {
            return hash.h;
        }
        self.collided.get(&hash).copied().unwrap_or(hash.h)
    }

    pub fn collided(&self) -> usize {
        self.collided.len()
    }
}

/// Given each string's hashes that meet at one owner (any order, repeats allowed): the ones
/// that lose their `h` to a smaller `g` of another string.
pub fn collided_at_owner(mut hashes: Vec<StringHash>) -> Vec<StringHash> {
    hashes.sort_unstable();
    hashes.dedup();
    hashes.windows(2).filter(|w| w[0].h == w[1].h).map(|w| w[1]).collect()
}

/// An id column of one record batch: integers or strings, checked (no null, no empty string).
#[derive(Debug, Clone)]
pub enum IdColumn {
    Ints(Int64Array),
    Strings(StringArray),
}

/// An id column's rows resolved ([`IdColumn::resolve`]).
#[derive(Debug, Clone)]
pub struct Resolved<'a> {
    pub ids: Cow<'a, [i64]>,
    /// Each string's fingerprint (`StringHash::g`); empty for integer ids.
    prints: Vec<u64>,
}

impl Resolved<'_> {
    /// Row `i`'s fingerprint, for a string id.
    pub fn print(&self, i: usize) -> Option<u64> {
        self.prints.get(i).copied()
    }
}

/// One id as read: an integer, or a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key<'a> {
    Int(i64),
    Str(&'a str),
}

impl<'a> Key<'a> {
    /// The string, for a string id.
    pub fn as_str(self) -> Option<&'a str> {
        match self {
            Key::Int(_) => None,
            Key::Str(s) => Some(s),
        }
    }
}

impl std::fmt::Display for Key<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Key::Int(id) => write!(f, "{id}"),
            Key::Str(s) => f.write_str(&shown(s)),
        }
    }
}

/// Characters of a string id an error message shows (an id may be megabytes long).
const SHOWN_CHARS: usize = 80;

/// A string id as messages show it: quoted and escaped, its first [`SHOWN_CHARS`] characters
/// and its length beyond them.
pub fn shown(s: &str) -> String {
    match s.char_indices().nth(SHOWN_CHARS) {
        None => format!("{s:?}"),
        Some((at, _)) => format!("{:?}... ({} bytes in all)", &s[..at], s.len()),
    }
}

impl IdColumn {
    /// Column `column` of `batch` (file `file`, from row `first_row`).
    pub fn read(batch: &RecordBatch, column: &str, file: &str, first_row: u64) -> Result<IdColumn, BadInput> {
        let array = columns::required(batch, column, file)?;
        IdColumn::from_array(array, column, file, first_row)
    }

    pub fn from_array(array: &ArrayRef, column: &str, file: &str, first_row: u64) -> Result<IdColumn, BadInput> {
        let at = |i: usize| Location::file(file).row(first_row + i as u64).column(column);
        let column_read = match IdKind::of(array.data_type()) {
            Some(IdKind::Int) => IdColumn::Ints(columns::int64(array, column, file, first_row)?),
            Some(IdKind::String) => IdColumn::Strings(utf8(&columns::plain(array))),
            None => {
                return Err(BadInput::new(
                    Location::file(file).column(column),
                    format!(
                        "expected ids: an integer (int64, int32, ...) or a string (utf8, large_utf8, \
                         utf8_view, or a dictionary of them), found {}",
                        array.data_type()
                    ),
                ));
            }
        };
        let nulls = match &column_read {
            IdColumn::Ints(a) => a.logical_nulls(),
            IdColumn::Strings(a) => a.logical_nulls(),
        };
        if let Some(i) = nulls.and_then(|n| (0..n.len()).find(|&i| n.is_null(i))) {
            return Err(BadInput::new(at(i), "null id: every id must be present"));
        }
        if let IdColumn::Strings(strings) = &column_read
            && let Some(i) = (0..strings.len()).find(|&i| strings.value_length(i) == 0)
        {
            return Err(BadInput::new(at(i), "empty string id: every id must have at least one character"));
        }
        Ok(column_read)
    }

    pub fn kind(&self) -> IdKind {
        match self {
            IdColumn::Ints(_) => IdKind::Int,
            IdColumn::Strings(_) => IdKind::String,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            IdColumn::Ints(a) => a.len(),
            IdColumn::Strings(a) => a.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn key(&self, i: usize) -> Key<'_> {
        match self {
            IdColumn::Ints(a) => Key::Int(a.value(i)),
            IdColumn::Strings(a) => Key::Str(a.value(i)),
        }
    }

    /// Row `i`'s internal id, strings mapped by `strings`.
    pub fn id(&self, i: usize, strings: &StringIds) -> i64 {
        match self {
            IdColumn::Ints(a) => a.value(i),
            IdColumn::Strings(a) => strings.id(StringHash::of(a.value(i))),
        }
    }

    /// Every row's internal id and, for strings, fingerprint: each string hashed once (a loop
    /// over the rows reads these, not [`IdColumn::id`], which hashes on every call).
    pub fn resolve(&self, strings: &StringIds) -> Resolved<'_> {
        match self {
            IdColumn::Ints(a) => Resolved { ids: Cow::Borrowed(a.values()), prints: Vec::new() },
            IdColumn::Strings(a) => {
                let hashes: Vec<StringHash> = a.iter().map(|s| StringHash::of(s.unwrap_or_default())).collect();
                let ids = hashes.iter().map(|&h| strings.id(h)).collect();
                Resolved { ids: Cow::Owned(ids), prints: hashes.iter().map(|h| h.g).collect() }
            }
        }
    }

    /// Row `i` as a pure function of its value: the integer, or the string's `h`. For draws
    /// made without the node table (`graphflat split-edges`): two strings that share an `h`
    /// draw alike, which only couples two draws.
    pub fn hashed(&self, i: usize) -> i64 {
        match self {
            IdColumn::Ints(a) => a.value(i),
            IdColumn::Strings(a) => StringHash::of(a.value(i)).h,
        }
    }

    /// Row `i`'s string hashes (`None` for an integer id).
    pub fn hash(&self, i: usize) -> Option<StringHash> {
        match self {
            IdColumn::Ints(_) => None,
            IdColumn::Strings(a) => Some(StringHash::of(a.value(i))),
        }
    }

    /// The column as read: `int64`, or `utf8`.
    pub fn to_array(&self) -> ArrayRef {
        match self {
            IdColumn::Ints(a) => Arc::new(a.clone()),
            IdColumn::Strings(a) => Arc::new(a.clone()),
        }
    }

    /// The column as `int64`, where it holds integers.
    pub fn ints(&self) -> Option<&Int64Array> {
        match self {
            IdColumn::Ints(a) => Some(a),
            IdColumn::Strings(_) => None,
        }
    }
}

/// A `utf8`, `large_utf8` or `utf8_view` array as `utf8` (nulls kept); the caller checked the type.
fn utf8(array: &ArrayRef) -> StringArray {
    match array.data_type() {
        DataType::Utf8 => array.as_string::<i32>().clone(),
        DataType::LargeUtf8 => array.as_string::<i64>().iter().collect(),
        _ => array.as_string_view().iter().collect(),
    }
}

/// A column of original ids for an output table: `int64` or `utf8`, as the input had them.
pub fn column_of(kind: IdKind, ints: Vec<i64>, strings: Option<StringArray>) -> ArrayRef {
    match (kind, strings) {
        (IdKind::String, Some(strings)) => Arc::new(strings),
        _ => Arc::new(Int64Array::from(ints)),
    }
}

/// The Arrow type of an output's id column.
pub fn data_type(kind: IdKind) -> DataType {
    match kind {
        IdKind::Int => DataType::Int64,
        IdKind::String => DataType::Utf8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::types::Int32Type;
    use arrow_array::{DictionaryArray, Float32Array, Int32Array, LargeStringArray};

    fn read(array: ArrayRef) -> Result<IdColumn, BadInput> {
        IdColumn::from_array(&array, "node_id", "n.parquet", 10)
    }

    #[test]
    fn every_string_encoding_reads_as_the_same_ids() {
        let want = ["user_8f3a", "sku-1201", "user_8f3a"];
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(want.to_vec())),
            Arc::new(LargeStringArray::from(want.to_vec())),
            Arc::new(arrow_array::StringViewArray::from(want.to_vec())),
            Arc::new(DictionaryArray::<Int32Type>::new(
                Int32Array::from(vec![1, 0, 1]),
                Arc::new(StringArray::from(vec!["sku-1201", "user_8f3a"])),
            )),
        ];
        let none = StringIds::default();
        for array in arrays {
            let ids = read(array).unwrap();
            assert_eq!(ids.kind(), IdKind::String);
            let keys: Vec<Key> = (0..3).map(|i| ids.key(i)).collect();
            assert_eq!(keys, want.iter().map(|s| Key::Str(s)).collect::<Vec<_>>());
            assert_eq!(ids.id(0, &none), ids.id(2, &none));
            assert_ne!(ids.id(0, &none), ids.id(1, &none));
        }
    }

    #[test]
    fn nulls_empty_strings_and_other_types_are_bad_input_at_their_row() {
        let null = read(Arc::new(StringArray::from(vec![Some("a"), None]))).unwrap_err();
        assert_eq!((null.at.row, null.problem.contains("null")), (Some(11), true));
        let empty = read(Arc::new(StringArray::from(vec!["a", "b", ""]))).unwrap_err();
        assert_eq!((empty.at.row, empty.problem.contains("empty string")), (Some(12), true));
        let float = read(Arc::new(Float32Array::from(vec![1.0]))).unwrap_err();
        assert_eq!((float.at.row, float.at.column.as_deref()), (None, Some("node_id")));
        assert!(float.problem.contains("found Float32"), "{}", float.problem);
        let int_null = read(Arc::new(Int32Array::from(vec![Some(1), None]))).unwrap_err();
        assert_eq!(int_null.at.row, Some(11));
    }

    #[test]
    fn hashes_spread_and_stay_below_the_collided_range() {
        let hashes: Vec<StringHash> = (0..50_000).map(|i| StringHash::of(&format!("user_{i}"))).collect();
        assert!(hashes.iter().all(|x| (0..COLLIDED_BASE).contains(&x.h)));
        let mut hs: Vec<i64> = hashes.iter().map(|x| x.h).collect();
        hs.sort_unstable();
        hs.dedup();
        assert_eq!(hs.len(), hashes.len());
        // The top bit of h is set about half the time: the 54 bits are all used.
        let high = hashes.iter().filter(|x| x.h >= COLLIDED_BASE / 2).count() as f64 / hashes.len() as f64;
        assert!((high - 0.5).abs() < 0.02, "{high}");
        // Strings that differ only in length (a zero byte the padding would hide) differ.
        assert_ne!(StringHash::of("a"), StringHash::of("a\0"));
        // A long id is shown cut, with its length.
        let long = "é".repeat(1000);
        assert_eq!(shown(&long), format!("{:?}... (2000 bytes in all)", "é".repeat(80)));
        assert_eq!(Key::Str("a\"b").to_string(), "\"a\\\"b\"");
    }

    #[test]
    fn collided_strings_get_ids_of_their_own_in_one_order_whatever_the_arrival() {
        // Hashes forced to collide (strings with a 54-bit collision are not known to anyone).
        let a = StringHash { h: 5, g: 9 };
        let b = StringHash { h: 5, g: 3 };
        let c = StringHash { h: 5, g: 7 };
        let d = StringHash { h: 8, g: 1 };
        let lost = collided_at_owner(vec![a, d, b, c, a]);
        assert_eq!(lost, vec![c, a], "b has the smallest g and keeps h");
        let ids = StringIds::from_collided(vec![a, c]);
        let again = StringIds::from_collided(vec![c, a, c]);
        assert_eq!(ids, again);
        assert_eq!([ids.id(b), ids.id(c), ids.id(a), ids.id(d)], [5, COLLIDED_BASE, COLLIDED_BASE + 1, 8]);
        // Each id is distinct: the collided range lies above every h.
        assert_eq!(ids.collided(), 2);
    }
}
