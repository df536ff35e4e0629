//! The sim's objects and the checks each Direct Rule call makes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::dr::meter::{MeterParams, MeterState, PARAMS_LEN};
use crate::dr::modify::{decode_list, ModifyField, ModifyOp};
use crate::dr::{
    check_sequence, ActionId, ActionKind, ActionSpec, CounterBulkId, CounterValue, DomainId,
    DomainType, DrError, MatcherId, Object, Reformat, Resource, RestoreRuleId, RuleId, TableId,
    NO_RESTORE_PATH,
};
use crate::prm::{Block, DecodeError, Encoded, PrmField, ENCODED_LEN, FIELDS};
use crate::restore::{PLAIN_MISS, REG_SOURCE, REG_TAG, TAG_MAX};
use crate::Vport;

use super::config::{SimConfig, Snapshot};
use super::matcher::{to_words, MatcherIndex, WORDS};
use super::slab::Slab;

pub(crate) struct Domain {
    pub(crate) ty: DomainType,
    pub(crate) allow_duplicates: bool,
    /// Tables and actions made in it.
    users: usize,
    /// Level-0 matchers of every root table, in lookup order.
    pub(crate) root: Vec<u32>,
}

pub(crate) struct Table {
    pub(crate) domain: u32,
    pub(crate) level: u32,
    /// Matchers in lookup order: priority, then creation.
    pub(crate) matchers: Vec<u32>,
    pub(crate) rules: usize,
    /// Actions that lead here.
    users: usize,
}

pub(crate) struct Matcher {
    pub(crate) table: u32,
    pub(crate) priority: u16,
    seq: u64,
    pub(crate) criteria: u8,
    pub(crate) mask: Encoded,
    pub(crate) ip_version: u8,
    pub(crate) index: MatcherIndex<Compiled>,
    pub(crate) rules: usize,
}

pub(crate) struct Rule {
    pub(crate) matcher: u32,
    pub(crate) slot: u32,
    pub(crate) actions: Box<[u32]>,
    /// Every action compiled (the matcher holds the first three).
    pub(crate) ops: Box<[Step]>,
}

/// A rule's actions as the packet path runs them: the common ones carry
/// what they need (a counter's bulk and offset, a vport, a table), the
/// others name their action object.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Step {
    #[default]
    Nop,
    /// A counter: bulk slot, offset.
    Count(u32, u32),
    Vport(Vport),
    Table(u32),
    Drop,
    Miss,
    Action(u32),
    /// More actions than fit: run the rule's full list.
    Rule(u32),
}

/// Up to three compiled actions, stored beside the rule's key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Compiled(pub(crate) [Step; 3]);

impl Compiled {
    /// The first three ops, or a pointer to the rule's full list.
    fn new(rule: u32, ops: &[Step]) -> Compiled {
        let mut arr = [Step::Nop; 3];
        if ops.len() <= 3 {
            arr[..ops.len()].copy_from_slice(ops);
        } else {
            arr[0] = Step::Rule(rule);
        }
        Compiled(arr)
    }
}

/// One flow counter.
#[derive(Debug, Default)]
pub(crate) struct Cell {
    pub(crate) packets: AtomicU64,
    pub(crate) bytes: AtomicU64,
}

pub(crate) struct Bulk {
    pub(crate) cells: Arc<[Cell]>,
    users: usize,
}

pub(crate) struct Meter {
    pub(crate) next: u32,
    pub(crate) active: bool,
    pub(crate) reg: u8,
    pub(crate) state: Mutex<Option<MeterState>>,
    pub(crate) params: MeterParams,
}

pub(crate) struct Sampler {
    pub(crate) ratio: u32,
    pub(crate) next: u32,
    pub(crate) sample: Box<[u32]>,
    /// `sample`, compiled as rules' actions are.
    pub(crate) sample_ops: Box<[Step]>,
    pub(crate) set: Option<ModifyOp>,
    pub(crate) rng: AtomicU64,
}

pub(crate) enum Body {
    Drop,
    DefaultMiss,
    Vport(Vport),
    Table(u32),
    /// (the encap before the copy, its destination).
    Array(Box<[(Option<u32>, u32)]>),
    Counter {
        bulk: u32,
        offset: u32,
    },
    Meter(Box<Meter>),
    Sampler(Box<Sampler>),
    PushVlan(u32),
    PopVlan,
    Modify(Box<[ModifyOp]>),
    Decap,
    Encap(Box<[u8]>),
}

pub(crate) struct Action {
    domain: u32,
    pub(crate) kind: ActionKind,
    users: usize,
    pub(crate) body: Body,
}

