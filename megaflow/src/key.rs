//! Flow keys, masks and matches.
//!
//! A [`FlowKey`] is a fixed array of [`KEY_WORDS`] `u64` words; every field a
//! packet or the pipeline can be classified on has a fixed place in it, given
//! once, as data, by the field table below ([`Field::layout`]). A [`Mask`] has
//! the same layout: a 1 bit means "this key bit matters". A [`Match`] is a key
//! and a mask whose wildcarded key bits are zero; it can only be built through
//! constructors that enforce that, so two matches that describe the same set of
//! packets compare and hash equal.
//!
//! Layout choices (see the table in `fields!` below):
//! - fields a lookup usually needs together share a word (eth_dst with
//!   eth_type, tp_src with tp_dst and tcp_flags), so typical masks touch few
//!   words and the megaflow subtables store and hash only those words;
//! - like Open vSwitch, ARP reuses the IPv4 slots (`arp_op` = `ip_proto`,
//!   `arp_spa`/`arp_tpa` = `ipv4_src`/`ipv4_dst`), ICMP type/code sit in
//!   `tp_src`/`tp_dst`, and ND's SLL/TLL share `arp_sha`/`arp_tha`;
//! - a VLAN TCI carries [`VLAN_PRESENT`] (the CFI bit position) so "no tag" and
//!   "tag with VID 0" differ.
//!
//! Thread-safety: plain `Copy` values.

use std::fmt;

/// Number of 64-bit words in a [`FlowKey`] and a [`Mask`].
pub const KEY_WORDS: usize = 44;

/// Bit set in a VLAN TCI field when a tag is present (the CFI/DEI position, as
/// Open vSwitch uses it).
pub const VLAN_PRESENT: u16 = 0x1000;
/// VLAN id bits of a TCI.
pub const VLAN_VID_MASK: u16 = 0x0fff;
/// VLAN priority (PCP) bits of a TCI.
pub const VLAN_PCP_MASK: u16 = 0xe000;

/// `ip_frag` bit: the packet is a fragment (first or later).
pub const FRAG_ANY: u8 = 1;
/// `ip_frag` bit: the packet is a later fragment (offset != 0, no L4 header).
pub const FRAG_LATER: u8 = 2;

/// Where a field lives in the key: word index, shift of its least significant
/// bit inside that word, and width in bits. Fields of 128 bits span two words,
/// `word` holding the high half.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldLayout {
    pub word: u8,
    pub shift: u8,
    pub bits: u8,
}

impl FieldLayout {
    /// Mask of the field's bits inside its (first) word; all ones for 64- and
    /// 128-bit fields.
    #[inline]
    pub const fn word_mask(self) -> u64 {
        if self.bits >= 64 {
            u64::MAX
        } else {
            ((1u64 << self.bits) - 1) << self.shift
        }
    }

    /// All-ones value of the field's width.
    #[inline]
    pub const fn max_value(self) -> u128 {
        if self.bits >= 128 {
            u128::MAX
        } else {
            (1u128 << self.bits) - 1
        }
    }
}

