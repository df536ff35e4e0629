//! Property test of the whole walk (sim eSwitch in front of the software
//! pipeline) against a pure software reference: a plain `ofproto::Bridge`
//! with the same table, translating and executing every packet itself.
//!
//! Each case draws a small OpenFlow table (in_port, ip/udp/tcp, nw_dst,
//! tp_dst; output, drop, NORMAL, meter, mod_nw_dst, mod_tp_dst, two
//! outputs, goto_table), an offload policy with small budgets and limits
//! (hot/all/off, rule budget 0..3, flow limit, max-idle, a sim with few
//! rules per table), which VMs' MACs are known from the start, and a
//! sequence of operations on strictly increasing time: batches of packets
//! from a small pool (so flows repeat, get hot and go to hardware), table
//! changes (add, modify, delete; most followed at once by a revalidator
//! pass, some left stale for a while), explicit passes and idle gaps
//! (aging). Checked:
//!
//! (a) after every pass (explicit or run by `receive`), every megaflow is
//!     current and sound: a fresh translation of its masked key, and of
//!     every pool packet it matches, gives its actions; a flow is
//!     `Offloaded` exactly when it has a hardware rule, no flow is left in a
//!     transient state, `offloaded_len` counts them and the budget holds;
//! (b) every batch sent while the tables are not stale leaves the switch
//!     exactly as the reference delivers it (ports and bytes, as multisets),
//!     except packets through a meter (all of their outputs or none) and
//!     NORMAL packets while the MAC table changed since the last pass
//!     (stale until the next pass, by design: then the others are still
//!     held to the reference);
//! (c) counting, after a final pass: every packet was handled once, in
//!     hardware or software (`hw_handled + sw_handled = sent`,
//!     `stats.packets = sw_handled`, `hits + upcalls = packets`); the
//!     hardware counters folded equal the packets the eSwitch handled
//!     (`stats.hw_packets = hw_handled`); each megaflow's packets and bytes
//!     are exactly those sent that matched it since it was made (megaflows
//!     that overlap another one for some packet are skipped); each OpenFlow
//!     rule's packets are exactly those the reference's translations hit it
//!     with (unless packets went through stale megaflows);
//! (d) no illegal lifecycle transition, and `finish` leaves the device
//!     empty;
//! (e) over the whole run, the exemptions stay a minority: floors on the
//!     share of batches, packets, megaflows and rules checked strictly
//!     (see `Tally`).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

use cli::config::PortSpec;
use cli::switch::{Egressor, FlowFile, Path, SimSwitch};
use megaflow::actions::{execute, CollectSink};
use megaflow::frame::{FrameSpec, L4};
use megaflow::offload::FlowState;
use megaflow::{extract, extract_into, DpAction, FlowKey, Match, PortNo, Timestamp};
use offload::sim::SimConfig;
use offload::Vport;
use ofproto::bridge::PortInfo;
use ofproto::mac::{MacLearn, MacTable};
use ofproto::{
    Bridge, FlowModCommand, OffloadMode, OffloadPolicy, PipelineConfig, RevalidatorConfig,
};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

/// How much of a run was checked strictly, over all its cases: the
/// exemptions above (stale tables, NORMAL while the MAC table moved,
/// ambiguous megaflows, inexact rule counts) must stay a minority, or the
/// property would quietly check less and less. Each pair is (checked,
/// total).
#[derive(Default)]
struct Tally {
    /// Batches held to the reference packet by packet (neither sent on
    /// stale tables nor with a NORMAL packet exempted).
    batches: AtomicPair,
    /// Packets held to the reference (not exempted, not through a meter).
    packets: AtomicPair,
    /// Megaflows whose counts were checked (not ambiguous).
    megaflows: AtomicPair,
    /// OpenFlow rules whose counts were checked exactly.
    rules: AtomicPair,
}

#[derive(Default)]
struct AtomicPair(AtomicU64, AtomicU64);

impl AtomicPair {
    fn add(&self, checked: u64, total: u64) {
        self.0.fetch_add(checked, Ordering::Relaxed);
        self.1.fetch_add(total, Ordering::Relaxed);
    }

    /// (checked, total, checked share)
    fn get(&self) -> (u64, u64, f64) {
        let (c, t) = (
            self.0.load(Ordering::Relaxed),
            self.1.load(Ordering::Relaxed),
        );
        (c, t, c as f64 / t.max(1) as f64)
    }
}

static TALLY: std::sync::LazyLock<Tally> = std::sync::LazyLock::new(Tally::default);

const MS: u64 = 1_000_000;
const T0: u64 = 1_700_000_000 * 1_000 * MS;
const N_PORTS: u32 = 4;

fn at(ms: u64) -> Timestamp {
    Timestamp(T0 + ms * MS)
}

fn vm_mac(port: u32) -> u64 {
    0x0200_0000_0000 | u64::from(port)
}

fn ports() -> Vec<PortSpec> {
    (1..=N_PORTS)
        .map(|i| PortSpec {
            name: format!("vm{i}"),
            no: PortNo(i),
            kind: cli::switch::PortKind::Representor,
            vport: Some(Vport::vf((i - 1) as u16).expect("vf")),
            tunnel: None,
            bridge: ofproto::BridgeNo::MAIN,
            peer: None,
        })
        .collect()
}

