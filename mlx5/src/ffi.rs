//! Every call the Direct Rule backend makes into rdma-core (Direct Rule
//! and the DEVX objects of counter bulks), and nothing else: the model
//! logic is in [`crate::backend`], which holds the objects made here and
//! never touches a raw pointer.
//!
//! An object is owned by its handle, [`Dr`]: made by a create call here,
//! gone only through [`destroy`], which consumes it (a refusal gives it
//! back). So a `&Dr<K>` is a live object for as long as it is borrowed.
//! One object must also not be freed while another still points at it:
//! rdma-core refcounts most of what its objects use (a table its matchers
//! and the actions that go to it, an action the rules and the actions that
//! contain it), but not all of it: a flow-counter action keeps a pointer
//! to its DEVX object, and a dest_vport action pointers into its domain,
//! without a reference (`dr_action.c`), and reads them later (rule
//! creation, the domain dump). So every handle carries a user count of its
//! own: each object made from others holds a count on each of them, and
//! [`destroy`] refuses (EBUSY) an object something still holds, whatever
//! rdma-core would do. With that, every function here is safe to call.
//!
//! Errors are the errno the call set (or returned).

use std::marker::PhantomData;
use std::os::raw::c_int;
use std::ptr::NonNull;
use std::sync::Arc;

use rdma_core_sys as sys;

use crate::device::{errno, OpenDevice};
use crate::marshal::{memory_words, meter_attr, sampler_attr, vlan_header, DestArray, MatchParams};

/// A kind of rdma-core object: its C type, its destroy call.
pub(crate) trait Kind {
    type Raw;
    /// The call that destroys one, by name for errors.
    const DESTROY_OP: &'static str;
    /// # Safety
    /// `p` must be a live object of this kind, destroyed at most once.
    unsafe fn destroy(p: *mut Self::Raw) -> c_int;
}

macro_rules! kinds {
    ($($(#[$doc:meta])* $name:ident: $raw:ty => $destroy:ident;)*) => {$(
        $(#[$doc])*
        pub(crate) enum $name {}
        impl Kind for $name {
            type Raw = $raw;
            const DESTROY_OP: &'static str = stringify!($destroy);
            unsafe fn destroy(p: *mut $raw) -> c_int {
                // SAFETY: the caller's contract: a live object, once.
                unsafe { sys::$destroy(p) }
            }
        }
    )*};
}

kinds! {
    /// `mlx5dv_dr_domain`.
    Domain: sys::mlx5dv_dr_domain => mlx5dv_dr_domain_destroy;
    /// `mlx5dv_dr_table`.
    Table: sys::mlx5dv_dr_table => mlx5dv_dr_table_destroy;
    /// `mlx5dv_dr_matcher`.
    Matcher: sys::mlx5dv_dr_matcher => mlx5dv_dr_matcher_destroy;
    /// `mlx5dv_dr_rule`.
    Rule: sys::mlx5dv_dr_rule => mlx5dv_dr_rule_destroy;
    /// `mlx5dv_dr_action`.
    Action: sys::mlx5dv_dr_action => mlx5dv_dr_action_destroy;
    /// A DEVX object (a flow counter bulk).
    DevxObj: sys::mlx5dv_devx_obj => mlx5dv_devx_obj_destroy;
}

/// A live rdma-core object of kind `K`, made by this module.
pub(crate) struct Dr<K: Kind> {
    p: NonNull<K::Raw>,
    /// Counted once for the object itself and once by each object made
    /// from it that is still alive.
    users: Arc<()>,
    /// The counts this object holds on the objects it was made from:
    /// never read, released when the object is destroyed.
    _holds: Vec<Arc<()>>,
    kind: PhantomData<K>,
}

// SAFETY: which rdma-core rule makes moving these to another thread
// sound: Direct Rule objects carry no thread-local state and serialise
// their own updates (every table, matcher and rule change takes its
// domain's locks, dr_domain_lock in providers/mlx5/dr_table.c and
// dr_matcher.c; rule insertion takes the matcher's STE locks), and a DEVX
// object is a kernel handle any thread may use. The backend reaches them
// only under its mutex besides.
unsafe impl<K: Kind> Send for Dr<K> {}

impl<K: Kind> Dr<K> {
    /// What a create call returned: the object, holding a count on each
    /// of `from`, or (NULL) its errno.
    fn made(p: *mut K::Raw, from: &[&Arc<()>]) -> Result<Dr<K>, i32> {
        NonNull::new(p)
            .map(|p| Dr {
                p,
                users: Arc::new(()),
                _holds: from.iter().map(|u| Arc::clone(u)).collect(),
                kind: PhantomData,
            })
            .ok_or_else(|| errno(0))
    }

    /// Whether objects made from this one are still alive.
    fn in_use(&self) -> bool {
        Arc::strong_count(&self.users) > 1
    }

    fn raw(&self) -> *mut K::Raw {
        self.p.as_ptr()
    }
}

impl<K: Kind> std::fmt::Debug for Dr<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({:p})", std::any::type_name::<K>(), self.p)
    }
}