/// Every object of the device.
pub(crate) struct State {
    pub(crate) config: SimConfig,
    pub(crate) domains: Slab<Domain>,
    pub(crate) tables: Slab<Table>,
    pub(crate) matchers: Slab<Matcher>,
    pub(crate) rules: Slab<Rule>,
    pub(crate) actions: Slab<Action>,
    pub(crate) bulks: Slab<Bulk>,
    /// Restore rules: their tags, and the rule of each tag.
    pub(crate) restore_rules: Slab<u32>,
    pub(crate) restore_tags: HashMap<u32, RestoreRuleId>,
    counters: usize,
    meters: usize,
    seq: u64,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "State({:?})", self.snapshot())
    }
}

/// The mask bits the sim models: every field [`PacketKey`] is filled with.
///
/// [`PacketKey`]: super::packet::PacketKey
fn modelled_bits() -> &'static [u8; ENCODED_LEN] {
    static BITS: OnceLock<[u8; ENCODED_LEN]> = OnceLock::new();
    BITS.get_or_init(|| {
        use PrmField as F;
        let mut m = [0u8; ENCODED_LEN];
        let fields = [
            F::OuterSmac,
            F::OuterEthertype,
            F::OuterDmac,
            F::OuterFirstPrio,
            F::OuterFirstCfi,
            F::OuterFirstVid,
            F::OuterIpProtocol,
            F::OuterIpDscp,
            F::OuterIpEcn,
            F::OuterCvlanTag,
            F::OuterSvlanTag,
            F::OuterFrag,
            F::OuterIpVersion,
            F::OuterTcpFlags,
            F::OuterTcpSport,
            F::OuterTcpDport,
            F::OuterIpTtlHoplimit,
            F::OuterUdpSport,
            F::OuterUdpDport,
            F::OuterSrcIp,
            F::OuterDstIp,
            F::MiscSourcePort,
            F::MiscOuterSecondPrio,
            F::MiscOuterSecondCfi,
            F::MiscOuterSecondVid,
            F::MiscOuterSecondCvlanTag,
            F::MiscOuterSecondSvlanTag,
            // A tunnel on its IANA port, and the frame inside it.
            F::MiscVxlanVni,
            F::MiscGeneveVni,
            F::MiscGeneveOam,
            F::MiscGeneveOptLen,
            F::MiscGeneveProtocolType,
            F::InnerSmac,
            F::InnerEthertype,
            F::InnerDmac,
            F::InnerFirstPrio,
            F::InnerFirstCfi,
            F::InnerFirstVid,
            F::InnerIpProtocol,
            F::InnerIpDscp,
            F::InnerIpEcn,
            F::InnerCvlanTag,
            F::InnerSvlanTag,
            F::InnerFrag,
            F::InnerIpVersion,
            F::InnerTcpFlags,
            F::InnerTcpSport,
            F::InnerTcpDport,
            F::InnerIpTtlHoplimit,
            F::InnerUdpSport,
            F::InnerUdpDport,
            F::InnerSrcIp,
            F::InnerDstIp,
            F::MiscInnerSecondPrio,
            F::MiscInnerSecondCfi,
            F::MiscInnerSecondVid,
            F::MiscInnerSecondCvlanTag,
            F::MiscInnerSecondSvlanTag,
        ];
        let regs = (0..8).filter_map(PrmField::reg_c);
        for f in fields.into_iter().chain(regs) {
            let d = f.def();
            let _ = crate::prm::set(&mut m, f, d.max_value());
        }
        m
    })
}

/// Each header block's `ip_version` and the addresses that need it, and
/// what a bad mask is told (`dr_ste_build_pre_check_spec`, outer and
/// inner alike).
const IP_VERSIONS: [(PrmField, PrmField, PrmField, &str); 2] = [
    (
        PrmField::OuterIpVersion,
        PrmField::OuterSrcIp,
        PrmField::OuterDstIp,
        "outer.ip_version in a matcher mask must be 4, 6 or 0",
    ),
    (
        PrmField::InnerIpVersion,
        PrmField::InnerSrcIp,
        PrmField::InnerDstIp,
        "inner.ip_version in a matcher mask must be 4, 6 or 0",
    ),
];

/// The first masked byte the sim does not model, and the field it is in.
fn unmodelled(mask: &Encoded) -> Option<DecodeError> {
    let bits = modelled_bits();
    let (i, _) = mask
        .mask()
        .iter()
        .zip(bits.iter())
        .enumerate()
        .find(|(_, (&m, &b))| m & !b != 0)?;
    let bit = (i * 8) as u16;
    let field = FIELDS
        .iter()
        .find(|d| d.bit < bit + 8 && bit < d.bit + u16::from(d.width));
    Some(match field {
        Some(d) => DecodeError::UnsupportedField(d.field),
        None => DecodeError::ReservedBits { byte: i },
    })
}