// ----------------------------------------------------------------------
// Generated tables.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Proto {
    Any,
    Ip,
    Udp,
    Tcp,
}

#[derive(Clone, Copy, Debug)]
enum Act {
    Output(u32),
    Drop,
    Normal,
    Meter(u32),
    SetNwDst(u8, u32),
    SetTpDst(u16, u32),
    Two(u32, u32),
    Goto,
}

#[derive(Clone, Debug)]
struct RuleGen {
    table: u8,
    priority: u16,
    in_port: Option<u32>,
    proto: Proto,
    nw_dst: Option<u8>,
    tp_dst: Option<u16>,
    act: Act,
}

impl RuleGen {
    /// The match part (`table=..,priority=..,fields`).
    fn match_text(&self) -> String {
        let mut parts = vec![
            format!("table={}", self.table),
            format!("priority={}", self.priority),
        ];
        if let Some(p) = self.in_port {
            parts.push(format!("in_port={p}"));
        }
        let proto = match (self.proto, self.nw_dst, self.tp_dst) {
            (Proto::Udp, ..) | (Proto::Any | Proto::Ip, _, Some(_)) => Some("udp"),
            (Proto::Tcp, ..) => Some("tcp"),
            (Proto::Ip, ..) | (Proto::Any, Some(_), None) => Some("ip"),
            (Proto::Any, None, None) => None,
        };
        if let Some(p) = proto {
            parts.push(p.to_string());
        }
        if let Some(d) = self.nw_dst {
            parts.push(format!("nw_dst=10.0.0.{d}"));
        }
        if let Some(d) = self.tp_dst {
            parts.push(format!("tp_dst={d}"));
        }
        parts.join(",")
    }

    fn actions_text(&self) -> String {
        match self.act {
            Act::Output(p) => format!("output:{p}"),
            Act::Drop => "drop".to_string(),
            Act::Normal => "normal".to_string(),
            Act::Meter(p) => format!("meter:1,output:{p}"),
            Act::SetNwDst(d, p) => format!("mod_nw_dst:10.0.0.{d},output:{p}"),
            Act::SetTpDst(d, p) => format!("mod_tp_dst:{d},output:{p}"),
            Act::Two(p, q) => format!("output:{p},output:{q}"),
            Act::Goto if self.table == 0 => "goto_table:1".to_string(),
            Act::Goto => "normal".to_string(),
        }
    }

    /// The line for `cmd` (deletes take no actions).
    fn text(&self, cmd: FlowModCommand) -> String {
        match cmd {
            FlowModCommand::Delete | FlowModCommand::DeleteStrict => self.match_text(),
            _ => format!("{},actions={}", self.match_text(), self.actions_text()),
        }
    }
}

fn port() -> impl Strategy<Value = u32> {
    1..=N_PORTS
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        4 => port().prop_map(Act::Output),
        1 => Just(Act::Drop),
        2 => Just(Act::Normal),
        1 => port().prop_map(Act::Meter),
        1 => (1u8..=5, port()).prop_map(|(d, p)| Act::SetNwDst(d, p)),
        1 => (prop::sample::select(vec![53u16, 80, 5001]), port())
            .prop_map(|(d, p)| Act::SetTpDst(d, p)),
        // Two different ports: the same port twice is a known sw/hw
        // disagreement (two copies in software, one from the eSwitch).
        1 => (port(), 1..N_PORTS).prop_map(|(p, d)| Act::Two(p, (p - 1 + d) % N_PORTS + 1)),
        1 => Just(Act::Goto),
    ]
}

fn rule() -> impl Strategy<Value = RuleGen> {
    (
        prop::sample::select(vec![0u8, 0, 0, 1]),
        prop::sample::select(vec![0u16, 10, 20, 30, 40]),
        prop::option::weighted(0.3, port()),
        prop::sample::select(vec![Proto::Any, Proto::Ip, Proto::Udp, Proto::Tcp]),
        prop::option::weighted(0.5, 1u8..=5),
        prop::option::weighted(0.3, prop::sample::select(vec![53u16, 80, 5001])),
        act(),
    )
        .prop_map(
            |(table, priority, in_port, proto, nw_dst, tp_dst, act)| RuleGen {
                table,
                priority,
                in_port,
                proto,
                nw_dst,
                tp_dst,
                act,
            },
        )
}

// ----------------------------------------------------------------------
// Generated packets, policies and operations.

#[derive(Clone, Debug)]
struct PktGen {
    in_port: u32,
    /// 1..=4: that VM's MAC; 5: an unknown unicast MAC; 6: broadcast.
    dst_mac: u32,
    dst_ip: u8,
    tcp: bool,
    sport: u16,
    dport: u16,
    payload: usize,
}

