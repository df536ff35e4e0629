//! Nicira's conntrack flush messages, as Open vSwitch sends them
//! (`ovs-ofctl ct-flush-zone` / `ct-flush`, and ovn-controller):
//!
//! ```text
//! NXT_CT_FLUSH_ZONE (29): zero(6) zone(2)
//! NXT_CT_FLUSH (32):      ip_proto(1) pad(7), then properties:
//!   0 original tuple, 1 reply tuple (each 4 bytes of padding, then
//!     nested properties:
//!     0 src, 1 dst (16: IPv6 or IPv4-mapped), 2 src port, 3 dst port,
//!     4 ICMP id (2), 5 ICMP type, 6 ICMP code (1)),
//!   2 zone (2), 3 mark (4), 4 mark mask (4), 5 labels (16),
//!   6 labels mask (16)
//! property: type(2) length(2, header included) value, zero padding to 8
//! ```
//!
//! A mark or labels without a mask are matched exactly.

use crate::error::OfpError;

/// `NXT_CT_FLUSH_ZONE`.
pub const FLUSH_ZONE: u32 = 29;
/// `NXT_CT_FLUSH`.
pub const FLUSH: u32 = 32;

/// `NXBRC_MUST_BE_ZERO` (Nicira's experimenter error 5).
pub const MUST_BE_ZERO: OfpError = OfpError::new(crate::error::EXPERIMENTER_ERROR, 5);

/// One direction's tuple, as far as given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlushTuple {
    /// IPv6, or IPv4 mapped (`::ffff:a.b.c.d`).
    pub src: Option<[u8; 16]>,
    pub dst: Option<[u8; 16]>,
    pub src_port: Option<u16>,
    pub dst_port: Option<u16>,
    pub icmp_id: Option<u16>,
    pub icmp_type: Option<u8>,
    pub icmp_code: Option<u8>,
}

/// What a flush message asks to remove.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtFlush {
    /// 0: any.
    pub ip_proto: u8,
    /// `None`: every zone (a `NXT_CT_FLUSH` without a zone property).
    pub zone: Option<u16>,
    pub orig: FlushTuple,
    pub reply: FlushTuple,
    pub mark: Option<(u32, u32)>,
    pub labels: Option<(u128, u128)>,
}

impl CtFlush {
    /// A `NXT_CT_FLUSH_ZONE` body: the whole zone.
    pub fn parse_zone(data: &[u8]) -> Result<CtFlush, OfpError> {
        let [z0, z1, z2, z3, z4, z5, hi, lo] = *data else {
            return Err(OfpError::BAD_LEN);
        };
        if [z0, z1, z2, z3, z4, z5] != [0; 6] {
            return Err(MUST_BE_ZERO);
        }
        Ok(CtFlush {
            zone: Some(u16::from_be_bytes([hi, lo])),
            ..CtFlush::default()
        })
    }

    /// A `NXT_CT_FLUSH` body.
    pub fn parse(data: &[u8]) -> Result<CtFlush, OfpError> {
        let (head, mut props) = (data.get(..8).ok_or(OfpError::BAD_LEN)?, &data[8..]);
        if head[1..] != [0; 7] {
            return Err(MUST_BE_ZERO);
        }
        let mut f = CtFlush {
            ip_proto: head[0],
            ..CtFlush::default()
        };
        let (mut mark, mut mark_mask, mut labels, mut labels_mask) = (None, None, None, None);
        while !props.is_empty() {
            let (ty, value, rest) = property(props)?;
            props = rest;
            match ty {
                0 => f.orig = tuple(nested(value)?)?,
                1 => f.reply = tuple(nested(value)?)?,
                2 => f.zone = Some(u16::from_be_bytes(lead(value)?)),
                3 => mark = Some(u32::from_be_bytes(fixed(value)?)),
                4 => mark_mask = Some(u32::from_be_bytes(fixed(value)?)),
                5 => labels = Some(u128::from_be_bytes(fixed(value)?)),
                6 => labels_mask = Some(u128::from_be_bytes(fixed(value)?)),
                _ => return Err(BAD_PROPERTY),
            }
        }
        f.mark = mark.map(|m| (m, mark_mask.unwrap_or(u32::MAX)));
        f.labels = labels.map(|l| (l, labels_mask.unwrap_or(u128::MAX)));
        Ok(f)
    }
}

/// An unknown property type (`OFPBPC_BAD_TYPE` has no 1.3 code: Open
/// vSwitch answers `NXBRC_BAD_...`; BAD_REQUEST/BAD_TYPE here).
const BAD_PROPERTY: OfpError = OfpError::BAD_TYPE;

/// The first property of `buf`: its type, value, and what follows it.
fn property(buf: &[u8]) -> Result<(u16, &[u8], &[u8]), OfpError> {
    let [t0, t1, l0, l1, ..] = *buf else {
        return Err(OfpError::BAD_LEN);
    };
    let len = usize::from(u16::from_be_bytes([l0, l1]));
    let padded = len.div_ceil(8) * 8;
    if len < 4 || padded > buf.len() {
        return Err(OfpError::BAD_LEN);
    }
    Ok((u16::from_be_bytes([t0, t1]), &buf[4..len], &buf[padded..]))
}

/// The properties nested in a property's value: they start 8-aligned,
/// after 4 bytes of padding behind the property's header.
fn nested(value: &[u8]) -> Result<&[u8], OfpError> {
    match value {
        [0, 0, 0, 0, rest @ ..] => Ok(rest),
        [] => Ok(value),
        _ => Err(OfpError::BAD_LEN),
    }
}

