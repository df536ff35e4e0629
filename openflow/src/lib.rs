//! # openflow: the OpenFlow 1.3 to 1.5 wire protocol as data
//!
//! Checked views over bytes and typed messages with parse and emit, in
//! the manner of smoltcp's `wire`: [`Reader`](wire::Reader) reads
//! big-endian fields and names the field a short message ran out in;
//! [`parse`] turns one whole message into a [`Message`] or a
//! [`ParseError`] that says which OpenFlow ERROR answers it
//! ([`ParseError::ofp_error`]); [`Message::emit`] writes one back.
//! [`Framer`] cuts a byte stream into messages.
//!
//! No state and no I/O: connections, roles and what a message does to
//! the switch live in `ofproto`'s channels.
//!
//! Decoded so far: HELLO (version bitmaps), ERROR (every type and code of
//! the spec, by name: [`ERROR_TYPES`]), ECHO, EXPERIMENTER, FEATURES,
//! GET/SET_CONFIG, PORT_STATUS, FLOW_MOD, FLOW_REMOVED, PACKET_IN,
//! PACKET_OUT, BARRIER, ROLE, GET/SET_ASYNC and MULTIPART DESC, FLOW,
//! AGGREGATE and PORT_DESC; OXM matches (every basic field, Nicira
//! registers), every instruction and action of 1.3 and the Nicira
//! `resubmit`, `reg_load` and `reg_move` actions, METER_MOD and the meter
//! multiparts, TABLE_MOD, PORT_MOD, GROUP_MOD with its buckets and the
//! GROUP, GROUP_DESC and GROUP_FEATURES multiparts, QUEUE_GET_CONFIG,
//! PORT_STATS, TABLE and TABLE_FEATURES: every message type of 1.3. The
//! multipart bodies not listed (QUEUE, EXPERIMENTER) are carried as bytes
//! with their type. 1.4 and 1.5 are read into the same messages and
//! written from them ([`versions`]: their changed encodings; [`regs`]:
//! the wide registers).

pub mod action;
pub mod bundle;
pub mod config_msgs;
pub mod error;
pub mod flow;
pub mod group;
pub mod header;
pub mod message;
pub mod meter;
pub mod multipart;
pub mod nx_controller;
pub mod nx_ct;
pub mod nx_ct_flush;
pub mod nx_tlv;
pub mod oxm;
pub mod port;
pub mod regs;
pub mod table;
pub mod versions;
pub mod wire;

pub use action::{Action, Instruction};
pub use config_msgs::{PortMod, QueueConfig, TableMod};
pub use error::{OfpError, ParseError, ERROR_TYPES};
pub use flow::{
    AggregateReply, FlowMod, FlowRemoved, FlowStats, FlowStatsRequest, PacketIn, PacketOut,
};
pub use group::{Bucket, GroupDesc, GroupFeatures, GroupMod, GroupStats};
pub use header::{
    version_name, Framer, Header, MsgType, HEADER_LEN, MAX_LEN, V13, V14, V15, VERSION, VERSIONS,
};
pub use message::{
    bitmap_has, bitmap_of, error_reply, parse, AsyncConfig, Features, Message, PortStatus, Role,
    SwitchConfig, TooLong,
};
pub use meter::{Band, MeterConfig, MeterFeatures, MeterMod, MeterStats};
pub use multipart::{Desc, MpReply, MpRequest};
pub use oxm::{Oxm, OxmMatch};
pub use port::{Port, PortStatsEntry};
pub use table::{TableFeatures, TableStats};