impl PktGen {
    fn frame(&self) -> Vec<u8> {
        let l4 = if self.tcp {
            L4::tcp(self.sport, self.dport)
        } else {
            L4::udp(self.sport, self.dport)
        };
        let dst_mac = match self.dst_mac {
            1..=4 => vm_mac(self.dst_mac),
            5 => 0x0200_0000_00ee,
            _ => 0xffff_ffff_ffff,
        };
        FrameSpec::ipv4(
            0x0a00_0100 | self.in_port,
            0x0a00_0000 | u32::from(self.dst_ip),
            l4,
        )
        .macs(vm_mac(self.in_port), dst_mac)
        .payload(self.payload)
        .build()
    }
}

fn pkt() -> impl Strategy<Value = PktGen> {
    (
        port(),
        1u32..=6,
        1u8..=5,
        any::<bool>(),
        prop::sample::select(vec![1000u16, 1001]),
        prop::sample::select(vec![53u16, 80, 5001, 9]),
        prop::sample::select(vec![10usize, 200]),
    )
        .prop_map(
            |(in_port, dst_mac, dst_ip, tcp, sport, dport, payload)| PktGen {
                in_port,
                dst_mac,
                dst_ip,
                tcp,
                sport,
                dport,
                payload,
            },
        )
}

#[derive(Clone, Debug)]
enum Op {
    /// Packets (indices into the pool) in one batch, `dt` ms after the last
    /// operation.
    Send(Vec<usize>, u64),
    /// A flow mod, then (when true) a revalidator pass before anything
    /// else happens.
    Change(FlowModCommand, RuleGen, bool),
    /// An explicit revalidator pass.
    Revalidate,
    /// Nothing happens for this many ms.
    Idle(u64),
}

fn command() -> impl Strategy<Value = FlowModCommand> {
    prop::sample::select(vec![
        FlowModCommand::Add,
        FlowModCommand::Add,
        FlowModCommand::Modify,
        FlowModCommand::ModifyStrict,
        FlowModCommand::Delete,
        FlowModCommand::DeleteStrict,
    ])
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (prop::collection::vec(0usize..64, 1..=3), 0u64..=40)
            .prop_map(|(b, dt)| Op::Send(b, dt)),
        2 => (command(), rule(), prop::bool::weighted(0.8))
            .prop_map(|(c, r, pass)| Op::Change(c, r, pass)),
        1 => Just(Op::Revalidate),
        1 => prop::sample::select(vec![300u64, 1_200, 4_000]).prop_map(Op::Idle),
    ]
}

#[derive(Clone, Debug)]
struct Setup {
    mode: OffloadMode,
    budget: Option<usize>,
    retry_ms: u64,
    max_idle_ms: u64,
    flow_limit: usize,
    /// Revalidator interval: passes also run inside `receive`.
    interval_ms: u64,
    /// Rules per DR table in the sim (ENOSPC).
    max_rules: Option<usize>,
    /// The meter's line.
    meter: String,
    /// Which VMs' MACs both bridges know from the start (bit i: port i+1).
    prelearn: u8,
    /// Whether table changes are preceded by a pass (see `Scenario`).
    pass_before_change: bool,
}

fn setup() -> impl Strategy<Value = Setup> {
    (
        prop_oneof![
            Just(OffloadMode::Off),
            Just(OffloadMode::All),
            (1u32..=4).prop_map(|packets| OffloadMode::Hot {
                packets,
                window_ns: 1_000 * MS
            }),
        ],
        prop::option::weighted(0.5, 0usize..=3),
        prop::sample::select(vec![100u64, 1_000]),
        prop::sample::select(vec![1_000u64, 3_000, 10_000]),
        prop::sample::select(vec![1_000_000usize, 3, 6]),
        prop::sample::select(vec![500u64, 3_600_000]),
        prop::option::weighted(0.2, 2usize..=4),
        prop::sample::select(vec![
            "meter=1,pktps,band=type=drop,rate=20".to_string(),
            "meter=1,kbps,burst,band=type=drop,rate=64,burst_size=4".to_string(),
        ]),
        0u8..16,
        prop::bool::weighted(0.5),
    )
        .prop_map(
            |(
                mode,
                budget,
                retry_ms,
                max_idle_ms,
                flow_limit,
                interval_ms,
                max_rules,
                meter,
                prelearn,
                pass_before_change,
            )| Setup {
                mode,
                budget,
                retry_ms,
                max_idle_ms,
                flow_limit,
                interval_ms,
                max_rules,
                meter,
                prelearn,
                pass_before_change,
            },
        )
}

// ----------------------------------------------------------------------
// The run.

/// Records every frame leaving the switch.
#[derive(Default)]
struct Rec {
    tx: Vec<(PortNo, Vec<u8>)>,
    hw: usize,
}

impl Egressor for Rec {
    fn tx(&mut self, port: PortNo, frame: &[u8], path: Path) {
        self.tx.push((port, frame.to_vec()));
        if path == Path::Hardware {
            self.hw += 1;
        }
    }
}

type Outputs = Vec<(PortNo, Vec<u8>)>;

/// A megaflow's identity over its life: its match and when it was made.
type FlowId = (Match, Timestamp);

