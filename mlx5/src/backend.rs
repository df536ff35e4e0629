//! `Mlx5Backend`: the Direct Rule API on a real device.
//!
//! Every call is first made on a *model*: a `sim` device in the same
//! state as the real one (same objects, same handles). The model runs the
//! checks the sim runs and answers with the same [`DrError`]s (stale
//! handles, objects in use, levels, domains, action sequences, match
//! bytes, IP versions), taken from rdma-core's sources; so the two backends
//! agree on every error by construction, and a call the model refuses
//! never reaches the device (except in cross-check mode, which
//! `eswitchd hw-check` uses to hold the device to the sim: there it does,
//! and every answer that differs is recorded). A call the model accepts is then made on the
//! device; if the device refuses it, the model's object is removed again
//! and the device's errno comes back as [`DrError::Device`] (or the
//! variant the errno means for that call: EEXIST on a rule is a duplicate,
//! ENOSPC and ENOMEM are out of room).
//!
//! The model also keeps what the device holds, so [`DrBackend::dump`]
//! lists every object this backend made and has not destroyed, with its
//! decoded match and actions, held to the device's own dump
//! ([`crate::view`]), with counter values read from the device. The
//! device's objects are [`ffi`] handles, kept per model handle and
//! destroyed in dependency order on drop (rules, matchers, actions,
//! tables, counter bulks, domains), so nothing outlives the backend even
//! after a failed destroy. This module calls rdma-core only through
//! [`ffi`] (and the slow-path queue, [`crate::verbs`]): it has no `unsafe`.

#![forbid(unsafe_code)]

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use offload::dr::dump::CounterDump;
use offload::dr::{
    ActionId, ActionSpec, CounterBulkId, CounterValue, DeviceDump, DomainId, DomainType, DrBackend,
    DrError, Errno, MatcherId, Object, Resource, RestoreRuleId, RuleId, SyncFlags, TableId,
    NO_RESTORE_PATH,
};
use offload::prm::SourcePortMode;
use offload::sim::{SimBackend, SimConfig};
use offload::Vport;
use rdma_core_sys as sys;

use crate::cmd::{self, BulkSize};
use crate::device::{OpenDevice, RepPort, StartError};
use crate::dr_dump::DevDump;
use crate::ffi::{self, Action, ActionArgs, DevxObj, Domain, Dr, Kind, Matcher, Rule, Table};
use crate::verbs::SlowPathQueue;
use crate::Divergence;
use crate::{Arrived, QueueError, SlowPathError};

/// A Direct Rule handle: its map key and the object it names.
trait Handle: Copy {
    const OBJECT: Object;
    fn key(self) -> u64;
}

macro_rules! handle {
    ($($ty:ty => $obj:ident),*) => {$(
        impl Handle for $ty {
            const OBJECT: Object = Object::$obj;
            fn key(self) -> u64 {
                u64::from(self.index) << 32 | u64::from(self.generation)
            }
        }
    )*};
}

handle!(DomainId => Domain, TableId => Table, MatcherId => Matcher, RuleId => Rule,
    ActionId => Action, CounterBulkId => CounterBulk, RestoreRuleId => RestoreRule);

/// The raw objects of one kind, by the model's handle.
struct Handles<H, T> {
    map: HashMap<u64, T>,
    kind: std::marker::PhantomData<H>,
}

impl<H, T> Default for Handles<H, T> {
    fn default() -> Self {
        Handles {
            map: HashMap::new(),
            kind: std::marker::PhantomData,
        }
    }
}

impl<H: Handle, T> Handles<H, T> {
    /// The object of `h`; a handle this backend does not hold is stale.
    fn get(&self, h: H) -> Result<&T, DrError> {
        self.map.get(&h.key()).ok_or(DrError::Stale(H::OBJECT))
    }

    fn insert(&mut self, h: H, v: T) {
        self.map.insert(h.key(), v);
    }

    fn remove(&mut self, h: H) -> Option<T> {
        self.map.remove(&h.key())
    }

    /// The object in slot `index` (whatever its generation): the dump
    /// names objects by slot.
    fn by_index(&self, index: u32) -> Option<&T> {
        self.map
            .iter()
            .find(|(k, _)| (*k >> 32) as u32 == index)
            .map(|(_, v)| v)
    }

    fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.map.drain().map(|(_, v)| v)
    }
}

