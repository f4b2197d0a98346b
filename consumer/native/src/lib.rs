//! The fast path of `consumer.fingerprint`: normalized title and content in, SimHash, content
//! hash, sketch, band keys and shingles record out, with every step after normalization in one
//! native pass per article.
//!
//! It reimplements `consumer.fingerprint.terms.TermExtractor.count`, the TF-IDF weights, the
//! top-N choice and the vote of `consumer.fingerprint.fingerprinter`,
//! `consumer.fingerprint.sketch.sketch` and `consumer.fingerprint.shingles`, exactly; the Python
//! code stays the reference, and tests assert equal fingerprints on real text. What would make
//! the two differ is passed in from Python rather than rebuilt here: the stop words, which
//! characters form Latin words and how the sketch classes code points (the running Python's
//! Unicode tables), and the IDF table.

mod murmur3;
mod shingles;
mod sketch;

use std::cmp::Ordering;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;

use jieba_rs::Jieba;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::sketch::{Sketched, Sketcher};

/// Keys are already murmur3 hashes: hashing them again would only cost time.
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _bytes: &[u8]) {
        unreachable!("only u64 keys are hashed")
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type HashKeyed<V> = HashMap<u64, V, BuildHasherDefault<PassThrough>>;

/// Weights are rounded to multiples of 2**-16 before the vote (see `_WEIGHT_SCALE` in
/// fingerprint.py): an exact integer sum.
const WEIGHT_SCALE: f64 = 65536.0;

/// A term's identity is the first half of its mmh3 x64 128 hash, as in the Python path's IDF
/// table and vote.
fn term_hash(term: &str) -> u64 {
    murmur3::x64_128(term.as_bytes(), 0).0
}

/// jieba's Han block as `consumer.fingerprint.terms._HAN_RUN` sees it.
fn is_han(c: char) -> bool {
    ('\u{4e00}'..='\u{9fd5}').contains(&c)
}

fn is_word_separator(c: char) -> bool {
    matches!(c, '\'' | '\u{2019}' | '.' | ',')
}

fn longer_than_one_char(s: &str) -> bool {
    s.chars().nth(1).is_some()
}

/// The fingerprint of an article with terms, of `text = title + "\n" + content`.
struct Article {
    simhash: u64,
    /// mmh3 x64 128 of `text`.
    content_hash: [u8; 16],
    /// The sketch, band keys and shingles record of `text`.
    sketched: Sketched,
    /// The length of `text` in code points.
    chars: usize,
}

/// An `Article` as `fingerprint_many` returns it.
type Computed<'py> = (
    u64,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    usize,
);

#[pyclass(frozen)]
struct Kernel {
    /// Built at the first Han text: its dictionary costs ~0.1 s, which a process that only
    /// sees Latin-script news (or exits at once) never needs to spend.
    jieba: OnceLock<Jieba>,
    /// Stop words by term hash; the word itself is compared too, so a hash collision cannot
    /// drop a real term.
    stop: HashKeyed<String>,
    /// One bit per code point: does `consumer.fingerprint.terms._WORD_CHAR` match it.
    word_chars: Vec<u8>,
    idf: HashKeyed<f64>,
    median_idf: f64,
    sketcher: Sketcher,
}

impl Kernel {
    fn is_word_char(&self, c: char) -> bool {
        let cp = c as usize;
        self.word_chars
            .get(cp >> 3)
            .is_some_and(|byte| byte >> (cp & 7) & 1 == 1)
    }

    fn keep(&self, term: &str) -> Option<u64> {
        if !longer_than_one_char(term) {
            return None;
        }
        let h = term_hash(term);
        match self.stop.get(&h) {
            Some(word) if word == term => None,
            _ => Some(h),
        }
    }

