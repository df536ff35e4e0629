//! sFlow version 5 datagrams (sflow.org, "sFlow Version 5", July 2004):
//! flow samples carrying the sampled packet's header (raw packet header
//! record) and counter samples carrying a port's generic interface
//! counters, as collectors (sfcapd, sflowtool, Wireshark) decode them.
//!
//! Everything is XDR: big-endian 32-bit words, opaque data padded to a
//! multiple of 4 bytes.

use std::net::Ipv4Addr;

/// `0x3FFFFFFF`: an interface that is not known.
pub const UNKNOWN_IF: u32 = 0x3fff_ffff;

/// Header bytes of a sampled packet exported by default (Open vSwitch's
/// default too).
pub const DEFAULT_HEADER_BYTES: usize = 128;

/// One sampled packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowSample {
    /// ifIndex of the data source (the port the sampler sits on).
    pub source: u32,
    /// 1 in `rate` packets is sampled.
    pub rate: u32,
    /// Packets that could have been sampled (the source's pool).
    pub pool: u32,
    /// Samples lost on the way to the agent.
    pub drops: u32,
    pub input: u32,
    pub output: u32,
    /// The frame's length on the wire (without FCS).
    pub frame_length: u32,
    /// Its first bytes (at most the configured header length).
    pub header: Vec<u8>,
}

/// A port's counters (the generic interface counters record).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IfCounters {
    pub index: u32,
    /// Bits per second (0: unknown).
    pub speed: u64,
    pub admin_up: bool,
    pub oper_up: bool,
    pub in_octets: u64,
    pub in_packets: u32,
    pub in_discards: u32,
    pub out_octets: u64,
    pub out_packets: u32,
    pub out_discards: u32,
}

/// One sample of a datagram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sample {
    Flow(FlowSample),
    Counters(IfCounters),
}

fn put32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Appends a `u32 format, u32 length, data` structure whose data `body`
/// writes.
fn tagged(out: &mut Vec<u8>, format: u32, body: impl FnOnce(&mut Vec<u8>)) {
    put32(out, format);
    let at = out.len();
    put32(out, 0);
    body(out);
    let len = (out.len() - at - 4) as u32;
    out[at..at + 4].copy_from_slice(&len.to_be_bytes());
}

/// The next sequence number of `source` in `seqs` (the first is 1).
fn next(seqs: &mut std::collections::HashMap<u32, u32>, source: u32) -> u32 {
    let seq = seqs.entry(source).or_default();
    *seq = seq.wrapping_add(1);
    *seq
}

/// Encodes datagrams of one agent; keeps the sequence numbers.
#[derive(Debug)]
pub struct Agent {
    pub address: Ipv4Addr,
    pub sub_agent: u32,
    datagrams: u32,
    /// Per data source: flow sample and counter sample sequence numbers.
    flow_seq: std::collections::HashMap<u32, u32>,
    counter_seq: std::collections::HashMap<u32, u32>,
}

impl Agent {
    pub fn new(address: Ipv4Addr, sub_agent: u32) -> Agent {
        Agent {
            address,
            sub_agent,
            datagrams: 0,
            flow_seq: Default::default(),
            counter_seq: Default::default(),
        }
    }

    /// One datagram of `samples` at `uptime_ms` since the agent started.
    pub fn datagram(&mut self, uptime_ms: u32, samples: &[Sample]) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + samples.len() * 200);
        self.datagrams = self.datagrams.wrapping_add(1);
        put32(&mut out, 5);
        put32(&mut out, 1); // IPv4
        out.extend_from_slice(&self.address.octets());
        put32(&mut out, self.sub_agent);
        put32(&mut out, self.datagrams);
        put32(&mut out, uptime_ms);
        put32(&mut out, samples.len() as u32);
        for s in samples {
            match s {
                Sample::Flow(f) => {
                    let seq = next(&mut self.flow_seq, f.source);
                    tagged(&mut out, 1, |o| {
                        put32(o, seq);
                        put32(o, f.source & 0x00ff_ffff);
                        put32(o, f.rate);
                        put32(o, f.pool);
                        put32(o, f.drops);
                        put32(o, f.input);
                        put32(o, f.output);
                        put32(o, 1);
                        // Raw packet header, Ethernet.
                        tagged(o, 1, |o| {
                            put32(o, 1);
                            put32(o, f.frame_length);
                            put32(o, f.frame_length - f.header.len() as u32);
                            put32(o, f.header.len() as u32);
                            o.extend_from_slice(&f.header);
                            o.resize(o.len() + (4 - f.header.len() % 4) % 4, 0);
                        });
                    });
                }
                Sample::Counters(c) => {
                    let seq = next(&mut self.counter_seq, c.index);
                    tagged(&mut out, 2, |o| {
                        put32(o, seq);
                        put32(o, c.index & 0x00ff_ffff);
                        put32(o, 1);
                        // Generic interface counters.
                        tagged(o, 1, |o| {
                            put32(o, c.index);
                            put32(o, 6); // ethernetCsmacd
                            put64(o, c.speed);
                            put32(o, 1); // full duplex
                            put32(o, u32::from(c.admin_up) | (u32::from(c.oper_up) << 1));
                            // In, then out: octets, unicast packets,
                            // multicast, broadcast, discards, errors, and
                            // unknown protocols (in) or promiscuous (out).
                            for (octets, packets, discards) in [
                                (c.in_octets, c.in_packets, c.in_discards),
                                (c.out_octets, c.out_packets, c.out_discards),
                            ] {
                                put64(o, octets);
                                for v in [packets, 0, 0, discards, 0, 0] {
                                    put32(o, v);
                                }
                            }
                        });
                    });
                }
            }
        }
        out
    }
}

/// The bytes `sample` takes in a datagram.
pub fn encoded_len(sample: &Sample) -> usize {
    match sample {
        // Tag, length, 8 words, the record's tag and length, 4 words, the
        // header padded to a word.
        Sample::Flow(f) => 8 + 32 + 8 + 16 + f.header.len().div_ceil(4) * 4,
        // Tag, length, 3 words, the record's tag and length, 88 bytes of
        // generic interface counters.
        Sample::Counters(_) => 8 + 12 + 8 + 88,
    }
}

/// The bytes of a datagram's header.
pub const DATAGRAM_HEADER_LEN: usize = 28;

#[cfg(test)]
#[path = "tests/sflow.rs"]
pub(crate) mod tests;
