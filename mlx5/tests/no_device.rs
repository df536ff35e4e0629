//! On a machine with no RDMA device (no `/sys/class/infiniband`), opening
//! says so, with the reason the library gave, and nothing panics. On a
//! machine with devices this prints SKIP: `ESWITCH_MLX5_DEVICE` tests run
//! there instead.

#[test]
fn opening_with_no_rdma_device_says_so() {
    const T: &str = "opening_with_no_rdma_device_says_so";
    if std::path::Path::new("/sys/class/infiniband").exists() {
        prereq::skip(T, "this machine has RDMA devices");
        return;
    }
    let e = match mlx5::open("mlx5_0") {
        Ok(_) => panic!("opened a device on a machine without one"),
        Err(e) => e,
    };
    let msg = e.to_string();
    if !rdma_core_sys::AVAILABLE {
        assert!(msg.contains("built without rdma-core"), "{msg}");
        return;
    }
    assert!(matches!(e, mlx5::DeviceError::NoDevices(_)), "{e:?}");
    assert!(msg.starts_with("no RDMA device on this machine"), "{msg}");
    assert!(mlx5::device::device_names().is_err());
}
