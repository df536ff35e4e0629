//! One OpenFlow 1.3 connection: bytes in, bytes out, the switch behind an
//! [`OfSwitch`]. No I/O here: the caller reads the socket, hands the bytes
//! to [`Connection::receive`], calls [`Connection::tick`] now and then,
//! and writes what [`Connection::take_output`] gives.
//!
//! The state machine ([`State`]) has its transitions in one place,
//! [`Connection::advance`]:
//!
//! ```text
//! Hello ──peer HELLO, common version──► Open ──framing error, idle──► Closed
//!   └──no common version: HELLO_FAILED──────────────────────────────► Closed
//! ```
//!
//! Keepalive as Open vSwitch does it: when nothing arrived for the
//! inactivity probe interval, an ECHO_REQUEST goes out; when nothing
//! arrived for another interval, the connection closes.
//!
//! Roles (EQUAL, MASTER, SLAVE with generation ids) are the switch's, not
//! the connection's: [`Roles`] holds them for every connection, so a new
//! master demotes the old one.

pub(crate) mod bundles;
pub mod convert;
pub mod groups;

use openflow::{nx_ct_flush, nx_tlv};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use megaflow::Timestamp;
use openflow::flow::{AggregateReply, FlowStats, FlowStatsRequest, GROUP_ANY, TABLE_ALL};
use openflow::message::role;
use openflow::multipart::mp_type;
use openflow::table::{prop, TableFeatures, TableStats};
use openflow::{
    bitmap_has, error_reply, parse, AsyncConfig, Desc, Features, Framer, Message, MpReply,
    MpRequest, MsgType, OfpError, Port, Role, SwitchConfig, V15, VERSION, VERSIONS,
};

use crate::bridge::Bridge;
use crate::meter::MeterSpec;
use crate::rule::OfPort;
use crate::table::match_covers;
use crate::TableId;
use megaflow::MeterId;

/// Where a connection is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// Our HELLO is out; the peer's has not arrived.
    Hello,
    /// OpenFlow 1.3 agreed; messages flow.
    Open,
    /// Finished, and why. Nothing more is read; what is in the output
    /// (an ERROR saying why) should still be sent.
    Closed(String),
}

impl State {
    pub fn name(&self) -> &'static str {
        match self {
            State::Hello => "hello",
            State::Open => "open",
            State::Closed(_) => "closed",
        }
    }
}

/// What happened, for [`Connection::advance`].
enum Event {
    PeerHello(Option<Vec<u32>>, u8),
    Broken(String),
    Idle,
}

/// The switch as an OpenFlow channel sees it.
pub trait OfSwitch {
    fn features(&self) -> Features;
    fn desc(&self) -> Desc;
    /// Every port, for PORT_DESC.
    fn ports(&self) -> Vec<Port>;
    /// The controllers' roles.
    fn roles(&mut self) -> &mut Roles;
    /// The bridge as [`bridge`](Self::bridge) hands it out: `&mut Bridge`,
    /// or a lock's guard where the bridge is shared with threads that
    /// translate.
    type BridgeRef<'a>: std::ops::DerefMut<Target = Bridge>
    where
        Self: 'a;
    /// The tables FLOW_MOD changes and FLOW stats read (held until the
    /// reference is dropped: take it for one change or one read).
    fn bridge(&mut self) -> Self::BridgeRef<'_>;
    /// Applies a TLV table mod (`NXT_TLV_TABLE_MOD`): the bridge's table,
    /// and whatever else of the switch follows it (receive's option map).
    fn tlv_mod(&mut self, m: &nx_tlv::TableMod) -> Result<(), OfpError> {
        self.bridge().apply_tlv_mod(m)
    }
    /// The bridge for reading only (stats and group replies, checks): a
    /// shared guard where the bridge is shared, so the threads that
    /// translate go on while a large reply is built.
    type BridgeView<'a>: std::ops::Deref<Target = Bridge>
    where
        Self: 'a;
    fn bridge_view(&mut self) -> Self::BridgeView<'_>;
    /// Now, on the switch's clock.
    fn now(&self) -> Timestamp;
    /// The tables' generation every megaflow already agrees with.
    fn tables_synced(&self) -> u64;
    /// Asks for a revalidator pass now (a BARRIER waits for it).
    fn request_sync(&mut self);
    /// Brings the megaflows up to the tables in force now, at once, if
    /// that is cheap ([`crate::Pipeline::sync_targeted`]); whether it did.
    fn sync_now(&mut self) -> bool {
        false
    }
    /// The switch's meters (`None`: METER_MOD is refused as BAD_TYPE).
    fn meters(&mut self) -> Option<&mut dyn Meters> {
        None
    }
    /// Counters of `port` (`OFPP_ANY`: every port).
    fn port_stats(&self, _port: u32) -> Vec<openflow::PortStatsEntry> {
        Vec::new()
    }
    /// Rules a flow mod removed (FLOW_REMOVED for those that asked).
    fn rules_removed(&mut self, _removed: &[crate::table::RemovedRule]) {}
    /// Removes the tracked connections `f` matches (`NXT_CT_FLUSH_ZONE`,
    /// `NXT_CT_FLUSH`); how many. A switch without a tracker refuses.
    fn ct_flush(&mut self, _f: &conntrack::FlushFilter) -> Result<usize, OfpError> {
        Err(OfpError::BAD_EXP_TYPE)
    }
    /// A PACKET_OUT: `actions` run on `frame` as received on `in_port`
    /// (an OpenFlow port number, CONTROLLER for none).
    fn packet_out(
        &mut self,
        in_port: u32,
        actions: &[crate::rule::OfAction],
        frame: &[u8],
    ) -> Result<(), OfpError>;
    /// A controller's NXT_RESUME: `frame`, received on `in_port`, goes on
    /// from continuation `id` with the pipeline fields `fields` set.
    fn resume(
        &mut self,
        in_port: u32,
        id: u32,
        fields: &[(megaflow::Field, u128, u128)],
        frame: &[u8],
    ) -> Result<(), OfpError>;
}

/// The meters a channel changes and reads (METER_MOD, the meter
/// multiparts).
pub trait Meters {
    fn get(&self, id: MeterId) -> Option<MeterSpec>;
    fn all(&self) -> Vec<MeterSpec>;
    fn set(&mut self, spec: MeterSpec);
    fn remove(&mut self, id: MeterId) -> bool;
    fn stats(&self, id: MeterId) -> Option<megaflow::meter::MeterStats>;
}