impl<H: Handle, K: Kind> Handles<H, Dr<K>> {
    /// Destroys the object of `h`; on failure it stays (so drop retries
    /// it).
    fn destroy(&mut self, h: H) -> Result<(), DrError> {
        let Some(o) = self.remove(h) else {
            return Ok(());
        };
        ffi::destroy(o).map_err(|(o, code)| {
            self.insert(h, o);
            device_error(K::DESTROY_OP, code)
        })
    }
}

/// The raw objects, by handle.
#[derive(Default)]
struct Raw {
    domains: Handles<DomainId, Dr<Domain>>,
    tables: Handles<TableId, Dr<Table>>,
    matchers: Handles<MatcherId, Dr<Matcher>>,
    rules: Handles<RuleId, Dr<Rule>>,
    actions: Handles<ActionId, Dr<Action>>,
    bulks: Handles<CounterBulkId, Bulk>,
}

/// A DEVX flow counter bulk.
struct Bulk {
    obj: Dr<DevxObj>,
    base: u32,
    size: u64,
}

/// The Direct Rule backend on an opened mlx5 device.
pub struct Mlx5Backend {
    dev: Arc<OpenDevice>,
    model: SimBackend,
    raw: Mutex<Raw>,
    /// `log_max_flow_counter_bulk` (0: units of 128 only).
    counter_bulk_log: u8,
    /// How the firmware marks a packet's source vport, and each vport's
    /// reg_c_0 tag (from `mlx5dv_query_port`).
    source_port: SourcePortMode,
    tags: HashMap<Vport, u32>,
    /// The same, by tag: what a slow-path completion's reg_b names, per
    /// packet.
    vports: HashMap<u32, Vport>,
    /// Ask the device about calls the model refuses, and record every
    /// answer that differs ([`Mlx5Backend::set_cross_check`]).
    cross_check: bool,
    divergences: Mutex<Vec<Divergence>>,
    /// The slow-path receive queue and its restore rules' tags, once
    /// opened ([`Mlx5Backend::open_slow_path`]): until then the slow path
    /// is on the representor netdevs and there is no restore path.
    slow_path: Mutex<Option<SlowPath>>,
}

/// The queue and the tag of each restore rule, by handle.
struct SlowPath {
    queue: SlowPathQueue,
    rules: Handles<RestoreRuleId, u32>,
}

/// An error as a divergence side: its text and errno.
fn describe(e: &DrError) -> String {
    format!("refused it with {} ({e})", e.errno())
}

/// The [`DrError`] for errno `code` from the device's `op`.
pub fn device_error(op: &'static str, code: i32) -> DrError {
    match (op, code) {
        ("mlx5dv_dr_rule_create" | "mlx5dv_create_flow", libc::EEXIST) => DrError::DuplicateRule,
        ("mlx5dv_dr_rule_create", libc::ENOSPC | libc::ENOMEM) => {
            DrError::NoSpace(Resource::TableRules)
        }
        ("mlx5dv_dr_matcher_create", libc::ENOSPC | libc::ENOMEM) => {
            DrError::NoSpace(Resource::Matchers)
        }
        ("ALLOC_FLOW_COUNTER", libc::ENOSPC | libc::ENOMEM) => DrError::NoSpace(Resource::Counters),
        ("mlx5dv_dr_action_create_flow_meter", libc::ENOSPC | libc::ENOMEM) => {
            DrError::NoSpace(Resource::Meters)
        }
        _ => DrError::Device {
            op,
            errno: Errno::from_code(code).unwrap_or(Errno::EIO),
            code,
        },
    }
}

impl Mlx5Backend {
    /// A backend on `dev`, whose model has the vports of a ConnectX
    /// (PF, uplink, ECPF, 127 VFs) and no capacity below the device's.
    pub fn new(dev: Arc<OpenDevice>) -> Mlx5Backend {
        let mut out = vec![0u8; cmd::QUERY_HCA_CAP_OUT_LEN];
        let counter_bulk_log = dev
            .general_cmd(&cmd::query_hca_cap_in(cmd::CAP_GENERAL), &mut out)
            .ok()
            .and_then(|()| cmd::log_max_flow_counter_bulk(&out).ok())
            .unwrap_or(0);
        let cfg = SimConfig {
            max_rules_per_table: usize::MAX,
            max_matchers_per_table: usize::MAX,
            max_counters: usize::MAX,
            max_bulk_log: 31,
            max_meters: usize::MAX,
            max_modify_actions: usize::MAX,
            // The slow path receives on the representor netdevs: no
            // restore tags (see `restore_path`).
            restore_path: false,
            ..SimConfig::default()
        };
        Mlx5Backend {
            dev,
            model: SimBackend::new(cfg),
            raw: Mutex::new(Raw::default()),
            counter_bulk_log,
            source_port: SourcePortMode::MiscSourcePort,
            tags: HashMap::new(),
            vports: HashMap::new(),
            cross_check: false,
            divergences: Mutex::new(Vec::new()),
            slow_path: Mutex::new(None),
        }
    }

