//! The slow-path receive queue: the `verbs` port.
//!
//! Packets the FDB does not finish go to the eSwitch manager. The kernel
//! delivers them to the representor netdevs and keeps the completion, so
//! software never learns what the FDB did (../shared/DESIGN.md, restore
//! tags; `offload::restore`). This queue receives them where the
//! completion is visible, as DPDK's mlx5 driver does:
//!
//! - one raw-packet QP on the eSwitch manager's IB device, its receive
//!   queue fed from one registered buffer, completing into an extended CQ
//!   created with BYTE_LEN, IMM and FLOW_TAG ([`WC_FLAGS`], 0x203: a
//!   reader the CQ was not created for is a NULL pointer in rdma-core);
//! - steered by `mlx5dv_create_flow` rules in the manager's NIC RX
//!   (`mlx5dv_create_flow_matcher` with `ft_type` NIC_RX, which the kernel
//!   puts in its BYPASS namespace): per served port, reg_c_0's source bits
//!   → the QP with flow tag 0; per restore tag, reg_c_1 == tag → the QP
//!   with that flow tag, looked up first ([`offload::restore::rx`]). Every
//!   rule also carries one modify-header, COPY reg_c_0 → reg_b, so the
//!   completion names the source vport.
//!
//! Why this and not the other two ways (docs/research/restore-tags.md):
//! `ibv_create_flow` cannot match reg_c, so it cannot carry FDB state; a
//! Direct Rule NIC_RX domain is this same kernel path at level 0, and its
//! software-steered levels drop on a miss and need `sw_owner`, DEVX and the
//! QP's TIR address.
//!
//! A completion is read with `ibv_wc_read_flow_tag` (the 24-bit tag) and
//! `ibv_wc_read_imm_data`, which mlx5 answers with the CQE's dword 36, the
//! `flow_table_metadata` a NIC RX rule wrote (reg_b) for every receive
//! opcode but RESP_SEND_INV (rdma-core `providers/mlx5/cq.c`,
//! `mlx5_cq_read_wc_imm_data`); no rdma-core API names it otherwise.
//!
//! Everything here needs a device: CAP_NET_RAW for the raw QP and the
//! flows (EPERM without), a ConnectX in switchdev mode for NIC RX of the
//! manager to see FDB misses. What a machine without one checks: the
//! attribute structures, byte for byte (the unit tests), and the layouts
//! (rdma-core-sys's `_Static_assert`s against the installed headers).

use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::Arc;

use offload::dr::{DrError, Object};
use offload::restore::{rx, PLAIN_MISS, TAG_MAX};
use rdma_core_sys as sys;

pub use crate::{Arrived, QueueError};

use crate::device::{errno, open_hint, OpenDevice};
use crate::marshal::{memory_words, MatchParams};

/// What the CQ reports per completion: the byte count, the immediate
/// (reg_b on mlx5) and the flow tag.
pub const WC_FLAGS: u64 =
    (sys::IBV_WC_EX_WITH_BYTE_LEN | sys::IBV_WC_EX_WITH_IMM | sys::IBV_WC_EX_WITH_FLOW_TAG) as u64;

/// Bytes of one receive buffer: a 9,000-byte jumbo frame with its
/// Ethernet and VLAN headers, rounded up to a cache line.
pub const FRAME_LEN: usize = 9216;

pub use crate::SLOW_PATH_DEPTH as DEFAULT_DEPTH;

/// The send queue a raw-packet QP must have (the slow path sends through
/// the representor netdevs).
const SEND_DEPTH: u32 = 1;

/// `struct ibv_cq_init_attr_ex` for a CQ of `depth` entries: no channel,
/// no flags (CQE compression stays off: a compressed mini-CQE loses the
/// flow tag), the completion fields of [`WC_FLAGS`].
pub fn cq_attr(depth: u32) -> sys::ibv_cq_init_attr_ex {
    sys::ibv_cq_init_attr_ex {
        cqe: depth,
        cq_context: std::ptr::null_mut(),
        channel: std::ptr::null_mut(),
        comp_vector: 0,
        wc_flags: WC_FLAGS,
        comp_mask: 0,
        flags: 0,
        parent_domain: std::ptr::null_mut(),
    }
}