macro_rules! fields {
    ($( $(#[$doc:meta])* $variant:ident $name:literal ($word:expr, $shift:expr, $bits:tt) $get:ident $set:ident; )*) => {
        /// Every field of a [`FlowKey`].
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Field {
            $( $(#[$doc])* $variant, )*
        }

        impl Field {
            /// All fields, in layout order.
            pub const ALL: &'static [Field] = &[ $( Field::$variant, )* ];

            /// The field's place in the key.
            #[inline]
            pub const fn layout(self) -> FieldLayout {
                match self {
                    $( Field::$variant => FieldLayout { word: $word, shift: $shift, bits: $bits }, )*
                }
            }

            /// Short lowercase name used in dumps (`eth_dst`, `ipv4_src`, ...).
            pub const fn name(self) -> &'static str {
                match self {
                    $( Field::$variant => $name, )*
                }
            }
        }

        impl FlowKey {
            $(
                fields!(@accessors $variant $get $set $bits);
            )*
        }
    };
    (@accessors $variant:ident $get:ident $set:ident 128) => {
        #[doc = concat!("The `", stringify!($get), "` field.")]
        #[inline]
        pub fn $get(&self) -> u128 { self.field(Field::$variant) }
        #[doc = concat!("Sets the `", stringify!($get), "` field.")]
        #[inline]
        pub fn $set(&mut self, v: u128) { self.set_field(Field::$variant, v) }
    };
    (@accessors $variant:ident $get:ident $set:ident $bits:tt) => {
        #[doc = concat!("The `", stringify!($get), "` field.")]
        #[inline]
        pub fn $get(&self) -> u64 {
            let l = Field::$variant.layout();
            (self.w[l.word as usize] & l.word_mask()) >> l.shift
        }
        #[doc = concat!("Sets the `", stringify!($get), "` field; bits above its width are ignored.")]
        #[inline]
        pub fn $set(&mut self, v: u64) {
            let l = Field::$variant.layout();
            let m = l.word_mask();
            let w = &mut self.w[l.word as usize];
            *w = (*w & !m) | ((v << l.shift) & m);
        }
    };
}

// Word map (bit 63 is the most significant):
//  0 in_port[63:32] pkt_mark[31:0]     11 ip_proto dscp|ecn ttl frag .. ipv6_label[19:0]
//  1 metadata                           12 ipv4_src[63:32] ipv4_dst[31:0]
//  2..5 reg0..reg7 (two per word)       13 tp_src tp_dst .. tcp_flags[15:0]
//  6 tun_id                             14,15 ipv6_src
//  7 tun_src tun_dst                    16,17 ipv6_dst
//  8 eth_dst[63:16] eth_type[15:0]      18,19 nd_target
//  9 eth_src[63:16] vlan_tci[15:0]      20 arp_sha / nd_sll [63:16]
// 10 vlan_tpid vlan2_tpid vlan2_tci ..  21 arp_tha / nd_tll [63:16]
// 22,23 tun_ipv6_src   24,25 tun_ipv6_dst
// 26 tun_flags[63:48] tun_tos[47:40] tun_ttl[39:32] tun_tp_src[31:16] tun_tp_dst[15:0]
// 27,28 tun_opts (Geneve option data, byte 0 most significant)
// 29 tun_md_present (bit n: tun_metadata<n> present)
// 30 recirc_id[63:32] dp_hash[31:0]
// 31 ct_state[63:56] ct_nw_proto[55:48] ct_zone[47:32] ct_mark[31:0]
// 32,33 ct_label   34 ct_nw_src[63:32] ct_nw_dst[31:0]
// 35,36 ct_ipv6_src   37,38 ct_ipv6_dst   39 ct_tp_src[63:48] ct_tp_dst[47:32] conj_id[31:0]
// 40..43 reg8..reg15 (two per word: xreg<n> is word 2+n for n < 4, 36+n
//    after; xxreg<n> the two words of four registers)
fields! {
    /// Ingress port (datapath port number).
    InPort "in_port" (0, 32, 32) in_port set_in_port;
    /// Packet mark (pipeline metadata set by actions, zero at ingress).
    PktMark "pkt_mark" (0, 0, 32) pkt_mark set_pkt_mark;
    /// OpenFlow metadata.
    Metadata "metadata" (1, 0, 64) metadata set_metadata;
    /// Pipeline register 0.
    Reg0 "reg0" (2, 32, 32) reg0 set_reg0;
    /// Pipeline register 1.
    Reg1 "reg1" (2, 0, 32) reg1 set_reg1;
    /// Pipeline register 2.
    Reg2 "reg2" (3, 32, 32) reg2 set_reg2;
    /// Pipeline register 3.
    Reg3 "reg3" (3, 0, 32) reg3 set_reg3;
    /// Pipeline register 4.
    Reg4 "reg4" (4, 32, 32) reg4 set_reg4;
    /// Pipeline register 5.
    Reg5 "reg5" (4, 0, 32) reg5 set_reg5;
    /// Pipeline register 6.
    Reg6 "reg6" (5, 32, 32) reg6 set_reg6;
    /// Pipeline register 7.
    Reg7 "reg7" (5, 0, 32) reg7 set_reg7;
    /// Tunnel id (VXLAN VNI).
    TunId "tun_id" (6, 0, 64) tun_id set_tun_id;
    /// Tunnel outer IPv4 source.
    TunSrc "tun_src" (7, 32, 32) tun_src set_tun_src;
    /// Tunnel outer IPv4 destination.
    TunDst "tun_dst" (7, 0, 32) tun_dst set_tun_dst;
    /// Ethernet destination address.
    EthDst "eth_dst" (8, 16, 48) eth_dst set_eth_dst;
    /// Ethertype after any VLAN tags (0x05ff and below: 802.3 length, stored as 0x05ff).
    EthType "eth_type" (8, 0, 16) eth_type set_eth_type;
    /// Ethernet source address.
    EthSrc "eth_src" (9, 16, 48) eth_src set_eth_src;
    /// Outer VLAN TCI with [`VLAN_PRESENT`] set when tagged.
    VlanTci "vlan_tci" (9, 0, 16) vlan_tci set_vlan_tci;
    /// Outer VLAN TPID (0x8100 or 0x88a8), zero when untagged.
    VlanTpid "vlan_tpid" (10, 48, 16) vlan_tpid set_vlan_tpid;
    /// Inner VLAN TPID, zero when there is no second tag.
    Vlan2Tpid "vlan2_tpid" (10, 32, 16) vlan2_tpid set_vlan2_tpid;
    /// Inner VLAN TCI with [`VLAN_PRESENT`] set when double tagged.
    Vlan2Tci "vlan2_tci" (10, 16, 16) vlan2_tci set_vlan2_tci;
    /// IP protocol / IPv6 next header after extension headers; ARP opcode.
    IpProto "ip_proto" (11, 56, 8) ip_proto set_ip_proto;
    /// IP DSCP (6 bits, unshifted).
    IpDscp "ip_dscp" (11, 50, 6) ip_dscp set_ip_dscp;
    /// IP ECN (2 bits).
    IpEcn "ip_ecn" (11, 48, 2) ip_ecn set_ip_ecn;
    /// IPv4 TTL / IPv6 hop limit.
    IpTtl "ip_ttl" (11, 40, 8) ip_ttl set_ip_ttl;
    /// Fragment state: [`FRAG_ANY`] | [`FRAG_LATER`].
    IpFrag "ip_frag" (11, 32, 8) ip_frag set_ip_frag;
    /// IPv6 flow label (20 bits).
    Ipv6Label "ipv6_label" (11, 0, 20) ipv6_label set_ipv6_label;
    /// IPv4 source; ARP sender protocol address.
    Ipv4Src "ipv4_src" (12, 32, 32) ipv4_src set_ipv4_src;
    /// IPv4 destination; ARP target protocol address.
    Ipv4Dst "ipv4_dst" (12, 0, 32) ipv4_dst set_ipv4_dst;
    /// TCP/UDP/SCTP source port; ICMP type.
    TpSrc "tp_src" (13, 48, 16) tp_src set_tp_src;
    /// TCP/UDP/SCTP destination port; ICMP code.
    TpDst "tp_dst" (13, 32, 16) tp_dst set_tp_dst;
    /// TCP flags (12 bits: NS CWR ECE URG ACK PSH RST SYN FIN).
    TcpFlags "tcp_flags" (13, 0, 16) tcp_flags set_tcp_flags;
    /// IPv6 source.
    Ipv6Src "ipv6_src" (14, 0, 128) ipv6_src set_ipv6_src;
    /// IPv6 destination.
    Ipv6Dst "ipv6_dst" (16, 0, 128) ipv6_dst set_ipv6_dst;
    /// ICMPv6 neighbour discovery target.
    NdTarget "nd_target" (18, 0, 128) nd_target set_nd_target;
    /// ARP sender hardware address; ND source link-layer address.
    ArpSha "arp_sha" (20, 16, 48) arp_sha set_arp_sha;
    /// ARP target hardware address; ND target link-layer address.
    ArpTha "arp_tha" (21, 16, 48) arp_tha set_arp_tha;
    /// Tunnel outer IPv6 source.
    TunIpv6Src "tun_ipv6_src" (22, 0, 128) tun_ipv6_src set_tun_ipv6_src;
    /// Tunnel outer IPv6 destination.
    TunIpv6Dst "tun_ipv6_dst" (24, 0, 128) tun_ipv6_dst set_tun_ipv6_dst;
    /// Tunnel flags ([`TUN_FLAG_OAM`]).
    TunFlags "tun_flags" (26, 48, 16) tun_flags set_tun_flags;
    /// Tunnel outer IP TOS / traffic class.
    TunTos "tun_tos" (26, 40, 8) tun_tos set_tun_tos;
    /// Tunnel outer IP TTL / hop limit.
    TunTtl "tun_ttl" (26, 32, 8) tun_ttl set_tun_ttl;
    /// Tunnel outer UDP source port.
    TunTpSrc "tun_tp_src" (26, 16, 16) tun_tp_src set_tun_tp_src;
    /// Tunnel outer UDP destination port.
    TunTpDst "tun_tp_dst" (26, 0, 16) tun_tp_dst set_tun_tp_dst;
    /// Geneve option data: [`TUN_OPT_SPACE`] bytes, where the bridge's TLV
    /// table places each `tun_metadata<n>` (option-space byte 0 is the
    /// most significant).
    TunOpts "tun_opts" (27, 0, 128) tun_opts set_tun_opts;
    /// Bit n: the packet carried the option `tun_metadata<n>` maps.
    TunMdPresent "tun_md_present" (29, 0, 64) tun_md_present set_tun_md_present;
    /// Recirculation id: 0 for a packet from a port, else the stage a
    /// `recirc` action sent it to.
    RecircId "recirc_id" (30, 32, 32) recirc_id set_recirc_id;
    /// The datapath's hash of the packet (`hash` action), for `dp_hash`
    /// select groups.
    DpHash "dp_hash" (30, 0, 32) dp_hash set_dp_hash;
    /// Connection tracking state ([`CS_NEW`] ...), zero until `ct()`.
    CtState "ct_state" (31, 56, 8) ct_state set_ct_state;
    /// The tracked connection's original-direction protocol.
    CtNwProto "ct_nw_proto" (31, 48, 8) ct_nw_proto set_ct_nw_proto;
    /// The conntrack zone of the last `ct()`.
    CtZone "ct_zone" (31, 32, 16) ct_zone set_ct_zone;
    /// The connection's mark.
    CtMark "ct_mark" (31, 0, 32) ct_mark set_ct_mark;
    /// The connection's label.
    CtLabel "ct_label" (32, 0, 128) ct_label set_ct_label;
    /// The original direction's IPv4 source.
    CtNwSrc "ct_nw_src" (34, 32, 32) ct_nw_src set_ct_nw_src;
    /// The original direction's IPv4 destination.
    CtNwDst "ct_nw_dst" (34, 0, 32) ct_nw_dst set_ct_nw_dst;
    /// The original direction's IPv6 source.
    CtIpv6Src "ct_ipv6_src" (35, 0, 128) ct_ipv6_src set_ct_ipv6_src;
    /// The original direction's IPv6 destination.
    CtIpv6Dst "ct_ipv6_dst" (37, 0, 128) ct_ipv6_dst set_ct_ipv6_dst;
    /// The original direction's L4 source port (ICMP: type).
    CtTpSrc "ct_tp_src" (39, 48, 16) ct_tp_src set_ct_tp_src;
    /// The original direction's L4 destination port (ICMP: code).
    CtTpDst "ct_tp_dst" (39, 32, 16) ct_tp_dst set_ct_tp_dst;
    /// The conjunctive match a lookup completed (`conj_id`): zero in every
    /// packet; a table sets it only while it looks for the flow that
    /// matches `conj_id=N` (see ofproto's classifier).
    ConjId "conj_id" (39, 0, 32) conj_id set_conj_id;
    /// Pipeline register 8.
    Reg8 "reg8" (40, 32, 32) reg8 set_reg8;
    /// Pipeline register 9.
    Reg9 "reg9" (40, 0, 32) reg9 set_reg9;
    /// Pipeline register 10.
    Reg10 "reg10" (41, 32, 32) reg10 set_reg10;
    /// Pipeline register 11.
    Reg11 "reg11" (41, 0, 32) reg11 set_reg11;
    /// Pipeline register 12.
    Reg12 "reg12" (42, 32, 32) reg12 set_reg12;
    /// Pipeline register 13.
    Reg13 "reg13" (42, 0, 32) reg13 set_reg13;
    /// Pipeline register 14.
    Reg14 "reg14" (43, 32, 32) reg14 set_reg14;
    /// Pipeline register 15.
    Reg15 "reg15" (43, 0, 32) reg15 set_reg15;
}

/// The registers `reg0`..`reg15`, in order.
pub const REGS: [Field; 16] = [
    Field::Reg0,
    Field::Reg1,
    Field::Reg2,
    Field::Reg3,
    Field::Reg4,
    Field::Reg5,
    Field::Reg6,
    Field::Reg7,
    Field::Reg8,
    Field::Reg9,
    Field::Reg10,
    Field::Reg11,
    Field::Reg12,
    Field::Reg13,
    Field::Reg14,
    Field::Reg15,
];

/// `ct_state` bits, as Open vSwitch's `CS_*` (`lib/packets.h`).
pub const CS_NEW: u8 = 0x01;
/// Part of an established connection.
pub const CS_ESTABLISHED: u8 = 0x02;
/// Related to an established connection (an ICMP error quoting it).
pub const CS_RELATED: u8 = 0x04;
/// In the reply direction.
pub const CS_REPLY_DIR: u8 = 0x08;
/// Invalid: could not be tracked.
pub const CS_INVALID: u8 = 0x10;
/// Tracked: went through `ct()`.
pub const CS_TRACKED: u8 = 0x20;
/// Source NATed.
pub const CS_SRC_NAT: u8 = 0x40;
/// Destination NATed.
pub const CS_DST_NAT: u8 = 0x80;

/// The fields a packet gets from recirculation and connection tracking:
/// zero for a packet from a port until `recirc`, `hash` or `ct()` sets
/// them.
pub const PACKET_META_FIELDS: [Field; 13] = [
    Field::RecircId,
    Field::DpHash,
    Field::CtState,
    Field::CtNwProto,
    Field::CtZone,
    Field::CtMark,
    Field::CtLabel,
    Field::CtNwSrc,
    Field::CtNwDst,
    Field::CtIpv6Src,
    Field::CtIpv6Dst,
    Field::CtTpSrc,
    Field::CtTpDst,
];

/// The tracking fields' bits in each word (128-bit fields in both of
/// theirs), from the field table at compile time.
const CT_BITS: [u64; KEY_WORDS] = {
    let mut bits = [0u64; KEY_WORDS];
    let mut i = 2;
    while i < PACKET_META_FIELDS.len() {
        let l = PACKET_META_FIELDS[i].layout();
        bits[l.word as usize] |= l.word_mask();
        if l.bits > 64 {
            bits[l.word as usize + 1] = u64::MAX;
        }
        i += 1;
    }
    bits
};

/// The first and one past the last word with tracking bits.
const CT_WORDS: (usize, usize) = {
    let (mut first, mut last) = (KEY_WORDS, 0);
    let mut w = 0;
    while w < KEY_WORDS {
        if CT_BITS[w] != 0 {
            if first == KEY_WORDS {
                first = w;
            }
            last = w + 1;
        }
        w += 1;
    }
    (first, last)
};

/// Writes what `ct()` left (`m`) into the key's `ct_*` fields, for the
/// next stage to match; all zero when the packet is not tracked (after
/// `ct_clear`). Once per tracked stage: the words are cleared and written
/// at the places the field table gives, known at compile time.
#[inline]
pub fn write_ct_meta(key: &mut FlowKey, m: &conntrack::CtMeta) {
    /// `v` at field `f`'s place in its word.
    #[inline(always)]
    fn put(key: &mut FlowKey, f: Field, v: u64) {
        let l = f.layout();
        key.w[l.word as usize] |= (v << l.shift) & l.word_mask();
    }
    /// A 128-bit field: high half in its word, low half in the next.
    #[inline(always)]
    fn put128(key: &mut FlowKey, f: Field, v: u128) {
        let w = f.layout().word as usize;
        key.w[w] = (v >> 64) as u64;
        key.w[w + 1] = v as u64;
    }
    let (first, last) = CT_WORDS;
    for (w, b) in key.w[first..last].iter_mut().zip(&CT_BITS[first..last]) {
        *w &= !b;
    }
    if m.state == 0 {
        return;
    }
    put(key, Field::CtState, u64::from(m.state));
    put(key, Field::CtZone, u64::from(m.zone));
    put(key, Field::CtMark, u64::from(m.mark));
    if m.label != 0 {
        put128(key, Field::CtLabel, m.label);
    }
    let o = &m.orig;
    if o.proto != 0 {
        put(key, Field::CtNwProto, u64::from(o.proto));
        if o.v6 {
            put128(key, Field::CtIpv6Src, u128::from_be_bytes(o.src.0));
            put128(key, Field::CtIpv6Dst, u128::from_be_bytes(o.dst.0));
        } else {
            put(key, Field::CtNwSrc, u64::from(o.src.as_v4().to_bits()));
            put(key, Field::CtNwDst, u64::from(o.dst.as_v4().to_bits()));
        }
        let (sp, dp) = m.orig_ports();
        put(key, Field::CtTpSrc, u64::from(sp));
        put(key, Field::CtTpDst, u64::from(dp));
    }
}

/// The tracking state a key carries (what [`write_ct_meta`] wrote).
pub fn read_ct_meta(key: &FlowKey) -> conntrack::CtMeta {
    let state = key.ct_state() as u8;
    if state == 0 {
        return conntrack::CtMeta::default();
    }
    let proto = key.ct_nw_proto() as u8;
    let mut orig = conntrack::Tuple::default();
    if proto != 0 {
        let v6 = key.ct_ipv6_src() != 0 || key.ct_ipv6_dst() != 0;
        orig.proto = proto;
        orig.v6 = v6;
        if v6 {
            orig.src = conntrack::Addr(key.ct_ipv6_src().to_be_bytes());
            orig.dst = conntrack::Addr(key.ct_ipv6_dst().to_be_bytes());
        } else {
            orig.src = conntrack::Addr::v4((key.ct_nw_src() as u32).to_be_bytes());
            orig.dst = conntrack::Addr::v4((key.ct_nw_dst() as u32).to_be_bytes());
        }
        let (sp, dp) = (key.ct_tp_src() as u16, key.ct_tp_dst() as u16);
        if orig.is_icmp() {
            orig.dport = u16::from_be_bytes([sp as u8, dp as u8]);
        } else {
            orig.sport = sp;
            orig.dport = dp;
        }
    }
    conntrack::CtMeta {
        state,
        zone: key.ct_zone() as u16,
        mark: key.ct_mark() as u32,
        label: key.ct_label(),
        orig,
    }
}

/// Bytes of Geneve option data a key holds (all mapped options together).
pub const TUN_OPT_SPACE: usize = 16;

/// `tun_flags` bit: Geneve's OAM bit was set (Open vSwitch's `oam`).
pub const TUN_FLAG_OAM: u64 = 1;

/// The tunnel metadata fields: set at decap, zero for a packet from no
/// tunnel.
pub const TUNNEL_FIELDS: [Field; 12] = [
    Field::TunId,
    Field::TunSrc,
    Field::TunDst,
    Field::TunIpv6Src,
    Field::TunIpv6Dst,
    Field::TunFlags,
    Field::TunTos,
    Field::TunTtl,
    Field::TunTpSrc,
    Field::TunTpDst,
    Field::TunOpts,
    Field::TunMdPresent,
];

/// The first key word past the packet's own headers (the words after it
/// hold tunnel metadata).
pub(crate) const HEADER_END: usize = 22;

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Reads a field's value out of a word array.
#[inline]
fn read_field(w: &[u64; KEY_WORDS], field: Field) -> u128 {
    let l = field.layout();
    let i = l.word as usize;
    if l.bits == 128 {
        ((w[i] as u128) << 64) | w[i + 1] as u128
    } else {
        ((w[i] & l.word_mask()) >> l.shift) as u128
    }
}

/// Writes a field's value into a word array; bits above its width are ignored.
#[inline]
fn write_field(w: &mut [u64; KEY_WORDS], field: Field, v: u128) {
    let l = field.layout();
    let i = l.word as usize;
    if l.bits == 128 {
        w[i] = (v >> 64) as u64;
        w[i + 1] = v as u64;
    } else {
        let m = l.word_mask();
        w[i] = (w[i] & !m) | (((v as u64) << l.shift) & m);
    }
}

/// The classification key of one packet: every header field and pipeline
/// metadata value, at fixed places.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct FlowKey {
    w: [u64; KEY_WORDS],
}

/// Hashed as one [`hash_words`] value: its two independent multiply chains
/// take a quarter of the dependent steps a byte-wise `Hash` of 40 words
/// does (the derived impl was most of `MegaflowCache::insert`'s time, in
/// its `by_mask` probe).
impl std::hash::Hash for FlowKey {
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(hash_words(&self.w));
    }
}

impl Default for FlowKey {
    fn default() -> Self {
        FlowKey::ZERO
    }
}

impl FlowKey {
    /// The all-zero key.
    pub const ZERO: FlowKey = FlowKey { w: [0; KEY_WORDS] };

    /// Builds a key from raw words (for decoders and tests).
    pub const fn from_words(w: [u64; KEY_WORDS]) -> Self {
        FlowKey { w }
    }

    /// The raw words.
    #[inline]
    pub fn words(&self) -> &[u64; KEY_WORDS] {
        &self.w
    }

    /// The raw words, for writers in this crate that fill whole words.
    #[inline]
    pub(crate) fn words_mut(&mut self) -> &mut [u64; KEY_WORDS] {
        &mut self.w
    }

    /// Any field's value, zero-extended.
    #[inline]
    pub fn field(&self, field: Field) -> u128 {
        read_field(&self.w, field)
    }

    /// Sets any field; bits above its width are ignored.
    #[inline]
    pub fn set_field(&mut self, field: Field, v: u128) {
        write_field(&mut self.w, field, v)
    }

    /// ICMP type (alias of `tp_src`).
    #[inline]
    pub fn icmp_type(&self) -> u64 {
        self.tp_src()
    }

    /// ICMP code (alias of `tp_dst`).
    #[inline]
    pub fn icmp_code(&self) -> u64 {
        self.tp_dst()
    }

    /// ARP opcode (alias of `ip_proto`).
    #[inline]
    pub fn arp_op(&self) -> u64 {
        self.ip_proto()
    }

    /// Hash of the words a packet brings (in_port and the headers, words 0
    /// and 8..22), skipping the pipeline metadata, registers and tunnel words,
    /// which are zero for a packet fresh from a port (tunnel receive will set
    /// the tunnel words; tenants with identical inner headers then share a
    /// set, which costs EMC hits, never correctness). The exact-match cache
    /// indexes by it; keys that differ only in the skipped words share a set
    /// and are told apart by verification against the megaflow.
    #[inline]
    pub fn packet_hash(&self) -> u64 {
        // Word 0, the headers (8..HEADER_END), and the stage and tracking
        // state (words 30 and 31: recirc_id, ct_state, ct_zone, ct_mark):
        // a packet's stages are different keys with different megaflows,
        // and sharing a set would make each evict the other (Open vSwitch
        // mixes the recirculation depth into its EMC hash likewise).
        let mut a = [0u64; HEADER_END - 5];
        a[0] = self.w[0];
        a[1..HEADER_END - 7].copy_from_slice(&self.w[8..HEADER_END]);
        a[HEADER_END - 7] = self.w[30];
        a[HEADER_END - 6] = self.w[31];
        hash_words(&a)
    }

    /// This key with the mask applied.
    #[inline]
    pub fn masked(&self, mask: &Mask) -> FlowKey {
        let mut out = *self;
        for (o, m) in out.w.iter_mut().zip(mask.w.iter()) {
            *o &= m;
        }
        out
    }
}

impl fmt::Debug for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("FlowKey");
        for &field in Field::ALL {
            let v = self.field(field);
            if v != 0 {
                d.field(field.name(), &format_args!("{v:#x}"));
            }
        }
        d.finish()
    }
}