/// A value of exactly `N` bytes.
fn fixed<const N: usize>(value: &[u8]) -> Result<[u8; N], OfpError> {
    value.try_into().map_err(|_| OfpError::BAD_LEN)
}

/// An 8- or 16-bit value: its first `N` bytes (Open vSwitch pads 16-bit
/// property values to 32 bits, as the OpenFlow specs do, and reads any
/// payload at least that long).
fn lead<const N: usize>(value: &[u8]) -> Result<[u8; N], OfpError> {
    value
        .get(..N)
        .and_then(|v| v.try_into().ok())
        .ok_or(OfpError::BAD_LEN)
}

fn tuple(mut buf: &[u8]) -> Result<FlushTuple, OfpError> {
    let mut t = FlushTuple::default();
    while !buf.is_empty() {
        let (ty, value, rest) = property(buf)?;
        buf = rest;
        match ty {
            0 => t.src = Some(fixed(value)?),
            1 => t.dst = Some(fixed(value)?),
            2 => t.src_port = Some(u16::from_be_bytes(lead(value)?)),
            3 => t.dst_port = Some(u16::from_be_bytes(lead(value)?)),
            4 => t.icmp_id = Some(u16::from_be_bytes(lead(value)?)),
            5 => t.icmp_type = Some(u8::from_be_bytes(lead(value)?)),
            6 => t.icmp_code = Some(u8::from_be_bytes(lead(value)?)),
            _ => return Err(BAD_PROPERTY),
        }
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prop(ty: u16, value: &[u8]) -> Vec<u8> {
        let len = 4 + value.len();
        let mut v = [&ty.to_be_bytes()[..], &(len as u16).to_be_bytes(), value].concat();
        v.resize(len.div_ceil(8) * 8, 0);
        v
    }

    #[test]
    fn a_flush_reads_its_tuples_zone_mark_and_labels() {
        let mut src = [0u8; 16];
        src[10..].copy_from_slice(&[0xff, 0xff, 198, 18, 0, 1]);
        let orig = [
            prop(0, &src),
            prop(2, &40000u16.to_be_bytes()),
            prop(3, &80u16.to_be_bytes()),
        ]
        .concat();
        let body = [
            &[6u8, 0, 0, 0, 0, 0, 0, 0][..],
            &prop(0, &[&[0u8; 4][..], &orig].concat()),
            &prop(2, &7u16.to_be_bytes()),
            &prop(3, &0x11u32.to_be_bytes()),
            &prop(5, &1u128.to_be_bytes()),
            &prop(6, &3u128.to_be_bytes()),
        ]
        .concat();
        let f = CtFlush::parse(&body).expect("parses");
        assert_eq!(f.ip_proto, 6);
        assert_eq!(f.zone, Some(7));
        assert_eq!(f.orig.src, Some(src));
        assert_eq!((f.orig.src_port, f.orig.dst_port), (Some(40000), Some(80)));
        assert_eq!(f.reply, FlushTuple::default());
        assert_eq!(f.mark, Some((0x11, u32::MAX)), "no mask: exact");
        assert_eq!(f.labels, Some((1, 3)));
        assert_eq!(
            CtFlush::parse_zone(&[0, 0, 0, 0, 0, 0, 0, 9])
                .expect("zone")
                .zone,
            Some(9)
        );
    }

    #[test]
    fn what_ovs_ofctl_3_1_sends_reads() {
        // `ovs-ofctl ct-flush SW zone=9 ct_nw_src=198.18.0.1,ct_nw_dst=
        // 198.18.0.2,ct_nw_proto=17,ct_tp_src=6000,ct_tp_dst=9`, captured:
        // 16-bit values padded to 32 bits.
        let hex = "110000000000000000000048000000000000001400000000000000000000ffffc6120001000000000001001400000000000000000000ffffc612000200000000000200081770000000030008000900000002000800090000";
        let body: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
            .collect();
        let f = CtFlush::parse(&body).expect("parses");
        assert_eq!((f.ip_proto, f.zone), (17, Some(9)));
        assert_eq!(
            f.orig.src.map(|a| a[12..].to_vec()),
            Some(vec![198, 18, 0, 1])
        );
        assert_eq!(
            f.orig.dst.map(|a| a[12..].to_vec()),
            Some(vec![198, 18, 0, 2])
        );
        assert_eq!((f.orig.src_port, f.orig.dst_port), (Some(6000), Some(9)));
    }

    #[test]
    fn what_is_not_a_flush_says_why() {
        assert_eq!(
            CtFlush::parse_zone(&[1, 0, 0, 0, 0, 0, 0, 9]),
            Err(MUST_BE_ZERO)
        );
        assert_eq!(CtFlush::parse_zone(&[0; 7]), Err(OfpError::BAD_LEN));
        assert_eq!(CtFlush::parse(&[6, 1, 0, 0, 0, 0, 0, 0]), Err(MUST_BE_ZERO));
        let head = [6u8, 0, 0, 0, 0, 0, 0, 0];
        let over = [&head[..], &[0, 2, 0, 40, 0, 0, 0, 0]].concat();
        assert_eq!(
            CtFlush::parse(&over),
            Err(OfpError::BAD_LEN),
            "length past the end"
        );
        let unknown = [&head[..], &prop(9, &[0; 4])].concat();
        assert_eq!(CtFlush::parse(&unknown), Err(BAD_PROPERTY));
        let short_zone = [&head[..], &prop(2, &[7])].concat();
        assert_eq!(CtFlush::parse(&short_zone), Err(OfpError::BAD_LEN));
        let short_mark = [&head[..], &prop(3, &[0, 0, 7])].concat();
        assert_eq!(CtFlush::parse(&short_mark), Err(OfpError::BAD_LEN));
    }
}