impl<O: megaflow::offload::FlowOffload, D: crate::Datapaths> Meters for crate::Pipeline<O, D> {
    fn get(&self, id: MeterId) -> Option<MeterSpec> {
        self.meters().get(id).copied()
    }
    fn all(&self) -> Vec<MeterSpec> {
        self.meters().iter().copied().collect()
    }
    fn set(&mut self, spec: MeterSpec) {
        self.set_meter(spec);
    }
    fn remove(&mut self, id: MeterId) -> bool {
        self.remove_meter(id).is_some()
    }
    fn stats(&self, id: MeterId) -> Option<megaflow::meter::MeterStats> {
        self.meters().stats(id)
    }
}

/// The largest meter id a controller may use (`OFPM_MAX`).
pub const METER_MAX: u32 = 0xffff_0000;

/// The most rules a table holds, as TABLE_FEATURES reports it.
pub const MAX_ENTRIES: u32 = 1_000_000;

/// `ofp_controller_role` by name.
pub fn role_name(r: u32) -> &'static str {
    match r {
        role::EQUAL => "equal",
        role::MASTER => "master",
        role::SLAVE => "slave",
        _ => "nochange",
    }
}

/// The roles of every connection of one switch and the greatest
/// generation id a master or slave request carried.
#[derive(Clone, Debug, Default)]
pub struct Roles {
    by_conn: BTreeMap<u64, u32>,
    generation: Option<u64>,
}

impl Roles {
    /// A connection's role (EQUAL until it asks for another).
    pub fn of(&self, conn: u64) -> u32 {
        self.by_conn.get(&conn).copied().unwrap_or(role::EQUAL)
    }

    /// A connection ended.
    pub fn forget(&mut self, conn: u64) {
        self.by_conn.remove(&conn);
    }

    /// A ROLE_REQUEST from `conn`: the reply, or the error the spec names
    /// (a stale generation id, a role that does not exist).
    pub fn request(&mut self, conn: u64, req: Role) -> Result<Role, OfpError> {
        match req.role {
            role::NOCHANGE => {}
            role::EQUAL => {
                self.by_conn.insert(conn, role::EQUAL);
            }
            role::MASTER | role::SLAVE => {
                if let Some(g) = self.generation {
                    // Wrapping comparison, as the spec defines it.
                    if (req.generation_id.wrapping_sub(g) as i64) < 0 {
                        return Err(OfpError::ROLE_STALE);
                    }
                }
                self.generation = Some(req.generation_id);
                if req.role == role::MASTER {
                    for r in self.by_conn.values_mut() {
                        if *r == role::MASTER {
                            *r = role::SLAVE;
                        }
                    }
                }
                self.by_conn.insert(conn, req.role);
            }
            _ => return Err(OfpError::ROLE_BAD_ROLE),
        }
        Ok(Role {
            role: self.of(conn),
            generation_id: self.generation.unwrap_or(u64::MAX),
        })
    }
}

/// Counters of one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnStats {
    pub rx_msgs: u64,
    pub tx_msgs: u64,
    pub errors_sent: u64,
    pub echo_requests_sent: u64,
}

/// The async configuration a connection starts with (the spec's
/// defaults): packet-ins for table-miss and actions, every port status,
/// flow-removed for every reason, to masters and equals; slaves get
/// port status only.
pub const DEFAULT_ASYNC: AsyncConfig = AsyncConfig {
    packet_in_mask: [0b11, 0],
    port_status_mask: [0b111, 0b111],
    flow_removed_mask: [0b1111, 0],
};

/// One connection.
#[derive(Debug)]
pub struct Connection {
    id: u64,
    state: State,
    framer: Framer,
    out: Vec<u8>,
    config: SwitchConfig,
    async_cfg: AsyncConfig,
    /// `NXT_SET_PACKET_IN_FORMAT`: standard or `NXT_PACKET_IN2`.
    packet_in_format: u32,
    probe: Duration,
    last_rx: Instant,
    echo_sent: bool,
    next_xid: u32,
    last_error: Option<String>,
    stats: ConnStats,
    /// A BARRIER waiting for the tables' generation to be synced: its xid
    /// and the generation. Nothing after it is read until it is answered.
    barrier: Option<(u32, u64)>,
    /// Output not yet taken past which no further message is acted on
    /// (one reply may go past it).
    out_limit: usize,
    /// Bundles open on this connection, by id (they go with it).
    bundles: BTreeMap<u32, bundles::Bundle>,
    /// The OpenFlow version agreed in the HELLOs (1.3 until then).
    version: u8,
    /// The versions it may agree to, lowest first.
    versions: Vec<u8>,
}

impl Connection {
    /// A new connection `id` (unique within the switch) at `now`, its
    /// HELLO queued; `probe` is the inactivity probe interval.
    pub fn new(id: u64, now: Instant, probe: Duration) -> Connection {
        Connection::with_versions(id, now, probe, &VERSIONS)
    }

    /// [`new`](Self::new), speaking only `versions` (of 1.3 to 1.5: a
    /// bridge's `protocols`); none of them: every one.
    pub fn with_versions(id: u64, now: Instant, probe: Duration, versions: &[u8]) -> Connection {
        let allowed: Vec<u8> = VERSIONS
            .iter()
            .copied()
            .filter(|v| versions.is_empty() || versions.contains(v))
            .collect();
        let allowed = if allowed.is_empty() {
            VERSIONS.to_vec()
        } else {
            allowed
        };
        let mut c = Connection {
            id,
            state: State::Hello,
            framer: Framer::new(),
            out: Vec::new(),
            config: SwitchConfig {
                flags: 0,
                miss_send_len: 128,
            },
            async_cfg: DEFAULT_ASYNC,
            packet_in_format: openflow::flow::nx_packet_in::FORMAT_STANDARD,
            probe,
            last_rx: now,
            echo_sent: false,
            next_xid: 1,
            last_error: None,
            stats: ConnStats::default(),
            barrier: None,
            out_limit: usize::MAX,
            bundles: BTreeMap::new(),
            version: VERSION,
            versions: allowed,
        };
        // The HELLO carries the highest version and the bitmap of all.
        let mut bitmap = vec![0u32];
        c.versions.iter().for_each(|v| bitmap[0] |= 1 << v);
        c.version = *c.versions.last().unwrap_or(&V15);
        c.send_new(&Message::Hello {
            bitmap: Some(bitmap),
        });
        c.version = VERSION;
        c
    }

    /// The OpenFlow version agreed with the peer (1.3 before the HELLOs).
    pub fn version(&self) -> u8 {
        self.version
    }