/// Which key bits matter: same layout as [`FlowKey`].
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct Mask {
    w: [u64; KEY_WORDS],
}

/// Hashed as [`FlowKey`] is, for the same reason.
impl std::hash::Hash for Mask {
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(hash_words(&self.w));
    }
}

impl Default for Mask {
    fn default() -> Self {
        Mask::EMPTY
    }
}

impl Mask {
    /// Matches everything.
    pub const EMPTY: Mask = Mask { w: [0; KEY_WORDS] };
    /// Matches exactly one key.
    pub const EXACT: Mask = Mask {
        w: [u64::MAX; KEY_WORDS],
    };

    /// Builds a mask from raw words.
    pub const fn from_words(w: [u64; KEY_WORDS]) -> Self {
        Mask { w }
    }

    /// The raw words.
    #[inline]
    pub fn words(&self) -> &[u64; KEY_WORDS] {
        &self.w
    }

    /// The mask bits of one field.
    #[inline]
    pub fn field(&self, field: Field) -> u128 {
        read_field(&self.w, field)
    }

    /// Sets the mask bits of one field.
    #[inline]
    pub fn set_field(&mut self, field: Field, bits: u128) {
        write_field(&mut self.w, field, bits)
    }

    /// Un-wildcards one whole field.
    #[inline]
    pub fn set_exact(&mut self, field: Field) {
        self.set_field(field, field.layout().max_value())
    }

