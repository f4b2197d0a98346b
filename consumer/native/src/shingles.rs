//! `consumer.fingerprint.shingles`, bit for bit: the 16 LSH band keys of the sketch's minima,
//! the Rice-coded record of the 512 smallest distinct top-32-bit shingle hashes, and the
//! Jaccard similarity of two such records (decoded and merged without allocating).

use crate::murmur3::fmix64;

pub const BANDS: usize = 16;
const BAND_ROWS: usize = 3;
pub const BAND_BYTES: usize = 4 * BANDS;
pub const BOTTOM: usize = 512;
const FORMAT: u8 = b'S';
const MAX_RICE: u32 = 31;
const BAND_MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;

/// The band keys of the sketch's 128 minima, as little-endian u32 (`shingles.band_keys`).
pub fn band_keys(minima: &[u64]) -> [u8; BAND_BYTES] {
    let mut out = [0u8; BAND_BYTES];
    for (band, rows) in minima[..BANDS * BAND_ROWS]
        .chunks_exact(BAND_ROWS)
        .enumerate()
    {
        let h = rows
            .iter()
            .fold(0u64, |h, &m| h.wrapping_mul(BAND_MULTIPLIER) ^ m);
        let key = (fmix64(h.wrapping_add(band as u64)) >> 32) as u32;
        out[4 * band..4 * band + 4].copy_from_slice(&key.to_le_bytes());
    }
    out
}

/// Collects the `BOTTOM` smallest distinct top-32-bit values of a text's shingle hashes
/// (`shingles.bottom_values`) as they are computed.
pub struct BottomValues {
    /// Only values below it are kept.
    threshold: u64,
    values: Vec<u32>,
}

impl BottomValues {
    /// For a text of `shingles` shingles. Hashes are uniform: of n values, about BOTTOM * 5/4
    /// lie below BOTTOM * 5/4 * 2**32 / n, and when at least BOTTOM distinct ones do, they
    /// hold the BOTTOM smallest; only they are kept and sorted.
    pub fn new(shingles: usize) -> BottomValues {
        if shingles <= 2 * BOTTOM {
            return BottomValues::all();
        }
        let expected = BOTTOM * 5 / 4;
        BottomValues {
            threshold: ((expected as u64) << 32) / shingles as u64,
            values: Vec::with_capacity(expected * 3 / 2),
        }
    }

    /// Keeps every value.
    pub fn all() -> BottomValues {
        BottomValues {
            threshold: u64::MAX,
            values: Vec::new(),
        }
    }

    pub fn add(&mut self, hash: u64) {
        if hash >> 32 < self.threshold {
            self.values.push((hash >> 32) as u32);
        }
    }

    /// The values, sorted; None when fewer than `BOTTOM` distinct ones fell below the
    /// threshold (a text of many repeated shingles): they may not be the smallest, and the
    /// text must be collected again with `all`.
    pub fn finish(mut self) -> Option<Vec<u32>> {
        sort_uniform(&mut self.values, self.threshold.min(1 << 32));
        self.values.dedup();
        if self.values.len() < BOTTOM && self.threshold != u64::MAX {
            return None;
        }
        self.values.truncate(BOTTOM);
        Some(self.values)
    }
}

/// The values of `encode_shingles` (for tests against it): all of `hashes`, through the same
/// threshold and fallback as a text's.
pub fn bottom_values(hashes: &[u64]) -> Vec<u32> {
    let mut bottom = BottomValues::new(hashes.len());
    hashes.iter().for_each(|&h| bottom.add(h));
    bottom.finish().unwrap_or_else(|| {
        let mut all = BottomValues::all();
        hashes.iter().for_each(|&h| all.add(h));
        all.finish()
            .expect("without a threshold every value is kept")
    })
}

/// Sorts values spread evenly over [0, bound): placed by a counting sort on their top bits,
/// about one per bucket, then put in order by an insertion sort that moves each at most past
/// its bucket's few others: linear time where a comparison sort is not.
fn sort_uniform(values: &mut Vec<u32>, bound: u64) {
    const BUCKET_BITS: u32 = 10;
    if values.len() < 64 {
        values.sort_unstable(); // cheaper than walking the buckets
        return;
    }
    let shift = (64 - bound.saturating_sub(1).leading_zeros()).saturating_sub(BUCKET_BITS);
    let mut starts = [0u32; (1 << BUCKET_BITS) + 1];
    for &v in values.iter() {
        starts[(v >> shift) as usize + 1] += 1;
    }
    // Values that are not spread (hashes never are, but a text could be crafted) would make
    // the insertion sort quadratic.
    if starts.iter().any(|&count| count > 32) {
        values.sort_unstable();
        return;
    }
    for bucket in 1..starts.len() {
        starts[bucket] += starts[bucket - 1];
    }
    let mut placed = vec![0u32; values.len()];
    for &v in values.iter() {
        let at = &mut starts[(v >> shift) as usize];
        placed[*at as usize] = v;
        *at += 1;
    }
    for i in 1..placed.len() {
        let v = placed[i];
        let mut j = i;
        while j > 0 && placed[j - 1] > v {
            placed[j] = placed[j - 1];
            j -= 1;
        }
        placed[j] = v;
    }
    *values = placed;
}