    /// Limits for a peer that may be hostile: messages longer than
    /// `max_message` bytes are refused (BAD_LEN, then the connection
    /// closes: where the next message starts is unknown), and no message
    /// is acted on while `max_queued` bytes of output wait to be taken.
    pub fn with_limits(mut self, max_message: usize, max_queued: usize) -> Connection {
        self.framer = Framer::with_limit(max_message);
        self.out_limit = max_queued;
        self
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// Whether whole messages wait that were not acted on because the
    /// output was over its limit: the caller sends the output, then calls
    /// [`resume`](Self::resume) before it reads more.
    pub fn backlogged(&self) -> bool {
        !self.is_closed() && self.barrier.is_none() && self.framer.ready()
    }

    pub fn state(&self) -> &State {
        &self.state
    }

    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed(_))
    }

    pub fn stats(&self) -> ConnStats {
        self.stats
    }

    /// The last error this connection sent or met, for `show`.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    pub fn async_config(&self) -> AsyncConfig {
        self.async_cfg
    }

    /// Whether packet-ins go to this connection as `NXT_PACKET_IN2`
    /// (it sent `NXT_SET_PACKET_IN_FORMAT` 2).
    pub fn wants_packet_in2(&self) -> bool {
        self.packet_in_format == openflow::flow::nx_packet_in::FORMAT_NXT_PACKET_IN2
    }

    pub fn switch_config(&self) -> SwitchConfig {
        self.config
    }

    /// Bytes to send now.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    /// The transitions, all of them.
    fn advance(&mut self, ev: Event) {
        let next = match (&self.state, ev) {
            (State::Closed(_), _) => return,
            (State::Hello, Event::PeerHello(bitmap, version)) => {
                // The highest version both speak: from the peer's bitmap,
                // else the lower of the two HELLOs' versions.
                let highest = *self.versions.last().unwrap_or(&V15);
                let common = match &bitmap {
                    Some(b) => self
                        .versions
                        .iter()
                        .rev()
                        .copied()
                        .find(|v| bitmap_has(b, *v)),
                    None => Some(version.min(highest)).filter(|v| self.versions.contains(v)),
                };
                if let Some(v) = common {
                    self.version = v;
                    State::Open
                } else {
                    let speaks: Vec<String> = self
                        .versions
                        .iter()
                        .map(|v| format!("1.{}", v - 1))
                        .collect();
                    let why = format!(
                        "no common version: this bridge speaks OpenFlow {}, the peer offered {}",
                        speaks.join(", "),
                        match &bitmap {
                            Some(b) => format!("the bitmap {b:x?}"),
                            None => format!("version {version:#04x}"),
                        }
                    );
                    let mut data = why.clone().into_bytes();
                    data.truncate(64);
                    self.send_new(&Message::Error {
                        error: OfpError::HELLO_INCOMPATIBLE,
                        data,
                    });
                    self.stats.errors_sent += 1;
                    self.last_error = Some(why.clone());
                    State::Closed(why)
                }
            }
            // A second HELLO on an open connection is ignored.
            (State::Open, Event::PeerHello(..)) => State::Open,
            (_, Event::Broken(why)) => {
                self.last_error = Some(why.clone());
                State::Closed(why)
            }
            (_, Event::Idle) => {
                let why = format!(
                    "no message for {} ms after an echo request (inactivity probe)",
                    2 * self.probe.as_millis()
                );
                self.last_error = Some(why.clone());
                State::Closed(why)
            }
        };
        self.state = next;
    }

    /// Keepalive at `now`: an ECHO_REQUEST after one quiet interval, close
    /// after two.
    pub fn tick(&mut self, now: Instant) {
        if self.is_closed() || self.probe.is_zero() {
            return;
        }
        let quiet = now.saturating_duration_since(self.last_rx);
        if quiet >= 2 * self.probe && self.echo_sent {
            self.advance(Event::Idle);
        } else if quiet >= self.probe && !self.echo_sent && self.state == State::Open {
            self.send_new(&Message::EchoRequest(Vec::new()));
            self.stats.echo_requests_sent += 1;
            self.echo_sent = true;
        }
    }

    /// The peer closed its side.
    pub fn peer_closed(&mut self) {
        self.fail("the peer closed the connection");
    }

    /// The transport failed (a TLS error, a peer that takes nothing):
    /// closed, `why` kept as the last error.
    pub fn fail(&mut self, why: impl Into<String>) {
        self.advance(Event::Broken(why.into()));
    }

    /// Whether a BARRIER is waiting for a revalidator pass (the caller
    /// calls [`resume`](Self::resume) once one may have run).
    pub fn waiting(&self) -> bool {
        self.barrier.is_some()
    }

    /// Answers a waiting BARRIER if the switch has caught up, then acts on
    /// what arrived after it.
    pub fn resume<S: OfSwitch>(&mut self, sw: &mut S) {
        if let Some((xid, gen)) = self.barrier {
            if sw.tables_synced() < gen {
                sw.request_sync();
                return;
            }
            self.barrier = None;
            self.send(xid, &Message::BarrierReply);
        }
        self.drain(&[], sw);
    }

    /// Bytes from the peer at `now`, acted on against `sw`.
    pub fn receive<S: OfSwitch>(&mut self, bytes: &[u8], sw: &mut S, now: Instant) {
        if self.is_closed() {
            return;
        }
        self.last_rx = now;
        self.echo_sent = false;
        self.drain(bytes, sw);
    }

    fn drain<S: OfSwitch>(&mut self, bytes: &[u8], sw: &mut S) {
        self.framer.push(bytes);
        while self.barrier.is_none() && self.out.len() < self.out_limit {
            let msg = match self.framer.next_message() {
                Ok(Some(m)) => m,
                Ok(None) => break,
                Err(e) => {
                    // Where the next message starts is unknown: answer,
                    // then close.
                    self.send_error(e.ofp_error(), bytes, 0);
                    self.advance(Event::Broken(format!("framing: {e}")));
                    break;
                }
            };
            self.stats.rx_msgs += 1;
            self.message(&msg, sw);
            if self.is_closed() {
                break;
            }
        }
    }

    fn message<S: OfSwitch>(&mut self, raw: &[u8], sw: &mut S) {
        let xid = u32::from_be_bytes([raw[4], raw[5], raw[6], raw[7]]);
        // A message only a switch sends (a reply, an asynchronous one) is
        // BAD_TYPE whatever its body, as the spec has it: its body is not
        // parsed (a malformed one would otherwise answer for its match).
        if raw[0] == self.version
            && self.state != State::Hello
            && MsgType::of_version(raw[1], self.version).is_some_and(MsgType::switch_only)
        {
            self.last_error = Some(format!("message type {} is sent by switches", raw[1]));
            self.send_error(OfpError::BAD_TYPE, raw, xid);
            return;
        }
        let (h, m) = match parse(raw) {
            Ok(x) => x,
            Err(e) => {
                self.last_error = Some(e.to_string());
                self.send_error(e.ofp_error(), raw, xid);
                return;
            }
        };
        if let Message::Hello { bitmap } = m {
            self.advance(Event::PeerHello(bitmap, h.version));
            return;
        }
        if self.state == State::Open && h.version != self.version {
            self.last_error = Some(format!(
                "a message of {} on a connection of {}",
                openflow::version_name(h.version),
                openflow::version_name(self.version)
            ));
            self.send_error(OfpError::BAD_VERSION, raw, xid);
            return;
        }
        if self.state == State::Hello {
            // Anything before the peer's HELLO breaks the handshake.
            self.send_error(OfpError::HELLO_EPERM, raw, xid);
            self.advance(Event::Broken(format!("{:?} before HELLO", m.ty())));
            return;
        }
        let reply = match self.answer(m, xid, sw) {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(e) => {
                self.send_error(e, raw, xid);
                return;
            }
        };
        self.send(xid, &reply);
    }

    /// A message's reply (`None`: it has none), or the ERROR for it.
    fn answer<S: OfSwitch>(
        &mut self,
        m: Message,
        xid: u32,
        sw: &mut S,
    ) -> Result<Option<Message>, OfpError> {
        let slave = sw.roles().of(self.id) == role::SLAVE;
        Ok(Some(match m {
            Message::EchoRequest(d) => Message::EchoReply(d),
            Message::EchoReply(_) => return Ok(None),
            Message::Error { error, .. } => {
                self.last_error = Some(format!("the peer sent {error}"));
                return Ok(None);
            }
            Message::Experimenter {
                experimenter: openflow::action::NX_VENDOR,
                exp_type: openflow::flow::nx_packet_in::SET_FORMAT,
                data,
            } => {
                use openflow::flow::nx_packet_in as nx;
                let format = match data.get(..4) {
                    Some(b) if data.len() == 4 => u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
                    _ => return Err(OfpError::BAD_LEN),
                };
                // The old NXT_PACKET_IN format is not sent (nor is any
                // unknown one), as Open vSwitch refuses what it lacks.
                if format != nx::FORMAT_STANDARD && format != nx::FORMAT_NXT_PACKET_IN2 {
                    self.last_error = Some(format!("packet-in format {format} not supported"));
                    return Err(OfpError::REQUEST_EPERM);
                }
                self.packet_in_format = format;
                return Ok(None);
            }
            Message::Experimenter {
                experimenter: openflow::action::NX_VENDOR,
                exp_type: openflow::flow::nx_packet_in::RESUME,
                data,
            } => {
                if slave {
                    return Err(OfpError::IS_SLAVE);
                }
                let pin = openflow::flow::PacketIn::from_nx_packet_in2(&data).map_err(|e| {
                    self.last_error = Some(format!("NXT_RESUME: {e}"));
                    e.ofp_error()
                })?;
                let Some(id) = openflow::flow::PacketIn::continuation_of(&data) else {
                    self.last_error =
                        Some("NXT_RESUME without a continuation of this switch".into());
                    return Err(openflow::flow::nx_packet_in::STALE);
                };
                let (in_port, fields) = convert::resume_metadata(&pin.matched);
                let in_port = in_port.unwrap_or(OfPort::Controller.number());
                sw.resume(in_port, id, &fields, &pin.data)
                    .inspect_err(|e| {
                        self.last_error = Some(format!("NXT_RESUME refused: {}", e.name()));
                    })?;
                return Ok(None);
            }
            Message::Experimenter {
                experimenter: openflow::action::NX_VENDOR,
                exp_type: nx_tlv::TABLE_MOD,
                data,
            } => {
                if slave {
                    return Err(OfpError::IS_SLAVE);
                }
                let m = nx_tlv::TableMod::parse(&data).map_err(|e| {
                    self.last_error = Some(format!("TLV table mod: {e}"));
                    OfpError::BAD_LEN
                })?;
                sw.tlv_mod(&m).inspect_err(|e| {
                    self.last_error = Some(format!("TLV table mod refused: {e}"));
                })?;
                return Ok(None);
            }
            Message::Experimenter {
                experimenter: openflow::action::NX_VENDOR,
                exp_type: nx_tlv::TABLE_REQUEST,
                data,
            } => {
                if !data.is_empty() {
                    return Err(OfpError::BAD_LEN);
                }
                Message::Experimenter {
                    experimenter: openflow::action::NX_VENDOR,
                    exp_type: nx_tlv::TABLE_REPLY,
                    data: sw.bridge_view().tlv().reply().encode(),
                }
            }
            Message::Experimenter {
                experimenter: openflow::action::NX_VENDOR,
                exp_type,
                data,
            } if exp_type == nx_ct_flush::FLUSH_ZONE || exp_type == nx_ct_flush::FLUSH => {
                let f = if exp_type == nx_ct_flush::FLUSH_ZONE {
                    nx_ct_flush::CtFlush::parse_zone(&data)
                } else {
                    nx_ct_flush::CtFlush::parse(&data)
                }
                .inspect_err(|e| {
                    self.last_error = Some(format!("conntrack flush refused: {}", e.name()));
                })?;
                // As Open vSwitch: nothing to remove is no error.
                sw.ct_flush(&flush_filter(&f))?;
                return Ok(None);
            }
            Message::Experimenter {
                experimenter: openflow::bundle::ONF_VENDOR,
                exp_type,
                data,
            } if exp_type == openflow::bundle::ET_BUNDLE_CONTROL
                || exp_type == openflow::bundle::ET_BUNDLE_ADD_MESSAGE =>
            {
                return self.bundle(exp_type, &data, xid, slave, sw);
            }
            Message::Experimenter {
                experimenter,
                exp_type,
                ..
            } => {
                self.last_error = Some(format!(
                    "experimenter message {experimenter:#010x} type {exp_type} not supported"
                ));
                return Err(OfpError::BAD_EXPERIMENTER);
            }
            Message::FeaturesRequest => Message::FeaturesReply(sw.features()),
            Message::GetConfigRequest => Message::GetConfigReply(self.config),
            Message::SetConfig(c) => {
                if slave {
                    return Err(OfpError::IS_SLAVE);
                }
                // OFPC_FRAG_* beyond REASM (3) are not defined.
                if c.flags > 3 {
                    return Err(OfpError::SWITCH_CONFIG_BAD_FLAGS);
                }
                self.config = c;
                return Ok(None);
            }
            Message::BarrierRequest => {
                let gen = sw.bridge_view().generations().tables;
                // The changes before it are in force for new lookups; the
                // megaflows they affect are brought up to date now when
                // that is cheap, else by the pass it waits for.
                if sw.tables_synced() >= gen || (sw.sync_now() && sw.tables_synced() >= gen) {
                    Message::BarrierReply
                } else {
                    sw.request_sync();
                    self.barrier = Some((xid, gen));
                    return Ok(None);
                }
            }
            Message::FlowMod(fm) => {
                if slave {
                    return Err(OfpError::IS_SLAVE);
                }
                let removed = self.apply_flow_mod(&fm, sw)?;
                if !removed.is_empty() {
                    sw.rules_removed(&removed);
                }
                // Megaflows the change makes stale go at the next offload
                // tick, not at the next interval (as Open vSwitch kicks its
                // revalidators on a table change).
                sw.request_sync();
                return Ok(None);
            }
            Message::MeterMod(_) if slave => return Err(OfpError::IS_SLAVE),
            Message::MeterMod(mm) => {
                let meters = sw.meters().ok_or(OfpError::BAD_TYPE)?;
                meter_mod(meters, &mm)?;
                if mm.command == openflow::meter::meter_command::DELETE {
                    // The rules that ran it go with it, as in Open vSwitch.
                    let which =
                        (mm.meter_id != openflow::meter::METER_ALL).then_some(MeterId(mm.meter_id));
                    let removed = sw.bridge().delete_meter_users(which);
                    if !removed.is_empty() {
                        sw.rules_removed(&removed);
                    }
                }
                sw.request_sync();
                return Ok(None);
            }
            Message::PacketOut(_) if slave => return Err(OfpError::IS_SLAVE),
            Message::PacketOut(po) => {
                if po.buffer_id != openflow::flow::NO_BUFFER {
                    return Err(OfpError::BUFFER_UNKNOWN);
                }
                let in_port = match OfPort::from_number(po.in_port) {
                    Some(OfPort::Port(p)) => p.0,
                    Some(OfPort::Controller) | Some(OfPort::Any) => OfPort::Controller.number(),
                    _ => return Err(OfpError::BAD_PORT),
                };
                if po.data.is_empty() {
                    return Err(OfpError::BAD_PACKET);
                }
                let actions = convert::packet_out_actions(&po.actions, sw.bridge_view().tlv())?;
                groups::check_groups(&sw.bridge_view().groups, &actions)?;
                sw.packet_out(in_port, &actions, &po.data)?;
                return Ok(None);
            }
            Message::RoleRequest(r) => Message::RoleReply(sw.roles().request(self.id, r)?),
            Message::GetAsyncRequest => Message::GetAsyncReply(self.async_cfg),
            Message::SetAsync(c) => {
                self.async_cfg = c;
                return Ok(None);
            }
            Message::SetAsyncProps(body) => {
                let mut c = self.async_cfg;
                openflow::versions::async_apply_v14(&body, &mut c).map_err(|e| e.ofp_error())?;
                self.async_cfg = c;
                return Ok(None);
            }
            Message::MultipartRequest { body, .. } => {
                match body {
                    MpRequest::Desc => Message::MultipartReply {
                        flags: 0,
                        body: MpReply::Desc(sw.desc()),
                    },
                    MpRequest::PortDesc(which) => {
                        let mut ports = sw.ports();
                        if which != OfPort::Any.number() {
                            ports.retain(|p| p.port_no == which);
                            if ports.is_empty() {
                                return Err(OfpError::BAD_PORT);
                            }
                        }
                        let v = self.version;
                        self.send_parts(xid, mp_type::PORT_DESC, &ports, |p, out| {
                            openflow::versions::port_emit(p, v, out)
                        });
                        return Ok(None);
                    }
                    MpRequest::Flow(req) => {
                        let now = sw.now();
                        let br = sw.bridge_view();
                        let rules = selected_rules(&br, &req)?;
                        let v = self.version;
                        self.send_parts(xid, mp_type::FLOW, rules, |(t, r), out| {
                            let e = flow_stats_entry(t, r, now, br.tlv());
                            openflow::versions::flow_stats_emit(&e, v, out);
                        });
                        return Ok(None);
                    }
                    MpRequest::Aggregate(req) => {
                        let br = sw.bridge_view();
                        let rules = selected_rules(&br, &req)?;
                        Message::MultipartReply {
                            flags: 0,
                            body: MpReply::Aggregate(AggregateReply {
                                packet_count: rules.iter().map(|(_, r)| r.packets).sum(),
                                byte_count: rules.iter().map(|(_, r)| r.bytes).sum(),
                                flow_count: rules.len() as u32,
                            }),
                        }
                    }
                    MpRequest::PortStats(p) => {
                        if p != OfPort::Any.number() && OfPort::from_number(p).is_none() {
                            return Err(OfpError::BAD_PORT);
                        }
                        let stats = sw.port_stats(p);
                        let v = self.version;
                        self.send_parts(xid, mp_type::PORT_STATS, &stats, |s, out| {
                            openflow::versions::port_stats_emit(s, v, out)
                        });
                        return Ok(None);
                    }
                    MpRequest::Meter(id) | MpRequest::MeterConfig(id) => {
                        let config = matches!(body, MpRequest::MeterConfig(_));
                        let meters = sw.meters().ok_or(OfpError::BAD_MULTIPART)?;
                        let specs: Vec<MeterSpec> = meters
                            .all()
                            .into_iter()
                            .filter(|m| id == openflow::meter::METER_ALL || m.id.0 == id)
                            .collect();
                        if config {
                            let v: Vec<_> = specs.iter().map(meter_config).collect();
                            self.send_parts(
                                xid,
                                mp_type::METER_CONFIG,
                                &v,
                                openflow::MeterConfig::emit,
                            );
                        } else {
                            let v: Vec<_> = specs
                                .iter()
                                .map(|m| {
                                    let st = meters.stats(m.id).unwrap_or_default();
                                    openflow::MeterStats {
                                        meter_id: m.id.0,
                                        flow_count: 0,
                                        // Passed and dropped: every packet
                                        // the meter saw.
                                        packet_in_count: st.packets + st.dropped_packets,
                                        byte_in_count: st.bytes + st.dropped_bytes,
                                        duration_sec: 0,
                                        duration_nsec: 0,
                                        bands: vec![(st.dropped_packets, st.dropped_bytes)],
                                    }
                                })
                                .collect();
                            self.send_parts(xid, mp_type::METER, &v, openflow::MeterStats::emit);
                        }
                        return Ok(None);
                    }
                    MpRequest::MeterFeatures => {
                        use openflow::meter::{band_type, meter_flags};
                        Message::MultipartReply {
                            flags: 0,
                            body: MpReply::MeterFeatures(openflow::MeterFeatures {
                                max_meter: METER_MAX,
                                band_types: 1 << band_type::DROP,
                                capabilities: u32::from(
                                    meter_flags::KBPS
                                        | meter_flags::PKTPS
                                        | meter_flags::BURST
                                        | meter_flags::STATS,
                                ),
                                max_bands: 1,
                                max_color: 0,
                            }),
                        }
                    }
                    MpRequest::Table => Message::MultipartReply {
                        flags: 0,
                        body: MpReply::Table(table_stats(&sw.bridge_view())),
                    },
                    MpRequest::TableFeatures(set) => {
                        if !set.is_empty() {
                            // The tables' features are fixed.
                            return Err(OfpError::new(13, 5));
                        }
                        let all = table_features_once();
                        self.send_parts(xid, mp_type::TABLE_FEATURES, all, TableFeatures::emit);
                        return Ok(None);
                    }
                    MpRequest::Group(id) => {
                        let now = sw.now();
                        let v = groups::group_stats(&sw.bridge_view(), id, now);
                        self.send_parts(xid, mp_type::GROUP, &v, openflow::GroupStats::emit);
                        return Ok(None);
                    }
                    MpRequest::GroupDesc(which) => {
                        let mut descs = groups::group_desc(&sw.bridge_view().groups);
                        if which != openflow::group::GROUP_ALL {
                            descs.retain(|g| g.group_id == which);
                        }
                        let v = self.version;
                        self.send_parts(xid, mp_type::GROUP_DESC, &descs, |g, out| {
                            openflow::versions::group_desc_emit(g, v, out)
                        });
                        return Ok(None);
                    }
                    MpRequest::GroupFeatures => Message::MultipartReply {
                        flags: 0,
                        body: MpReply::GroupFeatures(groups::group_features()),
                    },
                    // No queues: an empty answer.
                    MpRequest::Other {
                        ty: mp_type::QUEUE, ..
                    } => Message::MultipartReply {
                        flags: 0,
                        body: MpReply::Other {
                            ty: mp_type::QUEUE,
                            body: Vec::new(),
                        },
                    },
                    MpRequest::Other { .. } => return Err(OfpError::BAD_MULTIPART),
                }
            }
            // A HELLO after the handshake; the messages only a switch sends
            // are answered before their body is parsed (`message`).
            Message::Hello { .. }
            | Message::FeaturesReply(_)
            | Message::GetConfigReply(_)
            | Message::PortStatus(_)
            | Message::MultipartReply { .. }
            | Message::BarrierReply
            | Message::RoleReply(_)
            | Message::GetAsyncReply(_)
            | Message::FlowRemoved(_)
            | Message::PacketIn(_)
            | Message::QueueGetConfigReply(_) => return Err(OfpError::BAD_TYPE),
            Message::GroupMod(_) | Message::PortMod(_) | Message::TableMod(_) if slave => {
                return Err(OfpError::IS_SLAVE)
            }
            Message::GroupMod(gm) => {
                let removed = self.apply_group_mod(&gm, sw)?;
                if !removed.is_empty() {
                    sw.rules_removed(&removed);
                }
                sw.request_sync();
                return Ok(None);
            }
            Message::TableMod(t) => {
                if t.table_id != TABLE_ALL && t.table_id > TableId::MAX.0 {
                    return Err(OfpError::new(8, 0));
                }
                // 1.3 defines no table config but the deprecated bits.
                if t.config & !3 != 0 {
                    return Err(OfpError::new(8, 1));
                }
                return Ok(None);
            }
            Message::PortMod(p) => {
                if !sw.ports().iter().any(|q| q.port_no == p.port_no) {
                    return Err(OfpError::new(7, 0));
                }
                // Port configuration is the netdev's (rtnetlink), not the
                // controller's.
                if p.mask != 0 {
                    return Err(OfpError::new(7, 4));
                }
                return Ok(None);
            }
            Message::QueueGetConfigRequest(q) => {
                let known = q.port == OfPort::Any.number()
                    || sw.ports().iter().any(|p| p.port_no == q.port);
                if !known {
                    return Err(OfpError::new(9, 0));
                }
                // No queues on any port.
                Message::QueueGetConfigReply(openflow::QueueConfig {
                    port: q.port,
                    queues: Vec::new(),
                })
            }
        }))
    }

    /// A multipart reply of `items`, split so that no message passes the
    /// 64 KiB limit (REPLY_MORE on all but the last).
    /// Replies of `items` (a slice's references, or any iterator: a
    /// dump's entries are made as they are written, never all at once).
    fn send_parts<I>(
        &mut self,
        xid: u32,
        ty: u16,
        items: impl IntoIterator<Item = I>,
        emit: impl FnMut(I, &mut Vec<u8>),
    ) {
        let v = self.version;
        match openflow::multipart::emit_reply_parts(&mut self.out, v, xid, ty, items, emit) {
            Ok(n) => self.stats.tx_msgs += n as u64,
            Err(e) => {
                self.last_error = Some(format!("reply not sent: {e}"));
                self.send_error(OfpError::MULTIPART_BUFFER_OVERFLOW, &[], xid);
            }
        }
    }

    fn send(&mut self, xid: u32, m: &Message) {
        match m.emit_as(self.version, xid, &mut self.out) {
            Ok(()) => self.stats.tx_msgs += 1,
            Err(e) => {
                // Replies are built to fit; one that does not is a bug
                // here, answered rather than dropped.
                self.last_error = Some(format!("reply not sent: {e}"));
                self.send_error(OfpError::MULTIPART_BUFFER_OVERFLOW, &[], xid);
            }
        }
    }

    fn send_new(&mut self, m: &Message) {
        let xid = self.next_xid;
        self.next_xid = self.next_xid.wrapping_add(1);
        self.send(xid, m);
    }

    /// A flow mod applied to the bridge: the rules it removed, or the
    /// error that refuses it (nothing changed then).
    fn apply_flow_mod<S: OfSwitch>(
        &mut self,
        fm: &openflow::flow::FlowMod,
        sw: &mut S,
    ) -> Result<Vec<crate::table::RemovedRule>, OfpError> {
        let converted = {
            let view = sw.bridge_view();
            let tlv = view.tlv();
            convert::flow_mod_from_wire(fm, tlv).map_err(|e| {
                let what = convert::refused_action(fm, tlv)
                    .map(|w| format!(" ({w})"))
                    .unwrap_or_default();
                (e, format!("flow mod refused: {}{what}", e.name()))
            })
        };
        let fm = converted.map_err(|(e, why)| {
            self.last_error = Some(why);
            e
        })?;
        let meters = sw.meters();
        let known = |id| meters.is_some_and(|m| m.get(id).is_some());
        if let Some(e) = fm.unknown_meter(known) {
            let (t, c) = e.of_error();
            self.last_error = Some(format!("flow mod refused: {e}"));
            return Err(OfpError::new(t, c));
        }
        let now = sw.now();
        let outcome = sw.bridge().apply_flow_mod(&fm, now).map_err(|e| {
            let (t, c) = e.of_error();
            self.last_error = Some(format!("flow mod refused: {e}"));
            OfpError::new(t, c)
        })?;
        Ok(outcome.removed)
    }

    /// A group mod applied to the bridge: the rules that ran a deleted
    /// group (deleted with it), or the error that refuses it.
    fn apply_group_mod<S: OfSwitch>(
        &mut self,
        gm: &openflow::group::GroupMod,
        sw: &mut S,
    ) -> Result<Vec<crate::table::RemovedRule>, OfpError> {
        let now = sw.now();
        groups::group_mod(&mut sw.bridge(), gm, now).map_err(|(e, why)| {
            self.last_error = Some(why);
            e
        })
    }

    fn send_error(&mut self, e: OfpError, offending: &[u8], xid: u32) {
        self.stats.errors_sent += 1;
        self.last_error.get_or_insert_with(|| e.name());
        let m = error_reply(e, offending);
        if m.emit_as(self.version, xid, &mut self.out).is_ok() {
            self.stats.tx_msgs += 1;
        }
    }
}