/// One reference counted in (`up`) or out.
fn step(n: &mut usize, up: bool) {
    if up {
        *n += 1;
    } else {
        *n -= 1;
    }
}

fn stale(o: Object) -> DrError {
    DrError::Stale(o)
}

impl State {
    pub(crate) fn new(config: SimConfig) -> Self {
        State {
            config,
            domains: Slab::default(),
            tables: Slab::default(),
            matchers: Slab::default(),
            rules: Slab::default(),
            actions: Slab::default(),
            bulks: Slab::default(),
            restore_rules: Slab::default(),
            restore_tags: HashMap::new(),
            counters: 0,
            meters: 0,
            seq: 0,
        }
    }

    pub(crate) fn snapshot(&self) -> Snapshot {
        Snapshot {
            domains: self.domains.len(),
            tables: self.tables.len(),
            matchers: self.matchers.len(),
            rules: self.rules.len(),
            actions: self.actions.len(),
            counter_bulks: self.bulks.len(),
            counters: self.counters,
            meters: self.meters,
            restore_rules: self.restore_rules.len(),
        }
    }

    /// The slow-path queue's rule for `tag` (see [`crate::restore`]).
    pub(crate) fn restore_rule_create(&mut self, tag: u32) -> Result<RestoreRuleId, DrError> {
        if !self.config.restore_path {
            return Err(DrError::NoRestorePath(NO_RESTORE_PATH));
        }
        if tag == PLAIN_MISS || tag > TAG_MAX {
            return Err(DrError::Invalid(
                "a restore tag is 1 to 2^24-1 (24 bits of flow tag; 0 is the plain miss)",
            ));
        }
        if self.restore_tags.contains_key(&tag) {
            // The kernel's flow steering: an FTE of the same match with
            // another flow tag is EEXIST.
            return Err(DrError::DuplicateRule);
        }
        let (index, generation) = self.restore_rules.insert(tag);
        let id = RestoreRuleId { index, generation };
        self.restore_tags.insert(tag, id);
        Ok(id)
    }

    pub(crate) fn restore_rule_destroy(&mut self, r: RestoreRuleId) -> Result<(), DrError> {
        let tag = self
            .restore_rules
            .remove(r.index, r.generation)
            .ok_or(stale(Object::RestoreRule))?;
        self.restore_tags.remove(&tag);
        Ok(())
    }

    /// What the slow-path queue's completion says of a packet the FDB sent
    /// to the manager with registers `regs`: (flow tag, reg_b). The rules
    /// copy reg_c_0 into reg_b; a tag rule steers reg_c_1 == its tag. With
    /// no restore path there is no completion: (0, 0).
    pub(crate) fn completion(&self, regs: &[u32; 8]) -> (u32, u32) {
        if !self.config.restore_path {
            return (PLAIN_MISS, 0);
        }
        let c1 = regs[usize::from(REG_TAG)];
        let tag = if self.restore_tags.contains_key(&c1) {
            c1
        } else {
            PLAIN_MISS
        };
        (tag, regs[usize::from(REG_SOURCE)])
    }

    pub(crate) fn domain(&self, d: DomainId) -> Result<&Domain, DrError> {
        self.domains
            .get(d.index, d.generation)
            .ok_or(stale(Object::Domain))
    }

    pub(crate) fn domain_mut(&mut self, d: DomainId) -> Result<&mut Domain, DrError> {
        self.domains
            .get_mut(d.index, d.generation)
            .ok_or(stale(Object::Domain))
    }

    pub(crate) fn domain_create(&mut self, ty: DomainType) -> DomainId {
        let (index, generation) = self.domains.insert(Domain {
            ty,
            allow_duplicates: true,
            users: 0,
            root: Vec::new(),
        });
        DomainId { index, generation }
    }

    pub(crate) fn domain_destroy(&mut self, d: DomainId) -> Result<(), DrError> {
        let dom = self.domain(d)?;
        if dom.users > 0 {
            return Err(DrError::InUse {
                what: Object::Domain,
                users: dom.users,
                by: "tables or actions",
            });
        }
        self.domains.remove(d.index, d.generation);
        Ok(())
    }

    fn table(&self, t: TableId) -> Result<&Table, DrError> {
        self.tables
            .get(t.index, t.generation)
            .ok_or(stale(Object::Table))
    }

