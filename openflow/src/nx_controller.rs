//! `controller(...)` as Nicira encodes it: `NXAST_CONTROLLER` (subtype 20:
//! max_len, controller id, reason) and `NXAST_CONTROLLER2` (subtype 37:
//! properties, with the userdata a packet-in carries back to the
//! controller and the `pause` flag), which ovn-controller writes for every
//! action its pinctrl thread serves. Read and written as Open vSwitch 3.1
//! does (`encode_CONTROLLER`): the short form when nothing needs the long
//! one.

use crate::error::ParseError;
use crate::flow::put_prop;
use crate::wire::{Put, Reader};

/// `NXAST_CONTROLLER`.
pub const CONTROLLER: u16 = 20;
/// `NXAST_CONTROLLER2`.
pub const CONTROLLER2: u16 = 37;

/// `NXAC2PT_*`.
mod prop {
    pub const MAX_LEN: u16 = 0;
    pub const CONTROLLER_ID: u16 = 1;
    pub const REASON: u16 = 2;
    pub const USERDATA: u16 = 3;
    pub const PAUSE: u16 = 4;
    pub const METER_ID: u16 = 5;
}

/// `OFPR_ACTION`: the reason a controller action's packet-in has unless
/// it names another.
pub const REASON_ACTION: u8 = 1;
/// `NX_CTLR_NO_METER`.
pub const NO_METER: u32 = 0;

/// A controller action.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NxController {
    /// Bytes of the packet to send (0xffff: all).
    pub max_len: u16,
    pub controller_id: u16,
    /// `OFPR_*` of the packet-in.
    pub reason: u8,
    /// Bytes the packet-in carries back (`NXPINT_USERDATA`).
    pub userdata: Vec<u8>,
    /// Stop the pipeline here until the controller resumes it.
    pub pause: bool,
    pub meter_id: u32,
    /// It came as `NXAST_CONTROLLER2` (written back so).
    pub long: bool,
}

impl Default for NxController {
    fn default() -> Self {
        NxController {
            max_len: u16::MAX,
            controller_id: 0,
            reason: REASON_ACTION,
            userdata: Vec::new(),
            pause: false,
            meter_id: NO_METER,
            long: false,
        }
    }
}

fn bad(detail: String) -> ParseError {
    ParseError::Invalid {
        what: "controller action",
        detail,
        error: crate::OfpError::new(2, 5),
    }
}

/// `NXAST_CONTROLLER`'s body after the subtype.
pub fn parse_short(b: &mut Reader<'_>) -> Result<NxController, ParseError> {
    let max_len = b.u16("controller.max_len")?;
    let controller_id = b.u16("controller.controller_id")?;
    let reason = b.u8("controller.reason")?;
    Ok(NxController {
        max_len,
        controller_id,
        reason,
        ..NxController::default()
    })
}

/// `NXAST_CONTROLLER2`'s body after the subtype: 6 zeros, properties.
pub fn parse_long(b: &mut Reader<'_>) -> Result<NxController, ParseError> {
    if b.bytes(6, "controller2.zeros")?.iter().any(|&x| x != 0) {
        return Err(bad("bytes after the subtype are not zero".into()));
    }
    let mut c = NxController {
        long: true,
        ..NxController::default()
    };
    while b.remaining() >= 4 {
        let ty = b.u16("controller2 property.type")?;
        let len = usize::from(b.u16("controller2 property.length")?);
        if len < 4 {
            return Err(bad(format!("property {ty}: length {len}")));
        }
        let mut v = b.sub(len - 4, "controller2 property")?;
        b.skip(
            ((8 - len % 8) % 8).min(b.remaining()),
            "controller2 padding",
        )?;
        match ty {
            prop::MAX_LEN => c.max_len = v.u16("controller2.max_len")?,
            prop::CONTROLLER_ID => c.controller_id = v.u16("controller2.controller_id")?,
            prop::REASON => c.reason = v.u8("controller2.reason")?,
            prop::USERDATA => c.userdata = v.rest().to_vec(),
            prop::PAUSE => c.pause = true,
            prop::METER_ID => c.meter_id = v.u32("controller2.meter_id")?,
            _ => return Err(bad(format!("unknown property {ty}"))),
        }
    }
    if b.rest().iter().any(|&x| x != 0) {
        return Err(bad("trailing bytes are not zero".into()));
    }
    Ok(c)
}

/// Whether it needs `NXAST_CONTROLLER2`.
pub fn needs_long(c: &NxController) -> bool {
    c.long || !c.userdata.is_empty() || c.pause || c.meter_id != NO_METER
}

/// The body after the subtype, in the form [`needs_long`] picks.
pub fn emit(c: &NxController, out: &mut Vec<u8>) {
    if !needs_long(c) {
        out.put_u16(c.max_len);
        out.put_u16(c.controller_id);
        out.put_u8(c.reason);
        out.put_u8(0);
        return;
    }
    out.put_zeros(6);
    // 16-bit values take 4 bytes, as Open vSwitch writes them.
    if c.max_len != u16::MAX {
        put_prop(
            out,
            prop::MAX_LEN,
            &[&c.max_len.to_be_bytes()[..], &[0, 0]].concat(),
        );
    }
    if c.controller_id != 0 {
        put_prop(
            out,
            prop::CONTROLLER_ID,
            &[&c.controller_id.to_be_bytes()[..], &[0, 0]].concat(),
        );
    }
    if c.reason != REASON_ACTION {
        put_prop(out, prop::REASON, &[c.reason]);
    }
    if !c.userdata.is_empty() {
        put_prop(out, prop::USERDATA, &c.userdata);
    }
    if c.pause {
        put_prop(out, prop::PAUSE, &[]);
    }
    if c.meter_id != NO_METER {
        put_prop(out, prop::METER_ID, &c.meter_id.to_be_bytes());
    }
}
