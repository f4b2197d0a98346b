//! `KeyPostings`: the rows of one batch by each 32-bit key they are posted under, for the
//! rare-key candidates among a batch's own rows (`indexstore/pending_rows.py`). Every row
//! brings up to 64 keys and a batch thousands of rows, most keys a single row's; in a Python
//! dict each key costs an object, and each query a `Counter` of the rows its keys name.
//! `ReferencePostings` (`indexstore/postings.py`) is its reference; the tests hold the two to
//! the same answers, in the same order.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::tally::Spread;
use crate::{bytes, contiguous};

/// A key's rows: one (most keys), or several in the order they were added.
enum Rows {
    One(u32),
    Many(Vec<u32>),
}

#[pyclass(module = "indexstore._probe")]
#[derive(Default)]
pub struct KeyPostings {
    rows: HashMap<u32, Rows, BuildHasherDefault<Spread>>,
}

#[pymethods]
impl KeyPostings {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// Post `row` under each of `keys`, which are distinct (a row's distinct values).
    fn add(&mut self, row: u32, keys: PyBuffer<u32>) -> PyResult<()> {
        // SAFETY: the buffer stays alive until the method returns, and no Python code runs
        // meanwhile (the GIL is held), so nothing writes to the array while it is read.
        let keys = unsafe { contiguous(&keys, "keys")? };
        for &key in keys {
            match self.rows.get_mut(&key) {
                None => {
                    self.rows.insert(key, Rows::One(row));
                }
                Some(Rows::Many(rows)) => rows.push(row),
                Some(held) => {
                    let Rows::One(first) = *held else { unreachable!() };
                    *held = Rows::Many(vec![first, row]);
                }
            }
        }
        Ok(())
    }

    /// The rows posted under at least `min_shared` of these distinct `keys`, and under how
    /// many, as native-endian i64 bytes each: in the order a row is first named, going
    /// through `keys` in turn and each key's rows in the order they were added.
    fn sharing<'py>(
        &self,
        py: Python<'py>,
        keys: PyBuffer<u32>,
        min_shared: i64,
    ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        // SAFETY: as in `add`.
        let keys = unsafe { contiguous(&keys, "keys")? };
        let found: Vec<&Rows> = keys.iter().filter_map(|key| self.rows.get(key)).collect();
        let mut order: Vec<(i64, i64)> = Vec::new();
        if found.len() as i64 >= min_shared {
            let mut at: HashMap<u32, usize, BuildHasherDefault<Spread>> = HashMap::default();
            let mut count = |row: u32| {
                let i = *at.entry(row).or_insert_with(|| {
                    order.push((i64::from(row), 0));
                    order.len() - 1
                });
                order[i].1 += 1;
            };
            for held in found {
                match held {
                    Rows::One(row) => count(*row),
                    Rows::Many(rows) => rows.iter().for_each(|&row| count(row)),
                }
            }
        }
        let (rows, counts): (Vec<i64>, Vec<i64>) =
            order.into_iter().filter(|&(_, n)| n >= min_shared).unzip();
        Ok((bytes(py, &rows), bytes(py, &counts)))
    }

    fn __len__(&self) -> usize {
        self.rows.len()
    }
}