/// The tracker's filter for a flush message: a 16-byte address that is
/// IPv4-mapped (`::ffff:a.b.c.d`) is that IPv4 address; protocol 0 is any.
fn flush_filter(f: &nx_ct_flush::CtFlush) -> conntrack::FlushFilter {
    let addr = |a: [u8; 16]| match a {
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, b0, b1, b2, b3] => {
            (conntrack::Addr::v4([b0, b1, b2, b3]), false)
        }
        a => (conntrack::Addr(a), true),
    };
    // The protocol goes with the original tuple, and with the reply
    // tuple only when it is given (a whole original tuple alone is
    // removed from zone 0 unless a zone is named, as Open vSwitch does).
    let tuple = |t: &nx_ct_flush::FlushTuple, orig: bool| {
        let (src, dst) = (t.src.map(addr), t.dst.map(addr));
        let given = orig || *t != nx_ct_flush::FlushTuple::default();
        conntrack::dump::PartialTuple {
            src: src.map(|a| a.0),
            dst: dst.map(|a| a.0),
            v6: src.or(dst).is_some_and(|a| a.1),
            proto: (f.ip_proto != 0 && given).then_some(f.ip_proto),
            sport: t.src_port,
            dport: t.dst_port,
            icmp_type: t.icmp_type,
            icmp_code: t.icmp_code,
            icmp_id: t.icmp_id,
        }
    };
    conntrack::FlushFilter {
        zone: f.zone,
        mark: f.mark,
        label: f.labels,
        orig: tuple(&f.orig, true),
        reply: tuple(&f.reply, false),
    }
}

