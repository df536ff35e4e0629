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
//! The model also keeps what the device holds, so [`DrBackend::dump`] is
//! the model's dump: every object this backend made and has not destroyed,
//! with its decoded match and actions (counter values are read from the
//! device). Raw pointers are kept per handle and destroyed in dependency
//! order on drop (rules, matchers, actions, tables, counter bulks,
//! domains), so nothing outlives the backend even after a failed destroy.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::ptr::NonNull;
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
use crate::device::{errno, OpenDevice, RepPort, StartError};
use crate::dr_dump::DevDump;
use crate::marshal::{memory_words, meter_attr, sampler_attr, vlan_header, DestArray, MatchParams};
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

impl<H: Handle, T> Handles<H, NonNull<T>> {
    /// The raw pointer of `h`.
    fn ptr(&self, h: H) -> Result<*mut T, DrError> {
        self.get(h).map(|p| p.as_ptr())
    }

    /// Destroys the object of `h` with `destroy` (`op` for the error); on
    /// failure it stays (so drop retries it).
    fn destroy(
        &mut self,
        h: H,
        op: &'static str,
        destroy: unsafe extern "C" fn(*mut T) -> std::os::raw::c_int,
    ) -> Result<(), DrError> {
        let Some(p) = self.remove(h) else {
            return Ok(());
        };
        // SAFETY: a live object of this backend that the model just agreed
        // may go (nothing uses it); destroyed once.
        let rc = unsafe { destroy(p.as_ptr()) };
        if rc != 0 {
            self.insert(h, p);
            return Err(device_error(op, errno(rc)));
        }
        Ok(())
    }
}

/// The raw objects, by handle.
#[derive(Default)]
struct Raw {
    domains: Handles<DomainId, NonNull<sys::mlx5dv_dr_domain>>,
    tables: Handles<TableId, NonNull<sys::mlx5dv_dr_table>>,
    matchers: Handles<MatcherId, NonNull<sys::mlx5dv_dr_matcher>>,
    rules: Handles<RuleId, NonNull<sys::mlx5dv_dr_rule>>,
    actions: Handles<ActionId, NonNull<sys::mlx5dv_dr_action>>,
    bulks: Handles<CounterBulkId, Bulk>,
}

/// A DEVX flow counter bulk.
struct Bulk {
    obj: NonNull<sys::mlx5dv_devx_obj>,
    base: u32,
    size: u64,
}

// SAFETY: which rdma-core rule makes moving these pointers to another
// thread sound: libmlx5's Direct Rule objects carry no thread-local state
// and serialise their own updates (every table, matcher and rule change
// takes its domain's locks, dr_domain_lock in providers/mlx5/dr_table.c
// and dr_matcher.c; rule insertion takes the matcher's STE locks), and a
// DEVX object is a kernel handle any thread may use. Here no two threads
// even call on them at once: `Raw` is only reached through the backend's
// mutex.
unsafe impl Send for Raw {}

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
        ("mlx5dv_dr_rule_create", libc::EEXIST) => DrError::DuplicateRule,
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
        let tag = (reg_b & mask) >> shift;
        self.tags.iter().find(|(_, &t)| t == tag).map(|(&v, _)| v)
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
                self.tags.insert(vport, (value & mask) >> shift);
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
    /// at once with `kill`). The same errno is agreement.
    fn refused<T>(
        &self,
        op: &'static str,
        model: &DrError,
        made: Option<NonNull<T>>,
        kill: unsafe extern "C" fn(*mut T) -> std::os::raw::c_int,
    ) {
        let device = match made {
            None => device_error(op, errno(0)),
            Some(p) => {
                // SAFETY: the object the device just made for this probe;
                // nothing else knows it; destroyed once.
                let rc = unsafe { kill(p.as_ptr()) };
                let undone = if rc == 0 {
                    ""
                } else {
                    " (and its destroy failed)"
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
        dump_text(*raw.domains.get(d)?)
    }

    /// The device's own view of every live domain, parsed.
    pub fn device_view(&self) -> Result<DevDump, DrError> {
        let raw = self.raw();
        let mut all = DevDump::default();
        for dom in raw.domains.map.values() {
            all.extend(parse_dump(*dom)?);
        }
        Ok(all)
    }

    /// Where the device does not hold what the model says
    /// ([`crate::view`]); empty when it does.
    pub fn differences(&self) -> Result<Vec<String>, DrError> {
        Ok(self.dump()?.differences)
    }
}

/// `mlx5dv_dump_dr_domain` of a live domain, as text.
fn dump_text(dom: NonNull<sys::mlx5dv_dr_domain>) -> Result<String, DrError> {
    let mut buf: *mut std::os::raw::c_char = std::ptr::null_mut();
    let mut len = 0usize;
    // SAFETY: a live domain; the out pointers are valid; the buffer is
    // malloc'd by open_memstream and freed below.
    let rc = unsafe { sys::eswitch_dump_dr_domain(dom.as_ptr(), &mut buf, &mut len) };
    if rc != 0 {
        return Err(device_error("mlx5dv_dump_dr_domain", errno(rc)));
    }
    // SAFETY: `buf` holds `len` bytes written by the dump.
    let text = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) };
    let s = String::from_utf8_lossy(text).into_owned();
    // SAFETY: allocated by open_memstream, freed once.
    unsafe { libc::free(buf.cast()) };
    Ok(s)
}