    pub(crate) fn table_create(&mut self, d: DomainId, level: u32) -> Result<TableId, DrError> {
        self.domain_mut(d)?.users += 1;
        let (index, generation) = self.tables.insert(Table {
            domain: d.index,
            level,
            matchers: Vec::new(),
            rules: 0,
            users: 0,
        });
        Ok(TableId { index, generation })
    }

    pub(crate) fn table_destroy(&mut self, t: TableId) -> Result<(), DrError> {
        let table = self.table(t)?;
        if !table.matchers.is_empty() {
            return Err(DrError::InUse {
                what: Object::Table,
                users: table.matchers.len(),
                by: "matchers",
            });
        }
        if table.users > 0 {
            return Err(DrError::InUse {
                what: Object::Table,
                users: table.users,
                by: "actions that lead to it",
            });
        }
        let domain = table.domain;
        self.tables.remove(t.index, t.generation);
        if let Some(dom) = self.domains.at_mut(domain) {
            dom.users -= 1;
        }
        Ok(())
    }

    pub(crate) fn matcher_create(
        &mut self,
        t: TableId,
        priority: u16,
        criteria: u8,
        mask: &[u8],
    ) -> Result<MatcherId, DrError> {
        let table = self.table(t)?;
        if table.matchers.len() >= self.config.max_matchers_per_table {
            return Err(DrError::NoSpace(Resource::Matchers));
        }
        let (domain, level) = (table.domain, table.level);
        let mask = Encoded::from_bytes(criteria, mask, &[])?;
        if let Some(e) = unmodelled(&mask) {
            return Err(e.into());
        }
        let sp = mask.field_mask(PrmField::MiscSourcePort);
        if sp != 0 && sp != 0xffff {
            return Err(DrError::Invalid("partial misc.source_port mask"));
        }
        // Outer and inner headers alike (dr_ste_build_pre_check_spec).
        let mut words_src = mask.mask().to_vec();
        words_src.resize(ENCODED_LEN, 0);
        for (version, src, dst, what) in IP_VERSIONS {
            let v = mask.field_mask(version) as u8;
            if ![0, 4, 6].contains(&v) {
                return Err(DrError::Invalid(what));
            }
            if mask.field_mask(src) | mask.field_mask(dst) != 0 && v == 0 {
                return Err(DrError::Match(DecodeError::Invalid {
                    field: src,
                    reason: "IP addresses need ip_version 4 or 6 in the mask",
                }));
            }
            // The device matches the L3 type exactly: compare the whole
            // nibble.
            if v != 0 {
                let _ = crate::prm::set(&mut words_src, version, 0xf);
            }
        }
        let ip_version = mask.field_mask(PrmField::OuterIpVersion) as u8;
        let index = MatcherIndex::new(&to_words(&words_src));
        self.seq += 1;
        let (index_no, generation) = self.matchers.insert(Matcher {
            table: t.index,
            priority,
            seq: self.seq,
            criteria,
            mask,
            ip_version,
            index,
            rules: 0,
        });
        let order = |s: &State, m: u32| s.matchers.at(m).map(|m| (m.priority, m.seq));
        let key = order(self, index_no);
        let list = if level == 0 {
            self.domains.at(domain).map(|d| d.root.clone())
        } else {
            self.tables.at(t.index).map(|t| t.matchers.clone())
        };
        let mut list = list.unwrap_or_default();
        let at = list.partition_point(|&m| order(self, m) < key);
        list.insert(at, index_no);
        if let Some(tb) = self.tables.at_mut(t.index) {
            if level == 0 {
                tb.matchers.push(index_no);
            } else {
                tb.matchers = list.clone();
            }
        }
        if level == 0 {
            if let Some(d) = self.domains.at_mut(domain) {
                d.root = list;
            }
        }
        Ok(MatcherId {
            index: index_no,
            generation,
        })
    }

    pub(crate) fn matcher_destroy(&mut self, m: MatcherId) -> Result<(), DrError> {
        let matcher = self
            .matchers
            .get(m.index, m.generation)
            .ok_or(stale(Object::Matcher))?;
        if matcher.rules > 0 {
            return Err(DrError::InUse {
                what: Object::Matcher,
                users: matcher.rules,
                by: "rules",
            });
        }
        let t = matcher.table;
        self.matchers.remove(m.index, m.generation);
        let mut domain = None;
        if let Some(tb) = self.tables.at_mut(t) {
            tb.matchers.retain(|&x| x != m.index);
            if tb.level == 0 {
                domain = Some(tb.domain);
            }
        }
        if let Some(d) = domain.and_then(|d| self.domains.at_mut(d)) {
            d.root.retain(|&x| x != m.index);
        }
        Ok(())
    }