    /// Builder form of [`Mask::set_field`].
    pub fn with(mut self, field: Field, bits: u128) -> Self {
        self.set_field(field, bits);
        self
    }

    /// Builder form of [`Mask::set_exact`].
    pub fn with_exact(mut self, field: Field) -> Self {
        self.set_exact(field);
        self
    }

    /// A mask with exactly these fields exact.
    pub fn exact_fields(fields: &[Field]) -> Mask {
        fields.iter().fold(Mask::EMPTY, |m, &f| m.with_exact(f))
    }

    /// The fields of an IPv4 5-tuple megaflow from one port: in_port,
    /// eth_type, ip_proto, addresses and L4 ports.
    pub const IPV4_5TUPLE: &'static [Field] = &[
        Field::InPort,
        Field::EthType,
        Field::IpProto,
        Field::Ipv4Src,
        Field::Ipv4Dst,
        Field::TpSrc,
        Field::TpDst,
    ];

    /// True when the field has no mask bits set.
    pub fn is_wildcard(&self, field: Field) -> bool {
        self.field(field) == 0
    }

    /// True when every bit of the field is set.
    pub fn is_exact(&self, field: Field) -> bool {
        self.field(field) == field.layout().max_value()
    }

    /// Bitmap of the words that have any mask bit set (bit i = word i).
    #[inline]
    pub fn used_words(&self) -> u64 {
        let mut map = 0u64;
        for (i, &w) in self.w.iter().enumerate() {
            if w != 0 {
                map |= 1 << i;
            }
        }
        map
    }

    /// Union of two masks.
    pub fn union(&self, other: &Mask) -> Mask {
        let mut out = *self;
        for (o, m) in out.w.iter_mut().zip(other.w.iter()) {
            *o |= m;
        }
        out
    }

    /// Intersection of two masks.
    pub fn intersect(&self, other: &Mask) -> Mask {
        let mut out = *self;
        for (o, m) in out.w.iter_mut().zip(other.w.iter()) {
            *o &= m;
        }
        out
    }

    /// True when every bit of `self` is also set in `other`.
    pub fn is_subset_of(&self, other: &Mask) -> bool {
        self.w.iter().zip(other.w.iter()).all(|(a, b)| a & !b == 0)
    }

    /// Fields with at least one mask bit set.
    pub fn fields(&self) -> impl Iterator<Item = Field> + '_ {
        Field::ALL
            .iter()
            .copied()
            .filter(move |&f| !self.is_wildcard(f))
    }
}