    /// `TermExtractor.count`: term hash → occurrences, of jieba's cuts of the Han runs and of
    /// the Latin words and numbers. One pass over the text finds both.
    fn count(&self, text: &str, counts: &mut HashKeyed<f64>) {
        let mut han = String::with_capacity(text.len());
        let mut in_run = false;
        let mut chars = text.char_indices().peekable();
        while let Some((start, c)) = chars.next() {
            if is_han(c) {
                if !in_run && !han.is_empty() {
                    han.push(' ');
                }
                han.push(c);
                in_run = true;
                continue;
            }
            in_run = false;
            if !self.is_word_char(c) {
                continue;
            }
            // `_WORD`: word characters, then any number of (one separator, word characters).
            // No Han character is a word character, so a word never spans a Han run.
            let mut end = start + c.len_utf8();
            loop {
                match chars.peek() {
                    Some(&(at, d)) if self.is_word_char(d) => {
                        end = at + d.len_utf8();
                        chars.next();
                    }
                    Some(&(_, d)) if is_word_separator(d) => {
                        let mut after = chars.clone();
                        after.next();
                        match after.peek() {
                            Some(&(at, e)) if self.is_word_char(e) => {
                                end = at + e.len_utf8();
                                after.next();
                                chars = after;
                            }
                            _ => break,
                        }
                    }
                    _ => break,
                }
            }
            if let Some(h) = self.keep(&text[start..end]) {
                *counts.entry(h).or_insert(0.0) += 1.0;
            }
        }
        if han.is_empty() {
            return;
        }
        for token in self.jieba.get_or_init(Jieba::new).cut(&han, true) {
            if let Some(h) = self.keep(token.word) {
                *counts.entry(h).or_insert(0.0) += 1.0;
            }
        }
    }

    /// The fingerprint of one normalized article, or None when no term survives.
    fn fingerprint(
        &self,
        title: &str,
        content: &str,
        title_weight: f64,
        max_terms: usize,
    ) -> Option<Article> {
        let simhash = self.simhash(title, content, title_weight, max_terms)?;
        let mut text = String::with_capacity(title.len() + 1 + content.len());
        text.push_str(title);
        text.push('\n');
        text.push_str(content);
        Some(Article {
            simhash,
            content_hash: murmur3::digest(text.as_bytes(), 0),
            sketched: self.sketcher.sketched(&text),
            chars: text.chars().count(),
        })
    }

    /// The SimHash of one article, or None when no term survives.
    fn simhash(
        &self,
        title: &str,
        content: &str,
        title_weight: f64,
        max_terms: usize,
    ) -> Option<u64> {
        // At most about one distinct term per 8 bytes of text (median 13 on hkcnews and
        // reuters): sized once, so it never grows.
        let mut counts = HashKeyed::with_capacity_and_hasher(
            (title.len() + content.len()) / 8,
            Default::default(),
        );
        if title_weight == 1.0 {
            self.count(&format!("{title} {content}"), &mut counts);
        } else {
            self.count(content, &mut counts);
            let mut in_title = HashKeyed::default();
            self.count(title, &mut in_title);
            for (h, n) in in_title {
                // One product per term, added once: as `c.get(term, 0) + title_weight * n`.
                *counts.entry(h).or_insert(0.0) += title_weight * n;
            }
        }
        if counts.is_empty() {
            return None;
        }
        let mut weighted: Vec<(f64, u64)> = counts
            .into_iter()
            .map(|(h, tf)| (tf * self.idf.get(&h).copied().unwrap_or(self.median_idf), h))
            .collect();
        if max_terms > 0 && weighted.len() > max_terms {
            // Heaviest first, equal weights by ascending hash: as `_heaviest`.
            let heavier_first = |a: &(f64, u64), b: &(f64, u64)| {
                b.0.partial_cmp(&a.0)
                    .unwrap_or(Ordering::Equal)
                    .then(a.1.cmp(&b.1))
            };
            weighted.select_nth_unstable_by(max_terms - 1, heavier_first);
            weighted.truncate(max_terms);
        }
        // Bit j's vote is (weights of terms with bit j set) - (the others') = 2 × set - total.
        // The set sums come from sums per (nibble, nibble value): 16 additions per term
        // instead of 64. Integer sums, so the order of addition cannot change a bit.
        let mut by_nibble = [[0i64; 16]; 16];
        let mut total = 0i64;
        for (weight, h) in weighted {
            let w = (weight * WEIGHT_SCALE).round_ties_even() as i64;
            total += w;
            for (nibble, sums) in by_nibble.iter_mut().enumerate() {
                sums[(h >> (4 * nibble)) as usize & 15] += w;
            }
        }
        let mut simhash = 0u64;
        for bit in 0..64 {
            let sums = &by_nibble[bit / 4];
            let set: i64 = (0..16)
                .filter(|value| value >> (bit % 4) & 1 == 1)
                .map(|value| sums[value])
                .sum();
            simhash |= u64::from(2 * set - total > 0) << bit;
        }
        Some(simhash)
    }
}