/// Removes every element of `sub` from `from` (multiset); false if one is
/// missing.
fn take_all(from: &mut Outputs, sub: &Outputs) -> bool {
    for o in sub {
        match from.iter().position(|x| x == o) {
            Some(i) => {
                from.swap_remove(i);
            }
            None => return false,
        }
    }
    true
}

fn uses_meter(actions: &[DpAction]) -> bool {
    actions.iter().any(|a| match a {
        DpAction::Meter(_) => true,
        DpAction::Sample { actions, .. } => uses_meter(actions),
        _ => false,
    })
}

struct Scenario {
    sw: SimSwitch,
    reference: Bridge,
    ms: u64,
    /// Packets and bytes sent that matched each megaflow (match, created).
    per_flow: HashMap<FlowId, (u64, u64)>,
    /// Megaflows some packet matched together with another one.
    ambiguous: HashSet<FlowId>,
    /// Packets the reference's translations credited to each rule (uid).
    per_rule: HashMap<u64, u64>,
    /// Rules (uid) whose count may have lost in-flight credits (an add that
    /// replaced a rule while some of its hits were not folded yet).
    replaced_in_flight: HashSet<u64>,
    sent: u64,
    /// Frames the eSwitch forwarded.
    hw_tx: u64,
    passes: u64,
    mac_gen_at_pass: u64,
    /// Packets sent since the last pass.
    unfolded: bool,
    /// The tables changed since the last pass: megaflows and hardware rules
    /// may be stale (by design, until the next pass).
    table_stale: bool,
    /// Packets went through stale megaflows: their hits are credited to the
    /// rules they were translated with, not to the reference's.
    rules_inexact: bool,
    budget: Option<usize>,
    /// The keys of the packet pool.
    pool_keys: Vec<FlowKey>,
}

impl Scenario {
    fn new(
        setup: &Setup,
        table: &[RuleGen],
        pool: &[(PortNo, Vec<u8>)],
    ) -> Result<Scenario, TestCaseError> {
        let mut text = format!("{}\n", setup.meter);
        for r in table {
            text.push_str(&r.text(FlowModCommand::Add));
            text.push('\n');
        }
        let flows = FlowFile::parse(&text).map_err(|e| TestCaseError::fail(format!("{e:#}")))?;
        let cfg = PipelineConfig {
            offload: OffloadPolicy {
                mode: setup.mode,
                budget: setup.budget,
                retry_ns: setup.retry_ms * MS,
            },
            revalidator: RevalidatorConfig {
                interval_ns: setup.interval_ms * MS,
                max_idle_ns: setup.max_idle_ms * MS,
                flow_limit: setup.flow_limit,
                ..RevalidatorConfig::default()
            },
            ..PipelineConfig::default()
        };
        let mut sim = SimConfig::default();
        if let Some(n) = setup.max_rules {
            sim.max_rules_per_table = n;
        }
        let mut sw = SimSwitch::new(&ports(), &flows, cfg, sim, at(0))
            .map_err(|e| TestCaseError::fail(format!("{e:#}")))?;
        let mut reference = Bridge::new();
        for p in ports() {
            reference.add_port(PortInfo::new(p.no, p.name.clone()));
        }
        for fm in &flows.flows {
            reference
                .apply_flow_mod(fm, at(0))
                .expect("reference table");
        }
        for p in 1..=N_PORTS {
            if setup.prelearn & (1 << (p - 1)) != 0 {
                let l = MacLearn {
                    bridge: ofproto::BridgeNo::MAIN,
                    vlan: 0,
                    mac: vm_mac(p),
                    port: PortNo(p),
                };
                sw.pipeline_mut().bridge_mut().learn(&[l], at(0));
                reference.learn(&[l], at(0));
            }
        }
        let mac_gen_at_pass = sw.pipeline().bridge().mac().generation();
        Ok(Scenario {
            sw,
            reference,
            ms: 1,
            per_flow: HashMap::new(),
            ambiguous: HashSet::new(),
            per_rule: HashMap::new(),
            replaced_in_flight: HashSet::new(),
            sent: 0,
            hw_tx: 0,
            passes: 0,
            mac_gen_at_pass,
            unfolded: false,
            table_stale: false,
            rules_inexact: false,
            budget: setup.budget,
            pool_keys: pool.iter().map(|(p, f)| extract(p.0, f)).collect(),
        })
    }

    fn now(&self) -> Timestamp {
        at(self.ms)
    }

    /// Bookkeeping after anything that may have run a pass, and (a).
    fn after_pass(&mut self, forced: bool) -> Result<(), TestCaseError> {
        let passes = self.sw.pipeline().stats().passes;
        if !forced && passes == self.passes {
            return Ok(());
        }
        self.passes = passes;
        self.mac_gen_at_pass = self.sw.pipeline().bridge().mac().generation();
        self.unfolded = false;
        self.table_stale = false;
        self.check_consistent()
    }