impl fmt::Debug for Mask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Mask");
        for field in self.fields() {
            d.field(field.name(), &format_args!("{:#x}", self.field(field)));
        }
        d.finish()
    }
}

/// A key with its zero words left out (as Open vSwitch's miniflow): what a
/// million stored keys cost. A packet's key has a dozen non-zero words of
/// [`KEY_WORDS`]; a megaflow's masked key, fewer.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct PackedKey {
    /// Bit `i`: word `i` is non-zero, and in `words`.
    map: u64,
    words: Box<[u64]>,
}

const _: () = assert!(KEY_WORDS <= 64, "PackedKey's map has 64 bits");

impl PackedKey {
    pub fn pack(key: &FlowKey) -> PackedKey {
        let mut map = 0u64;
        for (i, &w) in key.w.iter().enumerate() {
            if w != 0 {
                map |= 1 << i;
            }
        }
        let words = key.w.iter().copied().filter(|&w| w != 0).collect();
        PackedKey { map, words }
    }

    pub fn unpack(&self) -> FlowKey {
        let mut w = [0u64; KEY_WORDS];
        let mut next = self.words.iter();
        for (i, slot) in w.iter_mut().enumerate() {
            if self.map & (1 << i) != 0 {
                *slot = next.next().copied().unwrap_or(0);
            }
        }
        FlowKey { w }
    }
}

