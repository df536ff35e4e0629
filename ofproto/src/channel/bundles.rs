//! Bundles on one connection (ONF extension 230 in OpenFlow 1.3, what
//! `ovs-ofctl --bundle` sends): flow and group mods gathered under an id
//! and committed all or nothing, in order.
//!
//! - OPEN makes a bundle (an ADD to an id not open makes one too), CLOSE
//!   takes no more ADDs, DISCARD drops it, COMMIT applies its messages in
//!   the order added. Each is answered with its reply.
//! - An ADD is checked when it comes: the message must parse as one a
//!   bundle takes (a flow or group mod), with the ADD's xid. Its own
//!   error comes then, for the ADD.
//! - COMMIT checkpoints the bridge's tables and groups, applies every
//!   message and, if one fails, puts the checkpoint back: that message's
//!   error goes out with its xid, then `MSG_FAILED` for the COMMIT, and
//!   nothing of the bundle stands (no rule removal is announced). On
//!   success the rules the bundle removed are announced, the megaflows are
//!   brought up to date as after any flow mod, and a BARRIER after the
//!   COMMIT is answered once they are.
//! - A connection holds at most [`MAX_BUNDLES`] bundles of at most
//!   [`MAX_BUNDLE_BYTES`] of messages each; they go with it.

use openflow::bundle::{self, ctrl, error, onf_error, BundleAdd, BundleCtrl};
use openflow::{parse, Message, OfpError};

use super::{Connection, OfSwitch};

/// Most bundles open on one connection.
pub const MAX_BUNDLES: usize = 64;

/// Most bytes of messages one bundle holds.
pub const MAX_BUNDLE_BYTES: usize = 64 << 20;

/// One open bundle.
#[derive(Debug, Default)]
pub struct Bundle {
    flags: u16,
    closed: bool,
    /// Its messages in the order added: xid, the bytes (for an error's
    /// data), the message as parsed when added.
    msgs: Vec<(u32, Vec<u8>, Bundled)>,
    bytes: usize,
}

/// What a bundle holds.
#[derive(Debug)]
enum Bundled {
    Flow(openflow::flow::FlowMod),
    Group(openflow::group::GroupMod),
}

impl Connection {
    /// A bundle control or add message (`exp_type`), its body `data`.
    pub(super) fn bundle<S: OfSwitch>(
        &mut self,
        exp_type: u32,
        data: &[u8],
        xid: u32,
        slave: bool,
        sw: &mut S,
    ) -> Result<Option<Message>, OfpError> {
        let refuse = |this: &mut Connection, code: u16, why: String| {
            this.last_error = Some(format!("bundle: {why}"));
            onf_error(code)
        };
        if exp_type == bundle::ET_BUNDLE_ADD_MESSAGE {
            let add = BundleAdd::parse(data)
                .map_err(|e| refuse(self, error::MSG_BAD_LEN, e.to_string()))?;
            self.bundle_add(add, xid, slave)?;
            return Ok(None);
        }
        let c = BundleCtrl::parse(data).map_err(|_| OfpError::BAD_LEN)?;
        let id = c.bundle_id;
        if c.flags & !(bundle::flags::ATOMIC | bundle::flags::ORDERED) != 0 {
            return Err(refuse(
                self,
                error::BAD_FLAGS,
                format!("flags {:#x}", c.flags),
            ));
        }
        let reply_ty = match c.ty {
            ctrl::OPEN_REQUEST => {
                if self.bundles.contains_key(&id) {
                    return Err(refuse(self, error::BUNDLE_EXIST, format!("{id} is open")));
                }
                if self.bundles.len() >= MAX_BUNDLES {
                    return Err(refuse(
                        self,
                        error::OUT_OF_BUNDLES,
                        format!("{MAX_BUNDLES} open"),
                    ));
                }
                self.bundles.insert(
                    id,
                    Bundle {
                        flags: c.flags,
                        ..Bundle::default()
                    },
                );
                ctrl::OPEN_REPLY
            }
            ctrl::CLOSE_REQUEST => {
                let b = self.open_bundle(id, c.flags)?;
                if b.closed {
                    return Err(refuse(
                        self,
                        error::BUNDLE_CLOSED,
                        format!("{id} is closed"),
                    ));
                }
                b.closed = true;
                ctrl::CLOSE_REPLY
            }
            ctrl::DISCARD_REQUEST => {
                self.open_bundle(id, c.flags)?;
                self.bundles.remove(&id);
                ctrl::DISCARD_REPLY
            }
            ctrl::COMMIT_REQUEST => {
                self.open_bundle(id, c.flags)?;
                let b = self.bundles.remove(&id).unwrap_or_default();
                self.commit(id, b, sw)?;
                ctrl::COMMIT_REPLY
            }
            t => return Err(refuse(self, error::BAD_TYPE, format!("control type {t}"))),
        };
        Ok(Some(Message::Experimenter {
            experimenter: bundle::ONF_VENDOR,
            exp_type: bundle::ET_BUNDLE_CONTROL,
            data: BundleCtrl {
                bundle_id: id,
                ty: reply_ty,
                flags: c.flags,
                props: Vec::new(),
            }
            .encode(),
        }))
    }