#[pymethods]
impl Kernel {
    /// `idf_keys`/`idf_values`: the IDF table's arrays as little-endian u64/f64 bytes;
    /// `sketch_classes`/`sketch_word_chars`: `consumer.fingerprint.sketch`'s class of every
    /// code point (one byte each) and its word characters (one bit each).
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        stop_words: Vec<String>,
        word_chars: &Bound<'_, PyBytes>,
        idf_keys: &Bound<'_, PyBytes>,
        idf_values: &Bound<'_, PyBytes>,
        median_idf: f64,
        sketch_classes: &Bound<'_, PyBytes>,
        sketch_word_chars: &Bound<'_, PyBytes>,
    ) -> PyResult<Self> {
        let (keys, values) = (idf_keys.as_bytes(), idf_values.as_bytes());
        if keys.len() != values.len() || keys.len() % 8 != 0 {
            return Err(PyValueError::new_err(
                "IDF keys and values must be as many 8-byte items",
            ));
        }
        let idf = keys
            .chunks_exact(8)
            .zip(values.chunks_exact(8))
            .map(|(k, v)| {
                (
                    u64::from_le_bytes(k.try_into().unwrap()),
                    f64::from_le_bytes(v.try_into().unwrap()),
                )
            })
            .collect();
        let stop = stop_words.into_iter().map(|w| (term_hash(&w), w)).collect();
        Ok(Kernel {
            jieba: OnceLock::new(),
            stop,
            word_chars: word_chars.as_bytes().to_vec(),
            idf,
            median_idf,
            sketcher: Sketcher::new(
                sketch_classes.as_bytes().to_vec(),
                sketch_word_chars.as_bytes().to_vec(),
            ),
        })
    }

    /// For each normalized (title, content), of `text = title + "\n" + content`: None when no
    /// term survives, else (SimHash, content hash: mmh3 x64 128 of `text`, sketch, band keys,
    /// shingles record, length of `text` in code points). `max_terms` 0 keeps every term.
    fn fingerprint_many<'py>(
        &self,
        py: Python<'py>,
        titles: Vec<Bound<'py, PyString>>,
        contents: Vec<Bound<'py, PyString>>,
        title_weight: f64,
        max_terms: usize,
    ) -> PyResult<Vec<Option<Computed<'py>>>> {
        if titles.len() != contents.len() {
            return Err(PyValueError::new_err(
                "as many titles as contents are needed",
            ));
        }
        // Borrowed from the str objects (their cached UTF-8), kept alive by `titles` and
        // `contents` until the end of the call: no copy.
        let titles = titles
            .iter()
            .map(|s| s.to_str())
            .collect::<PyResult<Vec<&str>>>()?;
        let contents = contents
            .iter()
            .map(|s| s.to_str())
            .collect::<PyResult<Vec<&str>>>()?;
        let results: Vec<Option<Article>> = py.detach(|| {
            titles
                .iter()
                .zip(&contents)
                .map(|(title, content)| self.fingerprint(title, content, title_weight, max_terms))
                .collect()
        });
        Ok(results
            .into_iter()
            .map(|article| {
                article.map(|a| {
                    (
                        a.simhash,
                        PyBytes::new(py, &a.content_hash),
                        PyBytes::new(py, &a.sketched.sketch),
                        PyBytes::new(py, a.sketched.bands.as_ref().map_or(&[][..], |b| &b[..])),
                        PyBytes::new(py, &a.sketched.shingles),
                        a.chars,
                    )
                })
            })
            .collect())
    }

    /// `consumer.fingerprint.sketch.sketch(text)` (for tests against it).
    fn sketch<'py>(&self, py: Python<'py>, text: &str) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.sketcher.sketch(text))
    }

    /// `consumer.fingerprint.shingles.of_text(text)`: band keys and shingles record (for tests
    /// against it).
    fn bands_and_shingles<'py>(
        &self,
        py: Python<'py>,
        text: &str,
    ) -> (Bound<'py, PyBytes>, Bound<'py, PyBytes>) {
        let sketched = self.sketcher.sketched(text);
        (
            PyBytes::new(py, sketched.bands.as_ref().map_or(&[][..], |b| &b[..])),
            PyBytes::new(py, &sketched.shingles),
        )
    }

    /// mmh3 x64 128 of `data` with `seed` as 16 bytes (for tests against mmh3).
    #[staticmethod]
    fn murmur3_x64_128<'py>(py: Python<'py>, data: &[u8], seed: u32) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &murmur3::digest(data, seed))
    }
}