/// The rules a FLOW or AGGREGATE request selects (the request checked).
fn selected_rules<'a>(
    br: &'a Bridge,
    req: &FlowStatsRequest,
) -> Result<Vec<(TableId, &'a crate::table::Rule)>, OfpError> {
    let matched = convert::match_from_wire(&req.matched, br.tlv())?;
    let out_port = OfPort::from_number(req.out_port).ok_or(OfpError::BAD_PORT)?;
    if req.table_id != TABLE_ALL && req.table_id > TableId::MAX.0 {
        return Err(OfpError::BAD_TABLE_ID);
    }
    let out_group = (req.out_group != GROUP_ANY).then_some(req.out_group);
    Ok(br
        .tables
        .tables()
        .filter(|t| req.table_id == TABLE_ALL || t.id().0 == req.table_id)
        .flat_map(|t| t.rules().map(move |(_, r)| (t.id(), r)))
        .filter(|(_, r)| {
            match_covers(&matched, &r.spec.matched)
                && (r.spec.cookie.0 ^ req.cookie) & req.cookie_mask == 0
                && r.outputs_to(out_port)
                && r.outputs_to_group(out_group)
        })
        .collect())
}

/// A rule as a FLOW stats entry at `now`.
fn flow_stats_entry(
    table: TableId,
    r: &crate::table::Rule,
    now: Timestamp,
    tlv: &crate::tlv::TlvTable,
) -> FlowStats {
    let age = now.since(r.created);
    FlowStats {
        table_id: table.0,
        duration_sec: duration(age).0,
        duration_nsec: duration(age).1,
        priority: r.spec.priority.0,
        idle_timeout: r.spec.idle_timeout,
        hard_timeout: r.spec.hard_timeout,
        flags: convert::flags_to_wire(&r.spec.flags),
        cookie: r.spec.cookie.0,
        packet_count: r.packets,
        byte_count: r.bytes,
        matched: convert::match_to_wire(&r.spec.matched, tlv),
        instructions: convert::instructions_to_wire(&r.spec.instructions, &r.spec.matched),
        idle_sec: duration(now.since(r.used)).0,
        importance: r.spec.importance,
    }
}