    /// (a): every megaflow sound and current right after a pass.
    fn check_consistent(&self) -> Result<(), TestCaseError> {
        let now = self.now();
        let p = self.sw.pipeline();
        let mut offloaded = 0;
        for d in p.dump() {
            // The megaflow's own key, and every packet of the pool it
            // matches, translate to its actions now. (The masked key's
            // translation may read other bits than the packet that made
            // the megaflow did: no subset check on its mask.)
            let t = p.bridge().translate(d.matched.key(), now);
            prop_assert_eq!(
                &t.datapath_actions(),
                &d.actions,
                "megaflow {} disagrees with the tables",
                d.line(now)
            );
            for key in self.pool_keys.iter().filter(|k| d.matched.matches(k)) {
                let t = p.bridge().translate(key, now);
                prop_assert_eq!(
                    &t.datapath_actions(),
                    &d.actions,
                    "megaflow {} is unsound for {:?}",
                    d.line(now),
                    key
                );
            }
            prop_assert_eq!(
                d.state == FlowState::Offloaded,
                d.hw.is_some(),
                "state vs hardware rule: {}",
                d.line(now)
            );
            prop_assert!(
                matches!(
                    d.state,
                    FlowState::Installed | FlowState::Offloaded | FlowState::SoftwareOnly
                ),
                "transient state after a pass: {}",
                d.line(now)
            );
            offloaded += usize::from(d.hw.is_some());
        }
        prop_assert_eq!(p.offloaded_len(), offloaded);
        if let Some(b) = self.budget {
            prop_assert!(offloaded <= b, "{offloaded} offloaded, budget {b}");
        }
        prop_assert_eq!(p.stats().illegal_transitions, 0);
        Ok(())
    }

    fn revalidate(&mut self) -> Result<(), TestCaseError> {
        self.ms += 1;
        let now = self.now();
        self.sw.pipeline_mut().revalidate(now);
        self.after_pass(true)
    }

    fn send(&mut self, pool: &[(PortNo, Vec<u8>)], batch: &[usize]) -> Result<(), TestCaseError> {
        let now = self.now();
        let pkts: Vec<(PortNo, &[u8])> = batch
            .iter()
            .map(|&i| {
                let (p, f) = &pool[i % pool.len()];
                (*p, f.as_slice())
            })
            .collect();
        // The reference, and which megaflow each packet matches now.
        let dump = self.sw.pipeline().dump();
        let mut refs = Vec::new();
        let mut keys: Vec<(FlowKey, usize, Vec<FlowId>)> = Vec::new();
        for &(port, frame) in &pkts {
            let mut buf = frame.to_vec();
            let mut key = FlowKey::ZERO;
            let ex = extract_into(port.0, &buf, &mut key);
            let t = self.reference.translate(&key, now);
            if !t.learned.is_empty() {
                self.reference.learn(&t.learned, now);
            }
            for r in &t.rules {
                *self.per_rule.entry(r.uid.0).or_default() += 1;
            }
            let mut sink = CollectSink::new();
            let mut layout = ex.layout;
            execute(&t.actions, &mut buf, &mut layout, &mut sink);
            refs.push(RefPkt {
                outputs: sink.outputs,
                metered: uses_meter(&t.actions),
                uses_mac: t.uses_mac_table,
            });
            let before: Vec<_> = dump
                .iter()
                .filter(|d| d.matched.matches(&key))
                .map(|d| (d.matched, d.created))
                .collect();
            keys.push((key, frame.len(), before));
        }
        let stale = self.table_stale;
        self.rules_inexact |= stale;
        let refused = |s: &ofproto::PipelineStats| {
            s.flow_limit_hits + s.port_limit_hits + s.evicted_fair + s.evicted_limit
        };
        let refused_before = refused(self.sw.pipeline().stats());
        let mut rec = Rec::default();
        self.sw.receive(now, &pkts, &mut rec);
        // A megaflow refused or evicted for the limits in this batch: a
        // packet that matches one made in the batch may have had its own
        // (another mask) refused, or evicted with its count, and no
        // megaflow counts it.
        let limited = refused(self.sw.pipeline().stats()) != refused_before;
        self.sent += pkts.len() as u64;
        self.hw_tx += rec.hw as u64;
        self.unfolded = true;
        // NORMAL decisions may be stale until the next pass when the MAC
        // table changed since the last one (learning during this batch
        // included).
        let mac_dirty = self.sw.pipeline().bridge().mac().generation() != self.mac_gen_at_pass;
        if stale {
            // Stale megaflows may have kept packets from NORMAL (and from
            // learning) that the reference ran through it: take the
            // switch's MAC table as it is.
            let mut mac = MacTable::default();
            for (vlan, m, e) in self.sw.pipeline().bridge().mac().iter() {
                mac.learn(
                    MacLearn {
                        bridge: ofproto::BridgeNo::MAIN,
                        vlan,
                        mac: m,
                        port: e.port,
                    },
                    e.seen,
                );
            }
            self.reference.set_mac_table(mac);
            TALLY.batches.add(0, 1);
            TALLY.packets.add(0, refs.len() as u64);
        } else {
            check_outputs(&refs, rec.tx, mac_dirty).map_err(|e| {
                TestCaseError::fail(format!("at {} ms, batch {pkts:?}: {e}", self.ms))
            })?;
            let exempt = |r: &RefPkt| r.uses_mac && mac_dirty;
            let strict = refs.iter().filter(|r| !exempt(r) && !r.metered).count();
            TALLY.batches.add(u64::from(!refs.iter().any(exempt)), 1);
            TALLY.packets.add(strict as u64, refs.len() as u64);
        }

        // Attribution of each packet to its megaflow: the one it matched
        // before the batch or made in it. When megaflows overlap (several
        // made in one batch, or made next to older ones), the cache and the
        // eSwitch may pick either: those are not checked one by one.
        let after = self.sw.pipeline().dump();
        for (key, len, before) in keys {
            let mut ids = before;
            let made_here = after
                .iter()
                .filter(|d| d.matched.matches(&key) && !ids.contains(&(d.matched, d.created)))
                .map(|d| (d.matched, d.created))
                .collect::<Vec<_>>();
            if limited && !made_here.is_empty() {
                self.ambiguous.extend(ids);
                self.ambiguous.extend(made_here);
                continue;
            }
            ids.extend(made_here);
            match ids[..] {
                [id] => {
                    let e = self.per_flow.entry(id).or_default();
                    e.0 += 1;
                    e.1 += len as u64;
                }
                _ => self.ambiguous.extend(ids),
            }
        }
        self.after_pass(false)
    }

