//! Sleeping until a port has packets: poll(2) on the ports' descriptors.

use std::time::Duration;

/// Sleeps until one of `fds` is readable (or has an error condition) or
/// `timeout` passes; returns how many are ready. With no descriptors it
/// just sleeps for `timeout`. An interrupted or failed poll counts as
/// "nothing ready": the caller polls its ports again anyway.
pub fn wait_readable(fds: &[i32], timeout: Duration) -> usize {
    if fds.is_empty() {
        std::thread::sleep(timeout);
        return 0;
    }
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: `pfds` is a valid, exclusively borrowed array of
    // `pfds.len()` pollfd structs for the duration of the call.
    let n = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
    if n < 0 {
        0
    } else {
        n as usize
    }
}