impl From<&FlowKey> for PackedKey {
    fn from(k: &FlowKey) -> PackedKey {
        PackedKey::pack(k)
    }
}

/// A key and a mask, with every wildcarded key bit zero.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Match {
    key: FlowKey,
    mask: Mask,
}

impl Match {
    /// Builds a match, zeroing the key bits the mask wildcards.
    pub fn new(key: &FlowKey, mask: &Mask) -> Self {
        Match {
            key: key.masked(mask),
            mask: *mask,
        }
    }

    /// Matches every packet.
    pub fn catch_all() -> Self {
        Match {
            key: FlowKey::ZERO,
            mask: Mask::EMPTY,
        }
    }

    /// The masked key (wildcarded bits are zero).
    #[inline]
    pub fn key(&self) -> &FlowKey {
        &self.key
    }

    /// The mask.
    #[inline]
    pub fn mask(&self) -> &Mask {
        &self.mask
    }

    /// True when `key` is one of the packets this match describes.
    #[inline]
    pub fn matches(&self, key: &FlowKey) -> bool {
        self.key
            .w
            .iter()
            .zip(self.mask.w.iter())
            .zip(key.w.iter())
            .all(|((k, m), p)| p & m == *k)
    }

    /// True when some packet matches both `self` and `other`.
    pub fn overlaps(&self, other: &Match) -> bool {
        (0..KEY_WORDS)
            .all(|i| (self.key.w[i] ^ other.key.w[i]) & self.mask.w[i] & other.mask.w[i] == 0)
    }

    /// Narrows one field of the match to `value` under `bits` (on top of what
    /// is already matched). Keeps the invariant: key bits outside the mask stay
    /// zero.
    pub fn set_field_masked(&mut self, field: Field, value: u128, bits: u128) {
        let old_bits = self.mask.field(field);
        let old_val = self.key.field(field);
        let new_bits = old_bits | bits;
        let new_val = (old_val & old_bits & !bits) | (value & bits);
        self.mask.set_field(field, new_bits);
        self.key.set_field(field, new_val & new_bits);
    }
}