/// The Rice parameter of these gaps with the fewest bits, the smallest of equals (`argmin`
/// over 0..=31 in `shingles.encode_shingles`). Bits(r + 1) - bits(r) = n - sum(ceil((g >> r)
/// / 2)) never decreases with r, so the first r where it is >= 0 is that minimum: found from
/// the mean gap's magnitude in two or three passes instead of 32.
fn rice_parameter(gaps: &[u64]) -> u32 {
    let n = gaps.len() as u64;
    // Whether bits(r + 1) >= bits(r).
    let rising = |r: u32| gaps.iter().map(|g| ((g >> r) + 1) >> 1).sum::<u64>() <= n;
    let mean = gaps.iter().sum::<u64>() / n;
    let mut r = (63 - mean.max(1).leading_zeros()).min(MAX_RICE);
    if rising(r) {
        while r > 0 && rising(r - 1) {
            r -= 1;
        }
    } else {
        while r < MAX_RICE && !rising(r) {
            r += 1;
        }
    }
    r
}

/// The shingles record of sorted distinct `values` (at most `BOTTOM`) of a text shingled `kind`.
pub fn encode(kind: u8, values: &[u32]) -> Vec<u8> {
    debug_assert!(values.len() <= BOTTOM);
    let n = values.len();
    let mut out = Vec::with_capacity(16 + n * 4);
    out.extend_from_slice(&[FORMAT, kind]);
    let mut count = n;
    loop {
        let byte = (count & 0x7F) as u8;
        count >>= 7;
        out.push(byte | if count > 0 { 0x80 } else { 0 });
        if count == 0 {
            break;
        }
    }
    if n == 0 {
        return out;
    }
    let mut gaps = [0u64; BOTTOM];
    let mut previous = 0;
    for (gap, &v) in gaps.iter_mut().zip(values) {
        *gap = u64::from(v - previous);
        previous = v;
    }
    let gaps = &gaps[..n];
    let r = rice_parameter(gaps);
    out.push(r as u8);
    let mut writer = BitWriter::new(out);
    let low_mask = (1u64 << r) - 1;
    for &g in gaps {
        let mut quotient = g >> r;
        // Long runs of one-bits first, so that no `put` takes more than 31 + 1 + 31 bits.
        while quotient > 31 {
            writer.put(u64::from(u32::MAX), 32);
            quotient -= 32;
        }
        // The quotient's one-bits, the closing zero-bit and the low r bits, in one go.
        let ones = ((1u64 << quotient) - 1) << (r + 1);
        writer.put(ones | (g & low_mask), quotient as u32 + 1 + r);
    }
    writer.finish()
}

struct BitWriter {
    out: Vec<u8>,
    /// Pending bits, the latest in the low `pending` bits (fewer than 64 between calls).
    acc: u128,
    pending: u32,
}

impl BitWriter {
    fn new(out: Vec<u8>) -> BitWriter {
        BitWriter {
            out,
            acc: 0,
            pending: 0,
        }
    }

    /// Appends the low `count` (<= 64) bits of `bits`, most significant first.
    fn put(&mut self, bits: u64, count: u32) {
        self.acc = self.acc << count | u128::from(bits);
        self.pending += count;
        if self.pending >= 64 {
            self.pending -= 64;
            let word = (self.acc >> self.pending) as u64;
            self.out.extend_from_slice(&word.to_be_bytes());
        }
    }

    fn finish(mut self) -> Vec<u8> {
        while self.pending >= 8 {
            self.pending -= 8;
            self.out.push((self.acc >> self.pending) as u8);
        }
        if self.pending > 0 {
            self.out.push((self.acc << (8 - self.pending)) as u8);
        }
        self.out
    }
}

/// Why a byte string is not a shingles record (`shingles.decode_shingles` raises ValueError).
pub type Malformed = &'static str;

/// The values of a decoded record, on the stack.
pub struct Decoded {
    pub kind: u8,
    pub len: usize,
    pub values: [u32; BOTTOM],
}

impl Decoded {
    pub fn values(&self) -> &[u32] {
        &self.values[..self.len]
    }
}

