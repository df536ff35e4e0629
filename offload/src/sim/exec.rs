//! A packet's walk through the simulated FDB.

use std::sync::atomic::Ordering;

use crate::dr::meter::{Color, MeterState};
use crate::dr::{DomainId, DomainType};
use crate::prm::SourcePortMode;
use crate::Vport;

use super::matcher::BATCH;
use super::packet::{apply_modify, extract_key, pop_vlan, push_vlan, PacketKey};
use super::state::{Body, Domain, State, Step};

/// Where a frame leaves the eSwitch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Egress {
    /// Sent to a vport.
    Vport(Vport),
    /// The FDB default: to the eSwitch manager; software receives it on the
    /// representor of `ingress`.
    Manager { ingress: Vport },
    /// Dropped.
    Drop(DropCause),
}

/// Why the eSwitch dropped a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropCause {
    /// A drop action.
    Rule,
    /// The NIC_RX domain's default.
    DomainDefault,
}

/// One frame out of the eSwitch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutFrame {
    /// Which input packet of this [`Output`] it came from (0-based).
    pub packet: u32,
    pub egress: Egress,
    /// The bytes as they leave (after VLAN and header rewrites).
    pub bytes: Vec<u8>,
    /// The metadata registers reg_c_0..7 at the end of the walk.
    pub regs: [u32; 8],
    /// A sampler's copy rather than the packet itself: the sim's own
    /// knowledge, for tests; software tells copies by [`OutFrame::tag`].
    pub sampled: bool,
    /// To the manager: the flow tag the slow-path queue's completion
    /// carries ([`crate::restore`]: 0 for a plain miss); 0 elsewhere.
    pub tag: u32,
    /// To the manager: reg_b in the completion (reg_c_0, the source's
    /// metadata, as the queue's rules copy it); 0 elsewhere.
    pub reg_b: u32,
}

/// Frames out of one or more [`process`](super::SimBackend::process) calls;
/// reusable without reallocating.
#[derive(Debug, Default)]
pub struct Output {
    frames: Vec<OutFrame>,
    len: usize,
    packets: u32,
    /// Packet buffers of a batch, kept for reuse.
    pool: Vec<Vec<u8>>,
}

impl Output {
    /// An empty output.
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets the frames, keeping their buffers.
    pub fn clear(&mut self) {
        self.len = 0;
        self.packets = 0;
    }

    /// The frames so far.
    pub fn frames(&self) -> &[OutFrame] {
        self.frames.get(..self.len).unwrap_or(&[])
    }

    /// Input packets processed so far.
    pub fn packets(&self) -> u32 {
        self.packets
    }

    /// Emits a copy of `w` (it goes on elsewhere too).
    fn emit_copy(&mut self, w: &Work, egress: Egress) {
        let f = self.slot(w, egress);
        f.bytes.clear();
        f.bytes.extend_from_slice(&w.bytes);
    }

    /// Emits `w` as its last stop: its buffer is swapped in, not copied.
    fn emit(&mut self, w: &mut Work, egress: Egress) {
        let f = self.slot(w, egress);
        std::mem::swap(&mut f.bytes, &mut w.bytes);
    }

    /// The next frame, filled but for its bytes.
    fn slot(&mut self, w: &Work, egress: Egress) -> &mut OutFrame {
        let packet = w.packet;
        if self.len == self.frames.len() {
            self.frames.push(OutFrame {
                packet,
                egress,
                bytes: Vec::new(),
                regs: [0; 8],
                sampled: false,
                tag: 0,
                reg_b: 0,
            });
        }
        let i = self.len;
        self.len += 1;
        let f = &mut self.frames[i];
        f.packet = packet;
        f.egress = egress;
        f.regs = w.regs;
        f.sampled = w.sampled;
        f.tag = 0;
        f.reg_b = 0;
        f
    }

    /// Fills the completion fields of the frames from `start` on that went
    /// to the manager.
    fn complete(&mut self, st: &State, start: usize) {
        let end = self.len;
        for f in self.frames.get_mut(start..end).unwrap_or(&mut []) {
            if matches!(f.egress, Egress::Manager { .. }) {
                (f.tag, f.reg_b) = st.completion(&f.regs);
            }
        }
    }
}

/// The packet being walked.
#[derive(Clone)]
struct Work {
    bytes: Vec<u8>,
    regs: [u32; 8],
    sampled: bool,
    /// Whether the batch's key still describes `bytes` and `regs`.
    fresh: bool,
    ingress: Vport,
    /// Its number in the [`Output`].
    packet: u32,
}

/// Where the walk goes after a rule's actions.
enum Next {
    Table(u32),
    Done,
}