/// A live domain's dump, parsed; a dump the parser cannot read is EIO,
/// logged with the line.
fn parse_dump(dom: NonNull<sys::mlx5dv_dr_domain>) -> Result<DevDump, DrError> {
    crate::dr_dump::parse(&dump_text(dom)?).map_err(|e| {
        tracing::warn!(%e, "mlx5: the device's dump");
        device_error("mlx5dv_dump_dr_domain (parse)", libc::EIO)
    })
}

/// Made on the model, then on the device; undone on the model when the
/// device refuses. In cross-check mode a call the model refuses is made on
/// the device too ([`Mlx5Backend::refused`]), and a refusal only the
/// device makes is recorded. `$raw` is the raw call, `$kill` the raw
/// destroy of what it makes.
macro_rules! made {
    ($self:ident, $model:expr, $undo:ident, $op:expr, $raw:expr, $kill:path $(,)?) => {{
        match $model {
            Err(e) => {
                if $self.cross_check {
                    let made = NonNull::new(($raw)());
                    $self.refused($op, &e, made, $kill);
                }
                Err(e)
            }
            Ok(id) => match NonNull::new(($raw)()) {
                Some(p) => Ok((id, p)),
                None => {
                    let code = errno(0);
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
        let ctx = self.dev.context();
        let (id, p) = made!(
            self,
            self.model.domain_create(ty),
            domain_destroy,
            "mlx5dv_dr_domain_create",
            // SAFETY: an open context; the result is checked for NULL.
            || unsafe { sys::mlx5dv_dr_domain_create(ctx, t) },
            sys::mlx5dv_dr_domain_destroy,
        )?;
        raw.domains.insert(id, p);
        Ok(id)
    }

    /// Refused while the device itself still lists tables in the domain
    /// (its own dump): "empty" is checked against the device.
    fn domain_destroy(&self, domain: DomainId) -> Result<(), DrError> {
        let mut raw = self.raw();
        if let Ok(dom) = raw.domains.get(domain) {
            let tables = parse_dump(*dom)?.tables.len();
            if tables > 0 {
                return Err(DrError::InUse {
                    what: Object::Domain,
                    users: tables,
                    by: "tables the device's own dump still lists",
                });
            }
        }
        self.model.domain_destroy(domain)?;
        raw.domains.destroy(
            domain,
            "mlx5dv_dr_domain_destroy",
            sys::mlx5dv_dr_domain_destroy,
        )
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
        // SAFETY: a live domain.
        let rc = unsafe { sys::mlx5dv_dr_domain_sync(p.as_ptr(), f) };
        if rc != 0 {
            return Err(device_error("mlx5dv_dr_domain_sync", errno(rc)));
        }
        Ok(())
    }

    fn domain_allow_duplicate_rules(&self, domain: DomainId, allow: bool) -> Result<(), DrError> {
        let raw = self.raw();
        self.model.domain_allow_duplicate_rules(domain, allow)?;
        let p = raw.domains.get(domain)?;
        // SAFETY: a live domain.
        unsafe { sys::mlx5dv_dr_domain_allow_duplicate_rules(p.as_ptr(), allow) };
        Ok(())
    }

    fn table_create(&self, domain: DomainId, level: u32) -> Result<TableId, DrError> {
        let mut raw = self.raw();
        let dom = *raw.domains.get(domain)?;
        let (id, p) = made!(
            self,
            self.model.table_create(domain, level),
            table_destroy,
            "mlx5dv_dr_table_create",
            // SAFETY: a live domain; the result is checked for NULL.
            || unsafe { sys::mlx5dv_dr_table_create(dom.as_ptr(), level) },
            sys::mlx5dv_dr_table_destroy,
        )?;
        raw.tables.insert(id, p);
        Ok(id)
    }

    fn table_destroy(&self, table: TableId) -> Result<(), DrError> {
        let mut raw = self.raw();
        self.model.table_destroy(table)?;
        raw.tables.destroy(
            table,
            "mlx5dv_dr_table_destroy",
            sys::mlx5dv_dr_table_destroy,
        )
    }

    fn matcher_create(
        &self,
        table: TableId,
        priority: u16,
        criteria: u8,
        mask: &[u8],
    ) -> Result<MatcherId, DrError> {
        let mut raw = self.raw();
        let tbl = *raw.tables.get(table)?;
        let mut params = MatchParams::new(mask);
        let (id, p) = made!(
            self,
            self.model.matcher_create(table, priority, criteria, mask),
            matcher_destroy,
            "mlx5dv_dr_matcher_create",
            // SAFETY: a live table and a match buffer that outlives the
            // call; the result is checked for NULL.
            || unsafe {
                sys::mlx5dv_dr_matcher_create(tbl.as_ptr(), priority, criteria, params.as_ptr())
            },
            sys::mlx5dv_dr_matcher_destroy,
        )?;
        raw.matchers.insert(id, p);
        Ok(id)
    }

    fn matcher_destroy(&self, matcher: MatcherId) -> Result<(), DrError> {
        let mut raw = self.raw();
        self.model.matcher_destroy(matcher)?;
        raw.matchers.destroy(
            matcher,
            "mlx5dv_dr_matcher_destroy",
            sys::mlx5dv_dr_matcher_destroy,
        )
    }

    fn rule_create(
        &self,
        matcher: MatcherId,
        value: &[u8],
        actions: &[ActionId],
    ) -> Result<RuleId, DrError> {
        let mut raw = self.raw();
        let m = *raw.matchers.get(matcher)?;
        let mut ptrs = actions
            .iter()
            .map(|a| raw.actions.ptr(*a))
            .collect::<Result<Vec<_>, _>>()?;
        let mut params = MatchParams::new(value);
        let (id, p) = made!(
            self,
            self.model.rule_create(matcher, value, actions),
            rule_destroy,
            "mlx5dv_dr_rule_create",
            // SAFETY: a live matcher, a value buffer and an action array
            // that outlive the call; the result is checked for NULL.
            || unsafe {
                sys::mlx5dv_dr_rule_create(
                    m.as_ptr(),
                    params.as_ptr(),
                    ptrs.len(),
                    ptrs.as_mut_ptr(),
                )
            },
            sys::mlx5dv_dr_rule_destroy,
        )?;
        raw.rules.insert(id, p);
        Ok(id)
    }

    fn rule_destroy(&self, rule: RuleId) -> Result<(), DrError> {
        let mut raw = self.raw();
        self.model.rule_destroy(rule)?;
        raw.rules
            .destroy(rule, "mlx5dv_dr_rule_destroy", sys::mlx5dv_dr_rule_destroy)
    }

    fn action_create(&self, domain: DomainId, spec: ActionSpec) -> Result<ActionId, DrError> {
        let mut raw = self.raw();
        let dom = *raw.domains.get(domain)?;
        // Everything the call points at, gathered before the model is
        // asked (a stale reference is the model's error too).
        let op = action_op(&spec);
        let call: Box<dyn FnOnce() -> *mut sys::mlx5dv_dr_action> = match &spec {
            // Every pointer a call below is given is a live object of this
            // backend (the raw lock is held until the call returns) or
            // memory its closure owns; the result is checked for NULL.
            // SAFETY: no argument.
            ActionSpec::Drop => Box::new(|| unsafe { sys::mlx5dv_dr_action_create_drop() }),
            ActionSpec::DefaultMiss => {
                // SAFETY: no argument.
                Box::new(|| unsafe { sys::mlx5dv_dr_action_create_default_miss() })
            }
            ActionSpec::DestVport(v) => {
                let v = u32::from(v.0);
                // SAFETY: a live domain.
                Box::new(move || unsafe {
                    sys::mlx5dv_dr_action_create_dest_vport(dom.as_ptr(), v)
                })
            }
            ActionSpec::DestTable(t) => {
                let t = raw.tables.ptr(*t)?;
                // SAFETY: a live table.
                Box::new(move || unsafe { sys::mlx5dv_dr_action_create_dest_table(t) })
            }
            ActionSpec::DestArray(list) => {
                let dests = list
                    .iter()
                    .map(|a| raw.actions.ptr(*a))
                    .collect::<Result<Vec<_>, _>>()?;
                let mut arr = DestArray::new(&dests);
                // SAFETY: a live domain; `arr` (owned by the closure) holds
                // `arr.len()` entries naming live actions.
                Box::new(move || unsafe {
                    sys::mlx5dv_dr_action_create_dest_array(
                        dom.as_ptr(),
                        arr.len(),
                        arr.as_mut_ptr(),
                    )
                })
            }
            ActionSpec::FlowCounter { bulk, offset } => {
                let obj = raw.bulks.get(*bulk)?.obj.as_ptr();
                let offset = *offset;
                // SAFETY: a live counter bulk; the model checked `offset`
                // lies inside it.
                Box::new(move || unsafe { sys::mlx5dv_dr_action_create_flow_counter(obj, offset) })
            }
            ActionSpec::FlowMeter(m) => {
                let next = raw.tables.ptr(m.next_table)?;
                let (active, reg) = (m.active, m.reg_c_index);
                let mut params = m.params.clone();
                Box::new(move || {
                    let mut attr = meter_attr(next, active, reg, &mut params);
                    // SAFETY: `attr` names a live table and points into
                    // `params`, both alive for the call.
                    unsafe { sys::mlx5dv_dr_action_create_flow_meter(&mut attr) }
                })
            }
            ActionSpec::FlowSampler(s) => {
                let next = raw.tables.ptr(s.default_next_table)?;
                let mut acts = s
                    .sample_actions
                    .iter()
                    .map(|a| raw.actions.ptr(*a))
                    .collect::<Result<Vec<_>, _>>()?;
                let (ratio, set) = (s.sample_ratio, s.action);
                Box::new(move || {
                    let mut attr = sampler_attr(ratio, next, &mut acts, set);
                    // SAFETY: `attr` names a live table and points into
                    // `acts` (live actions), alive for the call.
                    unsafe { sys::mlx5dv_dr_action_create_flow_sampler(&mut attr) }
                })
            }
            ActionSpec::PushVlan { header } => {
                let h = vlan_header(*header);
                // SAFETY: a live domain.
                Box::new(move || unsafe { sys::mlx5dv_dr_action_create_push_vlan(dom.as_ptr(), h) })
            }
            // SAFETY: no argument.
            ActionSpec::PopVlan => Box::new(|| unsafe { sys::mlx5dv_dr_action_create_pop_vlan() }),
            ActionSpec::ModifyHeader(bytes) => {
                let len = bytes.len();
                let mut words = memory_words(bytes);
                // SAFETY: a live domain; `words` (owned by the closure)
                // holds the `len` bytes of the actions.
                Box::new(move || unsafe {
                    sys::mlx5dv_dr_action_create_modify_header(
                        dom.as_ptr(),
                        0,
                        len,
                        words.as_mut_ptr(),
                    )
                })
            }
        };
        let (id, p) = made!(
            self,
            self.model.action_create(domain, spec),
            action_destroy,
            op,
            call,
            sys::mlx5dv_dr_action_destroy,
        )?;
        raw.actions.insert(id, p);
        Ok(id)
    }

    fn action_destroy(&self, action: ActionId) -> Result<(), DrError> {
        let mut raw = self.raw();
        self.model.action_destroy(action)?;
        raw.actions.destroy(
            action,
            "mlx5dv_dr_action_destroy",
            sys::mlx5dv_dr_action_destroy,
        )
    }

    fn counter_bulk_alloc(&self, log_size: u8) -> Result<CounterBulkId, DrError> {
        let mut raw = self.raw();
        let size = BulkSize::for_log(log_size, self.counter_bulk_log)
            .map_err(|_| DrError::Invalid("counter bulk size the device cannot allocate"))?;
        let id = self.model.counter_bulk_alloc(log_size)?;
        let input = cmd::alloc_flow_counter_in(size);
        let mut out = [0u8; cmd::ALLOC_FLOW_COUNTER_LEN];
        // SAFETY: an open context; `input` and `out` are valid for their
        // lengths; the result is checked for NULL.
        let obj = unsafe {
            sys::mlx5dv_devx_obj_create(
                self.dev.context(),
                input.as_ptr().cast(),
                input.len(),
                out.as_mut_ptr().cast(),
                out.len(),
            )
        };
        let fail = |code: i32| {
            let _ = self.model.counter_bulk_free(id);
            device_error("ALLOC_FLOW_COUNTER", code)
        };
        let Some(obj) = NonNull::new(obj) else {
            return Err(fail(errno(0)));
        };
        let base = match cmd::alloc_flow_counter_out(&out) {
            Ok(b) => b,
            Err(_) => {
                // SAFETY: the object just created, destroyed once.
                unsafe { sys::mlx5dv_devx_obj_destroy(obj.as_ptr()) };
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
        let Some(b) = raw.bulks.remove(bulk) else {
            return Ok(());
        };
        // SAFETY: a live DEVX object no counter action uses (the model
        // checked); the kernel sends its DEALLOC_FLOW_COUNTER.
        let rc = unsafe { sys::mlx5dv_devx_obj_destroy(b.obj.as_ptr()) };
        if rc != 0 {
            raw.bulks.insert(bulk, b);
            return Err(device_error("mlx5dv_devx_obj_destroy", errno(rc)));
        }
        Ok(())
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
        let mut device = DevDump::default();
        for dom in raw.domains.map.values() {
            device.extend(parse_dump(*dom)?);
        }
        dump.differences = crate::view::differences(&dump, &device, |slot, offset| {
            raw.bulks.by_index(slot).map(|b| b.base + offset)
        });
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
        // SAFETY: a live DEVX object; buffers valid for their lengths.
        let rc = unsafe {
            sys::mlx5dv_devx_obj_query(
                b.obj.as_ptr(),
                input.as_ptr().cast(),
                input.len(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if rc != 0 {
            return Err(device_error("QUERY_FLOW_COUNTER", errno(rc)));
        }
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
    }
}

impl Drop for Mlx5Backend {
    /// Whatever is left (after failed destroys, or a backend dropped
    /// without a teardown) goes in dependency order: rules, matchers,
    /// actions (those that lead to others after them), tables, counter
    /// bulks, domains.
    fn drop(&mut self) {
        let raw = self.raw.get_mut().unwrap_or_else(|e| e.into_inner());
        // Each pointer below is a live object of this backend, destroyed
        // once (drained from its map), after everything that uses it.
        for p in raw.rules.drain() {
            // SAFETY: a live rule, nothing uses it.
            unsafe { sys::mlx5dv_dr_rule_destroy(p.as_ptr()) };
        }
        for p in raw.matchers.drain() {
            // SAFETY: a live matcher; its rules are gone.
            unsafe { sys::mlx5dv_dr_matcher_destroy(p.as_ptr()) };
        }
        // An action another one contains (a dest_array's destinations, a
        // sampler's actions) is busy until its container goes: passes
        // until none is left or a pass frees nothing.
        let mut actions: Vec<NonNull<sys::mlx5dv_dr_action>> = raw.actions.drain().collect();
        while !actions.is_empty() {
            let before = actions.len();
            // SAFETY: a live action, no rule uses it; one the device
            // destroys leaves the list, so each goes once.
            actions.retain(|p| unsafe { sys::mlx5dv_dr_action_destroy(p.as_ptr()) } != 0);
            if actions.len() == before {
                tracing::warn!(left = before, "mlx5: actions the device would not destroy");
                break;
            }
        }
        for p in raw.tables.drain() {
            // SAFETY: a live table; its matchers and the actions that go
            // to it are gone.
            unsafe { sys::mlx5dv_dr_table_destroy(p.as_ptr()) };
        }
        for b in raw.bulks.drain() {
            // SAFETY: a live DEVX object; the counter actions on it are gone.
            unsafe { sys::mlx5dv_devx_obj_destroy(b.obj.as_ptr()) };
        }
        for p in raw.domains.drain() {
            // SAFETY: a live domain; everything made in it is gone.
            unsafe { sys::mlx5dv_dr_domain_destroy(p.as_ptr()) };
        }
    }
}

#[cfg(test)]
#[path = "tests/backend.rs"]
mod tests;