/// Decodes a shingles record, refusing exactly what `shingles.decode_shingles` refuses.
pub fn decode(data: &[u8]) -> Result<Decoded, Malformed> {
    if data.len() < 3 || data[0] != FORMAT || !matches!(data[1], b'C' | b'W') {
        return Err("not a shingles record");
    }
    let (n, at) = match data[2] {
        byte if byte & 0x80 == 0 => (usize::from(byte), 3),
        byte => match data.get(3) {
            Some(0) => return Err("shingles count not in its shortest form"),
            Some(&high) if high & 0x80 == 0 => {
                (usize::from(byte & 0x7F) | usize::from(high) << 7, 4)
            }
            _ => return Err("shingles count truncated or too long"),
        },
    };
    if n > BOTTOM {
        return Err("shingles record of too many values");
    }
    let mut decoded = Decoded {
        kind: data[1],
        len: n,
        values: [0; BOTTOM],
    };
    if n == 0 {
        return if at == data.len() {
            Ok(decoded)
        } else {
            Err("bytes after an empty shingles record")
        };
    }
    let r = match data.get(at) {
        Some(&r) if u32::from(r) <= MAX_RICE => u32::from(r),
        _ => return Err("missing or invalid Rice parameter"),
    };
    let mut reader = BitReader::new(&data[at + 1..]);
    let mut value = 0u64;
    for i in 0..n {
        let (quotient, low) = reader
            .code(r)
            .ok_or("shingles record ends inside a value")?;
        if quotient > u64::from(u32::MAX) {
            return Err("shingles record value beyond 32 bits");
        }
        let gap = quotient << r | low;
        if i > 0 && gap == 0 {
            return Err("shingles record values are not increasing");
        }
        value += gap;
        if value > u64::from(u32::MAX) {
            return Err("shingles record value beyond 32 bits");
        }
        decoded.values[i] = value as u32;
    }
    if !reader.at_padding_end() {
        return Err("shingles record has extra bytes or padding bits set");
    }
    Ok(decoded)
}

struct BitReader<'a> {
    data: &'a [u8],
    next: usize,
    /// The next `available` bits, most significant first; the bits below them are zero.
    buffer: u64,
    available: u32,
}

impl<'a> BitReader<'a> {
    fn new(data: &'a [u8]) -> BitReader<'a> {
        BitReader {
            data,
            next: 0,
            buffer: 0,
            available: 0,
        }
    }

    fn refill(&mut self) {
        while self.available <= 56 && self.next < self.data.len() {
            self.buffer |= u64::from(self.data[self.next]) << (56 - self.available);
            self.next += 1;
            self.available += 8;
        }
    }

    fn consume(&mut self, count: u32) {
        self.buffer = self.buffer.checked_shl(count).unwrap_or(0);
        self.available -= count;
    }

    /// One gap's code: its quotient (one-bits up to a zero-bit) and its low `r` bits. Nearly
    /// every code lies in the buffer whole and is read in one step.
    fn code(&mut self, r: u32) -> Option<(u64, u64)> {
        self.refill();
        let ones = self.buffer.leading_ones();
        if ones + 1 + r <= self.available {
            let low = (self.buffer << ones << 1).checked_shr(64 - r).unwrap_or(0);
            self.consume(ones + 1 + r);
            return Some((u64::from(ones), low));
        }
        Some((self.unary()?, self.bits(r)?))
    }

    /// The number of one-bits before the next zero-bit, which is consumed too.
    fn unary(&mut self) -> Option<u64> {
        let mut ones = 0u64;
        loop {
            self.refill();
            if self.available == 0 {
                return None;
            }
            let run = self.buffer.leading_ones().min(self.available);
            ones += u64::from(run);
            if run < self.available {
                self.consume(run + 1);
                return Some(ones);
            }
            self.consume(run);
        }
    }

    /// The next `count` (<= 31) bits as a number, most significant first.
    fn bits(&mut self, count: u32) -> Option<u64> {
        if count == 0 {
            return Some(0);
        }
        self.refill();
        if self.available < count {
            return None;
        }
        let bits = self.buffer >> (64 - count);
        self.consume(count);
        Some(bits)
    }

    /// Whether only the last byte's zero padding is left.
    fn at_padding_end(&self) -> bool {
        self.next == self.data.len() && self.available < 8 && self.buffer == 0
    }
}

/// `shingles.bottom_jaccard`: None when either record is empty or malformed, or their
/// shinglings differ; else, of every value up to the smaller of the largest values of the
/// full records (512 values), the share in both: exact when neither is full.
pub fn bottom_jaccard(a: &[u8], b: &[u8]) -> Option<f64> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let (a, b) = (decode(a).ok()?, decode(b).ok()?);
    if a.kind != b.kind {
        return None;
    }
    let (a, b) = (a.values(), b.values());
    if a.is_empty() && b.is_empty() {
        return Some(1.0);
    }
    // A record of BOTTOM values may have left larger ones out: below its largest, both sets
    // are known in full. A record of fewer holds its whole set.
    let full = |v: &[u32]| if v.len() == BOTTOM { v[BOTTOM - 1] } else { u32::MAX };
    let limit = full(a).min(full(b));
    let a = &a[..a.partition_point(|&v| v <= limit)];
    let b = &b[..b.partition_point(|&v| v <= limit)];
    // Walk the union of what is known in order.
    let (mut i, mut j, mut union, mut both) = (0, 0, 0usize, 0usize);
    while i < a.len() || j < b.len() {
        if j == b.len() || (i < a.len() && a[i] < b[j]) {
            i += 1;
        } else if i == a.len() || b[j] < a[i] {
            j += 1;
        } else {
            both += 1;
            i += 1;
            j += 1;
        }
        union += 1;
    }
    Some(both as f64 / union as f64)
}