/// TABLE stats: every table with its rule count (lookups are counted per
/// megaflow, not per table: zero).
fn table_stats(br: &Bridge) -> Vec<TableStats> {
    br.tables
        .tables()
        .map(|t| TableStats {
            table_id: t.id().0,
            active_count: t.len() as u32,
            lookup_count: 0,
            matched_count: 0,
        })
        .collect()
}

/// A METER_MOD on `meters`: one DROP band, in kb/s or packets/s; the
/// spec's METER_MOD_FAILED code for what is not that.
fn meter_mod(meters: &mut dyn Meters, mm: &openflow::MeterMod) -> Result<(), OfpError> {
    use openflow::meter::{band_type, meter_command, meter_flags, METER_ALL};
    let failed = |code| OfpError::new(12, code);
    let id = MeterId(mm.meter_id);
    if mm.command == meter_command::DELETE {
        if mm.meter_id == METER_ALL {
            for m in meters.all() {
                meters.remove(m.id);
            }
            return Ok(());
        }
        // Deleting a meter that does not exist is no error (as in OVS).
        meters.remove(id);
        return Ok(());
    }
    if !matches!(mm.command, meter_command::ADD | meter_command::MODIFY) {
        return Err(failed(4));
    }
    if mm.meter_id == 0 || mm.meter_id > METER_MAX {
        return Err(failed(2));
    }
    let known = meter_flags::KBPS | meter_flags::PKTPS | meter_flags::BURST | meter_flags::STATS;
    let unit = mm.flags & (meter_flags::KBPS | meter_flags::PKTPS);
    if mm.flags & !known != 0 || unit == (meter_flags::KBPS | meter_flags::PKTPS) {
        return Err(failed(5));
    }
    let [band] = mm.bands.as_slice() else {
        return Err(failed(if mm.bands.is_empty() { 8 } else { 11 }));
    };
    if band.ty != band_type::DROP {
        return Err(failed(8));
    }
    if band.rate == 0 {
        return Err(failed(6));
    }
    let exists = meters.get(id).is_some();
    match mm.command {
        meter_command::ADD if exists => return Err(failed(1)),
        meter_command::MODIFY if !exists => return Err(failed(3)),
        _ => {}
    }
    meters.set(MeterSpec {
        id,
        packets: unit == meter_flags::PKTPS,
        rate: u64::from(band.rate),
        burst_size: if mm.flags & meter_flags::BURST != 0 {
            u64::from(band.burst_size)
        } else {
            0
        },
        stats: mm.flags & meter_flags::STATS != 0,
    });
    Ok(())
}

