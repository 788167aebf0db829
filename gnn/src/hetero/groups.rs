//! Rows grouped by node type: a per-type map (a projection, a self weight) runs once per type
//! on that type's rows, and the results go back to row order.

use burn::prelude::*;
use burn::tensor::{Int, TensorData};

/// The rows of a set of rows, by node type.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TypeGroups {
    /// Per node type (by number), its rows, ascending.
    pub rows: Vec<Vec<i64>>,
}

impl TypeGroups {
    /// The groups of rows whose types are `types` (row `r` has type `types[r]`), over `count`
    /// node types.
    pub fn new(types: &[u8], count: usize) -> TypeGroups {
        let mut rows = vec![Vec::new(); count];
        for (r, &t) in types.iter().enumerate() {
            rows[usize::from(t)].push(r as i64);
        }
        TypeGroups { rows }
    }

    /// Where row `r` lands when the groups' rows are concatenated in type order.
    pub fn inverse(&self) -> Vec<i64> {
        let mut inverse = vec![0; self.rows.iter().map(Vec::len).sum()];
        for (at, &r) in self.rows.iter().flatten().enumerate() {
            inverse[r as usize] = at as i64;
        }
        inverse
    }
}

/// [`TypeGroups`] on a device.
#[derive(Debug, Clone)]
pub struct GroupTensors {
    /// Per node type, its rows; `None` for a type without rows.
    pub rows: Vec<Option<Tensor<1, Int>>>,
    /// [`TypeGroups::inverse`]; `None` when one type holds every row (no reordering).
    pub inverse: Option<Tensor<1, Int>>,
}

impl GroupTensors {
    pub fn new(groups: &TypeGroups, device: &Device) -> Self {
        let tensor = |v: &[i64]| Tensor::<1, Int>::from_data(TensorData::new(v.to_vec(), [v.len()]), device);
        let present = groups.rows.iter().filter(|r| !r.is_empty()).count();
        GroupTensors {
            rows: groups.rows.iter().map(|r| (!r.is_empty()).then(|| tensor(r))).collect(),
            inverse: (present > 1).then(|| tensor(&groups.inverse())),
        }
    }

    /// Rows computed per type, in row order: `parts` holds one tensor per type with rows, in
    /// type order, each with that type's rows.
    pub fn gather(&self, parts: Vec<Tensor<2>>) -> Tensor<2> {
        match &self.inverse {
            Some(inverse) => Tensor::cat(parts, 0).select(0, inverse.clone()),
            None => parts.into_iter().next().expect("a group with rows"),
        }
    }

    /// `f(t, rows of h of type t)` for each type with rows, in row order. With no rows at all
    /// (a full-graph worker that owns no node) it is `f(0, h)`: no rows, computed as every
    /// worker's are, so that its backward runs in step with theirs.
    pub fn map(&self, h: Tensor<2>, f: impl Fn(usize, Tensor<2>) -> Tensor<2>) -> Tensor<2> {
        if self.inverse.is_none() {
            let t = self.rows.iter().position(Option::is_some).unwrap_or(0);
            return f(t, h);
        }
        let parts = self
            .rows
            .iter()
            .enumerate()
            .filter_map(|(t, rows)| Some(f(t, h.clone().select(0, rows.clone()?))))
            .collect();
        self.gather(parts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_and_their_inverse_put_rows_back_in_order() {
        let groups = TypeGroups::new(&[2, 0, 2, 1, 0], 4);
        assert_eq!(groups.rows, vec![vec![1, 4], vec![3], vec![0, 2], vec![]]);
        // Concatenated: 1 4 3 0 2; row 0 is at 3, row 1 at 0, ...
        assert_eq!(groups.inverse(), vec![3, 0, 4, 2, 1]);

        let device = Device::default();
        let g = GroupTensors::new(&groups, &device);
        let h = Tensor::<2>::from_data(TensorData::new(vec![0.0f32, 1.0, 2.0, 3.0, 4.0], [5, 1]), &device);
        // Each type adds 10 times its number: row order is kept.
        let out = g.map(h, |t, rows| rows + 10.0 * t as f32);
        let values: Vec<f32> = out.into_data().iter::<f32>().collect();
        assert_eq!(values, vec![20.0, 1.0, 22.0, 13.0, 4.0]);

        // One type: no reordering at all.
        let one = GroupTensors::new(&TypeGroups::new(&[1, 1], 2), &device);
        assert!(one.inverse.is_none());

        // No rows: the first type's function of no rows, no rows.
        let none = GroupTensors::new(&TypeGroups::new(&[], 3), &device);
        let empty = none.map(Tensor::<2>::zeros([0, 2], &device), |_, rows| rows.matmul(Tensor::ones([2, 4], &device)));
        assert_eq!(empty.dims(), [0, 4]);
    }
}
