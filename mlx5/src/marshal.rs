//! What is laid out in memory just below each FFI call: the match
//! parameter buffer, action pointer arrays, the meter and sampler
//! attributes, dest_array entries, the push_vlan header and the
//! modify-header words. Built from Rust values, owned here, handed to the
//! library as pointers; unit-tested without calling the library.

use std::ptr;

use rdma_core_sys as sys;

/// `struct mlx5dv_flow_match_parameters` with its flexible array: the
/// `match_sz` word, then the bytes, in 8-byte words (the library reads
/// `match_buf` as `uint64_t[]`).
pub struct MatchParams {
    words: Vec<u64>,
}

impl MatchParams {
    /// The buffer for `bytes` (`match_sz` = `bytes.len()`).
    pub fn new(bytes: &[u8]) -> MatchParams {
        let mut words = Vec::with_capacity(1 + bytes.len().div_ceil(8));
        words.push(bytes.len() as u64);
        words.extend(memory_words(bytes));
        MatchParams { words }
    }

    /// `match_sz`.
    pub fn match_sz(&self) -> usize {
        self.words[0] as usize
    }

    /// The bytes as the library will read them.
    pub fn bytes(&self) -> Vec<u8> {
        let mut v: Vec<u8> = self.words[1..]
            .iter()
            .flat_map(|w| w.to_ne_bytes())
            .collect();
        v.truncate(self.match_sz());
        v
    }

    /// The pointer the library takes (valid while `self` lives).
    pub fn as_ptr(&mut self) -> *mut sys::mlx5dv_flow_match_parameters {
        self.words.as_mut_ptr().cast()
    }
}

/// A push_vlan header as `mlx5dv_dr_action_create_push_vlan` takes it: a
/// `__be32` of `TPID << 16 | TCI`.
pub fn vlan_header(header: u32) -> u32 {
    header.to_be()
}

/// Bytes as the u64 words that hold them in memory order (the last one
/// zero-padded), whatever the host's endianness: the `match_buf` of a
/// match buffer, and the `__be64` array of modify-header PRM words (8
/// bytes each, as `offload::dr::modify` encodes them).
pub fn memory_words(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            u64::from_ne_bytes(w)
        })
        .collect()
}

/// `struct mlx5dv_dr_flow_meter_attr` over the parameter bytes it points
/// to (both must outlive the call).
pub fn meter_attr(
    next_table: *mut sys::mlx5dv_dr_table,
    active: bool,
    reg_c_index: u8,
    params: &mut [u8],
) -> sys::mlx5dv_dr_flow_meter_attr {
    sys::mlx5dv_dr_flow_meter_attr {
        next_table,
        active: u8::from(active),
        reg_c_index,
        flow_meter_parameter_sz: params.len(),
        flow_meter_parameter: params.as_mut_ptr().cast(),
    }
}

/// `struct mlx5dv_dr_flow_sampler_attr`: the sampled copy's actions (the
/// array must outlive the call) and the optional SET applied to the
/// original before its default table (`action`, a `__be64`: the PRM
/// bytes in memory order; 0 for none).
pub fn sampler_attr(
    sample_ratio: u32,
    default_next_table: *mut sys::mlx5dv_dr_table,
    sample_actions: &mut [*mut sys::mlx5dv_dr_action],
    set: Option<[u8; 8]>,
) -> sys::mlx5dv_dr_flow_sampler_attr {
    sys::mlx5dv_dr_flow_sampler_attr {
        sample_ratio,
        default_next_table,
        num_sample_actions: sample_actions.len() as u32,
        sample_actions: sample_actions.as_mut_ptr(),
        action: set.map_or(0, u64::from_ne_bytes),
    }
}

/// The entries of a dest_array: one `mlx5dv_dr_action_dest_attr` per
/// destination (`MLX5DV_DR_ACTION_DEST`, or `MLX5DV_DR_ACTION_DEST_REFORMAT`
/// pointing at its `mlx5dv_dr_action_dest_reformat` pair), and the array
/// of pointers to them the library takes. All live here, at fixed
/// addresses, until the call returns.
pub struct DestArray {
    /// The (reformat, dest) pairs the REFORMAT entries point at.
    _pairs: Box<[sys::mlx5dv_dr_action_dest_reformat]>,
    attrs: Box<[sys::mlx5dv_dr_action_dest_attr]>,
    ptrs: Vec<*mut sys::mlx5dv_dr_action_dest_attr>,
}

impl DestArray {
    /// `dests`: each destination, behind its reformat (encap) if it has
    /// one.
    pub fn new(
        dests: &[(
            Option<*mut sys::mlx5dv_dr_action>,
            *mut sys::mlx5dv_dr_action,
        )],
    ) -> DestArray {
        let mut pairs: Box<[sys::mlx5dv_dr_action_dest_reformat]> = dests
            .iter()
            .map(|&(r, d)| sys::mlx5dv_dr_action_dest_reformat {
                reformat: r.unwrap_or(ptr::null_mut()),
                dest: d,
            })
            .collect();
        let mut attrs: Box<[sys::mlx5dv_dr_action_dest_attr]> = dests
            .iter()
            .zip(pairs.iter_mut())
            .map(|(&(r, d), pair)| match r {
                None => sys::mlx5dv_dr_action_dest_attr {
                    type_: sys::MLX5DV_DR_ACTION_DEST,
                    __bindgen_anon_1: sys::mlx5dv_dr_action_dest_attr__bindgen_ty_1 { dest: d },
                },
                Some(_) => sys::mlx5dv_dr_action_dest_attr {
                    type_: sys::MLX5DV_DR_ACTION_DEST_REFORMAT,
                    __bindgen_anon_1: sys::mlx5dv_dr_action_dest_attr__bindgen_ty_1 {
                        dest_reformat: ptr::from_mut(pair),
                    },
                },
            })
            .collect();
        let ptrs = attrs.iter_mut().map(ptr::from_mut).collect();
        DestArray {
            _pairs: pairs,
            attrs,
            ptrs,
        }
    }

    pub fn len(&self) -> usize {
        self.ptrs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ptrs.is_empty()
    }

    /// Entry `i`: its type, its reformat (null for a plain one) and its
    /// destination.
    pub fn entry(&self, i: usize) -> (u32, *mut sys::mlx5dv_dr_action, *mut sys::mlx5dv_dr_action) {
        let a = &self.attrs[i];
        if a.type_ == sys::MLX5DV_DR_ACTION_DEST {
            // SAFETY: a plain entry was written with the `dest` member.
            (a.type_, ptr::null_mut(), unsafe { a.__bindgen_anon_1.dest })
        } else {
            // SAFETY: a REFORMAT entry was written with `dest_reformat`,
            // a pointer into `_pairs`, which lives as long as `self`.
            let pair = unsafe { &*a.__bindgen_anon_1.dest_reformat };
            (a.type_, pair.reformat, pair.dest)
        }
    }

    /// The array the library takes (valid while `self` lives).
    pub fn as_mut_ptr(&mut self) -> *mut *mut sys::mlx5dv_dr_action_dest_attr {
        self.ptrs.as_mut_ptr()
    }
}

#[cfg(test)]
#[path = "tests/marshal.rs"]
mod tests;