/// A meter as METER_CONFIG describes it.
fn meter_config(m: &MeterSpec) -> openflow::MeterConfig {
    use openflow::meter::{band_type, meter_flags};
    let mut flags = if m.packets {
        meter_flags::PKTPS
    } else {
        meter_flags::KBPS
    };
    if m.burst_size > 0 {
        flags |= meter_flags::BURST;
    }
    if m.stats {
        flags |= meter_flags::STATS;
    }
    openflow::MeterConfig {
        flags,
        meter_id: m.id.0,
        bands: vec![openflow::Band {
            ty: band_type::DROP,
            rate: m.rate.min(u64::from(u32::MAX)) as u32,
            burst_size: m.burst_size.min(u64::from(u32::MAX)) as u32,
            arg: 0,
        }],
    }
}

/// An age in nanoseconds as OpenFlow's (seconds, nanoseconds).
pub(crate) fn duration(age_ns: u64) -> (u32, u32) {
    (
        (age_ns / 1_000_000_000) as u32,
        (age_ns % 1_000_000_000) as u32,
    )
}

/// The FLOW_REMOVED of a rule that left its table at `at`.
/// `tlv` is the bridge's TLV table (for the `tun_metadata` fields).
pub fn flow_removed(
    r: &crate::table::RemovedRule,
    at: Timestamp,
    tlv: &crate::tlv::TlvTable,
) -> openflow::FlowRemoved {
    use crate::table::RemovedReason;
    use openflow::flow::removed_reason;
    let age = at.since(r.rule.created);
    let spec = &r.rule.spec;
    openflow::FlowRemoved {
        cookie: spec.cookie.0,
        priority: spec.priority.0,
        reason: match r.reason {
            RemovedReason::IdleTimeout => removed_reason::IDLE_TIMEOUT,
            RemovedReason::HardTimeout => removed_reason::HARD_TIMEOUT,
            RemovedReason::Delete | RemovedReason::MeterDelete => removed_reason::DELETE,
            RemovedReason::GroupDelete => removed_reason::GROUP_DELETE,
        },
        table_id: r.table.0,
        duration_sec: duration(age).0,
        duration_nsec: duration(age).1,
        idle_timeout: spec.idle_timeout,
        hard_timeout: spec.hard_timeout,
        packet_count: r.rule.packets,
        byte_count: r.rule.bytes,
        matched: convert::match_to_wire(&spec.matched, tlv),
    }
}

