use super::*;

fn ne16(v: u16) -> [u8; 2] {
    v.to_ne_bytes()
}

fn ne32(v: u32) -> [u8; 4] {
    v.to_ne_bytes()
}

/// The expected bytes, built field by field from linux/netlink.h and
/// linux/rtnetlink.h.
fn expected_msg(seq: u32, ifindex: i32, fd: i32, flags: u32, expected_fd: Option<i32>) -> Vec<u8> {
    let nest_len: u16 = 4 + 8 + 8 + if expected_fd.is_some() { 8 } else { 0 };
    let total = 16 + 16 + u32::from(nest_len);
    let mut m = Vec::new();
    m.extend(ne32(total));
    m.extend(ne16(19)); // RTM_SETLINK
    m.extend(ne16(0x1 | 0x4)); // NLM_F_REQUEST | NLM_F_ACK
    m.extend(ne32(seq));
    m.extend(ne32(0)); // pid: the kernel
    m.extend([0, 0]); // ifi_family AF_UNSPEC, pad
    m.extend(ne16(0)); // ifi_type
    m.extend(ifindex.to_ne_bytes());
    m.extend(ne32(0)); // ifi_flags
    m.extend(ne32(0)); // ifi_change
    m.extend(ne16(nest_len));
    m.extend(ne16(43 | 0x8000)); // IFLA_XDP | NLA_F_NESTED
    m.extend(ne16(8));
    m.extend(ne16(1)); // IFLA_XDP_FD
    m.extend(fd.to_ne_bytes());
    m.extend(ne16(8));
    m.extend(ne16(3)); // IFLA_XDP_FLAGS
    m.extend(ne32(flags));
    if let Some(e) = expected_fd {
        m.extend(ne16(8));
        m.extend(ne16(8)); // IFLA_XDP_EXPECTED_FD
        m.extend(e.to_ne_bytes());
    }
    m
}

#[test]
fn encode_attach() {
    let req = XdpRequest {
        ifindex: 7,
        fd: 5,
        flags: XDP_FLAGS_SKB_MODE | XDP_FLAGS_UPDATE_IF_NOEXIST,
        expected_fd: None,
    };
    let m = encode_setlink_xdp(&req, 42);
    assert_eq!(m.len(), 52);
    assert_eq!(m, expected_msg(42, 7, 5, 3, None));
}

#[test]
fn encode_guarded_detach() {
    let req = XdpRequest {
        ifindex: 300,
        fd: -1,
        flags: XDP_FLAGS_DRV_MODE | XDP_FLAGS_REPLACE,
        expected_fd: Some(9),
    };
    let m = encode_setlink_xdp(&req, 1);
    assert_eq!(m.len(), 60);
    assert_eq!(m, expected_msg(1, 300, -1, 4 | 16, Some(9)));
    // fd -1 is all ones
    assert_eq!(&m[40..44], &[0xff; 4]);
}

/// An NLMSG_ERROR message for request `seq` with `error` (0 = ack).
fn ack(seq: u32, error: i32, capped: bool, ext_msg: Option<&str>) -> Vec<u8> {
    let orig = encode_setlink_xdp(
        &XdpRequest {
            ifindex: 7,
            fd: 5,
            flags: 2,
            expected_fd: None,
        },
        seq,
    );
    let mut payload = Vec::new();
    payload.extend(error.to_ne_bytes());
    if capped {
        payload.extend(&orig[..16]);
    } else {
        payload.extend(&orig);
    }
    if let Some(s) = ext_msg {
        let len = 4 + s.len() + 1;
        payload.extend(ne16(len as u16));
        payload.extend(ne16(1)); // NLMSGERR_ATTR_MSG
        payload.extend(s.as_bytes());
        payload.push(0);
        while payload.len() % 4 != 0 {
            payload.push(0);
        }
    }
    let mut flags = 0u16;
    if capped {
        flags |= 0x100;
    }
    if ext_msg.is_some() {
        flags |= 0x200;
    }
    let mut m = Vec::new();
    m.extend(ne32(16 + payload.len() as u32));
    m.extend(ne16(2)); // NLMSG_ERROR
    m.extend(ne16(flags));
    m.extend(ne32(seq));
    m.extend(ne32(1234));
    m.extend(payload);
    m
}

#[test]
fn parse_positive_ack() {
    let m = ack(42, 0, true, None);
    assert!(matches!(parse_ack(&m, 42), Some(Ok(()))));
}

#[test]
fn parse_error_with_ext_ack_capped() {
    let m = ack(42, -libc::EBUSY, true, Some("XDP program already attached"));
    let e = match parse_ack(&m, 42) {
        Some(Err(e)) => e,
        other => panic!("expected an error, got {other:?}"),
    };
    assert_eq!(e.errno(), Some(libc::EBUSY));
    assert_eq!(e.message.as_deref(), Some("XDP program already attached"));
    assert!(e
        .to_string()
        .contains("(kernel: XDP program already attached)"));
}

#[test]
fn parse_error_with_ext_ack_uncapped() {
    let m = ack(9, -libc::EINVAL, false, Some("bad flags"));
    let e = match parse_ack(&m, 9) {
        Some(Err(e)) => e,
        other => panic!("expected an error, got {other:?}"),
    };
    assert_eq!(e.errno(), Some(libc::EINVAL));
    assert_eq!(e.message.as_deref(), Some("bad flags"));
}

#[test]
fn parse_error_without_ext_ack() {
    let m = ack(3, -libc::ENODEV, false, None);
    let e = match parse_ack(&m, 3) {
        Some(Err(e)) => e,
        other => panic!("expected an error, got {other:?}"),
    };
    assert_eq!(e.errno(), Some(libc::ENODEV));
    assert!(e.message.is_none());
}

#[test]
fn parse_skips_other_sequences_and_messages() {
    assert!(parse_ack(&ack(41, 0, true, None), 42).is_none());
    // Another message first, then our ack, in one datagram.
    let mut m = ack(41, -libc::EPERM, true, None);
    m.extend(ack(42, 0, true, None));
    assert!(matches!(parse_ack(&m, 42), Some(Ok(()))));
}

#[test]
fn parse_rejects_garbage() {
    assert!(parse_ack(&[], 1).is_none());
    assert!(parse_ack(&[1, 2, 3], 1).is_none());
    // A header claiming more bytes than there are.
    let mut m = ack(1, 0, true, None);
    m[0] = 200;
    assert!(parse_ack(&m, 1).is_none());
    // A header claiming fewer than a header.
    let mut m = ack(1, 0, true, None);
    m[..4].copy_from_slice(&ne32(4));
    assert!(parse_ack(&m, 1).is_none());
}

/// The whole exchange with the real kernel: detaching from an interface
/// that does not exist fails with ENODEV (or EPERM without CAP_NET_ADMIN),
/// and the errno comes back through the ack.
#[test]
fn kernel_rejects_unknown_ifindex() {
    let req = XdpRequest {
        ifindex: 0x7fff_fff0,
        fd: -1,
        flags: XDP_FLAGS_SKB_MODE,
        expected_fd: None,
    };
    let e = match set_xdp(&req) {
        Err(e) => e,
        Ok(()) => panic!("RTM_SETLINK on a missing interface succeeded"),
    };
    assert!(
        matches!(e.errno(), Some(libc::ENODEV) | Some(libc::EPERM)),
        "unexpected error {e}"
    );
}
