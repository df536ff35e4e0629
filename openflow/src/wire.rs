//! Checked reading and writing of big-endian fields: every read says what
//! it was reading when the bytes ran out, so a short message becomes an
//! error that names the field, never a panic.

use crate::error::ParseError;

/// A cursor over untrusted bytes.
#[derive(Clone, Copy, Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// The OpenFlow version of the message being read (the encodings
    /// that differ between 1.3, 1.4 and 1.5 ask it); sub-readers keep it.
    version: u8,
}

impl<'a> Reader<'a> {
    /// A reader of OpenFlow 1.3 bytes.
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader::versioned(buf, crate::header::VERSION)
    }

    /// A reader of bytes of OpenFlow `version`.
    pub fn versioned(buf: &'a [u8], version: u8) -> Reader<'a> {
        Reader {
            buf,
            pos: 0,
            version,
        }
    }

    /// The version of the message being read.
    pub fn version(&self) -> u8 {
        self.version
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

    /// A sub-reader over one entry of a list whose first two bytes are
    /// its length (the entry's, those two included): the rest of it, once
    /// the length is at least `min` and fits.
    pub fn entry(&mut self, min: usize, what: &'static str) -> Result<Reader<'a>, ParseError> {
        let len = usize::from(self.u16(what)?);
        if len < min.max(2) {
            return Err(ParseError::BadLength { what, length: len });
        }
        self.sub(len - 2, what)
    }

    /// A sub-reader over the next `n` bytes.
    pub fn sub(&mut self, n: usize, what: &'static str) -> Result<Reader<'a>, ParseError> {
        let version = self.version;
        self.bytes(n, what).map(|b| Reader::versioned(b, version))
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
        // At most n - 1 bytes (the field ends with a NUL), cut between
        // characters.
        let mut k = s.len().min(n.saturating_sub(1));
        while !s.is_char_boundary(k) {
            k -= 1;
        }
        self.extend_from_slice(&s.as_bytes()[..k]);
        self.put_zeros(n - k);
    }
}

/// A fixed-size NUL-terminated string field as text: up to the first NUL
/// and at most the field's length less one (the spec's terminator), each
/// byte that is not UTF-8 read as `?`. The text is never longer than the
/// field, so it is written back as it was read.
pub fn c_string(b: &[u8]) -> String {
    let b = &b[..b.len().saturating_sub(1)];
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    let mut s = String::with_capacity(end);
    for chunk in b[..end].utf8_chunks() {
        s.push_str(chunk.valid());
        s.extend(std::iter::repeat_n('?', chunk.invalid().len()));
    }
    s
}

/// Writes a 16-bit length at `at` (the length of everything from `at`'s
/// structure start `start` to the end of `buf`).
pub fn patch_len(buf: &mut [u8], start: usize, at: usize) {
    let len = (buf.len() - start) as u16;
    buf[at..at + 2].copy_from_slice(&len.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_strings_read_back_as_they_are_written() {
        // 16 bytes that are not UTF-8 and no NUL (found by the fuzzer: the
        // lossy reading grew to 48 bytes and came back cut).
        let s = c_string(&[0xd8; 16]);
        assert_eq!(s, "?".repeat(15));
        let mut b = Vec::new();
        b.put_str(&s, 16);
        assert_eq!(c_string(&b), s);
        // A character the field would cut is left out whole.
        let name = format!("{}é", "a".repeat(14));
        let mut b = Vec::new();
        b.put_str(&name, 16);
        assert_eq!(b.len(), 16);
        assert_eq!(c_string(&b), "a".repeat(14));
        assert_eq!(c_string(b"vm1\0\0\0\0\0"), "vm1");
    }
}