    /// Opens the slow-path receive queue on IB port `port` (the uplink's
    /// is port 1) with `depth` buffers, steering to it the packets of
    /// every representor [`Mlx5Backend::set_port_info`] reported; from
    /// then on the backend has a restore path, and the model too.
    pub fn open_slow_path(&self, port: u8, depth: u32) -> Result<(), SlowPathError> {
        let SourcePortMode::Metadata { mask, shift } = self.source_port else {
            return Err(SlowPathError::NoMetadata);
        };
        let mut sources: Vec<(u32, u32)> = self
            .tags
            .values()
            .map(|&t| (t.checked_shl(u32::from(shift)).unwrap_or(0) & mask, mask))
            .collect();
        if sources.is_empty() {
            return Err(SlowPathError::NoMetadata);
        }
        sources.sort_unstable();
        let queue = SlowPathQueue::open(Arc::clone(&self.dev), port, &sources, depth)?;
        *self.slow() = Some(SlowPath {
            queue,
            rules: Handles::default(),
        });
        self.model.set_restore_path(true);
        Ok(())
    }

    fn slow(&self) -> MutexGuard<'_, Option<SlowPath>> {
        self.slow_path.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands up to `max` packets the slow-path queue received to `each`
    /// (none while it is not open); returns how many.
    pub fn poll_slow_path(
        &self,
        max: usize,
        each: impl FnMut(Arrived<'_>),
    ) -> Result<usize, QueueError> {
        match self.slow().as_mut() {
            Some(sp) => sp.queue.poll(max, each),
            None => Ok(0),
        }
    }

    /// The vport whose reg_c_0 metadata is `reg_b` (what a completion of
    /// the slow-path queue names its source by).
    pub fn vport_of_metadata(&self, reg_b: u32) -> Option<Vport> {
        let SourcePortMode::Metadata { mask, shift } = self.source_port else {
            return None;
        };
        self.vports.get(&((reg_b & mask) >> shift)).copied()
    }

    /// How the firmware marks the source vport (`misc.source_port` until
    /// [`Mlx5Backend::set_port_info`] reports reg_c_0 metadata).
    pub fn source_port(&self) -> SourcePortMode {
        self.source_port
    }

    /// What `mlx5dv_query_port` said of a representor's port: its vport
    /// and, with vport metadata, the reg_c_0 value and mask that mark its
    /// packets (the mode becomes `Metadata` with the mask's shift).
    pub fn set_port_info(&mut self, vport: Vport, reg_c0: Option<(u32, u32)>) {
        if let Some((value, mask)) = reg_c0 {
            if mask != 0 {
                let shift = mask.trailing_zeros() as u8;
                self.source_port = SourcePortMode::Metadata { mask, shift };
                let tag = (value & mask) >> shift;
                self.tags.insert(vport, tag);
                self.vports.insert(tag, vport);
            }
        }
    }

    /// The reg_c_0 tag of `vport`, when the device reported one.
    pub fn vport_tag(&self, vport: Vport) -> Option<u32> {
        self.tags.get(&vport).copied()
    }

    /// The model: the sim in the same state as the device, which answers
    /// first for every call.
    pub fn model(&self) -> &SimBackend {
        &self.model
    }

    /// Cross-check mode, for `eswitchd hw-check`: a create the model
    /// refuses is also made on the device (and destroyed at once if the
    /// device accepts it), so the device's own answer to every documented
    /// error is checked; any answer that differs from the model's is kept
    /// for [`Mlx5Backend::take_divergences`]. Off in the daemon, where a
    /// call the model refuses never reaches the device.
    pub fn set_cross_check(&mut self, on: bool) {
        self.cross_check = on;
    }

    /// The divergences recorded since the last call.
    pub fn take_divergences(&self) -> Vec<Divergence> {
        std::mem::take(&mut *self.divergences.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn diverged(&self, op: &'static str, model: String, device: String) {
        if self.cross_check {
            let d = Divergence { op, model, device };
            tracing::warn!(%d, "the device and the sim differ");
            self.divergences
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(d);
        }
    }

    /// The device's answer to a call the model refused with `model`:
    /// `made` is what the device returned (an object it made is destroyed
    /// at once). The same errno is agreement.
    fn refused<K: Kind>(&self, op: &'static str, model: &DrError, made: Result<Dr<K>, i32>) {
        let device = match made {
            Err(code) => device_error(op, code),
            Ok(o) => {
                let undone = match ffi::destroy(o) {
                    Ok(()) => "",
                    Err(_) => " (and its destroy failed)",
                };
                self.diverged(op, describe(model), format!("accepted it{undone}"));
                return;
            }
        };
        if device.errno() != model.errno() {
            self.diverged(op, describe(model), describe(&device));
        }
    }

    fn raw(&self) -> MutexGuard<'_, Raw> {
        self.raw.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The device's own view of a domain (`mlx5dv_dump_dr_domain`).
    pub fn device_dump(&self, d: DomainId) -> Result<String, DrError> {
        let raw = self.raw();
        dump_text(raw.domains.get(d)?)
    }

    /// Where the device does not hold what the model says
    /// ([`crate::view`]); empty when it does. Reads the device's dump, not
    /// its counters.
    pub fn differences(&self) -> Result<Vec<String>, DrError> {
        let raw = self.raw();
        differences_of(&raw, &self.model.dump()?)
    }
}

/// Where the device's own dump of every live domain differs from `model`.
fn differences_of(raw: &Raw, model: &DeviceDump) -> Result<Vec<String>, DrError> {
    let mut device = DevDump::default();
    for dom in raw.domains.map.values() {
        device.extend(parse_dump(dom)?);
    }
    Ok(crate::view::differences(model, &device, |slot, offset| {
        raw.bulks.by_index(slot).map(|b| b.base + offset)
    }))
}

/// `mlx5dv_dump_dr_domain` of a live domain, as text.
fn dump_text(dom: &Dr<Domain>) -> Result<String, DrError> {
    ffi::dump_domain(dom).map_err(|code| device_error("mlx5dv_dump_dr_domain", code))
}

/// A live domain's dump, parsed; a dump the parser cannot read is EIO,
/// logged with the line.
fn parse_dump(dom: &Dr<Domain>) -> Result<DevDump, DrError> {
    crate::dr_dump::parse(&dump_text(dom)?).map_err(|e| {
        tracing::warn!(%e, "mlx5: the device's dump");
        device_error("mlx5dv_dump_dr_domain (parse)", libc::EIO)
    })
}

/// Made on the model, then on the device; undone on the model when the
/// device refuses. In cross-check mode a call the model refuses is made on
/// the device too ([`Mlx5Backend::refused`]), and a refusal only the
/// device makes is recorded. `$raw` makes the object on the device
/// ([`ffi`]).
macro_rules! made {
    ($self:ident, $model:expr, $undo:ident, $op:expr, $raw:expr $(,)?) => {{
        match $model {
            Err(e) => {
                if $self.cross_check {
                    $self.refused($op, &e, ($raw)());
                }
                Err(e)
            }
            Ok(id) => match ($raw)() {
                Ok(p) => Ok((id, p)),
                Err(code) => {
                    let _ = $self.model.$undo(id);
                    let e = device_error($op, code);
                    $self.diverged($op, "accepted".to_owned(), describe(&e));
                    Err(e)
                }
            },
        }
    }};
}

impl DrBackend for Mlx5Backend {
    fn domain_create(&self, ty: DomainType) -> Result<DomainId, DrError> {
        let mut raw = self.raw();
        let t = match ty {
            DomainType::NicRx => sys::MLX5DV_DR_DOMAIN_TYPE_NIC_RX,
            DomainType::NicTx => sys::MLX5DV_DR_DOMAIN_TYPE_NIC_TX,
            DomainType::Fdb => sys::MLX5DV_DR_DOMAIN_TYPE_FDB,
        };
        let (id, p) = made!(
            self,
            self.model.domain_create(ty),
            domain_destroy,
            "mlx5dv_dr_domain_create",
            || ffi::domain_create(&self.dev, t),
        )?;
        raw.domains.insert(id, p);
        Ok(id)
    }

    /// Refused while the device itself still lists tables in the domain
    /// (its own dump): "empty" is checked against the device.
    fn domain_destroy(&self, domain: DomainId) -> Result<(), DrError> {
        let mut raw = self.raw();
        if let Ok(dom) = raw.domains.get(domain) {
            let tables = parse_dump(dom)?.tables.len();
            if tables > 0 {
                return Err(DrError::InUse {
                    what: Object::Domain,
                    users: tables,
                    by: "tables the device's own dump still lists",
                });
            }
        }
        self.model.domain_destroy(domain)?;
        raw.domains.destroy(domain)
    }

    fn domain_sync(&self, domain: DomainId, flags: SyncFlags) -> Result<(), DrError> {
        let raw = self.raw();
        self.model.domain_sync(domain, flags)?;
        let p = raw.domains.get(domain)?;
        let mut f = 0;
        if flags.sw {
            f |= sys::MLX5DV_DR_DOMAIN_SYNC_FLAGS_SW;
        }
        if flags.hw {
            f |= sys::MLX5DV_DR_DOMAIN_SYNC_FLAGS_HW;
        }
        if flags.mem {
            f |= sys::MLX5DV_DR_DOMAIN_SYNC_FLAGS_MEM;
        }
        ffi::domain_sync(p, f).map_err(|code| device_error("mlx5dv_dr_domain_sync", code))
    }

    fn domain_allow_duplicate_rules(&self, domain: DomainId, allow: bool) -> Result<(), DrError> {
        let raw = self.raw();
        self.model.domain_allow_duplicate_rules(domain, allow)?;
        let p = raw.domains.get(domain)?;
        ffi::domain_allow_duplicate_rules(p, allow);
        Ok(())
    }

    fn table_create(&self, domain: DomainId, level: u32) -> Result<TableId, DrError> {
        let mut raw = self.raw();
        let dom = raw.domains.get(domain)?;
        let (id, p) = made!(
            self,
            self.model.table_create(domain, level),
            table_destroy,
            "mlx5dv_dr_table_create",
            || ffi::table_create(dom, level),
        )?;
        raw.tables.insert(id, p);
        Ok(id)
    }

    fn table_destroy(&self, table: TableId) -> Result<(), DrError> {
        let mut raw = self.raw();
        self.model.table_destroy(table)?;
        raw.tables.destroy(table)
    }

    fn matcher_create(
        &self,
        table: TableId,
        priority: u16,
        criteria: u8,
        mask: &[u8],
    ) -> Result<MatcherId, DrError> {
        let mut raw = self.raw();
        let tbl = raw.tables.get(table)?;
        let (id, p) = made!(
            self,
            self.model.matcher_create(table, priority, criteria, mask),
            matcher_destroy,
            "mlx5dv_dr_matcher_create",
            || ffi::matcher_create(tbl, priority, criteria, mask),
        )?;
        raw.matchers.insert(id, p);
        Ok(id)
    }

    fn matcher_destroy(&self, matcher: MatcherId) -> Result<(), DrError> {
        let mut raw = self.raw();
        self.model.matcher_destroy(matcher)?;
        raw.matchers.destroy(matcher)
    }

    fn rule_create(
        &self,
        matcher: MatcherId,
        value: &[u8],
        actions: &[ActionId],
    ) -> Result<RuleId, DrError> {
        let mut raw = self.raw();
        let m = raw.matchers.get(matcher)?;
        let acts = actions
            .iter()
            .map(|a| raw.actions.get(*a))
            .collect::<Result<Vec<_>, _>>()?;
        let (id, p) = made!(
            self,
            self.model.rule_create(matcher, value, actions),
            rule_destroy,
            "mlx5dv_dr_rule_create",
            || ffi::rule_create(m, value, &acts),
        )?;
        raw.rules.insert(id, p);
        Ok(id)
    }

    /// On the device first, then on the model: a rule the device keeps
    /// stays in both, so a retry finds it (nothing uses a rule, so the
    /// model has no reason to refuse once the device agreed).
    fn rule_destroy(&self, rule: RuleId) -> Result<(), DrError> {
        let mut raw = self.raw();
        raw.rules.get(rule)?;
        raw.rules.destroy(rule)?;
        self.model.rule_destroy(rule)
    }

    fn action_create(&self, domain: DomainId, spec: ActionSpec) -> Result<ActionId, DrError> {
        let mut raw = self.raw();
        let dom = raw.domains.get(domain)?;
        // Everything the call names, gathered before the model is asked
        // (a stale reference is the model's error too).
        let op = action_op(&spec);
        let args = match &spec {
            ActionSpec::Drop => ActionArgs::Drop,
            ActionSpec::DefaultMiss => ActionArgs::DefaultMiss,
            ActionSpec::DestVport(v) => ActionArgs::DestVport(dom, u32::from(v.0)),
            ActionSpec::DestTable(t) => ActionArgs::DestTable(raw.tables.get(*t)?),
            ActionSpec::DestArray(list) => ActionArgs::DestArray(
                dom,
                list.iter()
                    .map(|d| {
                        let r = d.reformat.map(|r| raw.actions.get(r)).transpose()?;
                        Ok((r, raw.actions.get(d.to)?))
                    })
                    .collect::<Result<Vec<_>, DrError>>()?,
            ),
            ActionSpec::FlowCounter { bulk, offset } => {
                ActionArgs::FlowCounter(&raw.bulks.get(*bulk)?.obj, *offset)
            }
            ActionSpec::FlowMeter(m) => ActionArgs::FlowMeter {
                next: raw.tables.get(m.next_table)?,
                active: m.active,
                reg_c_index: m.reg_c_index,
                params: m.params.clone(),
            },
            ActionSpec::FlowSampler(s) => ActionArgs::FlowSampler {
                next: raw.tables.get(s.default_next_table)?,
                ratio: s.sample_ratio,
                actions: s
                    .sample_actions
                    .iter()
                    .map(|a| raw.actions.get(*a))
                    .collect::<Result<Vec<_>, _>>()?,
                set: s.action,
            },
            ActionSpec::PushVlan { header } => ActionArgs::PushVlan(dom, *header),
            ActionSpec::PopVlan => ActionArgs::PopVlan,
            ActionSpec::ModifyHeader(bytes) => ActionArgs::ModifyHeader(dom, bytes.clone()),
            ActionSpec::PacketReformat { reformat, data } => {
                ActionArgs::PacketReformat(dom, *reformat as u32, data.clone())
            }
        };
        let (id, p) = made!(
            self,
            self.model.action_create(domain, spec),
            action_destroy,
            op,
            || ffi::action_create(args),
        )?;
        raw.actions.insert(id, p);
        Ok(id)
    }

    fn action_destroy(&self, action: ActionId) -> Result<(), DrError> {
        let mut raw = self.raw();
        self.model.action_destroy(action)?;
        raw.actions.destroy(action)
    }

    fn counter_bulk_alloc(&self, log_size: u8) -> Result<CounterBulkId, DrError> {
        let mut raw = self.raw();
        let size = BulkSize::for_log(log_size, self.counter_bulk_log)
            .map_err(|_| DrError::Invalid("counter bulk size the device cannot allocate"))?;
        let id = self.model.counter_bulk_alloc(log_size)?;
        let input = cmd::alloc_flow_counter_in(size);
        let mut out = [0u8; cmd::ALLOC_FLOW_COUNTER_LEN];
        let fail = |code: i32| {
            let _ = self.model.counter_bulk_free(id);
            device_error("ALLOC_FLOW_COUNTER", code)
        };
        let obj = ffi::devx_obj_create(&self.dev, &input, &mut out).map_err(fail)?;
        let base = match cmd::alloc_flow_counter_out(&out) {
            Ok(b) => b,
            Err(_) => {
                let _ = ffi::destroy(obj);
                return Err(fail(libc::EIO));
            }
        };
        raw.bulks.insert(
            id,
            Bulk {
                obj,
                base,
                size: size.counters(),
            },
        );
        Ok(id)
    }

    fn counter_bulk_free(&self, bulk: CounterBulkId) -> Result<(), DrError> {
        let mut raw = self.raw();
        self.model.counter_bulk_free(bulk)?;
        let Some(Bulk { obj, base, size }) = raw.bulks.remove(bulk) else {
            return Ok(());
        };
        // No counter action uses it (the model checked); the kernel sends
        // its DEALLOC_FLOW_COUNTER.
        ffi::destroy(obj).map_err(|(obj, code)| {
            raw.bulks.insert(bulk, Bulk { obj, base, size });
            device_error("mlx5dv_devx_obj_destroy", code)
        })
    }

    fn counter_bulk_query(
        &self,
        bulk: CounterBulkId,
        out: &mut Vec<CounterValue>,
    ) -> Result<(), DrError> {
        let raw = self.raw();
        query_bulk(raw.bulks.get(bulk)?, out)?;
        if self.cross_check {
            // The model counted the frames the check sent through it.
            let mut want = Vec::new();
            self.model.counter_bulk_query(bulk, &mut want)?;
            let differ = want.iter().zip(out.iter()).position(|(w, g)| w != g);
            if let Some(i) = differ {
                self.diverged(
                    "QUERY_FLOW_COUNTER",
                    format!("counted {:?} at offset {i}", want[i]),
                    format!("counted {:?}", out[i]),
                );
            }
        }
        Ok(())
    }

    fn dump(&self) -> Result<DeviceDump, DrError> {
        let raw = self.raw();
        let mut dump = self.model.dump()?;
        // The objects are the model's; the counter values the device's,
        // each bulk a rule counts in read once.
        let mut read: HashMap<u32, Vec<CounterValue>> = HashMap::new();
        for r in &mut dump.rules {
            let Some((slot, offset)) = r.counter_at else {
                continue;
            };
            let values = match read.entry(slot) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => {
                    let Some(b) = raw.bulks.by_index(slot) else {
                        continue;
                    };
                    let mut values = Vec::new();
                    query_bulk(b, &mut values)?;
                    e.insert(values)
                }
            };
            r.counter = values.get(offset as usize).map(|c| CounterDump {
                packets: c.packets,
                bytes: c.bytes,
            });
        }
        // The objects listed are the device's only where its own dump
        // agrees; every difference is listed with them.
        dump.differences = differences_of(&raw, &dump)?;
        Ok(dump)
    }

    fn restore_path(&self) -> Result<(), &'static str> {
        match *self.slow() {
            Some(_) => Ok(()),
            None => Err(NO_RESTORE_PATH),
        }
    }

    /// Made on the model (which refuses it without a queue, with a bad or
    /// a steered tag), then steered on the device.
    fn restore_rule_create(&self, tag: u32) -> Result<RestoreRuleId, DrError> {
        let mut slow = self.slow();
        let id = self.model.restore_rule_create(tag)?;
        let Some(sp) = slow.as_mut() else {
            let _ = self.model.restore_rule_destroy(id);
            return Err(DrError::NoRestorePath(NO_RESTORE_PATH));
        };
        if let Err(e) = sp.queue.add_tag(tag) {
            let _ = self.model.restore_rule_destroy(id);
            return Err(e);
        }
        sp.rules.insert(id, tag);
        Ok(id)
    }

    /// Removed from the device, then from the model; a rule the device
    /// keeps stays in both.
    fn restore_rule_destroy(&self, rule: RestoreRuleId) -> Result<(), DrError> {
        let mut slow = self.slow();
        let sp = slow.as_mut().ok_or(DrError::Stale(Object::RestoreRule))?;
        let tag = *sp.rules.get(rule)?;
        sp.queue.remove_tag(tag)?;
        sp.rules.remove(rule);
        self.model.restore_rule_destroy(rule)
    }
}

/// Reads every counter of a DEVX bulk into `out`, by offset
/// (QUERY_FLOW_COUNTER in chunks of at most 4,094).
fn query_bulk(b: &Bulk, out: &mut Vec<CounterValue>) -> Result<(), DrError> {
    out.clear();
    let mut buf = Vec::new();
    for (first, n) in cmd::query_chunks(b.base, b.size) {
        let input = cmd::query_flow_counter_in(first, n);
        buf.clear();
        buf.resize(cmd::query_flow_counter_out_len(n), 0);
        ffi::devx_obj_query(&b.obj, &input, &mut buf)
            .map_err(|code| device_error("QUERY_FLOW_COUNTER", code))?;
        cmd::query_flow_counter_out(&buf, n, out)
            .map_err(|_| device_error("QUERY_FLOW_COUNTER", libc::EIO))?;
    }
    Ok(())
}

/// Opens `device`, learns each representor's vport and reg_c_0 metadata
/// (checking the config's vport against the device's), and proves FDB
/// software steering by creating a level-1 FDB table (a device without it
/// creates the domain but refuses that table with EOPNOTSUPP), which it
/// then removes.
pub fn start(device: &str, reps: &[RepPort]) -> Result<Mlx5Backend, StartError> {
    let dev = Arc::new(crate::device::open(device)?);
    let mut b = Mlx5Backend::new(Arc::clone(&dev));
    for r in reps {
        let Some(port) = r.ib_port else {
            continue;
        };
        let info = dev.query_port(port).map_err(|err| StartError::QueryPort {
            netdev: r.netdev.clone(),
            device: device.to_string(),
            port,
            err,
        })?;
        if let Some(v) = info.vport {
            if v != r.vport.0 {
                return Err(StartError::VportMismatch {
                    netdev: r.netdev.clone(),
                    config: r.vport,
                    device_vport: Vport(v),
                });
            }
        }
        b.set_port_info(r.vport, info.reg_c0);
    }
    let fdb = |err| StartError::Fdb {
        device: device.to_string(),
        err,
    };
    let d = b.domain_create(DomainType::Fdb).map_err(fdb)?;
    let t = b.table_create(d, 1);
    let result = match t {
        Ok(t) => b.table_destroy(t).map_err(fdb),
        Err(e) => Err(fdb(e)),
    };
    let _ = b.domain_destroy(d);
    result.map(|()| b)
}

/// The library call an action spec is made with (for errors).
fn action_op(spec: &ActionSpec) -> &'static str {
    match spec {
        ActionSpec::Drop => "mlx5dv_dr_action_create_drop",
        ActionSpec::DefaultMiss => "mlx5dv_dr_action_create_default_miss",
        ActionSpec::DestVport(_) => "mlx5dv_dr_action_create_dest_vport",
        ActionSpec::DestTable(_) => "mlx5dv_dr_action_create_dest_table",
        ActionSpec::DestArray(_) => "mlx5dv_dr_action_create_dest_array",
        ActionSpec::FlowCounter { .. } => "mlx5dv_dr_action_create_flow_counter",
        ActionSpec::FlowMeter(_) => "mlx5dv_dr_action_create_flow_meter",
        ActionSpec::FlowSampler(_) => "mlx5dv_dr_action_create_flow_sampler",
        ActionSpec::PushVlan { .. } => "mlx5dv_dr_action_create_push_vlan",
        ActionSpec::PopVlan => "mlx5dv_dr_action_create_pop_vlan",
        ActionSpec::ModifyHeader(_) => "mlx5dv_dr_action_create_modify_header",
        ActionSpec::PacketReformat { .. } => "mlx5dv_dr_action_create_packet_reformat",
    }
}

