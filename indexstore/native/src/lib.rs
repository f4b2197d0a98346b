//! The inner loop of `indexstore.tables.SearchTables.search`, for one run of one table.
//!
//! NumPy needs about eight passes over a batch's candidates (each bucket's range expanded,
//! keys gathered, queries repeated, XOR, popcount, compare, select) and an array for each;
//! here each candidate is read once and only the hits are written. `probe_reference` in
//! `indexstore/probe.py` does the same in NumPy; the tests hold this to it.

use pyo3::buffer::{Element, PyBuffer};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

mod postings;
mod tally;

/// Every (query, key) of one run of one table with Hamming distance <= `k`, among the keys in
/// the buckets within the probe radius of each query's bucket: the bucket of a key is its top
/// `bits` bits, `offsets[b]..offsets[b + 1]` its range in the sorted `keys`, and the buckets
/// probed are the query's XOR each of `masks`. Returns the query index, the key's position in
/// `keys` and the distance of each hit, as native-endian i64 bytes, query after query, mask
/// after mask. With `bits` = 0 and `masks` = [0] this compares every query with every key.
#[pyfunction]
fn probe<'py>(
    py: Python<'py>,
    queries: PyBuffer<u64>,
    offsets: PyBuffer<i64>,
    keys: PyBuffer<u64>,
    masks: PyBuffer<u64>,
    bits: u32,
    k: u32,
) -> PyResult<(
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
)> {
    // SAFETY (all four): the exported buffers stay alive until the function returns, and no
    // Python code runs meanwhile (the GIL is held, nothing calls back), so nothing writes to
    // the arrays while they are read here.
    let (queries, offsets, keys, masks) = unsafe {
        (
            contiguous(&queries, "queries")?,
            contiguous(&offsets, "offsets")?,
            contiguous(&keys, "keys")?,
            contiguous(&masks, "masks")?,
        )
    };
    if bits > 63 {
        return Err(PyValueError::new_err("bits must be below 64"));
    }
    let buckets = 1u64 << bits;
    if offsets.len() as u64 != buckets + 1 {
        return Err(PyValueError::new_err(
            "offsets: not one more than the buckets",
        ));
    }
    if masks.iter().any(|&m| m >= buckets) {
        return Err(PyValueError::new_err("masks: wider than the buckets"));
    }
    let run = Run { offsets, keys };
    let mut hits = Hits::default();
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("popcnt") {
            // SAFETY: the CPU has the instruction, checked just above.
            unsafe { scan_popcnt(&run, queries, masks, bits, k, &mut hits)? };
            return Ok(hits.into_bytes(py));
        }
    }
    scan(&run, queries, masks, bits, k, &mut hits)?;
    Ok(hits.into_bytes(py))
}

/// # Safety
/// The buffer's memory must not change while the slice is in use.
unsafe fn contiguous<'a, T: Element>(buffer: &'a PyBuffer<T>, name: &str) -> PyResult<&'a [T]> {
    let pointer = buffer
        .as_slice_ptr()
        .ok_or_else(|| PyValueError::new_err(format!("{name}: not a C-contiguous array")))?;
    Ok(&*pointer.as_ptr())
}

struct Run<'a> {
    offsets: &'a [i64],
    keys: &'a [u64],
}

impl Run<'_> {
    /// Bucket `b`'s keys and the position of its first key.
    fn bucket(&self, b: usize) -> PyResult<(&[u64], usize)> {
        let (lo, hi) = (self.offsets[b], self.offsets[b + 1]);
        usize::try_from(lo)
            .ok()
            .zip(usize::try_from(hi).ok())
            .and_then(|(lo, hi)| self.keys.get(lo..hi).map(|keys| (keys, lo)))
            .ok_or_else(|| PyValueError::new_err("offsets: a range outside the keys"))
    }
}

#[derive(Default)]
struct Hits {
    query: Vec<i64>,
    position: Vec<i64>,
    distance: Vec<i64>,
}

type HitBytes<'py> = (
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
);

impl Hits {
    fn into_bytes(self, py: Python<'_>) -> HitBytes<'_> {
        (
            bytes(py, &self.query),
            bytes(py, &self.position),
            bytes(py, &self.distance),
        )
    }
}

// Without the popcnt instruction (not in baseline x86-64) count_ones is a dozen instructions:
// the loop is compiled twice and the one the CPU can run is chosen at run time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
unsafe fn scan_popcnt(
    run: &Run<'_>,
    queries: &[u64],
    masks: &[u64],
    bits: u32,
    k: u32,
    hits: &mut Hits,
) -> PyResult<()> {
    scan(run, queries, masks, bits, k, hits)
}

#[inline(always)]
fn scan(
    run: &Run<'_>,
    queries: &[u64],
    masks: &[u64],
    bits: u32,
    k: u32,
    hits: &mut Hits,
) -> PyResult<()> {
    for (index, &query) in queries.iter().enumerate() {
        let bucket = if bits == 0 { 0 } else { query >> (64 - bits) };
        for &mask in masks {
            let (keys, first) = run.bucket((bucket ^ mask) as usize)?;
            for (at, &key) in keys.iter().enumerate() {
                let distance = (key ^ query).count_ones();
                if distance <= k {
                    hits.query.push(index as i64);
                    hits.position.push((first + at) as i64);
                    hits.distance.push(i64::from(distance));
                }
            }
        }
    }
    Ok(())
}

fn bytes<'py, T: Copy>(py: Python<'py>, values: &[T]) -> Bound<'py, PyBytes> {
    // SAFETY: T is a plain integer type (i64 or u64): every byte of it is initialized.
    let raw = unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    };
    PyBytes::new(py, raw)
}

#[pymodule]
fn _probe(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(probe, m)?)?;
    m.add_class::<tally::KeyTally>()?;
    m.add_class::<postings::KeyPostings>()
}