    fn action_ref(&self, a: ActionId) -> Result<&Action, DrError> {
        self.actions
            .get(a.index, a.generation)
            .ok_or(stale(Object::Action))
    }

    /// The level a table-continuing action leads to.
    fn target_level(&self, body: &Body) -> Option<(&'static str, u32)> {
        let (what, t) = match body {
            Body::Table(t) => ("dest_table", *t),
            Body::Meter(m) => ("meter next table", m.next),
            Body::Sampler(s) => ("sampler default table", s.next),
            _ => return None,
        };
        self.tables.at(t).map(|t| (what, t.level))
    }

    pub(crate) fn rule_create(
        &mut self,
        m: MatcherId,
        value: &[u8],
        actions: &[ActionId],
    ) -> Result<RuleId, DrError> {
        let matcher = self
            .matchers
            .get(m.index, m.generation)
            .ok_or(stale(Object::Matcher))?;
        let table = self.tables.at(matcher.table).ok_or(stale(Object::Table))?;
        let domain = self.domains.at(table.domain).ok_or(stale(Object::Domain))?;
        let enc = Encoded::from_bytes(matcher.criteria, matcher.mask.mask(), value)?;
        for (version, ..) in IP_VERSIONS {
            let (mask, rule) = (
                matcher.mask.field_mask(version) as u8,
                enc.field_value(version) as u8,
            );
            if rule != mask {
                return Err(DrError::IpVersion { mask, rule });
            }
        }
        let mut resolved = Vec::with_capacity(actions.len());
        for &a in actions {
            let act = self.action_ref(a)?;
            if act.domain != table.domain {
                return Err(DrError::OtherDomain(Object::Action));
            }
            if table.level == 0
                && !matches!(
                    act.kind,
                    ActionKind::Drop
                        | ActionKind::DefaultMiss
                        | ActionKind::DestTable
                        | ActionKind::DestArray
                        | ActionKind::FlowCounter
                )
            {
                return Err(DrError::WrongDomain {
                    action: act.kind.name(),
                    domain: "root (level 0) table of a",
                });
            }
            let mut targets = vec![&act.body];
            if let Body::Array(list) = &act.body {
                targets.extend(
                    list.iter()
                        .filter_map(|&(_, d)| self.actions.at(d))
                        .map(|d| &d.body),
                );
            }
            for body in targets {
                if let Some((what, to)) = self.target_level(body) {
                    if to <= table.level {
                        return Err(DrError::Level {
                            what,
                            from: table.level,
                            to,
                        });
                    }
                }
            }
            resolved.push(a.index);
        }
        check_sequence(
            actions
                .iter()
                .filter_map(|a| self.actions.at(a.index).map(|x| x.kind)),
        )?;
        let words = to_words(enc.value());
        let key = matcher.index.key_of(&words);
        if table.rules >= self.config.max_rules_per_table {
            return Err(DrError::NoSpace(Resource::TableRules));
        }
        let duplicates = table.level != 0 && domain.allow_duplicates;
        let t = matcher.table;
        let ops = self.compile(&resolved);
        self.count_users(&resolved, true);
        let (index, generation) = self.rules.insert(Rule {
            matcher: m.index,
            slot: 0,
            actions: resolved.into_boxed_slice(),
            ops: ops.into_boxed_slice(),
        });
        let compiled = self
            .rules
            .at(index)
            .map(|r| Compiled::new(index, &r.ops))
            .unwrap_or_default();
        let slot = self
            .matchers
            .at_mut(m.index)
            .and_then(|mm| mm.index.insert(&key, index, compiled, duplicates));
        let Some(slot) = slot else {
            if let Some(r) = self.rules.remove(index, generation) {
                self.count_users(&r.actions, false);
            }
            return Err(DrError::DuplicateRule);
        };
        if let Some(mm) = self.matchers.at_mut(m.index) {
            mm.rules += 1;
        }
        if let Some(tb) = self.tables.at_mut(t) {
            tb.rules += 1;
        }
        if let Some(r) = self.rules.at_mut(index) {
            r.slot = slot;
        }
        Ok(RuleId { index, generation })
    }

    pub(crate) fn rule_destroy(&mut self, r: RuleId) -> Result<(), DrError> {
        let rule = self
            .rules
            .remove(r.index, r.generation)
            .ok_or(stale(Object::Rule))?;
        self.count_users(&rule.actions, false);
        let mut table = None;
        let rules = &self.rules;
        let promote = |next: u32| {
            rules
                .at(next)
                .map(|r| Compiled::new(next, &r.ops))
                .unwrap_or_default()
        };
        if let Some(m) = self.matchers.at_mut(rule.matcher) {
            m.index.remove(rule.slot, r.index, promote);
            m.rules -= 1;
            table = Some(m.table);
        }
        if let Some(t) = table.and_then(|t| self.tables.at_mut(t)) {
            t.rules -= 1;
        }
        Ok(())
    }

