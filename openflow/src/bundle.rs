//! Bundles: flow and group mods applied all or nothing (OpenFlow 1.4's
//! `OFPT_BUNDLE_CONTROL` / `OFPT_BUNDLE_ADD_MESSAGE`, in OpenFlow 1.3 as
//! ONF extension 230: experimenter messages of ONF's id with types 2300
//! and 2301 and the same bodies; `ovs-ofctl -O OpenFlow13 --bundle` sends
//! those).
//!
//! `ofp_bundle_ctrl_msg`: bundle id (4), type (2), flags (2), properties.
//! `ofp_bundle_add_msg`: bundle id (4), pad (2), flags (2), the message
//! (with its own header and length), properties.

use crate::error::ParseError;
use crate::wire::{Put, Reader};
use crate::OfpError;

/// ONF's experimenter id.
pub const ONF_VENDOR: u32 = 0x4f4e_4600;
/// `ONF_ET_BUNDLE_CONTROL`.
pub const ET_BUNDLE_CONTROL: u32 = 2300;
/// `ONF_ET_BUNDLE_ADD_MESSAGE`.
pub const ET_BUNDLE_ADD_MESSAGE: u32 = 2301;

/// `ofp_bundle_ctrl_type`.
pub mod ctrl {
    pub const OPEN_REQUEST: u16 = 0;
    pub const OPEN_REPLY: u16 = 1;
    pub const CLOSE_REQUEST: u16 = 2;
    pub const CLOSE_REPLY: u16 = 3;
    pub const COMMIT_REQUEST: u16 = 4;
    pub const COMMIT_REPLY: u16 = 5;
    pub const DISCARD_REQUEST: u16 = 6;
    pub const DISCARD_REPLY: u16 = 7;
}

/// `ofp_bundle_flags`.
pub mod flags {
    pub const ATOMIC: u16 = 1 << 0;
    pub const ORDERED: u16 = 1 << 1;
}

/// `OFPET_BUNDLE_FAILED`'s codes (ONF 1.3: experimenter errors 2300 +
/// code under ONF's id).
pub mod error {
    pub const UNKNOWN: u16 = 0;
    pub const EPERM: u16 = 1;
    pub const BAD_ID: u16 = 2;
    pub const BUNDLE_EXIST: u16 = 3;
    pub const BUNDLE_CLOSED: u16 = 4;
    pub const OUT_OF_BUNDLES: u16 = 5;
    pub const BAD_TYPE: u16 = 6;
    pub const BAD_FLAGS: u16 = 7;
    pub const MSG_BAD_LEN: u16 = 8;
    pub const MSG_BAD_XID: u16 = 9;
    pub const MSG_UNSUP: u16 = 10;
    pub const MSG_CONFLICT: u16 = 11;
    pub const MSG_TOO_MANY: u16 = 12;
    pub const MSG_FAILED: u16 = 13;
}

/// The OpenFlow 1.3 error for bundle error `code`.
pub const fn onf_error(code: u16) -> OfpError {
    OfpError::new(crate::error::EXPERIMENTER_ERROR, 2300 + code)
}

/// Whether an ONF experimenter type is a bundle message's.
pub fn is_bundle_type(exp_type: u32) -> bool {
    exp_type == ET_BUNDLE_CONTROL || exp_type == ET_BUNDLE_ADD_MESSAGE
}

/// Whether `e` is one of ONF's bundle errors (its data starts with ONF's
/// experimenter id, not Nicira's).
pub fn is_onf_error(e: OfpError) -> bool {
    e.ty == crate::error::EXPERIMENTER_ERROR && (2300..=2315).contains(&e.code)
}

/// A bundle control message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BundleCtrl {
    pub bundle_id: u32,
    pub ty: u16,
    pub flags: u16,
    /// Properties, unread (none is defined that a switch must act on).
    pub props: Vec<u8>,
}

impl BundleCtrl {
    pub fn parse(data: &[u8]) -> Result<BundleCtrl, ParseError> {
        let mut r = Reader::new(data);
        Ok(BundleCtrl {
            bundle_id: r.u32("bundle_ctrl.bundle_id")?,
            ty: r.u16("bundle_ctrl.type")?,
            flags: r.u16("bundle_ctrl.flags")?,
            props: r.rest().to_vec(),
        })
    }

    /// The body (after the experimenter header).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + self.props.len());
        out.put_u32(self.bundle_id);
        out.put_u16(self.ty);
        out.put_u16(self.flags);
        out.extend_from_slice(&self.props);
        out
    }
}

/// A message added to a bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BundleAdd {
    pub bundle_id: u32,
    pub flags: u16,
    /// The message, whole (its own header first).
    pub message: Vec<u8>,
}

impl BundleAdd {
    /// Its body; the inner message's length must fit in it.
    pub fn parse(data: &[u8]) -> Result<BundleAdd, ParseError> {
        let mut r = Reader::new(data);
        let bundle_id = r.u32("bundle_add.bundle_id")?;
        let _pad = r.u16("bundle_add.pad")?;
        let flags = r.u16("bundle_add.flags")?;
        let rest = r.rest();
        let len = rest
            .get(2..4)
            .map_or(0, |b| usize::from(u16::from_be_bytes([b[0], b[1]])));
        if len < crate::HEADER_LEN || len > rest.len() {
            return Err(ParseError::BadLength {
                what: "bundle_add.message",
                length: len,
            });
        }
        Ok(BundleAdd {
            bundle_id,
            flags,
            message: rest[..len].to_vec(),
        })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + self.message.len());
        out.put_u32(self.bundle_id);
        out.put_u16(0);
        out.put_u16(self.flags);
        out.extend_from_slice(&self.message);
        out
    }
}