impl fmt::Debug for Match {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for field in self.mask.fields() {
            if !first {
                f.write_str(",")?;
            }
            first = false;
            let m = self.mask.field(field);
            let v = self.key.field(field);
            if m == field.layout().max_value() {
                write!(f, "{field}={v:#x}")?;
            } else {
                write!(f, "{field}={v:#x}/{m:#x}")?;
            }
        }
        if first {
            f.write_str("<any>")?;
        }
        Ok(())
    }
}

const K0: u64 = 0xa076_1d64_78bd_642f;
const K1: u64 = 0xe703_7ed1_a0b4_28db;
const K2: u64 = 0x8ebc_6af0_9c88_c6e3;

/// 64x64 -> 128 multiply folded to 64 bits: the mixing step of the hashes.
#[inline(always)]
fn fold_mul(a: u64, b: u64) -> u64 {
    let r = (a as u128).wrapping_mul(b as u128);
    (r as u64) ^ ((r >> 64) as u64)
}

/// Hashes a sequence of words: two words per multiply, two independent
/// lanes, so a full key costs about six dependent multiplies.
#[inline]
pub fn hash_words(words: &[u64]) -> u64 {
    let mut a = K0;
    let mut b = K1;
    let mut chunks = words.chunks_exact(4);
    for c in &mut chunks {
        a = fold_mul(c[0] ^ a, c[1] ^ K1);
        b = fold_mul(c[2] ^ b, c[3] ^ K2);
    }
    let rest = chunks.remainder();
    match rest.len() {
        1 => a = fold_mul(rest[0] ^ a, K1),
        2 => a = fold_mul(rest[0] ^ a, rest[1] ^ K1),
        3 => {
            a = fold_mul(rest[0] ^ a, rest[1] ^ K1);
            b = fold_mul(rest[2] ^ b, K2);
        }
        _ => {}
    }
    fold_mul(a ^ (words.len() as u64), b ^ K0)
}

/// Incremental form of [`hash_words`] for words produced one at a time
/// (subtables hash `key & mask` without building it first). Gives the same
/// result as `hash_words` over the same sequence.
#[derive(Clone, Copy)]
pub struct WordHasher {
    a: u64,
    b: u64,
    pending: [u64; 3],
    n: usize,
}

impl Default for WordHasher {
    fn default() -> Self {
        Self::new()
    }
}

impl WordHasher {
    #[inline]
    pub fn new() -> Self {
        WordHasher {
            a: K0,
            b: K1,
            pending: [0; 3],
            n: 0,
        }
    }

    #[inline]
    pub fn push(&mut self, w: u64) {
        let slot = self.n & 3;
        if slot == 3 {
            self.a = fold_mul(self.pending[0] ^ self.a, self.pending[1] ^ K1);
            self.b = fold_mul(self.pending[2] ^ self.b, w ^ K2);
        } else {
            self.pending[slot] = w;
        }
        self.n += 1;
    }

    #[inline]
    pub fn finish(self) -> u64 {
        let (mut a, mut b) = (self.a, self.b);
        let p = self.pending;
        match self.n & 3 {
            1 => a = fold_mul(p[0] ^ a, K1),
            2 => a = fold_mul(p[0] ^ a, p[1] ^ K1),
            3 => {
                a = fold_mul(p[0] ^ a, p[1] ^ K1);
                b = fold_mul(p[2] ^ b, K2);
            }
            _ => {}
        }
        fold_mul(a ^ (self.n as u64), b ^ K0)
    }
}

/// A fast, non-cryptographic `Hasher` for the cache's own maps (masks,
/// port numbers). Keys come from the pipeline, not from the network, so
/// hash flooding is not a concern there.
#[derive(Clone, Copy, Default)]
pub struct FastHasher(u64);

impl std::hash::Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            self.0 = fold_mul(self.0 ^ u64::from_le_bytes(b), K1);
        }
    }

    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.0 = fold_mul(self.0 ^ v as u64, K2);
    }

    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = fold_mul(self.0 ^ v, K2);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// `BuildHasher` for [`FastHasher`].