    /// A flow mod on both bridges, with passes before and after as told.
    fn change(
        &mut self,
        cmd: FlowModCommand,
        r: &RuleGen,
        pass_before: bool,
        pass_after: bool,
    ) -> Result<(), TestCaseError> {
        if pass_before {
            self.revalidate()?;
        }
        self.ms += 1;
        let now = self.now();
        let text = r.text(cmd);
        let fm = ofproto::text::parse_flow(&text, cmd)
            .map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        let replaced = (cmd == FlowModCommand::Add)
            .then(|| {
                self.reference
                    .tables()
                    .table(fm.rule.table)?
                    .rules()
                    .find(|(_, x)| {
                        x.spec.priority == fm.rule.priority && x.spec.matched == fm.rule.matched
                    })
                    .map(|(_, x)| x.uid.0)
            })
            .flatten();
        let a = self.sw.pipeline_mut().bridge_mut().apply_flow_mod(&fm, now);
        let b = self.reference.apply_flow_mod(&fm, now);
        match (&a, &b) {
            (Ok(a), Ok(b)) => {
                prop_assert_eq!(
                    (a.added, a.replaced, a.modified, a.removed.len()),
                    (b.added, b.replaced, b.modified, b.removed.len())
                );
            }
            (Err(a), Err(b)) => prop_assert_eq!(a, b),
            _ => prop_assert!(false, "{text}: switch {a:?}, reference {b:?}"),
        }
        if let Some(old) = replaced {
            // The new rule carries the old one's counters (no reset_counts).
            let new = self
                .reference
                .tables()
                .table(fm.rule.table)
                .and_then(|t| {
                    t.rules().find(|(_, x)| {
                        x.spec.priority == fm.rule.priority && x.spec.matched == fm.rule.matched
                    })
                })
                .map(|(_, x)| x.uid.0);
            if let Some(new) = new {
                let carried = self.per_rule.get(&old).copied().unwrap_or(0);
                self.per_rule.insert(new, carried);
                if self.unfolded || self.replaced_in_flight.contains(&old) {
                    self.replaced_in_flight.insert(new);
                }
            }
        }
        let changed = match &a {
            Ok(o) => o.added + o.replaced + o.modified + o.removed.len() > 0,
            Err(_) => false,
        };
        if pass_after {
            self.revalidate()
        } else {
            self.table_stale |= changed;
            Ok(())
        }
    }