/// A call's return code: 0 is success, anything else its errno.
fn check(rc: c_int) -> Result<(), i32> {
    if rc == 0 {
        Ok(())
    } else {
        Err(errno(rc))
    }
}

/// Destroys `o`; a refusal gives it back with the errno (the object is
/// still live: the device keeps it, and so does the caller).
pub(crate) fn destroy<K: Kind>(o: Dr<K>) -> Result<(), (Dr<K>, i32)> {
    if o.in_use() {
        return Err((o, libc::EBUSY));
    }
    // SAFETY: a live object (its handle exists) that nothing made here
    // points at any more (its user count is its own), destroyed once (the
    // handle is consumed; on failure it is handed back, still live).
    let rc = unsafe { K::destroy(o.raw()) };
    check(rc).map_err(|code| (o, code))
    // On success `o` drops here, and with it the counts it held.
}

/// `mlx5dv_dr_domain_create` of `ty` (`MLX5DV_DR_DOMAIN_TYPE_*`).
pub(crate) fn domain_create(dev: &OpenDevice, ty: u32) -> Result<Dr<Domain>, i32> {
    // SAFETY: an open context (the device outlives the backend and every
    // object made on it); the result is checked for NULL.
    Dr::made(
        unsafe { sys::mlx5dv_dr_domain_create(dev.context(), ty) },
        &[],
    )
}

/// `mlx5dv_dr_domain_sync` with `flags`.
pub(crate) fn domain_sync(d: &Dr<Domain>, flags: u32) -> Result<(), i32> {
    // SAFETY: a live domain.
    check(unsafe { sys::mlx5dv_dr_domain_sync(d.raw(), flags) })
}

/// `mlx5dv_dr_domain_allow_duplicate_rules`.
pub(crate) fn domain_allow_duplicate_rules(d: &Dr<Domain>, allow: bool) {
    // SAFETY: a live domain.
    unsafe { sys::mlx5dv_dr_domain_allow_duplicate_rules(d.raw(), allow) };
}

/// `mlx5dv_dump_dr_domain`, as text.
pub(crate) fn dump_domain(d: &Dr<Domain>) -> Result<String, i32> {
    let mut buf: *mut std::os::raw::c_char = std::ptr::null_mut();
    let mut len = 0usize;
    // SAFETY: a live domain; the out pointers are valid; the buffer is
    // malloc'd by open_memstream and freed below.
    check(unsafe { sys::eswitch_dump_dr_domain(d.raw(), &mut buf, &mut len) })?;
    // SAFETY: `buf` holds `len` bytes written by the dump.
    let text = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), len) };
    let s = String::from_utf8_lossy(text).into_owned();
    // SAFETY: allocated by open_memstream, freed once.
    unsafe { libc::free(buf.cast()) };
    Ok(s)
}

/// `mlx5dv_dr_table_create` at `level`.
pub(crate) fn table_create(d: &Dr<Domain>, level: u32) -> Result<Dr<Table>, i32> {
    // SAFETY: a live domain; the result is checked for NULL.
    Dr::made(
        unsafe { sys::mlx5dv_dr_table_create(d.raw(), level) },
        &[&d.users],
    )
}

/// `mlx5dv_dr_matcher_create` over `mask` (`fte_match_param` bytes).
pub(crate) fn matcher_create(
    t: &Dr<Table>,
    priority: u16,
    criteria: u8,
    mask: &[u8],
) -> Result<Dr<Matcher>, i32> {
    let mut params = MatchParams::new(mask);
    // SAFETY: a live table and a match buffer that outlives the call; the
    // result is checked for NULL.
    Dr::made(
        unsafe { sys::mlx5dv_dr_matcher_create(t.raw(), priority, criteria, params.as_ptr()) },
        &[&t.users],
    )
}