pub type FastBuild = std::hash::BuildHasherDefault<FastHasher>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packets_stages_hash_apart_in_the_exact_match_cache() {
        let mut k = FlowKey::ZERO;
        k.set_in_port(1);
        k.set_eth_type(0x0800);
        k.set_ipv4_src(0xc612_0002);
        let mut stage2 = k;
        stage2.set_recirc_id(5);
        assert_ne!(k.packet_hash(), stage2.packet_hash());
        let mut tracked = stage2;
        tracked.set_ct_state(0x22);
        assert_ne!(stage2.packet_hash(), tracked.packet_hash());
        // Registers and tunnel words still do not count.
        let mut r = k;
        r.set_reg0(7);
        assert_eq!(k.packet_hash(), r.packet_hash());
        // The words hashed are the fields' own.
        assert_eq!(Field::RecircId.layout().word, 30);
        assert_eq!(Field::CtState.layout().word, 31);
    }

    proptest::proptest! {
        /// Packing keeps every word, zero or not, at its place.
        #[test]
    #[test]
        fn a_packed_key_unpacks_to_itself(words in proptest::collection::vec(
            proptest::prop_oneof![3 => proptest::strategy::Just(0u64), 1 => proptest::num::u64::ANY],
            KEY_WORDS,
        )) {
            let mut w = [0u64; KEY_WORDS];
            w.copy_from_slice(&words);
            let k = FlowKey::from_words(w);
            let p = PackedKey::pack(&k);
            proptest::prop_assert_eq!(p.unpack(), k);
            proptest::prop_assert_eq!(p.words.len(), words.iter().filter(|&&w| w != 0).count());
        }
    }

    proptest::proptest! {
        /// `write_ct_meta` writes each tracking field as its own setter
        /// does, clears what it does not write, and leaves every other
        /// field alone; `read_ct_meta` reads it back.
        #[test]
        fn ct_meta_is_written_at_the_fields_places(
            words in proptest::collection::vec(proptest::num::u64::ANY, KEY_WORDS),
            state in 1u8..,
            zone: u16,
            mark: u32,
            label: u128,
            v6: bool,
            src: [u8; 16],
            dst: [u8; 16],
            ports: (u16, u16),
            tracked_tuple: bool,
        ) {
            use proptest::prop_assert_eq;
            let mut w = [0u64; KEY_WORDS];
            w.copy_from_slice(&words);
            let before = FlowKey::from_words(w);
            let addr = |b: [u8; 16]| if v6 { conntrack::Addr(b) } else { conntrack::Addr::v4([b[0], b[1], b[2], b[3]]) };
            // Without a tuple (proto 0) the tuple fields are cleared, not written.
            let orig = if tracked_tuple {
                conntrack::Tuple { src: addr(src), dst: addr(dst), sport: ports.0, dport: ports.1, proto: 17, v6 }
            } else {
                conntrack::Tuple::default()
            };
            let m = conntrack::CtMeta { state, zone, mark, label, orig };
            let mut k = before;
            write_ct_meta(&mut k, &m);
            // The same through the generic setters.
            let mut r = before;
            for f in &PACKET_META_FIELDS[2..] {
                r.set_field(*f, 0);
            }
            r.set_ct_state(u64::from(state));
            r.set_ct_zone(u64::from(zone));
            r.set_ct_mark(u64::from(mark));
            r.set_ct_label(label);
            if tracked_tuple {
                r.set_ct_nw_proto(17);
                if v6 {
                    r.set_ct_ipv6_src(u128::from_be_bytes(src));
                    r.set_ct_ipv6_dst(u128::from_be_bytes(dst));
                } else {
                    r.set_ct_nw_src(u64::from(u32::from_be_bytes([src[0], src[1], src[2], src[3]])));
                    r.set_ct_nw_dst(u64::from(u32::from_be_bytes([dst[0], dst[1], dst[2], dst[3]])));
                }
                r.set_ct_tp_src(u64::from(ports.0));
                r.set_ct_tp_dst(u64::from(ports.1));
            }
            prop_assert_eq!(k, r);
            prop_assert_eq!(k.conj_id(), before.conj_id());
            if !tracked_tuple || !v6 || src != [0; 16] || dst != [0; 16] {
                prop_assert_eq!(read_ct_meta(&k), m);
            }
            // Untracked: every tracking field zero, nothing else touched.
            write_ct_meta(&mut k, &conntrack::CtMeta::default());
            for f in &PACKET_META_FIELDS[2..] {
                r.set_field(*f, 0);
            }
            prop_assert_eq!(k, r);
        }
    }

    #[test]
    fn fields_do_not_overlap_and_fit() {
        let mut owner = [[None::<Field>; 64]; KEY_WORDS];
        for &f in Field::ALL {
            let l = f.layout();
            let spans: Vec<(usize, u32, u32)> = if l.bits == 128 {
                vec![(l.word as usize, 0, 64), (l.word as usize + 1, 0, 64)]
            } else {
                assert!(
                    l.shift as u32 + l.bits as u32 <= 64,
                    "{f} overflows its word"
                );
                vec![(l.word as usize, l.shift as u32, l.bits as u32)]
            };
            for (w, s, n) in spans {
                for b in s..s + n {
                    assert!(
                        owner[w][b as usize].is_none(),
                        "{f} overlaps {:?}",
                        owner[w][b as usize]
                    );
                    owner[w][b as usize] = Some(f);
                }
            }
        }
    }

    #[test]
    fn set_and_read_every_field() {
        for &f in Field::ALL {
            let mut k = FlowKey::ZERO;
            k.set_field(f, u128::MAX);
            assert_eq!(k.field(f), f.layout().max_value(), "{f}");
            // only this field's bits are set
            for &g in Field::ALL {
                if g != f {
                    assert_eq!(k.field(g), 0, "{f} leaked into {g}");
                }
            }
        }
    }

    #[test]
    fn typed_accessors_agree_with_table() {
        let mut k = FlowKey::ZERO;
        k.set_eth_dst(0xaabb_ccdd_eeff);
        k.set_eth_type(0x0800);
        k.set_tp_dst(80);
        assert_eq!(k.field(Field::EthDst), 0xaabb_ccdd_eeff);
        assert_eq!(k.eth_type(), 0x0800);
        assert_eq!(k.words()[8], 0xaabb_ccdd_eeff_0800);
        assert_eq!(k.field(Field::TpDst), 80);
    }

    #[test]
    fn match_zeroes_wildcarded_bits() {
        let mut k = FlowKey::ZERO;
        k.set_ipv4_src(0x0a01_0203);
        k.set_tp_dst(443);
        let m = Mask::EMPTY.with(Field::Ipv4Src, 0xff00_0000);
        let mt = Match::new(&k, &m);
        assert_eq!(mt.key().ipv4_src(), 0x0a00_0000);
        assert_eq!(mt.key().tp_dst(), 0);
        assert!(mt.matches(&k));
        let mut other = k;
        other.set_ipv4_src(0x0b01_0203);
        assert!(!mt.matches(&other));
    }

    #[test]
    fn overlap_detection() {
        let mut k1 = FlowKey::ZERO;
        k1.set_tp_dst(80);
        let a = Match::new(&k1, &Mask::EMPTY.with_exact(Field::TpDst));
        let mut k2 = FlowKey::ZERO;
        k2.set_ipv4_dst(1);
        let b = Match::new(&k2, &Mask::EMPTY.with_exact(Field::Ipv4Dst));
        assert!(a.overlaps(&b));
        let mut k3 = FlowKey::ZERO;
        k3.set_tp_dst(81);
        let c = Match::new(&k3, &Mask::EMPTY.with_exact(Field::TpDst));
        assert!(!a.overlaps(&c));
    }

    #[test]
    fn incremental_hash_equals_slice_hash() {
        for n in 0..=KEY_WORDS {
            let words: Vec<u64> = (0..n as u64)
                .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
                .collect();
            let mut h = WordHasher::new();
            for &w in &words {
                h.push(w);
            }
            assert_eq!(h.finish(), hash_words(&words), "n={n}");
        }
    }
}
