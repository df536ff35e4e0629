//! The wildcards a translation accumulates: the one door through which every
//! read of the packet's key is recorded.
//!
//! A megaflow's mask is the set of key bits some decision of the pipeline
//! depended on. Every lookup and every action that reads the key adds the bits
//! it read here, and nothing else widens or narrows the result. Bits the
//! pipeline itself has overwritten with a constant (a `set_field` before a
//! later table matches the field) are not the packet's: reading them says
//! nothing about the packet, so they are left wildcarded ([`Wildcards::write`]
//! marks them). That is one way eswitch's megaflows end up wider than Open
//! vSwitch's, which un-wildcards such bits on the packet.
//!
//! A field whose value the pipeline derived from the packet by arithmetic
//! (`dec_ttl`) is read whole: one bit of `ttl - 1` depends on every bit of
//! `ttl` ([`Wildcards::derive_whole`]). A `move` un-wildcards its source
//! bits and then marks its destination written.

use megaflow::{Field, FlowKey, Mask, KEY_WORDS};

/// Accumulated wildcards of one translation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wildcards {
    mask: Mask,
    written: Mask,
    /// Fields a read of any bit of reads whole (see `derive_whole`).
    whole: Mask,
    has_whole: bool,
}

impl Wildcards {
    /// Nothing read yet.
    pub fn new() -> Self {
        Wildcards::default()
    }

    /// The bits read so far: the megaflow mask.
    pub fn mask(&self) -> &Mask {
        &self.mask
    }

    /// Records that `bits` of `field` were read.
    #[inline]
    pub fn unwildcard(&mut self, field: Field, bits: u128) {
        let written = self.written.field(field);
        let old = self.mask.field(field);
        let new = old | (bits & !written);
        if new != old {
            self.mask.set_field(field, new);
            if self.has_whole {
                self.widen();
            }
        }
    }

    /// Extends every partly read field that is read whole to all its bits.
    fn widen(&mut self) {
        for &f in Field::ALL {
            if self.whole.field(f) != 0 && self.mask.field(f) != 0 {
                let all = f.layout().max_value() & !self.written.field(f);
                self.mask.set_field(f, all);
            }
        }
    }

    /// Records that the whole `field` was read.
    #[inline]
    pub fn unwildcard_field(&mut self, field: Field) {
        self.unwildcard(field, field.layout().max_value());
    }

    /// Records that the bits of `mask` were read (a classifier subtable's
    /// mask, a lookup stage).
    #[inline]
    pub fn unwildcard_mask(&mut self, mask: &Mask) {
        let m = mask.words();
        let wr = self.written.words();
        let cur = self.mask.words();
        let mut out = *cur;
        let mut changed = false;
        for i in 0..KEY_WORDS {
            let add = m[i] & !wr[i];
            if add & !cur[i] != 0 {
                out[i] |= add;
                changed = true;
            }
        }
        if changed {
            self.mask = Mask::from_words(out);
            if self.has_whole {
                self.widen();
            }
        }
    }

    /// Records that the top `n` bits of a prefix field (IPv4/IPv6 address,
    /// the port pair) were read.
    #[inline]
    pub fn unwildcard_prefix(&mut self, field: Field, n: u32) {
        let bits = field.layout().bits as u32;
        if n == 0 {
            return;
        }
        let ones = field.layout().max_value();
        let prefix = if n >= bits { ones } else { ones & !(ones >> n) };
        self.unwildcard(field, prefix);
    }

    /// Reads a field of `key`, recording the read.
    #[inline]
    pub fn read(&mut self, key: &FlowKey, field: Field) -> u128 {
        self.unwildcard_field(field);
        key.field(field)
    }

    /// Reads the `bits` of a field of `key`, recording only those.
    #[inline]
    pub fn read_bits(&mut self, key: &FlowKey, field: Field, bits: u128) -> u128 {
        self.unwildcard(field, bits);
        key.field(field) & bits
    }

    /// Marks `bits` of `field` as overwritten by the pipeline with a value
    /// that does not depend on the packet: later reads of them are free.
    #[inline]
    pub fn write(&mut self, field: Field, bits: u128) {
        let old = self.written.field(field);
        self.written.set_field(field, old | bits);
    }

    /// Records that `bits` of the *packet's* `field` were read, even where
    /// the pipeline has since overwritten the field (reading an original
    /// VLAN tag after the tags were rearranged).
    #[inline]
    pub fn unwildcard_packet(&mut self, field: Field, bits: u128) {
        let old = self.mask.field(field);
        if old | bits != old {
            self.mask.set_field(field, old | bits);
            if self.has_whole {
                self.widen();
            }
        }
    }

    /// The bits written so far (see [`Wildcards::restore_written`]).
    pub fn written(&self) -> Mask {
        self.written
    }

    /// Puts back what was written at `written` (the fields of a packet
    /// copy that a group bucket changed hold the packet's values again).
    pub fn restore_written(&mut self, written: Mask) {
        self.written = written;
    }

    /// True when all of `bits` of `field` hold pipeline constants.
    #[inline]
    pub fn is_written(&self, field: Field, bits: u128) -> bool {
        self.written.field(field) & bits == bits
    }

