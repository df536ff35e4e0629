//! The slow-path queue's attribute structures, byte for byte where the
//! library reads them (offsets as rdma-core 44's headers lay them out,
//! which rdma-core-sys's layout checks hold the bindings to).

use std::mem::offset_of;

use super::*;

#[test]
fn the_cq_reports_byte_count_reg_b_and_flow_tag() {
    assert_eq!(WC_FLAGS, 0x203, "BYTE_LEN | IMM | FLOW_TAG");
    let a = cq_attr(512);
    assert_eq!(
        (a.cqe, a.wc_flags, a.comp_mask, a.flags),
        (512, 0x203, 0, 0)
    );
    assert!(a.channel.is_null() && a.parent_domain.is_null());
    assert_eq!(offset_of!(sys::ibv_cq_init_attr_ex, cqe), 0);
    assert_eq!(offset_of!(sys::ibv_cq_init_attr_ex, wc_flags), 32);
    assert_eq!(offset_of!(sys::ibv_cq_init_attr_ex, comp_mask), 40);
    assert_eq!(std::mem::size_of::<sys::ibv_cq_init_attr_ex>(), 56);
}

#[test]
fn the_qp_is_raw_packet_on_one_cq_with_depth_receives() {
    let cq = 0x1000 as *mut sys::ibv_cq;
    let a = qp_init_attr(cq, 256);
    assert_eq!(a.qp_type, 8, "IBV_QPT_RAW_PACKET");
    assert_eq!((a.send_cq, a.recv_cq), (cq, cq));
    assert_eq!(
        (
            a.cap.max_recv_wr,
            a.cap.max_recv_sge,
            a.cap.max_send_wr,
            a.cap.max_send_sge
        ),
        (256, 1, 1, 1)
    );
    assert!(a.srq.is_null());
    assert_eq!(offset_of!(sys::ibv_qp_init_attr, send_cq), 8);
    assert_eq!(offset_of!(sys::ibv_qp_init_attr, recv_cq), 16);
    assert_eq!(offset_of!(sys::ibv_qp_init_attr, cap), 32);
    assert_eq!(offset_of!(sys::ibv_qp_cap, max_recv_wr), 4);
    assert_eq!(offset_of!(sys::ibv_qp_init_attr, qp_type), 52);
    assert_eq!(std::mem::size_of::<sys::ibv_qp_init_attr>(), 64);
}

#[test]
fn the_qp_goes_init_on_its_port_then_rtr_then_rts() {
    let steps = qp_steps(1);
    let got: Vec<(u32, u8, i32)> = steps
        .iter()
        .map(|(a, m)| (a.qp_state, a.port_num, *m))
        .collect();
    // IBV_QP_STATE = 1, IBV_QP_PORT = 32; INIT 1, RTR 2, RTS 3.
    assert_eq!(got, [(1, 1, 33), (2, 0, 1), (3, 0, 1)]);
    assert_eq!(offset_of!(sys::ibv_qp_attr, qp_state), 0);
    assert_eq!(offset_of!(sys::ibv_qp_attr, port_num), 129);
    assert_eq!(std::mem::size_of::<sys::ibv_qp_attr>(), 144);
}

#[test]
fn matchers_are_nic_rx_on_misc2_over_the_registers() {
    let mut mask = MatchParams::new(&rx::tag_mask());
    let a = matcher_attr(rx::TAG_PRIORITY, &mut mask);
    assert_eq!(a.type_, 0, "IBV_FLOW_ATTR_NORMAL");
    assert_eq!(a.priority, 0);
    assert_eq!(a.match_criteria_enable, 1 << 3, "misc2");
    assert_eq!(a.comp_mask, 1, "MLX5DV_FLOW_MATCHER_MASK_FT_TYPE");
    assert_eq!(a.ft_type, 0, "MLX5DV_FLOW_TABLE_TYPE_NIC_RX");
    assert_eq!(a.match_mask, mask.as_ptr());
    let bytes = mask.bytes();
    // Through misc2 (4 blocks of 64): the kernel zero-fills a shorter
    // mask (UVERBS_ATTR_SIZE(1, sizeof(struct mlx5_ib_match_params))).
    assert_eq!(mask.match_sz(), 256, "fte_match_param through misc2");
    assert_eq!(&bytes[232..236], &[0xff; 4], "metadata_reg_c_1");
    assert_eq!(bytes.iter().filter(|&&b| b != 0).count(), 4);
    assert_eq!(offset_of!(sys::mlx5dv_flow_matcher_attr, priority), 8);
    assert_eq!(
        offset_of!(sys::mlx5dv_flow_matcher_attr, match_criteria_enable),
        10
    );
    assert_eq!(offset_of!(sys::mlx5dv_flow_matcher_attr, match_mask), 16);
    assert_eq!(offset_of!(sys::mlx5dv_flow_matcher_attr, comp_mask), 24);
    assert_eq!(offset_of!(sys::mlx5dv_flow_matcher_attr, ft_type), 32);
    let src = matcher_attr(
        rx::SOURCE_PRIORITY,
        &mut MatchParams::new(&rx::source_mask(0xffff_0000)),
    );
    assert_eq!(src.priority, 1, "after the tags");
}

#[test]
fn a_restore_rule_tags_copies_and_steers_to_the_qp() {
    let copy = 0x2000 as *mut sys::ibv_flow_action;
    let qp = 0x3000 as *mut sys::ibv_qp;
    let a = rule_actions(Some(0x12_3456), copy, qp);
    let types: Vec<u32> = a.iter().map(|x| x.type_).collect();
    // TAG 4, IBV_FLOW_ACTION 3, DEST_IBV_QP 0.
    assert_eq!(types, [4, 3, 0]);
    // SAFETY: each entry was written with the member its type names.
    unsafe {
        assert_eq!(a[0].__bindgen_anon_1.tag_value, 0x12_3456);
        assert_eq!(a[1].__bindgen_anon_1.action, copy);
        assert_eq!(a[2].__bindgen_anon_1.qp, qp);
    }
    assert_eq!(std::mem::size_of::<sys::mlx5dv_flow_action_attr>(), 16);
    assert_eq!(
        offset_of!(sys::mlx5dv_flow_action_attr, __bindgen_anon_1),
        8
    );
    let plain: Vec<u32> = rule_actions(None, copy, qp)
        .iter()
        .map(|x| x.type_)
        .collect();
    assert_eq!(plain, [3, 0], "a source rule leaves the default tag, 0");
}

#[test]
fn the_copy_action_is_reg_c_0_into_reg_b() {
    let words = memory_words(&rx::copy_source());
    assert_eq!(words.len(), 1);
    assert_eq!(words[0].to_ne_bytes(), [0x30, 0x51, 0, 0, 0, 0x50, 0, 0]);
}

#[test]
fn refusals_name_the_call_and_what_to_check() {
    let e = failed("ibv_create_qp(RAW_PACKET)", libc::EPERM);
    let s = e.to_string();
    assert!(
        s.contains("ibv_create_qp(RAW_PACKET)") && s.contains("CAP_NET_RAW"),
        "{s}"
    );
    let e = failed("mlx5dv_create_flow_action_modify_header", libc::EOPNOTSUPP);
    assert!(e.to_string().contains("NIC RX modify-header"), "{e}");
}
