//! The memory the library will read, checked byte by byte without calling
//! it.

use super::*;

#[test]
fn match_params_carry_match_sz_then_the_bytes_in_memory_order() {
    let bytes: Vec<u8> = (0..68u8).collect();
    let mut m = MatchParams::new(&bytes);
    assert_eq!(m.match_sz(), 68);
    assert_eq!(m.bytes(), bytes);
    let p = m.as_ptr();
    assert_eq!(p as usize % 8, 0, "u64-aligned, as match_buf is");
    // SAFETY: `p` points at 1 + 9 initialised u64 words owned by `m`,
    // alive for this block; read as the C struct and its trailing bytes.
    unsafe {
        assert_eq!((*p).match_sz, 68);
        let raw = std::slice::from_raw_parts(p.cast::<u8>().add(8), 68);
        assert_eq!(raw, &bytes[..]);
        let pad = std::slice::from_raw_parts(p.cast::<u8>().add(8 + 68), 4);
        assert_eq!(pad, &[0, 0, 0, 0], "the last word is zero-padded");
    }
    let mut empty = MatchParams::new(&[]);
    assert_eq!(empty.match_sz(), 0);
    assert!(!empty.as_ptr().is_null());
}

#[test]
fn push_vlan_headers_and_memory_words_are_big_endian_in_memory() {
    let h = vlan_header(0x8100_0005);
    assert_eq!(h.to_ne_bytes(), [0x81, 0x00, 0x00, 0x05]);
    let prm = [
        0x10, 0x01, 0x00, 0x30, 0xde, 0xad, 0xbe, 0xef, // set reg_c_0 (first word)
        0x10, 0x02, 0x00, 0x20, 0x00, 0x00, 0x00, 0x07,
    ];
    let w = memory_words(&prm);
    assert_eq!(w.len(), 2);
    let mem: Vec<u8> = w.iter().flat_map(|x| x.to_ne_bytes()).collect();
    assert_eq!(mem, prm);
}

#[test]
fn a_sampler_attr_points_at_its_actions_and_carries_the_set_as_be64() {
    let mut acts = [8usize as *mut sys::mlx5dv_dr_action, 16 as *mut _];
    let table = 64usize as *mut sys::mlx5dv_dr_table;
    let set = [0x10, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a];
    let a = sampler_attr(1000, table, &mut acts, Some(set));
    assert_eq!(a.sample_ratio, 1000);
    assert_eq!(a.default_next_table, table);
    assert_eq!(a.num_sample_actions, 2);
    assert_eq!(a.sample_actions, acts.as_mut_ptr());
    assert_eq!(a.action.to_ne_bytes(), set, "the PRM bytes as they lie");
    assert_eq!(sampler_attr(2, table, &mut [], None).action, 0);
}

#[test]
fn a_meter_attr_points_at_its_parameters() {
    let mut params = [0u8; 32];
    params[0] = 0x80;
    let table = 128usize as *mut sys::mlx5dv_dr_table;
    let a = meter_attr(table, true, 2, &mut params);
    assert_eq!((a.active, a.reg_c_index), (1, 2));
    assert_eq!(a.flow_meter_parameter_sz, 32);
    assert_eq!(a.flow_meter_parameter, params.as_mut_ptr().cast());
    assert_eq!(a.next_table, table);
}

#[test]
fn dest_array_entries_are_their_destinations_in_order() {
    let a = |n: usize| n as *mut sys::mlx5dv_dr_action;
    let dests = [(None, a(24)), (Some(a(72)), a(40)), (None, a(56))];
    let mut d = DestArray::new(&dests);
    assert_eq!(d.len(), 3);
    assert_eq!(
        d.entry(0),
        (sys::MLX5DV_DR_ACTION_DEST, ptr::null_mut(), a(24))
    );
    assert_eq!(
        d.entry(1),
        (sys::MLX5DV_DR_ACTION_DEST_REFORMAT, a(72), a(40))
    );
    assert_eq!(
        d.entry(2),
        (sys::MLX5DV_DR_ACTION_DEST, ptr::null_mut(), a(56))
    );
    let arr = d.as_mut_ptr();
    // SAFETY: `arr` has three valid pointers to entries owned by `d`; the
    // REFORMAT entry's pair is owned by `d` too.
    unsafe {
        for (i, (r, want)) in dests.iter().enumerate() {
            let e = *arr.add(i);
            match r {
                None => {
                    assert_eq!((*e).type_, sys::MLX5DV_DR_ACTION_DEST);
                    assert_eq!((*e).__bindgen_anon_1.dest, *want);
                }
                Some(r) => {
                    assert_eq!((*e).type_, sys::MLX5DV_DR_ACTION_DEST_REFORMAT);
                    let pair = &*(*e).__bindgen_anon_1.dest_reformat;
                    assert_eq!((pair.reformat, pair.dest), (*r, *want));
                }
            }
        }
    }
}