impl Drop for Mlx5Backend {
    /// Whatever is left (after failed destroys, or a backend dropped
    /// without a teardown) goes in dependency order: rules, matchers,
    /// actions (those that lead to others after them), tables, counter
    /// bulks, domains.
    fn drop(&mut self) {
        let raw = self.raw.get_mut().unwrap_or_else(|e| e.into_inner());
        // Each object goes once (drained from its map), after everything
        // that uses it; one the device keeps is left to it (logged).
        fn all<K: Kind>(what: &str, objects: impl Iterator<Item = Dr<K>>) {
            let kept = objects.map(ffi::destroy).filter(Result::is_err).count();
            left(what, kept);
        }
        fn left(what: &str, n: usize) {
            if n > 0 {
                tracing::warn!(left = n, "mlx5: {what} the device would not destroy");
            }
        }
        all("rules", raw.rules.drain());
        all("matchers", raw.matchers.drain());
        // An action another one contains (a dest_array's destinations, a
        // sampler's actions) is busy until its container goes: passes
        // until none is left or a pass frees nothing.
        let mut actions: Vec<Dr<Action>> = raw.actions.drain().collect();
        while !actions.is_empty() {
            let before = actions.len();
            actions = actions
                .into_iter()
                .filter_map(|a| ffi::destroy(a).err().map(|(a, _)| a))
                .collect();
            if actions.len() == before {
                left("actions", before);
                break;
            }
        }
        all("tables", raw.tables.drain());
        all("counter bulks", raw.bulks.drain().map(|b| b.obj));
        all("domains", raw.domains.drain());
    }
}

#[cfg(test)]
#[path = "tests/backend.rs"]
mod tests;