/// What every table can do (the eight properties OpenFlow 1.3 requires).
/// [`table_features`], built once: they never change, and `ovs-ofctl`
/// asks for them on every run (for the tables' names).
fn table_features_once() -> &'static [TableFeatures] {
    static ALL: std::sync::OnceLock<Vec<TableFeatures>> = std::sync::OnceLock::new();
    ALL.get_or_init(table_features)
}

pub fn table_features() -> Vec<TableFeatures> {
    use openflow::action::{action_type as a, instruction_type as i};
    let ids = |v: &[u16]| -> Vec<u8> {
        v.iter()
            .flat_map(|t| {
                let mut b = t.to_be_bytes().to_vec();
                b.extend_from_slice(&4u16.to_be_bytes());
                b
            })
            .collect()
    };
    let last_instructions = [
        i::WRITE_METADATA,
        i::WRITE_ACTIONS,
        i::APPLY_ACTIONS,
        i::CLEAR_ACTIONS,
        i::METER,
    ];
    let mut all = vec![i::GOTO_TABLE];
    all.extend(last_instructions);
    let (instructions, last_instructions) = (ids(&all), ids(&last_instructions));
    let actions = ids(&[
        a::OUTPUT,
        a::GROUP,
        a::SET_NW_TTL,
        a::PUSH_VLAN,
        a::POP_VLAN,
        a::DEC_NW_TTL,
        a::SET_FIELD,
    ]);
    let headers = |list: convert::HeaderList| -> Vec<u8> {
        convert::wire_headers(list)
            .iter()
            .flat_map(|h| h.to_be_bytes())
            .collect()
    };
    let max = TableId::MAX.0;
    (0..=max)
        .map(|t| {
            let next: Vec<u8> = ((t + 1)..=max).collect();
            // The last table cannot go to another.
            let instructions = if t == max {
                last_instructions.clone()
            } else {
                instructions.clone()
            };
            TableFeatures {
                table_id: t,
                // Unnamed, as Open vSwitch's tables are unless configured.
                name: String::new(),
                metadata_match: u64::MAX,
                metadata_write: u64::MAX,
                config: 0,
                max_entries: MAX_ENTRIES,
                properties: vec![
                    (prop::INSTRUCTIONS, instructions),
                    (prop::NEXT_TABLES, next),
                    (prop::WRITE_ACTIONS, actions.clone()),
                    (prop::APPLY_ACTIONS, actions.clone()),
                    (prop::MATCH, headers(convert::HeaderList::Match)),
                    (prop::WILDCARDS, headers(convert::HeaderList::Wildcards)),
                    (prop::WRITE_SETFIELD, headers(convert::HeaderList::SetField)),
                    (prop::APPLY_SETFIELD, headers(convert::HeaderList::SetField)),
                ],
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