/// `consumer.fingerprint.shingles.bottom_jaccard`: the Jaccard similarity of two shingles
/// records from their bottom 512 values; None when either is empty or malformed, or their
/// shinglings differ.
#[pyfunction]
fn bottom_jaccard(a: &[u8], b: &[u8]) -> Option<f64> {
    shingles::bottom_jaccard(a, b)
}

/// `consumer.fingerprint.shingles.encode_shingles` (for tests against it).
#[pyfunction]
fn encode_shingles<'py>(
    py: Python<'py>,
    kind: &[u8],
    hashes: Vec<u64>,
) -> PyResult<Bound<'py, PyBytes>> {
    if !matches!(kind, b"C" | b"W") {
        return Err(PyValueError::new_err("unknown shingling kind"));
    }
    let values = shingles::bottom_values(&hashes);
    Ok(PyBytes::new(py, &shingles::encode(kind[0], &values)))
}

/// `consumer.fingerprint.shingles.decode_shingles`, with the values as a list (for tests
/// against it): ValueError for what is not a shingles record.
#[pyfunction]
fn decode_shingles<'py>(py: Python<'py>, data: &[u8]) -> PyResult<(Bound<'py, PyBytes>, Vec<u32>)> {
    let decoded = shingles::decode(data).map_err(PyValueError::new_err)?;
    Ok((PyBytes::new(py, &[decoded.kind]), decoded.values().to_vec()))
}

/// `consumer.fingerprint.shingles.low_values`: the values of a shingles record below `below`,
/// the first `at_most` of them, as little-endian u32s; ValueError for what is not a record.
#[pyfunction]
fn low_values<'py>(
    py: Python<'py>,
    data: &[u8],
    below: u32,
    at_most: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    let decoded = shingles::decode(data).map_err(PyValueError::new_err)?;
    let low: Vec<u8> = decoded
        .values()
        .iter()
        .take_while(|&&value| value < below)
        .take(at_most)
        .flat_map(|value| value.to_le_bytes())
        .collect();
    Ok(PyBytes::new(py, &low))
}

/// `consumer.deciding.boilerplate.sample`: every value of a shingles record below the first of
/// `bounds` (densest first) below which the record is complete and holds at most `dense_at_most`
/// values; else its values below `sparse_below`, the first `sparse_at_most` of them (the bound
/// then the last value + 1 if cut). The values as little-endian u32s, and the bound.
#[pyfunction]
fn boilerplate_sample<'py>(
    py: Python<'py>,
    data: &[u8],
    bounds: Vec<u64>,
    dense_at_most: usize,
    sparse_below: u64,
    sparse_at_most: usize,
    bottom: usize,
) -> PyResult<(Bound<'py, PyBytes>, u64)> {
    let decoded = shingles::decode(data).map_err(PyValueError::new_err)?;
    let all = decoded.values();
    // The record holds every value below the bound the Python reference takes as complete.
    let values: &[u32] = &all[..all.iter().take_while(|&&v| v < u32::MAX).count()];
    let complete_below: u64 = if values.len() < bottom {
        u64::from(u32::MAX)
    } else {
        u64::from(*values.last().unwrap_or(&0))
    };
    let below = |bound: u64| values.partition_point(|&v| u64::from(v) < bound);
    let le = |slice: &[u32]| -> Vec<u8> { slice.iter().flat_map(|v| v.to_le_bytes()).collect() };
    for &bound in &bounds {
        let n = below(bound);
        if bound <= complete_below && n <= dense_at_most {
            return Ok((PyBytes::new(py, &le(&values[..n])), bound));
        }
    }
    let n = below(sparse_below);
    if n <= sparse_at_most {
        return Ok((PyBytes::new(py, &le(&values[..n])), sparse_below));
    }
    let cut = &values[..sparse_at_most];
    let bound = u64::from(*cut.last().unwrap_or(&0)) + 1;
    Ok((PyBytes::new(py, &le(cut)), bound))
}

#[pymodule]
fn _fastfp(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Kernel>()?;
    m.add_function(wrap_pyfunction!(bottom_jaccard, m)?)?;
    m.add_function(wrap_pyfunction!(encode_shingles, m)?)?;
    m.add_function(wrap_pyfunction!(decode_shingles, m)?)?;
    m.add_function(wrap_pyfunction!(low_values, m)?)?;
    m.add_function(wrap_pyfunction!(boilerplate_sample, m)?)
}