    /// Bundle `id`, which must be open with `flags`.
    fn open_bundle(&mut self, id: u32, flags: u16) -> Result<&mut Bundle, OfpError> {
        let why = match self.bundles.get(&id) {
            None => Some((error::BAD_ID, format!("bundle {id} is not open"))),
            Some(b) if b.flags != flags => Some((
                error::BAD_FLAGS,
                format!(
                    "bundle {id} was opened with flags {:#x}, not {flags:#x}",
                    b.flags
                ),
            )),
            Some(_) => None,
        };
        if let Some((code, why)) = why {
            self.last_error = Some(format!("bundle: {why}"));
            return Err(onf_error(code));
        }
        Ok(self.bundles.get_mut(&id).expect("checked above"))
    }

    fn bundle_add(&mut self, add: BundleAdd, xid: u32, slave: bool) -> Result<(), OfpError> {
        let msg = &add.message;
        let inner_xid = u32::from_be_bytes([msg[4], msg[5], msg[6], msg[7]]);
        let (code, why) = if inner_xid != xid {
            (
                error::MSG_BAD_XID,
                format!("message xid {inner_xid} in an add of xid {xid}"),
            )
        } else {
            // The message is checked now: its own error answers the add.
            let (_, m) = parse(msg).map_err(|e| {
                self.last_error = Some(format!("bundle: added message: {e}"));
                e.ofp_error()
            })?;
            let bundled = match m {
                Message::FlowMod(_) | Message::GroupMod(_) if slave => {
                    return Err(OfpError::IS_SLAVE)
                }
                Message::FlowMod(fm) => Some(Bundled::Flow(fm)),
                Message::GroupMod(gm) => Some(Bundled::Group(gm)),
                _ => None,
            };
            match bundled {
                Some(bundled) => {
                    let id = add.bundle_id;
                    if !self.bundles.contains_key(&id) {
                        if self.bundles.len() >= MAX_BUNDLES {
                            self.last_error = Some(format!("bundle: {MAX_BUNDLES} open"));
                            return Err(onf_error(error::OUT_OF_BUNDLES));
                        }
                        let b = Bundle {
                            flags: add.flags,
                            ..Bundle::default()
                        };
                        self.bundles.insert(id, b);
                    }
                    let b = self.open_bundle(id, add.flags)?;
                    let (code, why) = if b.closed {
                        (error::BUNDLE_CLOSED, format!("bundle {id} is closed"))
                    } else if b.bytes + msg.len() > MAX_BUNDLE_BYTES {
                        (
                            error::MSG_TOO_MANY,
                            format!("bundle {id} holds {MAX_BUNDLE_BYTES} bytes"),
                        )
                    } else {
                        b.bytes += msg.len();
                        b.msgs.push((xid, add.message, bundled));
                        return Ok(());
                    };
                    (code, why)
                }
                None => (
                    error::MSG_UNSUP,
                    format!(
                        "message type {} cannot be bundled (flow and group mods can)",
                        msg[1]
                    ),
                ),
            }
        };
        self.last_error = Some(format!("bundle: {why}"));
        Err(onf_error(code))
    }

    /// Applies bundle `id`'s messages all or nothing.
    fn commit<S: OfSwitch>(&mut self, id: u32, b: Bundle, sw: &mut S) -> Result<(), OfpError> {
        let checkpoint = sw.bridge().checkpoint();
        let mut removed = Vec::new();
        for (xid, raw, m) in &b.msgs {
            let applied = match m {
                Bundled::Flow(fm) => self.apply_flow_mod(fm, sw),
                Bundled::Group(gm) => self.apply_group_mod(gm, sw),
            };
            match applied {
                Ok(r) => removed.extend(r),
                Err(e) => {
                    sw.bridge().roll_back(checkpoint);
                    let why = self.last_error.take().unwrap_or_else(|| e.name());
                    self.send_error(e, raw, *xid);
                    self.last_error = Some(format!(
                        "bundle {id}: message of xid {xid} failed, nothing applied: {why}"
                    ));
                    // The tables changed back: megaflows follow.
                    sw.request_sync();
                    return Err(onf_error(error::MSG_FAILED));
                }
            }
        }
        if !removed.is_empty() {
            sw.rules_removed(&removed);
        }
        if !b.msgs.is_empty() {
            sw.request_sync();
        }
        Ok(())
    }
}