    /// Counts a rule's use of its actions in or out.
    fn count_users(&mut self, actions: &[u32], up: bool) {
        for &a in actions {
            if let Some(act) = self.actions.at_mut(a) {
                step(&mut act.users, up);
            }
        }
    }

    /// The packet-path form of a rule's actions.
    fn compile(&self, actions: &[u32]) -> Vec<Step> {
        actions
            .iter()
            .map(|&a| match self.actions.at(a).map(|x| &x.body) {
                Some(Body::Counter { bulk, offset, .. }) => Step::Count(*bulk, *offset),
                Some(Body::Vport(v)) => Step::Vport(*v),
                Some(Body::Table(t)) => Step::Table(*t),
                Some(Body::Drop) => Step::Drop,
                Some(Body::DefaultMiss) => Step::Miss,
                _ => Step::Action(a),
            })
            .collect()
    }

    /// A table of `domain` for an action, counted as a user.
    fn use_table(&self, domain: u32, t: TableId) -> Result<u32, DrError> {
        let table = self.table(t)?;
        if table.domain != domain {
            return Err(DrError::OtherDomain(Object::Table));
        }
        Ok(t.index)
    }

    fn body(&self, d: DomainId, ty: DomainType, spec: ActionSpec) -> Result<Body, DrError> {
        let wrong = |action: &'static str| DrError::WrongDomain {
            action,
            domain: ty.name(),
        };
        Ok(match spec {
            ActionSpec::Drop => Body::Drop,
            ActionSpec::DefaultMiss => Body::DefaultMiss,
            ActionSpec::DestVport(v) => {
                if ty != DomainType::Fdb {
                    return Err(wrong("dest_vport"));
                }
                if !self.config.vports.contains(&v) {
                    return Err(DrError::NoVport(u32::from(v.0)));
                }
                Body::Vport(v)
            }
            ActionSpec::DestTable(t) => {
                if self.table(t)?.level == 0 {
                    return Err(DrError::Invalid("dest_table must lead to a level above 0"));
                }
                Body::Table(self.use_table(d.index, t)?)
            }
            ActionSpec::DestArray(list) => {
                if list.is_empty() {
                    return Err(DrError::Invalid(
                        "dest_array needs at least one destination",
                    ));
                }
                for dest in &list {
                    let act = self.action_ref(dest.to)?;
                    if act.domain != d.index {
                        return Err(DrError::OtherDomain(Object::Action));
                    }
                    if !matches!(act.kind, ActionKind::DestVport | ActionKind::DestTable) {
                        return Err(DrError::Invalid(
                            "dest_array destinations must be dest_vport or dest_table actions",
                        ));
                    }
                    if let Some(r) = dest.reformat {
                        let re = self.action_ref(r)?;
                        if re.domain != d.index {
                            return Err(DrError::OtherDomain(Object::Action));
                        }
                        // dr_action_create_dest_array: a reformat entry is
                        // an encap toward a vport.
                        if !matches!(re.body, Body::Encap(_)) || act.kind != ActionKind::DestVport {
                            return Err(DrError::Invalid(
                                "a dest_array reformat must be an encap before a dest_vport",
                            ));
                        }
                    }
                }
                Body::Array(
                    list.iter()
                        .map(|a| (a.reformat.map(|r| r.index), a.to.index))
                        .collect(),
                )
            }
            ActionSpec::FlowCounter { bulk, offset } => {
                let b = self
                    .bulks
                    .get(bulk.index, bulk.generation)
                    .ok_or(stale(Object::CounterBulk))?;
                if offset as usize >= b.cells.len() {
                    return Err(DrError::Invalid("counter offset beyond the bulk"));
                }
                Body::Counter {
                    bulk: bulk.index,
                    offset,
                }
            }
            ActionSpec::FlowMeter(attr) => {
                if self.table(attr.next_table)?.level == 0 {
                    return Err(DrError::RootNextTable);
                }
                if attr.reg_c_index > 7 {
                    return Err(DrError::Invalid("meter reg_c_index above 7"));
                }
                if attr.params.len() != PARAMS_LEN {
                    return Err(DrError::Invalid("flow_meter_parameter_sz must be 32"));
                }
                let params = MeterParams::decode(&attr.params)?;
                if self.meters >= self.config.max_meters {
                    return Err(DrError::NoSpace(Resource::Meters));
                }
                Body::Meter(Box::new(Meter {
                    next: self.use_table(d.index, attr.next_table)?,
                    active: attr.active,
                    reg: attr.reg_c_index,
                    state: Mutex::new(None),
                    params,
                }))
            }
            ActionSpec::FlowSampler(attr) => {
                if attr.sample_ratio == 0 || attr.sample_actions.is_empty() {
                    return Err(DrError::Invalid(
                        "sampler needs a ratio above 0 and at least one sample action",
                    ));
                }
                if ty == DomainType::NicTx {
                    return Err(wrong("flow_sampler"));
                }
                let next = self.use_table(d.index, attr.default_next_table)?;
                let mut kinds = Vec::new();
                for &a in &attr.sample_actions {
                    let act = self.action_ref(a)?;
                    if act.domain != d.index {
                        return Err(DrError::OtherDomain(Object::Action));
                    }
                    kinds.push(act.kind);
                }
                check_sequence(kinds)?;
                let set = match attr.action {
                    Some(b) => match decode_list(&b)?.as_slice() {
                        [op @ ModifyOp::Set { .. }] => Some(*op),
                        _ => return Err(DrError::Invalid("sampler action must be one SET")),
                    },
                    None => None,
                };
                let seed = self.config.seed ^ (u64::from(d.index) << 32) ^ self.seq;
                Body::Sampler(Box::new(Sampler {
                    ratio: attr.sample_ratio,
                    next,
                    sample: attr.sample_actions.iter().map(|a| a.index).collect(),
                    sample_ops: self
                        .compile(
                            &attr
                                .sample_actions
                                .iter()
                                .map(|a| a.index)
                                .collect::<Vec<_>>(),
                        )
                        .into_boxed_slice(),
                    set,
                    rng: AtomicU64::new(seed),
                }))
            }
            ActionSpec::PushVlan { header } => {
                let tpid = header >> 16;
                if tpid != 0x8100 && tpid != 0x88a8 {
                    return Err(DrError::Invalid(
                        "push_vlan ethertype must be 0x8100 or 0x88a8",
                    ));
                }
                Body::PushVlan(header)
            }
            ActionSpec::PopVlan => Body::PopVlan,
            ActionSpec::ModifyHeader(bytes) => {
                let ops = decode_list(&bytes)?;
                let reg_b = |f: ModifyField| f == ModifyField::RegB;
                if ops
                    .iter()
                    .any(|op| reg_b(op.dst()) || op.src().is_some_and(reg_b))
                {
                    // rdma-core: reg_b is a SET or COPY field only in NIC_RX
                    // (dr_action.c, EINVAL elsewhere); the sim keeps its
                    // NIC_RX packet walk without it too, and says so.
                    return Err(DrError::Invalid(if ty == DomainType::NicRx {
                        "reg_b in a NIC_RX Direct Rule domain is not modelled by the sim"
                    } else {
                        "reg_b may be set or copied only in a NIC_RX domain"
                    }));
                }
                if ops.len() > self.config.max_modify_actions {
                    return Err(DrError::Invalid(
                        "modify header action number exceeds HW limit",
                    ));
                }
                Body::Modify(ops.into_boxed_slice())
            }
            ActionSpec::PacketReformat { reformat, data } => {
                // rdma-core's dr_action_verify_reformat_params: data with
                // encap only, within max_encap_size; RX domains decap, TX
                // domains encap, the FDB both (EINVAL otherwise).
                match reformat {
                    Reformat::L2TunnelToL2 => {
                        if !data.is_empty() {
                            return Err(DrError::Invalid("decap (l2_tunnel_to_l2) takes no data"));
                        }
                        if ty == DomainType::NicTx {
                            return Err(DrError::Invalid(
                                "Action reformat type not support on TX domain",
                            ));
                        }
                        Body::Decap
                    }
                    Reformat::L2ToL2Tunnel => {
                        if data.is_empty() {
                            return Err(DrError::Invalid(
                                "encap (l2_to_l2_tunnel) needs its header",
                            ));
                        }
                        if data.len() > self.config.max_encap_header_size {
                            return Err(DrError::Invalid(
                                "encap header larger than the device's max_encap_header_size",
                            ));
                        }
                        if ty == DomainType::NicRx {
                            return Err(DrError::Invalid(
                                "Action reformat type not support on RX domain",
                            ));
                        }
                        if !super::packet::encap_header_ok(&data) {
                            return Err(DrError::Invalid(
                                "encap header is not Ethernet + IPv4/IPv6 + UDP (the sim fills those)",
                            ));
                        }
                        Body::Encap(data.into_boxed_slice())
                    }
                }
            }
        })
    }

    /// Objects an action body holds a reference on.
    fn body_links(body: &Body) -> (Vec<u32>, Vec<u32>, Option<u32>) {
        match body {
            Body::Table(t) => (vec![*t], vec![], None),
            Body::Meter(m) => (vec![m.next], vec![], None),
            Body::Sampler(s) => (vec![s.next], s.sample.to_vec(), None),
            Body::Array(list) => (
                vec![],
                list.iter()
                    .flat_map(|&(r, d)| r.into_iter().chain([d]))
                    .collect(),
                None,
            ),
            Body::Counter { bulk, .. } => (vec![], vec![], Some(*bulk)),
            _ => (vec![], vec![], None),
        }
    }

    fn link(&mut self, body: &Body, up: bool) {
        let (tables, actions, bulk) = Self::body_links(body);
        let step = |n: &mut usize| step(n, up);
        for t in tables {
            if let Some(t) = self.tables.at_mut(t) {
                step(&mut t.users);
            }
        }
        for a in actions {
            if let Some(a) = self.actions.at_mut(a) {
                step(&mut a.users);
            }
        }
        if let Some(b) = bulk.and_then(|b| self.bulks.at_mut(b)) {
            step(&mut b.users);
        }
    }

    pub(crate) fn action_create(
        &mut self,
        d: DomainId,
        spec: ActionSpec,
    ) -> Result<ActionId, DrError> {
        let ty = self.domain(d)?.ty;
        let kind = ActionKind::of(&spec);
        self.seq += 1;
        let body = self.body(d, ty, spec)?;
        self.link(&body, true);
        if matches!(body, Body::Meter(_)) {
            self.meters += 1;
        }
        if let Ok(dom) = self.domain_mut(d) {
            dom.users += 1;
        }
        let (index, generation) = self.actions.insert(Action {
            domain: d.index,
            kind,
            users: 0,
            body,
        });
        Ok(ActionId { index, generation })
    }

    pub(crate) fn action_destroy(&mut self, a: ActionId) -> Result<(), DrError> {
        let act = self.action_ref(a)?;
        if act.users > 0 {
            return Err(DrError::InUse {
                what: Object::Action,
                users: act.users,
                by: "rules or actions",
            });
        }
        let Some(act) = self.actions.remove(a.index, a.generation) else {
            return Err(stale(Object::Action));
        };
        self.link(&act.body, false);
        if matches!(act.body, Body::Meter(_)) {
            self.meters -= 1;
        }
        if let Some(d) = self.domains.at_mut(act.domain) {
            d.users -= 1;
        }
        Ok(())
    }

    pub(crate) fn counter_bulk_alloc(&mut self, log_size: u8) -> Result<CounterBulkId, DrError> {
        if log_size > self.config.max_bulk_log {
            return Err(DrError::Invalid(
                "counter bulk larger than the device allows",
            ));
        }
        let n = 1usize << log_size;
        if self.counters + n > self.config.max_counters {
            return Err(DrError::NoSpace(Resource::Counters));
        }
        self.counters += n;
        let cells: Arc<[Cell]> = (0..n).map(|_| Cell::default()).collect();
        let (index, generation) = self.bulks.insert(Bulk { cells, users: 0 });
        Ok(CounterBulkId { index, generation })
    }

    pub(crate) fn counter_bulk_free(&mut self, b: CounterBulkId) -> Result<(), DrError> {
        let bulk = self
            .bulks
            .get(b.index, b.generation)
            .ok_or(stale(Object::CounterBulk))?;
        if bulk.users > 0 {
            return Err(DrError::InUse {
                what: Object::CounterBulk,
                users: bulk.users,
                by: "flow_counter actions",
            });
        }
        let n = bulk.cells.len();
        self.bulks.remove(b.index, b.generation);
        self.counters -= n;
        Ok(())
    }

    pub(crate) fn counter_bulk_query(
        &self,
        b: CounterBulkId,
        out: &mut Vec<CounterValue>,
    ) -> Result<(), DrError> {
        let bulk = self
            .bulks
            .get(b.index, b.generation)
            .ok_or(stale(Object::CounterBulk))?;
        out.clear();
        out.extend(bulk.cells.iter().map(|c| CounterValue {
            packets: c.packets.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
        }));
        Ok(())
    }
}

/// The word count is what [`PacketKey`](super::packet::PacketKey) holds.
const _: () = assert!(WORDS * 8 == ENCODED_LEN);
const _: () = assert!(Block::Misc2 as usize == 3);
