//! Checked reading and writing of big-endian fields: every read says what
//! it was reading when the bytes ran out, so a short message becomes an
//! error that names the field, never a panic.

use crate::error::ParseError;

/// A cursor over untrusted bytes.
#[derive(Clone, Copy, Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The next `n` bytes (`what` names them in the error).
    pub fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], ParseError> {
        if self.remaining() < n {
            return Err(ParseError::Truncated {
                what,
                need: n,
                have: self.remaining(),
            });
        }
        let b = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }

    pub fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], ParseError> {
        let b = self.bytes(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(b);
        Ok(a)
    }

    pub fn u8(&mut self, what: &'static str) -> Result<u8, ParseError> {
        Ok(self.array::<1>(what)?[0])
    }

    pub fn u16(&mut self, what: &'static str) -> Result<u16, ParseError> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }

    pub fn u32(&mut self, what: &'static str) -> Result<u32, ParseError> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }

    pub fn u64(&mut self, what: &'static str) -> Result<u64, ParseError> {
        Ok(u64::from_be_bytes(self.array(what)?))
    }

    /// Skips padding.
    pub fn skip(&mut self, n: usize, what: &'static str) -> Result<(), ParseError> {
        self.bytes(n, what).map(|_| ())
    }

    /// A sub-reader over the next `n` bytes.
    pub fn sub(&mut self, n: usize, what: &'static str) -> Result<Reader<'a>, ParseError> {
        self.bytes(n, what).map(Reader::new)
    }
}

/// Appends big-endian fields.
pub trait Put {
    fn put_u8(&mut self, v: u8);
    fn put_u16(&mut self, v: u16);
    fn put_u32(&mut self, v: u32);
    fn put_u64(&mut self, v: u64);
    fn put_zeros(&mut self, n: usize);
    /// `s` as a NUL-padded fixed-size string of `n` bytes (cut to `n - 1`).
    fn put_str(&mut self, s: &str, n: usize);
}

impl Put for Vec<u8> {
    fn put_u8(&mut self, v: u8) {
        self.push(v);
    }
    fn put_u16(&mut self, v: u16) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn put_zeros(&mut self, n: usize) {
        self.resize(self.len() + n, 0);
    }
    fn put_str(&mut self, s: &str, n: usize) {
        let b = s.as_bytes();
        let k = b.len().min(n.saturating_sub(1));
        self.extend_from_slice(&b[..k]);
        self.put_zeros(n - k);
    }
}

/// A fixed-size NUL-padded string field as text (up to the first NUL;
/// bytes that are not UTF-8 replaced).
pub fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// Writes a 16-bit length at `at` (the length of everything from `at`'s
/// structure start `start` to the end of `buf`).
pub fn patch_len(buf: &mut [u8], start: usize, at: usize) {
    let len = (buf.len() - start) as u16;
    buf[at..at + 2].copy_from_slice(&len.to_be_bytes());
}