    /// (c) and (d), at the end.
    fn finish(mut self) -> Result<(), TestCaseError> {
        self.revalidate()?;
        let now = self.now();
        let p = self.sw.pipeline();
        let st = p.stats().clone();
        let c = self.sw.counters().clone();
        prop_assert_eq!(c.rx.packets, self.sent);
        prop_assert_eq!(c.hw_handled + c.sw_handled, self.sent, "{:?}", c);
        prop_assert_eq!(st.packets, c.sw_handled, "software packets");
        prop_assert_eq!(st.hits + st.upcalls, st.packets);
        prop_assert_eq!(
            st.hw_packets,
            c.hw_handled,
            "hardware counters folded vs packets the eSwitch handled: {:?} {:?}",
            st,
            c
        );
        // Every megaflow counted exactly the packets that matched it.
        for d in p.dump() {
            let id = (d.matched, d.created);
            let ambiguous = self.ambiguous.contains(&id);
            TALLY.megaflows.add(u64::from(!ambiguous), 1);
            if ambiguous {
                continue;
            }
            let (packets, bytes) = self.per_flow.get(&id).copied().unwrap_or_default();
            prop_assert_eq!(
                (d.stats.packets, d.stats.bytes),
                (packets, bytes),
                "megaflow {}",
                d.line(now)
            );
        }
        // Every OpenFlow rule counted exactly the packets that hit it.
        for t in p.bridge().tables().tables() {
            for (_, r) in t.rules() {
                let want = self.per_rule.get(&r.uid.0).copied().unwrap_or(0);
                let same = self
                    .reference
                    .tables()
                    .tables()
                    .any(|rt| rt.rules().any(|(_, x)| x.uid == r.uid && x.spec == r.spec));
                prop_assert!(same, "rule {:?} not in the reference", r.spec);
                let exact = !self.rules_inexact && !self.replaced_in_flight.contains(&r.uid.0);
                TALLY.rules.add(u64::from(exact), 1);
                if self.rules_inexact {
                    continue;
                }
                if self.replaced_in_flight.contains(&r.uid.0) {
                    prop_assert!(
                        r.packets <= want,
                        "rule {:?}: {} > {want}",
                        r.spec,
                        r.packets
                    );
                } else {
                    prop_assert_eq!(r.packets, want, "rule {:?}", r.spec);
                }
            }
        }
        prop_assert_eq!(st.illegal_transitions, 0);
        if std::env::var_os("PROPS_DEBUG").is_some() {
            eprintln!(
                "fl {} sent {} hw {} hw_tx {} passes {} offl {} fail {:?} demoted {} aged {} lim {} mod {} del {} flows {} amb {} rules {} replaced {}",
                st.flow_limit_hits, self.sent, c.hw_handled, self.hw_tx, st.passes, st.offloaded, st.offload_failures, st.demoted, st.aged,
                st.evicted_limit, st.revalidated_modified, st.revalidated_deleted, st.megaflows_created,
                self.ambiguous.len(), self.per_rule.len(), self.replaced_in_flight.len()
            );
        }
        let (_, _) = self
            .sw
            .finish(at(self.ms + 1))
            .map_err(|e| TestCaseError::fail(format!("finish: {e:#}")))?;
        Ok(())
    }
}

/// What the reference did with one packet.
struct RefPkt {
    outputs: Outputs,
    metered: bool,
    uses_mac: bool,
}

/// (b) for one batch: the switch's outputs against the reference's, as
/// multisets. Packets through a meter deliver all their outputs or none;
/// NORMAL packets may be stale while the MAC table changed since the last
/// pass (then only the other packets are held to the reference).
fn check_outputs(refs: &[RefPkt], got: Outputs, mac_dirty: bool) -> Result<(), String> {
    let mut rest = got.clone();
    let mut strict: Outputs = Vec::new();
    let mut optional: Vec<&Outputs> = Vec::new();
    let mut stale = false;
    for r in refs {
        if r.uses_mac && mac_dirty {
            stale = true;
        } else if r.metered {
            optional.push(&r.outputs);
        } else {
            strict.extend(r.outputs.iter().cloned());
        }
    }
    let show =
        |o: &Outputs| -> Vec<(u32, usize)> { o.iter().map(|(p, b)| (p.0, b.len())).collect() };
    if !take_all(&mut rest, &strict) {
        return Err(format!(
            "switch sent {:?}, reference {:?}",
            show(&got),
            show(&strict)
        ));
    }
    if stale {
        return Ok(());
    }
    optional.sort_by_key(|o| std::cmp::Reverse(o.len()));
    for o in optional {
        let mut tmp = rest.clone();
        if take_all(&mut tmp, o) {
            rest = tmp;
        }
    }
    if !rest.is_empty() {
        return Err(format!(
            "switch sent {:?} more than the reference {:?}",
            show(&rest),
            show(&strict)
        ));
    }
    Ok(())
}

fn run(
    setup: Setup,
    table: Vec<RuleGen>,
    pool: Vec<PktGen>,
    ops: Vec<Op>,
) -> Result<(), TestCaseError> {
    let pool: Vec<(PortNo, Vec<u8>)> = pool
        .iter()
        .map(|p| (PortNo(p.in_port), p.frame()))
        .collect();
    let mut s = Scenario::new(&setup, &table, &pool)?;
    for op in &ops {
        match op {
            Op::Send(batch, dt) => {
                s.ms += dt + 1;
                s.send(&pool, batch)?;
            }
            Op::Change(cmd, r, pass_after) => {
                s.change(*cmd, r, setup.pass_before_change, *pass_after)?
            }
            Op::Revalidate => s.revalidate()?,
            Op::Idle(dt) => s.ms += dt,
        }
    }
    s.finish()
}

