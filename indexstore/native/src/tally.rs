//! `KeyTally`: a running count per 32-bit key, for a batch's key-frequency changes
//! (`indexstore/pending_frequencies.py`). A row brings up to 128 keys and a batch thousands of
//! rows; a Python dict pays for each key an object and a hash of it, this a slot in a table.
//! `collections.Counter` is its reference there; the tests hold the two to the same counts.

use std::collections::HashMap;

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::{bytes, contiguous};

#[pyclass(module = "indexstore._probe")]
#[derive(Default)]
pub struct KeyTally {
    counts: HashMap<u32, i64>,
}

#[pymethods]
impl KeyTally {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// Add `sign` to the count of each of `keys` (a key given twice, twice).
    fn add(&mut self, keys: PyBuffer<u32>, sign: i64) -> PyResult<()> {
        // SAFETY: the buffer stays alive until the method returns, and no Python code runs
        // meanwhile (the GIL is held), so nothing writes to the array while it is read.
        let keys = unsafe { contiguous(&keys, "keys")? };
        for &key in keys {
            *self.counts.entry(key).or_insert(0) += sign;
        }
        Ok(())
    }

    /// The count of each of `keys` (0 for one never added), as native-endian i64 bytes.
    fn get<'py>(&self, py: Python<'py>, keys: PyBuffer<u32>) -> PyResult<Bound<'py, PyBytes>> {
        // SAFETY: as in `add`.
        let keys = unsafe { contiguous(&keys, "keys")? };
        let counts: Vec<i64> = keys
            .iter()
            .map(|key| self.counts.get(key).copied().unwrap_or(0))
            .collect();
        Ok(bytes(py, &counts))
    }

    fn __len__(&self) -> usize {
        self.counts.len()
    }
}
