//! SplitMix64: the project's one small, seedable generator (Steele, Lea and
//! Flood, 2014). Samplers draw from it on the datapath; generators of test
//! data and workloads use it for reproducible streams. Not for anything
//! that needs unpredictability.

/// A SplitMix64 stream; the same seed gives the same numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// The stream that starts from `seed`.
    pub const fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// What the stream adds to its state at every step (the golden ratio).
    pub const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(Self::GAMMA);
        Self::mix(self.0)
    }

    /// The output function: a bijective mix of a state word (for callers
    /// that keep the state elsewhere, e.g. in an atomic counter).
    #[inline]
    pub const fn mix(mut z: u64) -> u64 {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0); the tiny bias of the modulo
    /// does not matter for test data and sampling.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// True with `probability` out of `u32::MAX` (`u32::MAX`: always), as
    /// a datapath `sample` action asks.
    #[inline]
    pub fn take(&mut self, probability: u32) -> bool {
        probability == u32::MAX || ((self.next_u64() >> 32) as u32) < probability
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_from_the_reference_implementation() {
        // The first outputs for seed 0 of the published algorithm.
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(r.next_u64(), 0x06c4_5d18_8009_454f);
    }

    #[test]
    fn below_and_take_stay_in_range() {
        let mut r = SplitMix64::new(7);
        assert!((0..1000).all(|_| r.below(10) < 10));
        assert_eq!(r.below(0), 0);
        assert!((0..100).all(|_| r.take(u32::MAX)));
        assert!((0..100).all(|_| !r.take(0)));
        let taken = (0..10_000).filter(|_| r.take(u32::MAX / 4)).count();
        assert!((2000..3000).contains(&taken), "{taken} of 10000 at 1/4");
    }
}