    /// Forgets that `field` was overwritten: it holds the packet's value
    /// again (an original VLAN tag back in its original place).
    #[inline]
    pub fn unwrite(&mut self, field: Field) {
        self.written.set_field(field, 0);
    }

    /// Marks `field` as derived from its own packet value by arithmetic
    /// (`dec_ttl`): it is no longer a constant, and from now on reading any
    /// bit of it reads the whole field.
    pub fn derive_whole(&mut self, field: Field) {
        self.written.set_field(field, 0);
        self.whole.set_exact(field);
        self.has_whole = true;
        self.widen();
    }

    /// Removes pipeline-internal fields from the mask: metadata and the
    /// registers are zero in every packet a port delivers, so a lookup on
    /// them tells packets apart by nothing. Then makes the prerequisites of
    /// what is matched exact, as Open vSwitch's datapath interface does:
    /// L4 bits need the exact IP protocol and Ethernet type, L3 bits the
    /// exact Ethernet type. Narrowing is always sound, and a device cannot
    /// match a port without its protocol (nor can the mlx5 FDB), so
    /// without this such megaflows could never be offloaded.
    pub fn finish(mut self) -> Mask {
        for f in PIPELINE_FIELDS {
            self.mask.set_field(*f, 0);
        }
        let any = |m: &Mask, fs: &[Field]| fs.iter().any(|&f| !m.is_wildcard(f));
        if any(&self.mask, L4_FIELDS) {
            self.mask.set_exact(Field::IpProto);
        }
        if any(&self.mask, L3_FIELDS) {
            self.mask.set_exact(Field::EthType);
        }
        // "Not a later fragment" (OVN's router reads ip.later_frag) also
        // reads whether the packet is a fragment at all: a device has one
        // fragment bit, and "no fragment" is what it can match.
        let frag = self.mask.field(Field::IpFrag);
        if frag & u128::from(megaflow::key::FRAG_LATER) != 0 {
            self.mask
                .set_field(Field::IpFrag, frag | u128::from(megaflow::key::FRAG_ANY));
        }
        self.mask
    }
}

/// Fields whose meaning depends on the IP protocol.
const L4_FIELDS: &[Field] = &[Field::TpSrc, Field::TpDst, Field::TcpFlags, Field::NdTarget];

/// Fields whose meaning depends on the Ethernet type.
const L3_FIELDS: &[Field] = &[
    Field::IpProto,
    Field::IpDscp,
    Field::IpEcn,
    Field::IpTtl,
    Field::IpFrag,
    Field::Ipv6Label,
    Field::Ipv4Src,
    Field::Ipv4Dst,
    Field::Ipv6Src,
    Field::Ipv6Dst,
    Field::NdTarget,
    Field::ArpSha,
    Field::ArpTha,
];

/// Fields every packet enters the pipeline with zero: metadata, the
/// registers, and `conj_id` (set only inside a table's lookup).
pub const PIPELINE_FIELDS: &[Field] = &pipeline_fields();

const fn pipeline_fields() -> [Field; megaflow::key::REGS.len() + 2] {
    let mut out = [Field::Metadata; megaflow::key::REGS.len() + 2];
    let mut i = 0;
    while i < megaflow::key::REGS.len() {
        out[i + 1] = megaflow::key::REGS[i];
        i += 1;
    }
    out[i + 1] = Field::ConjId;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_a_later_fragment_is_finished_as_no_fragment_at_all() {
        let mut wc = Wildcards::new();
        wc.unwildcard(Field::IpFrag, u128::from(megaflow::key::FRAG_LATER));
        let m = wc.finish();
        let both = u128::from(megaflow::key::FRAG_ANY | megaflow::key::FRAG_LATER);
        assert_eq!(m.field(Field::IpFrag), both);
        // "A fragment or not" alone stays as read.
        let mut wc = Wildcards::new();
        wc.unwildcard(Field::IpFrag, u128::from(megaflow::key::FRAG_ANY));
        assert_eq!(
            wc.finish().field(Field::IpFrag),
            u128::from(megaflow::key::FRAG_ANY)
        );
    }

    #[test]
    fn written_bits_are_not_unwildcarded() {
        let mut wc = Wildcards::new();
        wc.write(Field::Ipv4Src, 0xffff_0000);
        wc.unwildcard_field(Field::Ipv4Src);
        assert_eq!(wc.mask().field(Field::Ipv4Src), 0x0000_ffff);
        wc.derive_whole(Field::IpTtl);
        wc.unwildcard(Field::IpTtl, 0x80);
        assert_eq!(wc.mask().field(Field::IpTtl), 0xff);
    }

    #[test]
    fn prefixes_and_pipeline_fields() {
        let mut wc = Wildcards::new();
        wc.unwildcard_prefix(Field::Ipv4Dst, 9);
        assert_eq!(wc.mask().field(Field::Ipv4Dst), 0xff80_0000);
        wc.unwildcard_prefix(Field::Ipv6Src, 200);
        assert!(wc.mask().is_exact(Field::Ipv6Src));
        wc.unwildcard_field(Field::Reg3);
        wc.unwildcard_field(Field::Metadata);
        let m = wc.finish();
        assert!(m.is_wildcard(Field::Reg3) && m.is_wildcard(Field::Metadata));
        assert!(m.is_exact(Field::Ipv6Src));
    }
}