/// `mlx5dv_dr_rule_create` with `value` and `actions`, in order.
pub(crate) fn rule_create(
    m: &Dr<Matcher>,
    value: &[u8],
    actions: &[&Dr<Action>],
) -> Result<Dr<Rule>, i32> {
    let mut params = MatchParams::new(value);
    let mut ptrs: Vec<*mut sys::mlx5dv_dr_action> = actions.iter().map(|a| a.raw()).collect();
    let mut from: Vec<&Arc<()>> = actions.iter().map(|a| &a.users).collect();
    from.push(&m.users);
    // SAFETY: a live matcher, a value buffer and an array of live actions
    // that outlive the call; the result is checked for NULL.
    let p = unsafe {
        sys::mlx5dv_dr_rule_create(m.raw(), params.as_ptr(), ptrs.len(), ptrs.as_mut_ptr())
    };
    Dr::made(p, &from)
}

/// What an action is made of: its kind, and the objects and bytes it
/// names.
pub(crate) enum ActionArgs<'a> {
    Drop,
    DefaultMiss,
    DestVport(&'a Dr<Domain>, u32),
    DestTable(&'a Dr<Table>),
    /// Each destination behind its encap, if it has one.
    DestArray(
        &'a Dr<Domain>,
        Vec<(Option<&'a Dr<Action>>, &'a Dr<Action>)>,
    ),
    FlowCounter(&'a Dr<DevxObj>, u32),
    FlowMeter {
        next: &'a Dr<Table>,
        active: bool,
        reg_c_index: u8,
        params: Vec<u8>,
    },
    FlowSampler {
        next: &'a Dr<Table>,
        ratio: u32,
        actions: Vec<&'a Dr<Action>>,
        set: Option<[u8; 8]>,
    },
    /// `TPID << 16 | TCI`.
    PushVlan(&'a Dr<Domain>, u32),
    PopVlan,
    /// PRM modify-header actions, 8 bytes each.
    ModifyHeader(&'a Dr<Domain>, Vec<u8>),
    /// A reformat type (`MLX5DV_FLOW_ACTION_PACKET_REFORMAT_TYPE_*`) and
    /// its data (the encap header; none for decap).
    PacketReformat(&'a Dr<Domain>, u32, Vec<u8>),
}

/// `mlx5dv_dr_action_create_*`. The action holds a count on every
/// object it names.
pub(crate) fn action_create(args: ActionArgs<'_>) -> Result<Dr<Action>, i32> {
    // Every pointer a call below is given is a live object (a borrowed
    // handle) or memory this function owns until the call returns; each
    // result is checked for NULL.
    let (p, from): (*mut sys::mlx5dv_dr_action, Vec<&Arc<()>>) = match args {
        // SAFETY: no argument.
        ActionArgs::Drop => (unsafe { sys::mlx5dv_dr_action_create_drop() }, vec![]),
        ActionArgs::DefaultMiss => (
            // SAFETY: no argument.
            unsafe { sys::mlx5dv_dr_action_create_default_miss() },
            vec![],
        ),
        ActionArgs::DestVport(d, v) => (
            // SAFETY: a live domain (which rdma-core does not refcount
            // for this action: the count taken here keeps it).
            unsafe { sys::mlx5dv_dr_action_create_dest_vport(d.raw(), v) },
            vec![&d.users],
        ),
        ActionArgs::DestTable(t) => (
            // SAFETY: a live table.
            unsafe { sys::mlx5dv_dr_action_create_dest_table(t.raw()) },
            vec![&t.users],
        ),
        ActionArgs::DestArray(d, dests) => {
            let raws: Vec<_> = dests
                .iter()
                .map(|(r, a)| (r.map(|r| r.raw()), a.raw()))
                .collect();
            let mut arr = DestArray::new(&raws);
            let mut from: Vec<&Arc<()>> = dests
                .iter()
                .flat_map(|(r, a)| r.iter().map(|r| &r.users).chain([&a.users]))
                .collect();
            from.push(&d.users);
            // SAFETY: a live domain; `arr` holds `arr.len()` entries naming
            // live actions, alive for the call.
            let p = unsafe {
                sys::mlx5dv_dr_action_create_dest_array(d.raw(), arr.len(), arr.as_mut_ptr())
            };
            (p, from)
        }
        ActionArgs::FlowCounter(bulk, offset) => (
            // SAFETY: a live counter bulk (rdma-core does not refcount it
            // for this action: the count taken here keeps it). rdma-core
            // does not check the offset; the model does, but in
            // cross-check mode the call is made even after it refused: an
            // offset outside the bulk counts nowhere, it touches no host
            // memory.
            unsafe { sys::mlx5dv_dr_action_create_flow_counter(bulk.raw(), offset) },
            vec![&bulk.users],
        ),
        ActionArgs::FlowMeter {
            next,
            active,
            reg_c_index,
            mut params,
        } => {
            let mut attr = meter_attr(next.raw(), active, reg_c_index, &mut params);
            // SAFETY: `attr` names a live table and points into `params`,
            // both alive for the call.
            let p = unsafe { sys::mlx5dv_dr_action_create_flow_meter(&mut attr) };
            (p, vec![&next.users])
        }
        ActionArgs::FlowSampler {
            next,
            ratio,
            actions,
            set,
        } => {
            let mut raws: Vec<*mut sys::mlx5dv_dr_action> =
                actions.iter().map(|a| a.raw()).collect();
            let mut attr = sampler_attr(ratio, next.raw(), &mut raws, set);
            let mut from: Vec<&Arc<()>> = actions.iter().map(|a| &a.users).collect();
            from.push(&next.users);
            // SAFETY: `attr` names a live table and points into `raws`
            // (live actions), alive for the call.
            let p = unsafe { sys::mlx5dv_dr_action_create_flow_sampler(&mut attr) };
            (p, from)
        }
        ActionArgs::PushVlan(d, header) => (
            // SAFETY: a live domain.
            unsafe { sys::mlx5dv_dr_action_create_push_vlan(d.raw(), vlan_header(header)) },
            vec![&d.users],
        ),
        // SAFETY: no argument.
        ActionArgs::PopVlan => (unsafe { sys::mlx5dv_dr_action_create_pop_vlan() }, vec![]),
        ActionArgs::ModifyHeader(d, bytes) => {
            let mut words = memory_words(&bytes);
            // SAFETY: a live domain; `words` holds the `bytes.len()` bytes
            // of the actions, alive for the call.
            let p = unsafe {
                sys::mlx5dv_dr_action_create_modify_header(
                    d.raw(),
                    0,
                    bytes.len(),
                    words.as_mut_ptr(),
                )
            };
            (p, vec![&d.users])
        }
        ActionArgs::PacketReformat(d, ty, mut data) => {
            let (len, ptr) = if data.is_empty() {
                (0, std::ptr::null_mut())
            } else {
                (data.len(), data.as_mut_ptr().cast())
            };
            // SAFETY: a live domain; `ptr` is null with a length of 0
            // (decap) or `data`'s `len` bytes, alive for the call, which
            // copies them.
            let p =
                unsafe { sys::mlx5dv_dr_action_create_packet_reformat(d.raw(), 0, ty, len, ptr) };
            (p, vec![&d.users])
        }
    };
    Dr::made(p, &from)
}

/// `mlx5dv_devx_obj_create` with the command `input`; `out` gets the
/// command's output.
pub(crate) fn devx_obj_create(
    dev: &OpenDevice,
    input: &[u8],
    out: &mut [u8],
) -> Result<Dr<DevxObj>, i32> {
    // SAFETY: an open context; `input` and `out` are valid for their
    // lengths; the result is checked for NULL.
    Dr::made(
        unsafe {
            sys::mlx5dv_devx_obj_create(
                dev.context(),
                input.as_ptr().cast(),
                input.len(),
                out.as_mut_ptr().cast(),
                out.len(),
            )
        },
        &[],
    )
}

/// `mlx5dv_devx_obj_query` of `o` with the command `input`.
pub(crate) fn devx_obj_query(o: &Dr<DevxObj>, input: &[u8], out: &mut [u8]) -> Result<(), i32> {
    // SAFETY: a live DEVX object; buffers valid for their lengths.
    check(unsafe {
        sys::mlx5dv_devx_obj_query(
            o.raw(),
            input.as_ptr().cast(),
            input.len(),
            out.as_mut_ptr().cast(),
            out.len(),
        )
    })
}

#[cfg(test)]
#[path = "tests/ffi.rs"]
mod tests;
