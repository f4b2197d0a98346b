//! `consumer.fingerprint.sketch.sketch`: the 65-byte verification sketch of normalized text,
//! bit for bit (128 four-bit minima, two to a byte).
//!
//! Which code points are letters, Latin letters, kept or dropped, and which form words, comes
//! from Python (the running interpreter's Unicode tables), as for the terms.

use crate::murmur3::{self, fmix64};
use crate::shingles::{self, BottomValues, BAND_BYTES};

const MINIMA: usize = 128;
const MINIMUM_BITS: usize = 4;
pub const SKETCH_BYTES: usize = 1 + MINIMA * MINIMUM_BITS / 8;
const CHAR_SHINGLE: usize = 5;
const WORD_SHINGLE: usize = 3;
/// Shorter than this (characters), a text is shingled by words from half its letters Latin on
/// (`SENTENCE_CHARS` in sketch.py).
const SENTENCE_CHARS: usize = 200;
/// A page with this many letters of other scripts than Latin is shingled by characters
/// (`PAGE_OTHER_SCRIPT_LETTERS` in sketch.py).
const PAGE_OTHER_SCRIPT_LETTERS: usize = 16;
/// Longer than a word of a news story (`LONGEST_WORD` in sketch.py).
const LONGEST_WORD: usize = 24;
/// The top 7 bits of a shingle's hash choose one of 128 bins.
const BIN_SHIFT: u32 = 64 - 7;
const P1: u64 = 0x9E37_79B9_7F4A_7C15;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;

/// `consumer.fingerprint.sketch`'s classes of code points.
const DROPPED: u8 = 0;
const LETTER: u8 = 2;
const LATIN_LETTER: u8 = 3;
const LATIN_CAPITAL: u8 = 4;

/// A run of Latin letters and ASCII digits, read as `_latin_in_words` in sketch.py does.
#[derive(Default)]
struct LatinRun {
    chars: usize,
    capitals: usize,
    digits: bool,
    capital_first: bool,
}

impl LatinRun {
    fn add(&mut self, class: u8, c: char) {
        let capital = class == LATIN_CAPITAL;
        if self.chars == 0 {
            self.capital_first = capital;
        }
        self.chars += 1;
        self.capitals += usize::from(capital);
        self.digits |= c.is_ascii_digit();
    }

    /// The letters of the run if it reads as a word, else 0; the run starts again.
    fn end(&mut self) -> usize {
        let run = std::mem::take(self);
        let cased = run.capitals == 0
            || run.capitals == run.chars
            || (run.capitals == 1 && run.capital_first);
        if !run.digits && run.chars <= LONGEST_WORD && cased {
            run.chars
        } else {
            0
        }
    }
}

/// What `Sketcher::sketched` computes of one text.
pub struct Sketched {
    pub sketch: [u8; SKETCH_BYTES],
    /// None for a text without shingles.
    pub bands: Option<[u8; BAND_BYTES]>,
    /// Empty for a text without shingles.
    pub shingles: Vec<u8>,
}

pub struct Sketcher {
    /// `consumer.fingerprint.sketch`'s class of every code point, one byte each.
    classes: Vec<u8>,
    /// One bit per code point: does `consumer.fingerprint.sketch._WORD`'s class match it.
    word_chars: Vec<u8>,
}

impl Sketcher {
    pub fn new(classes: Vec<u8>, word_chars: Vec<u8>) -> Sketcher {
        Sketcher {
            classes,
            word_chars,
        }
    }

    fn class(&self, c: char) -> u8 {
        self.classes.get(c as usize).copied().unwrap_or(DROPPED)
    }

    fn is_word_char(&self, c: char) -> bool {
        let cp = c as usize;
        self.word_chars
            .get(cp >> 3)
            .is_some_and(|byte| byte >> (cp & 7) & 1 == 1)
    }

    pub fn sketch(&self, text: &str) -> [u8; SKETCH_BYTES] {
        self.sketched(text).sketch
    }