struct Walk<'a> {
    st: &'a State,
    dom: &'a Domain,
    now: u64,
}

/// Walks packets; appends their frames to `out`.
pub(crate) fn process<'p>(
    st: &State,
    domain: DomainId,
    now: u64,
    packets: impl IntoIterator<Item = (Vport, &'p [u8])>,
    out: &mut Output,
) {
    let dom = st.domains.get(domain.index, domain.generation);
    let walk = dom.map(|dom| Walk { st, dom, now });
    let start = out.len;
    let mut lanes: Vec<Lane> = Vec::with_capacity(BATCH);
    let mut it = packets.into_iter().peekable();
    while it.peek().is_some() {
        for (ingress, frame) in it.by_ref().take(BATCH) {
            let mut regs = [0u32; 8];
            if let SourcePortMode::Metadata { mask, shift } = st.config.source_port {
                regs[0] = (u32::from(ingress.0) << shift) & mask;
            }
            let mut bytes = out.pool.pop().unwrap_or_default();
            bytes.clear();
            bytes.extend_from_slice(frame);
            lanes.push(Lane {
                w: Work {
                    bytes,
                    regs,
                    sampled: false,
                    fresh: false,
                    ingress,
                    packet: out.packets,
                },
                table: None,
                live: true,
            });
            out.packets += 1;
        }
        match &walk {
            Some(walk) => walk.batch(&mut lanes, out),
            None => {
                for l in &mut lanes {
                    let ingress = l.w.ingress;
                    out.emit(&mut l.w, Egress::Manager { ingress });
                }
            }
        }
        out.pool.extend(lanes.drain(..).map(|l| l.w.bytes));
    }
    out.complete(st, start);
}

/// A packet of a batch.
struct Lane {
    w: Work,
    /// The table it is looked up in next (None: the root).
    table: Option<u32>,
    live: bool,
}

