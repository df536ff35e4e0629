//! The crate links against the installed libibverbs and libmlx5, its
//! layout checks compiled, and the device list behaves as ../shared/MLX5.md
//! says on a machine with no RDMA device (NULL with ENOSYS, or an empty
//! list): no crash, zero devices. A build without rdma-core prints SKIP
//! (and fails under `ESWITCH_NO_SKIP=1`, as in CI).

#[test]
fn the_layout_checks_compiled_against_the_installed_headers() {
    if !rdma_core_sys::AVAILABLE {
        prereq::skip(
            "the_layout_checks_compiled_against_the_installed_headers",
            "built without rdma-core (apt-get install libibverbs-dev pkg-config)",
        );
        return;
    }
    #[cfg(not(rdma_core_missing))]
    {
        // SAFETY: a C function with no arguments returning a constant.
        let n = unsafe { rdma_core_sys::eswitch_layout_checks() };
        assert!(n >= 742, "{n} layout checks");
    }
}

#[test]
fn the_device_list_links_and_counts() {
    if !rdma_core_sys::AVAILABLE {
        prereq::skip(
            "the_device_list_links_and_counts",
            "built without rdma-core (apt-get install libibverbs-dev pkg-config)",
        );
        return;
    }
    #[cfg(not(rdma_core_missing))]
    {
        let mut n: std::os::raw::c_int = -1;
        // SAFETY: `n` is a valid out pointer; the list (or NULL) is freed
        // below and not used after.
        let list = unsafe { rdma_core_sys::ibv_get_device_list(&mut n) };
        if list.is_null() {
            let err = std::io::Error::last_os_error();
            // No RDMA in the kernel: ENOSYS, "no devices".
            assert_eq!(err.raw_os_error(), Some(ENOSYS), "{err}");
            return;
        }
        assert!(n >= 0);
        // SAFETY: `list` came from ibv_get_device_list and is freed once.
        unsafe { rdma_core_sys::ibv_free_device_list(list) };
    }
}

#[cfg(not(rdma_core_missing))]
const ENOSYS: i32 = 38;