/// The property over many cases (PROPTEST_CASES=n for a longer hunt;
/// failures are kept in proptest-regressions/pipeline_props.txt and run
/// first), then floors on the share of what was checked strictly.
#[test]
fn the_switch_delivers_and_counts_as_the_software_reference() {
    use proptest::test_runner::{Config, TestRunner};
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(512);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "proptest-regressions/pipeline_props.txt",
        ))),
        max_shrink_iters: 2_000,
        source_file: Some(file!()),
        test_name: Some("the_switch_delivers_and_counts_as_the_software_reference"),
        ..Config::default()
    });
    let strategy = (
        setup(),
        prop::collection::vec(rule(), 1..8),
        prop::collection::vec(pkt(), 2..10),
        prop::collection::vec(op(), 1..60),
    );
    let result = runner.run(&strategy, |(setup, table, pool, ops)| {
        run(setup, table, pool, ops)
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // Floors some 10 points under what 512 cases reach (batches 93-94 %,
    // packets 89-91 %, megaflows ~97 %, rules 72-76 %): fewer cases vary
    // more, so the floors apply from 128 cases up.
    let shares = [
        ("batches", TALLY.batches.get(), 0.83),
        ("packets", TALLY.packets.get(), 0.78),
        ("megaflows", TALLY.megaflows.get(), 0.85),
        ("rules", TALLY.rules.get(), 0.6),
    ];
    for (what, (checked, total, share), _) in shares {
        eprintln!(
            "strictly checked {what}: {checked} of {total} ({:.1}%)",
            share * 100.0
        );
    }
    for (what, (checked, total, share), floor) in shares {
        if cases < 128 {
            break;
        }
        assert!(
            share >= floor,
            "only {checked} of {total} {what} were checked strictly ({:.1}% < {:.0}%): \
             the exemptions grew",
            share * 100.0,
            floor * 100.0
        );
    }
}

// ----------------------------------------------------------------------
// Disagreements the property test found, fixed, kept as small cases.

fn fixed_switch(table: &str, mode: OffloadMode) -> SimSwitch {
    let flows = FlowFile::parse(table).expect("table parses");
    let cfg = PipelineConfig {
        offload: OffloadPolicy {
            mode,
            ..OffloadPolicy::default()
        },
        ..PipelineConfig::default()
    };
    SimSwitch::new(&ports(), &flows, cfg, SimConfig::default(), at(0)).expect("switch")
}

fn udp_frame(in_port: u32, dst: u8, dport: u16) -> Vec<u8> {
    PktGen {
        in_port,
        dst_mac: 1,
        dst_ip: dst,
        tcp: false,
        sport: 1000,
        dport,
        payload: 10,
    }
    .frame()
}

/// `output:4,output:4` sends two copies in software (as Open vSwitch's
/// datapath does); a dest_array would send one, so the flow stays in
/// software with the reason.
#[test]
fn a_repeated_output_sends_as_many_copies_from_hardware_as_from_software() {
    let mut sw = fixed_switch("priority=0,actions=output:4,output:4", OffloadMode::All);
    let f = udp_frame(1, 2, 53);
    let mut copies = Vec::new();
    for ms in 1..=2 {
        let mut rec = Rec::default();
        sw.receive(at(ms), &[(PortNo(1), &f)], &mut rec);
        copies.push((rec.tx.len(), rec.hw));
    }
    let why = sw.pipeline().dump()[0].offloaded();
    sw.finish(at(3)).expect("clean teardown");
    assert_eq!(copies, vec![(2, 0), (2, 0)], "(copies, from hardware)");
    assert_eq!(why, "no (action output:4 twice)");
}

/// An `add-flow` that replaces a rule with the same match and priority
/// keeps its counters (no `reset_counts`), including hits not yet folded
/// in when it is replaced.
#[test]
fn an_add_that_replaces_a_rule_keeps_the_hits_not_yet_credited() {
    let table = "priority=10,udp,actions=output:1";
    let mut sw = fixed_switch(table, OffloadMode::Off);
    let f = udp_frame(2, 2, 53);
    sw.receive(at(1), &[(PortNo(2), &f)], &mut Rec::default());
    let fm = ofproto::text::parse_flow(table, FlowModCommand::Add).expect("parses");
    let p = sw.pipeline_mut();
    p.bridge_mut().apply_flow_mod(&fm, at(2)).expect("applies");
    p.revalidate(at(3));
    let packets: Vec<u64> = p
        .bridge()
        .tables()
        .tables()
        .flat_map(|t| t.rules().map(|(_, r)| r.packets))
        .collect();
    sw.finish(at(4)).expect("clean teardown");
    assert_eq!(packets, vec![1]);
}

/// Re-translating a megaflow's masked key could read bits the packet's
/// lookup did not (here the nw_dst prefix trie on 0.0.0.0) and delete a
/// sound megaflow on an unrelated table change; the revalidator
/// re-translates the packet that made the flow instead.
#[test]
fn an_unrelated_table_change_keeps_a_sound_megaflow() {
    let mut sw = fixed_switch(
        "priority=30,in_port=1,ip,nw_dst=10.0.0.3,actions=output:1
         priority=30,udp,tp_dst=53,actions=output:1
         priority=10,actions=output:1",
        OffloadMode::Off,
    );
    let f = udp_frame(2, 3, 53);
    sw.receive(at(1), &[(PortNo(2), &f)], &mut Rec::default());
    let before: Vec<String> = sw.pipeline().dump().iter().map(|d| d.line(at(1))).collect();
    assert_eq!(before.len(), 1, "{before:?}");
    let fm = ofproto::text::parse_flow("priority=5,tcp,actions=drop", FlowModCommand::Add)
        .expect("parses");
    let p = sw.pipeline_mut();
    p.bridge_mut().apply_flow_mod(&fm, at(2)).expect("applies");
    let r = p.revalidate(at(3));
    sw.finish(at(4)).expect("clean teardown");
    assert_eq!((r.deleted, r.modified), (0, 0), "{before:?}: {r:?}");
}
