//! `KeyTally`: a running count per 32-bit key, for a batch's key-frequency changes
//! (`indexstore/pending_frequencies.py`) and for the window's (`indexstore/frequencies.py`).
//! A row brings up to 128 keys and a batch thousands of rows; a Python dict pays for each key
//! an object and a hash of it, this a slot in a table. `collections.Counter` is its reference;
//! the tests hold the two to the same counts. A key whose count returns to 0 leaves the table,
//! so the window's table holds only the keys of its live rows.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::{bytes, contiguous};

/// The keys are already hash values (shingle hashes): one multiplication spreads them over
/// the 64 bits the table reads (its control bytes come from the top bits), where the default
/// SipHash would cost more than the count itself.
#[derive(Default)]
pub(crate) struct Spread(u64);

impl Hasher for Spread {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _bytes: &[u8]) {
        unreachable!("only u32 keys are hashed")
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

#[pyclass(module = "indexstore._probe")]
#[derive(Default)]
pub struct KeyTally {
    // i32 counts: a slot is 8 bytes; no key is carried by 2^31 live rows.
    counts: HashMap<u32, i32, BuildHasherDefault<Spread>>,
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
            let count = self.counts.entry(key).or_insert(0);
            *count += sign as i32;
            if *count == 0 {
                self.counts.remove(&key);
            }
        }
        Ok(())
    }

    /// The count of each of `keys` (0 for one never added), as native-endian i64 bytes.
    fn get<'py>(&self, py: Python<'py>, keys: PyBuffer<u32>) -> PyResult<Bound<'py, PyBytes>> {
        // SAFETY: as in `add`.
        let keys = unsafe { contiguous(&keys, "keys")? };
        let counts: Vec<i64> = keys
            .iter()
            .map(|key| i64::from(self.counts.get(key).copied().unwrap_or(0)))
            .collect();
        Ok(bytes(py, &counts))
    }

    fn __len__(&self) -> usize {
        self.counts.len()
    }
}