    /// The sketch of normalized text, and the band keys and shingles record of the same
    /// shingles (`consumer.fingerprint.shingles.bands_and_shingles`).
    pub fn sketched(&self, text: &str) -> Sketched {
        // One pass counts the letters and keeps the characters of character shingles; words
        // are looked for only in the texts shingled by words (mostly Latin script).
        let mut items = Vec::with_capacity(text.len());
        let (mut letters, mut latin, mut chars) = (0usize, 0usize, 0usize);
        for c in text.chars() {
            chars += 1;
            let class = self.class(c);
            let latin_letter = class == LATIN_LETTER || class == LATIN_CAPITAL;
            letters += usize::from(latin_letter || class == LETTER);
            latin += usize::from(latin_letter);
            if class != DROPPED {
                items.push(u64::from(c));
            }
        }
        let mut out = [0u8; SKETCH_BYTES];
        // By words when at least three quarters of the letters are Latin letters of words
        // (all Latin letters are, in a text of no other script), half in a text of fewer than
        // SENTENCE_CHARS characters (`_by_words`). The letters of words are counted only where
        // they matter: where all Latin letters would be enough.
        let enough = |latin: usize| {
            if chars < SENTENCE_CHARS {
                2 * latin >= letters
            } else {
                4 * latin >= 3 * letters
            }
        };
        let page_of_other_script =
            chars >= SENTENCE_CHARS && letters - latin >= PAGE_OTHER_SCRIPT_LETTERS;
        let by_words = !page_of_other_script
            && enough(latin)
            && (latin == letters || enough(self.latin_in_words(text)));
        let (size, p) = if letters > 0 && by_words {
            out[0] = b'W';
            items.clear();
            self.word_hashes(text, &mut items);
            (WORD_SHINGLE, P2)
        } else {
            out[0] = b'C';
            (CHAR_SHINGLE, P1)
        };
        // As `_word_shingles`: no word, no shingle (not seen in practice: letters are word
        // characters); characters always make one.
        if items.is_empty() && out[0] == b'W' {
            return Sketched {
                sketch: out,
                bands: None,
                shingles: Vec::new(),
            };
        }
        let mut minima = Minima::new();
        let mut bottom = BottomValues::new(items.len().saturating_sub(size) + 1);
        each_shingle(&items, size, p, |h| {
            let h = fmix64(h);
            minima.add(h);
            bottom.add(h);
        });
        let values = bottom.finish().unwrap_or_else(|| {
            // Too many repeated shingles below the expected threshold: all of them, again.
            let mut all = BottomValues::all();
            each_shingle(&items, size, p, |h| all.add(fmix64(h)));
            all.finish()
                .expect("without a threshold every value is kept")
        });
        let minima = minima.densified();
        for (bin, minimum) in minima.iter().enumerate() {
            // b-bit minwise hashing keeps the low 4 bits; bin 2i in the low half of byte i.
            out[1 + bin / 2] |= ((minimum & 0xF) as u8) << (4 * (bin % 2));
        }
        Sketched {
            sketch: out,
            bands: Some(shingles::band_keys(&minima)),
            shingles: shingles::encode(out[0], &values),
        }
    }

    /// The Latin letters of a text that are in runs read as words (`_latin_in_words`).
    fn latin_in_words(&self, text: &str) -> usize {
        let mut in_words = 0;
        let mut run = LatinRun::default();
        for c in text.chars() {
            let class = self.class(c);
            if class == LATIN_LETTER || class == LATIN_CAPITAL || c.is_ascii_digit() {
                run.add(class, c);
            } else if run.chars > 0 {
                in_words += run.end();
            }
        }
        in_words + run.end()
    }

    /// The term hash (as `consumer.fingerprint.terms.hash_terms`) of every word, in order.
    fn word_hashes(&self, text: &str, into: &mut Vec<u64>) {
        let mut start = None;
        for (at, c) in text.char_indices() {
            match (self.is_word_char(c), start) {
                (true, None) => start = Some(at),
                (false, Some(s)) => {
                    into.push(murmur3::x64_128(&text.as_bytes()[s..at], 0).0);
                    start = None;
                }
                _ => {}
            }
        }
        if let Some(s) = start {
            into.push(murmur3::x64_128(&text.as_bytes()[s..], 0).0);
        }
    }
}

/// Polynomial hashes (multiplier `p`) of every `size` consecutive items; no more than `size`
/// items are one shingle of themselves, its hash seeded with their number (`_char_shingles`,
/// `_word_shingles`).
fn each_shingle(items: &[u64], size: usize, p: u64, mut emit: impl FnMut(u64)) {
    let polynomial = |seed: u64, window: &[u64]| {
        window
            .iter()
            .fold(seed, |h, &x| h.wrapping_mul(p).wrapping_add(x))
    };
    if items.len() <= size {
        emit(polynomial(items.len() as u64, items));
    } else {
        for window in items.windows(size) {
            emit(polynomial(0, window));
        }
    }
}

/// One-permutation MinHash with rotation densification
/// (`consumer.fingerprint.sketch.bin_minima`).
struct Minima {
    minima: [u64; MINIMA],
    present: u128,
}

impl Minima {
    fn new() -> Minima {
        Minima {
            minima: [0; MINIMA],
            present: 0,
        }
    }

    fn add(&mut self, h: u64) {
        let bin = (h >> BIN_SHIFT) as usize;
        if self.present >> bin & 1 == 0 || h < self.minima[bin] {
            self.minima[bin] = h;
            self.present |= 1u128 << bin;
        }
    }

    /// Every bin's minimum (`bin_minima`); at least one bin must be present.
    fn densified(&self) -> [u64; MINIMA] {
        let mut out = self.minima;
        for (bin, minimum) in out.iter_mut().enumerate() {
            if self.present >> bin & 1 == 0 {
                // An empty bin borrows the next non-empty bin's minimum (cyclically), salted
                // by the distance.
                let distance = self.present.rotate_right(bin as u32).trailing_zeros();
                let donor = (bin + distance as usize) % MINIMA;
                *minimum =
                    fmix64(self.minima[donor].wrapping_add(u64::from(distance).wrapping_mul(P1)));
            }
        }
        out
    }
}