/// `struct ibv_qp_init_attr` of the raw-packet QP: one CQ for both queues,
/// `depth` receive requests of one SGE each.
pub fn qp_init_attr(cq: *mut sys::ibv_cq, depth: u32) -> sys::ibv_qp_init_attr {
    sys::ibv_qp_init_attr {
        qp_context: std::ptr::null_mut(),
        send_cq: cq,
        recv_cq: cq,
        srq: std::ptr::null_mut(),
        cap: sys::ibv_qp_cap {
            max_send_wr: SEND_DEPTH,
            max_recv_wr: depth,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        qp_type: sys::IBV_QPT_RAW_PACKET,
        sq_sig_all: 0,
    }
}

/// The `ibv_modify_qp` steps that bring a raw-packet QP to RTS: INIT with
/// its port, then RTR, then RTS; each its attributes and mask.
pub fn qp_steps(port: u8) -> [(sys::ibv_qp_attr, std::os::raw::c_int); 3] {
    let step = |state: sys::ibv_qp_state| {
        // SAFETY: ibv_qp_attr is a plain C struct of integers, enums and a
        // union of integers (no pointers, no references): all zeros is a
        // valid value of it, and the one libibverbs' own examples start
        // from.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = state;
        a
    };
    let mut init = step(sys::IBV_QPS_INIT);
    init.port_num = port;
    [
        (
            init,
            (sys::IBV_QP_STATE | sys::IBV_QP_PORT) as std::os::raw::c_int,
        ),
        (
            step(sys::IBV_QPS_RTR),
            sys::IBV_QP_STATE as std::os::raw::c_int,
        ),
        (
            step(sys::IBV_QPS_RTS),
            sys::IBV_QP_STATE as std::os::raw::c_int,
        ),
    ]
}

/// `struct mlx5dv_flow_matcher_attr` of a NIC RX matcher on misc2 at
/// `priority` over `mask` (which must outlive the call).
pub fn matcher_attr(priority: u16, mask: &mut MatchParams) -> sys::mlx5dv_flow_matcher_attr {
    sys::mlx5dv_flow_matcher_attr {
        type_: sys::IBV_FLOW_ATTR_NORMAL,
        flags: 0,
        priority,
        match_criteria_enable: rx::criteria(),
        match_mask: mask.as_ptr(),
        comp_mask: u64::from(sys::MLX5DV_FLOW_MATCHER_MASK_FT_TYPE),
        ft_type: sys::MLX5_IB_UAPI_FLOW_TABLE_TYPE_NIC_RX,
    }
}

/// One `mlx5dv_flow_action_attr`.
fn flow_action(
    type_: sys::mlx5dv_flow_action_type,
    arg: sys::mlx5dv_flow_action_attr__bindgen_ty_1,
) -> sys::mlx5dv_flow_action_attr {
    sys::mlx5dv_flow_action_attr {
        type_,
        __bindgen_anon_1: arg,
    }
}

/// The actions of a steering rule: the flow tag (a restore rule's; a
/// source rule has none, the default is 0), the COPY reg_c_0 → reg_b
/// modify-header, the QP. rdma-core allows one destination and one tag.
pub fn rule_actions(
    tag: Option<u32>,
    copy: *mut sys::ibv_flow_action,
    qp: *mut sys::ibv_qp,
) -> Vec<sys::mlx5dv_flow_action_attr> {
    use sys::mlx5dv_flow_action_attr__bindgen_ty_1 as Arg;
    let mut v = Vec::with_capacity(3);
    if let Some(t) = tag {
        v.push(flow_action(
            sys::MLX5DV_FLOW_ACTION_TAG,
            Arg { tag_value: t },
        ));
    }
    v.push(flow_action(
        sys::MLX5DV_FLOW_ACTION_IBV_FLOW_ACTION,
        Arg { action: copy },
    ));
    v.push(flow_action(sys::MLX5DV_FLOW_ACTION_DEST_IBV_QP, Arg { qp }));
    v
}

/// The error of a call that returned NULL (errno) or a non-zero code.
fn failed(op: &'static str, rc: i32) -> QueueError {
    let code = errno(rc);
    QueueError {
        op,
        err: std::io::Error::from_raw_os_error(code),
        hint: match code {
            libc::EPERM | libc::EACCES => {
                " (a raw-packet QP and NIC RX flows need CAP_NET_RAW: run eswitchd as root)"
            }
            libc::EOPNOTSUPP => {
                " (the device or kernel cannot steer NIC RX by metadata registers, or \
                 lacks NIC RX modify-header support)"
            }
            c => open_hint(c),
        },
    }
}

/// A pointer from a create call, or its error.
fn made<T>(op: &'static str, p: *mut T) -> Result<NonNull<T>, QueueError> {
    NonNull::new(p).ok_or_else(|| failed(op, 0))
}

/// The QP, its CQ and buffers, destroyed in reverse order of creation.
struct Queue {
    pd: NonNull<sys::ibv_pd>,
    cq: Option<NonNull<sys::ibv_cq_ex>>,
    qp: Option<NonNull<sys::ibv_qp>>,
    mr: Option<NonNull<sys::ibv_mr>>,
    buf: Vec<u8>,
    depth: u32,
}

impl Drop for Queue {
    fn drop(&mut self) {
        let warn = |what: &str, rc: i32| {
            if rc != 0 {
                tracing::warn!(rc, "slow-path queue: {what} failed");
            }
        };
        // SAFETY: each object was made by this queue, is destroyed once,
        // users before what they use (the steering rules that name the QP
        // went first: `SlowPathQueue` drops its steering before its queue).
        unsafe {
            if let Some(qp) = self.qp {
                warn("ibv_destroy_qp", sys::ibv_destroy_qp(qp.as_ptr()));
            }
            if let Some(cq) = self.cq {
                let cq = sys::eswitch_ibv_cq_ex_to_cq(cq.as_ptr());
                warn("ibv_destroy_cq", sys::ibv_destroy_cq(cq));
            }
            if let Some(mr) = self.mr {
                let rc = sys::ibv_dereg_mr(mr.as_ptr());
                if rc != 0 {
                    // Still registered: the device may write into it, so
                    // the buffer is leaked, never freed under it.
                    warn("ibv_dereg_mr", rc);
                    std::mem::forget(std::mem::take(&mut self.buf));
                }
            }
            warn("ibv_dealloc_pd", sys::ibv_dealloc_pd(self.pd.as_ptr()));
        }
    }
}

impl Queue {
    fn open(ctx: *mut sys::ibv_context, port: u8, depth: u32) -> Result<Queue, QueueError> {
        // SAFETY: `ctx` is an open context (the caller's OpenDevice, which
        // outlives the queue).
        let pd = made("ibv_alloc_pd", unsafe { sys::ibv_alloc_pd(ctx) })?;
        let mut q = Queue {
            pd,
            cq: None,
            qp: None,
            mr: None,
            buf: vec![0u8; FRAME_LEN * depth as usize],
            depth,
        };
        let mut attr = cq_attr(depth);
        // SAFETY: an open context and a valid attribute struct.
        let cq = made("ibv_create_cq_ex", unsafe {
            sys::eswitch_ibv_create_cq_ex(ctx, &mut attr)
        })?;
        q.cq = Some(cq);
        // SAFETY: a CQ just made; the cast is ibv_cq_ex_to_cq.
        let base = unsafe { sys::eswitch_ibv_cq_ex_to_cq(cq.as_ptr()) };
        let mut init = qp_init_attr(base, depth);
        // SAFETY: a live PD and a valid attribute struct naming a live CQ.
        let qp = made("ibv_create_qp(RAW_PACKET)", unsafe {
            sys::ibv_create_qp(pd.as_ptr(), &mut init)
        })?;
        q.qp = Some(qp);
        for (mut a, mask) in qp_steps(port) {
            // SAFETY: a live QP and a valid attribute struct.
            let rc = unsafe { sys::ibv_modify_qp(qp.as_ptr(), &mut a, mask) };
            if rc != 0 {
                return Err(failed("ibv_modify_qp", rc));
            }
        }
        let len = q.buf.len();
        // SAFETY: the buffer lives as long as the queue (it is only freed
        // after the MR is deregistered, in Drop) and is not moved (a Vec's
        // heap block stays put).
        let mr = made("ibv_reg_mr", unsafe {
            sys::ibv_reg_mr(
                pd.as_ptr(),
                q.buf.as_mut_ptr().cast(),
                len,
                sys::IBV_ACCESS_LOCAL_WRITE as i32,
            )
        })?;
        q.mr = Some(mr);
        for slot in 0..depth {
            q.post(slot)?;
        }
        Ok(q)
    }

    fn qp(&self) -> *mut sys::ibv_qp {
        self.qp.map_or(std::ptr::null_mut(), NonNull::as_ptr)
    }

    /// Gives receive buffer `slot` to the QP.
    fn post(&mut self, slot: u32) -> Result<(), QueueError> {
        let (Some(qp), Some(mr)) = (self.qp, self.mr) else {
            return Err(failed("ibv_post_recv", libc::EINVAL));
        };
        // SAFETY: the MR is live; only its lkey is read.
        let lkey = unsafe { (*mr.as_ptr()).lkey };
        let at = slot as usize * FRAME_LEN;
        // The slot's address, without a reference over memory the device
        // may be writing (`Vec::as_mut_ptr` makes none).
        let mut sge = sys::ibv_sge {
            addr: self.buf.as_mut_ptr().wrapping_add(at) as u64,
            length: FRAME_LEN as u32,
            lkey,
        };
        let mut wr = sys::ibv_recv_wr {
            wr_id: u64::from(slot),
            next: std::ptr::null_mut(),
            sg_list: &mut sge,
            num_sge: 1,
        };
        let mut bad = std::ptr::null_mut();
        // SAFETY: a live QP in RTS; the request and its SGE are valid for
        // the call (the library copies them), the SGE names registered
        // memory of this queue that no other request holds.
        let rc = unsafe { sys::eswitch_ibv_post_recv(qp.as_ptr(), &mut wr, &mut bad) };
        if rc != 0 {
            return Err(failed("ibv_post_recv", rc));
        }
        Ok(())
    }

    /// Hands up to `max` received packets to `each`, reposting their
    /// buffers; returns how many. At most `max` completions are read. A
    /// completion in error is counted in `errors` and its buffer reposted,
    /// but for a flush (the QP went to the error state): then nothing is
    /// reposted and the poll fails, so a dead QP cannot spin the loop.
    fn poll(
        &mut self,
        max: usize,
        errors: &mut u64,
        mut each: impl FnMut(Arrived<'_>),
    ) -> Result<usize, QueueError> {
        let Some(cq) = self.cq else {
            return Ok(0);
        };
        let cq = cq.as_ptr();
        // SAFETY: a live CQ polled by this thread only (`&mut self`).
        let rc = unsafe { sys::eswitch_ibv_start_poll(cq) };
        if rc == libc::ENOENT {
            return Ok(0);
        }
        if rc != 0 {
            return Err(failed("ibv_start_poll", rc));
        }
        let mut n = 0;
        let mut read = 0;
        let mut result = Ok(());
        loop {
            read += 1;
            let mut wc = sys::eswitch_wc::default();
            // SAFETY: a completion is current (start/next_poll returned 0);
            // the CQ was created with WC_FLAGS, the readers used.
            unsafe { sys::eswitch_ibv_wc_read(cq, WC_FLAGS, &mut wc) };
            let slot = wc.wr_id as u32;
            if slot < self.depth {
                if wc.status == sys::IBV_WC_SUCCESS && wc.opcode == sys::IBV_WC_RECV {
                    let at = slot as usize * FRAME_LEN;
                    let len = (wc.byte_len as usize).min(FRAME_LEN);
                    each(Arrived {
                        bytes: &self.buf[at..at + len],
                        tag: wc.flow_tag,
                        reg_b: wc.reg_b,
                    });
                    n += 1;
                } else {
                    *errors += 1;
                }
                if wc.status == sys::IBV_WC_WR_FLUSH_ERR {
                    result = Err(failed(
                        "ibv_poll_cq (the QP is in the error state)",
                        libc::EIO,
                    ));
                    break;
                }
                if let Err(e) = self.post(slot) {
                    result = Err(e);
                    break;
                }
            }
            if n >= max || read >= max.max(1) {
                break;
            }
            // SAFETY: inside a poll that start_poll opened.
            let rc = unsafe { sys::eswitch_ibv_next_poll(cq) };
            if rc == libc::ENOENT {
                break;
            }
            if rc != 0 {
                result = Err(failed("ibv_next_poll", rc));
                break;
            }
        }
        // SAFETY: closes the poll start_poll opened (it returned 0).
        unsafe { sys::eswitch_ibv_end_poll(cq) };
        result.map(|()| n)
    }
}

/// The NIC RX rules that feed the queue.
struct Steering {
    copy: Option<NonNull<sys::ibv_flow_action>>,
    tag_matcher: Option<NonNull<sys::mlx5dv_flow_matcher>>,
    source_matcher: Option<NonNull<sys::mlx5dv_flow_matcher>>,
    sources: Vec<NonNull<sys::ibv_flow>>,
    tags: HashMap<u32, NonNull<sys::ibv_flow>>,
}

impl Drop for Steering {
    fn drop(&mut self) {
        // SAFETY: every object was made by this steering and is destroyed
        // once, rules before the matchers and the action they use.
        unsafe {
            for f in self
                .sources
                .drain(..)
                .chain(self.tags.drain().map(|(_, f)| f))
            {
                sys::eswitch_ibv_destroy_flow(f.as_ptr());
            }
            for m in [self.tag_matcher, self.source_matcher]
                .into_iter()
                .flatten()
            {
                sys::mlx5dv_destroy_flow_matcher(m.as_ptr());
            }
            if let Some(a) = self.copy {
                sys::eswitch_ibv_destroy_flow_action(a.as_ptr());
            }
        }
    }
}

impl Steering {
    /// One rule of `matcher` with `value`, steering to `qp`.
    fn flow(
        &self,
        matcher: Option<NonNull<sys::mlx5dv_flow_matcher>>,
        value: &[u8],
        tag: Option<u32>,
        qp: *mut sys::ibv_qp,
    ) -> Result<NonNull<sys::ibv_flow>, QueueError> {
        let (Some(m), Some(copy)) = (matcher, self.copy) else {
            return Err(failed("mlx5dv_create_flow", libc::EINVAL));
        };
        let mut v = MatchParams::new(value);
        let mut actions = rule_actions(tag, copy.as_ptr(), qp);
        // SAFETY: a live matcher, a match buffer and an action array that
        // outlive the call, naming a live action and QP.
        made("mlx5dv_create_flow", unsafe {
            sys::mlx5dv_create_flow(m.as_ptr(), v.as_ptr(), actions.len(), actions.as_mut_ptr())
        })
    }
}

/// The slow-path receive queue and its steering; everything is destroyed
/// on drop, the steering first.
pub struct SlowPathQueue {
    steering: Steering,
    queue: Queue,
    /// Keeps the context open while the queue lives.
    _dev: Arc<OpenDevice>,
    /// Completions in error so far.
    errors: u64,
}

// SAFETY: which rdma-core rule makes moving these pointers to another
// thread sound: verbs objects may be used from any thread (libibverbs
// locks a QP's and a CQ's own queues per call), and flows and matchers
// are kernel handles. The queue is polled through `&mut self` only, so no
// two threads poll it at once.
unsafe impl Send for SlowPathQueue {}

impl SlowPathQueue {
    /// Opens the queue on `dev`'s IB port `port` (the uplink's is 1) with
    /// `depth` receive buffers, and steers to it every packet whose reg_c_0
    /// carries one of `sources` (each port's `mlx5dv_query_port` reg_c_0
    /// value and mask). On error nothing is left in the device.
    pub fn open(
        dev: Arc<OpenDevice>,
        port: u8,
        sources: &[(u32, u32)],
        depth: u32,
    ) -> Result<SlowPathQueue, QueueError> {
        let ctx = dev.context();
        let queue = Queue::open(ctx, port, depth)?;
        let mut steering = Steering {
            copy: None,
            tag_matcher: None,
            source_matcher: None,
            sources: Vec::new(),
            tags: HashMap::new(),
        };
        let mut copy = memory_words(&rx::copy_source());
        // SAFETY: an open context; the action words outlive the call.
        steering.copy = Some(made("mlx5dv_create_flow_action_modify_header", unsafe {
            sys::mlx5dv_create_flow_action_modify_header(
                ctx,
                copy.len() * 8,
                copy.as_mut_ptr(),
                sys::MLX5_IB_UAPI_FLOW_TABLE_TYPE_NIC_RX,
            )
        })?);
        let matcher = |priority: u16, mask: &[u8]| {
            let mut m = MatchParams::new(mask);
            let mut attr = matcher_attr(priority, &mut m);
            // SAFETY: an open context; the attribute and its mask outlive
            // the call.
            made("mlx5dv_create_flow_matcher", unsafe {
                sys::mlx5dv_create_flow_matcher(ctx, &mut attr)
            })
        };
        steering.tag_matcher = Some(matcher(rx::TAG_PRIORITY, &rx::tag_mask())?);
        for &(value, mask) in sources {
            if steering.source_matcher.is_none() {
                steering.source_matcher =
                    Some(matcher(rx::SOURCE_PRIORITY, &rx::source_mask(mask))?);
            }
            let f = steering.flow(
                steering.source_matcher,
                &rx::source_value(value & mask),
                None,
                queue.qp(),
            )?;
            steering.sources.push(f);
        }
        Ok(SlowPathQueue {
            steering,
            queue,
            _dev: dev,
            errors: 0,
        })
    }

    /// Steers reg_c_1 == `tag` to the queue with that flow tag. Refused
    /// before the device: 0 and tags above 24 bits (EINVAL), a tag steered
    /// already (EEXIST, as the kernel answers an FTE of the same match
    /// with another tag).
    pub fn add_tag(&mut self, tag: u32) -> Result<(), DrError> {
        if tag == PLAIN_MISS || tag > TAG_MAX {
            return Err(DrError::Invalid(
                "a restore tag is 1 to 2^24-1 (24 bits of flow tag; 0 is the plain miss)",
            ));
        }
        if self.steering.tags.contains_key(&tag) {
            return Err(DrError::DuplicateRule);
        }
        let f = self
            .steering
            .flow(
                self.steering.tag_matcher,
                &rx::tag_value(tag),
                Some(tag),
                self.queue.qp(),
            )
            .map_err(|e| crate::backend::device_error(e.op, e.err.raw_os_error().unwrap_or(0)))?;
        self.steering.tags.insert(tag, f);
        Ok(())
    }

    /// Stops steering `tag`.
    pub fn remove_tag(&mut self, tag: u32) -> Result<(), DrError> {
        let f = self
            .steering
            .tags
            .remove(&tag)
            .ok_or(DrError::Stale(Object::RestoreRule))?;
        // SAFETY: a live flow of this steering, destroyed once.
        let rc = unsafe { sys::eswitch_ibv_destroy_flow(f.as_ptr()) };
        if rc != 0 {
            self.steering.tags.insert(tag, f);
            return Err(crate::backend::device_error("ibv_destroy_flow", errno(rc)));
        }
        Ok(())
    }

    /// The tags steered now, ascending.
    pub fn tags(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.steering.tags.keys().copied().collect();
        v.sort_unstable();
        v
    }

    /// Hands up to `max` received packets to `each`; returns how many.
    pub fn poll(&mut self, max: usize, each: impl FnMut(Arrived<'_>)) -> Result<usize, QueueError> {
        self.queue.poll(max, &mut self.errors, each)
    }

    /// Completions in error so far (their buffers went back to the QP).
    pub fn errors(&self) -> u64 {
        self.errors
    }
}

#[cfg(test)]
#[path = "tests/verbs.rs"]
mod tests;