impl Walk<'_> {
    fn default_egress(&self, w: &Work) -> Egress {
        match self.dom.ty {
            DomainType::Fdb => Egress::Manager { ingress: w.ingress },
            DomainType::NicRx => Egress::Drop(DropCause::DomainDefault),
            DomainType::NicTx => Egress::Vport(w.ingress),
        }
    }

    fn matchers(&self, table: Option<u32>) -> &[u32] {
        match table {
            None => &self.dom.root,
            Some(t) => self.st.tables.at(t).map_or(&[], |t| &t.matchers[..]),
        }
    }

    /// Walks a batch: packets at the same table are looked up together.
    fn batch(&self, lanes: &mut [Lane], out: &mut Output) {
        let mut keys = [PacketKey::ZERO; BATCH];
        loop {
            let Some(table) = lanes.iter().find(|l| l.live).map(|l| l.table) else {
                return;
            };
            let mut group = [0u8; BATCH];
            let mut n = 0;
            for (i, l) in lanes.iter_mut().enumerate() {
                if l.live && l.table == table {
                    group[n] = i as u8;
                    n += 1;
                    if !l.w.fresh {
                        extract_key(&l.w.bytes, l.w.ingress.0, &l.w.regs, &mut keys[i]);
                        l.w.fresh = true;
                    }
                }
            }
            let group = &group[..n];
            let mut hits = [None; BATCH];
            for &m in self.matchers(table) {
                let Some(index) = self.st.matchers.at(m).map(|m| &m.index) else {
                    continue;
                };
                index.lookup_batch(&keys, group, &mut hits);
                if group.iter().all(|&i| hits[usize::from(i)].is_some()) {
                    break;
                }
            }
            for &i in group {
                let i = usize::from(i);
                let Some(l) = lanes.get_mut(i) else {
                    continue;
                };
                let next = match hits[i] {
                    Some(rule) => self.actions(&rule.0, &mut l.w, out),
                    None => {
                        let egress = self.default_egress(&l.w);
                        out.emit(&mut l.w, egress);
                        Next::Done
                    }
                };
                match next {
                    Next::Table(t) => l.table = Some(t),
                    Next::Done => l.live = false,
                }
            }
        }
    }

    /// Walks a copy from table `start` until it leaves (a batch of one).
    fn tables(&self, start: Option<u32>, w: Work, out: &mut Output) {
        let mut lane = Lane {
            w,
            table: start,
            live: true,
        };
        lane.w.fresh = false;
        self.batch(std::slice::from_mut(&mut lane), out);
    }

    /// Runs a rule's (or a sampler's) actions.
    fn actions(&self, ops: &[Step], w: &mut Work, out: &mut Output) -> Next {
        for op in ops {
            let a = match op {
                Step::Nop => continue,
                Step::Count(bulk, offset) => {
                    let cell = self
                        .st
                        .bulks
                        .at(*bulk)
                        .and_then(|b| b.cells.get(*offset as usize));
                    if let Some(c) = cell {
                        c.packets.fetch_add(1, Ordering::Relaxed);
                        c.bytes.fetch_add(w.bytes.len() as u64, Ordering::Relaxed);
                    }
                    continue;
                }
                Step::Vport(v) => {
                    out.emit(w, Egress::Vport(*v));
                    return Next::Done;
                }
                Step::Table(t) => return Next::Table(*t),
                Step::Drop => {
                    out.emit(w, Egress::Drop(DropCause::Rule));
                    return Next::Done;
                }
                Step::Miss => {
                    let egress = self.default_egress(w);
                    out.emit(w, egress);
                    return Next::Done;
                }
                Step::Action(a) => *a,
                Step::Rule(r) => {
                    let Some(rule) = self.st.rules.at(*r) else {
                        continue;
                    };
                    return self.actions(&rule.ops, w, out);
                }
            };
            let Some(act) = self.st.actions.at(a) else {
                continue;
            };
            match &act.body {
                Body::Modify(ops) => {
                    apply_modify(&mut w.bytes, &mut w.regs, ops);
                    w.fresh = false;
                }
                Body::PushVlan(h) => {
                    push_vlan(&mut w.bytes, *h);
                    w.fresh = false;
                }
                Body::PopVlan => {
                    pop_vlan(&mut w.bytes);
                    w.fresh = false;
                }
                Body::Decap => {
                    super::packet::decap(&mut w.bytes);
                    w.fresh = false;
                }
                Body::Encap(data) => {
                    super::packet::encap(&mut w.bytes, data);
                    w.fresh = false;
                }
                // compile() turns these into their own ops.
                Body::Counter { .. }
                | Body::Drop
                | Body::DefaultMiss
                | Body::Vport(_)
                | Body::Table(_) => {
                    debug_assert!(false, "{:?} reached as an action object", act.kind);
                }
                Body::Array(dests) => {
                    for &(r, d) in dests.iter() {
                        let encap = r.and_then(|r| match self.st.actions.at(r).map(|a| &a.body) {
                            Some(Body::Encap(h)) => Some(h),
                            _ => None,
                        });
                        match (self.st.actions.at(d).map(|d| &d.body), encap) {
                            (Some(Body::Vport(v)), Some(h)) => {
                                let mut copy = w.clone();
                                super::packet::encap(&mut copy.bytes, h);
                                copy.fresh = false;
                                out.emit_copy(&copy, Egress::Vport(*v));
                            }
                            (Some(Body::Vport(v)), None) => out.emit_copy(w, Egress::Vport(*v)),
                            (Some(Body::Table(t)), _) => self.tables(Some(*t), w.clone(), out),
                            _ => {}
                        }
                    }
                    return Next::Done;
                }
                Body::Meter(m) => {
                    let color = if m.active {
                        let mut s = m.state.lock().unwrap_or_else(|p| p.into_inner());
                        let state = s.get_or_insert_with(|| MeterState::new(&m.params, self.now));
                        state.mark(self.now, w.bytes.len() as u32)
                    } else {
                        Color::Green
                    };
                    if let Some(r) = w.regs.get_mut(usize::from(m.reg)) {
                        *r = color as u32;
                    }
                    w.fresh = false;
                    return Next::Table(m.next);
                }
                Body::Sampler(s) => {
                    if sample_hit(&s.rng, s.ratio) {
                        let mut copy = w.clone();
                        copy.sampled = true;
                        match self.actions(&s.sample_ops, &mut copy, out) {
                            Next::Table(t) => self.tables(Some(t), copy, out),
                            Next::Done => {}
                        }
                    }
                    if let Some(op) = &s.set {
                        apply_modify(&mut w.bytes, &mut w.regs, std::slice::from_ref(op));
                        w.fresh = false;
                    }
                    return Next::Table(s.next);
                }
            }
        }
        let egress = self.default_egress(w);
        out.emit(w, egress);
        Next::Done
    }
}

/// One draw of a sampler's generator (SplitMix64 over an atomic counter, so
/// concurrent packets draw distinct numbers): true about once in `ratio`.
fn sample_hit(rng: &std::sync::atomic::AtomicU64, ratio: u32) -> bool {
    use megaflow::SplitMix64;
    let state = rng
        .fetch_add(SplitMix64::GAMMA, Ordering::Relaxed)
        .wrapping_add(SplitMix64::GAMMA);
    SplitMix64::mix(state) % u64::from(ratio.max(1)) == 0
}
