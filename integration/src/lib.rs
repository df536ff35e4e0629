//! Scenarios with real parts (network namespaces, veth pairs, OpenFlow
//! clients, captures). Helpers shared by the scenario tests live here.
//!
//! Privileged scenarios ask [`prereq`] first (`prereq::netns(test, tools)`)
//! and return when it says the prerequisite is missing: it prints
//! `SKIP <test>: <reason>` (a failure when `ESWITCH_NO_SKIP` is set), so they
//! never pass silently.

pub mod eswitchd;
pub mod netns;
pub mod ovs;

/// A fresh directory under the system temp dir, named from `prefix`, the
/// process id and a counter; removed (with its contents) on drop.
pub struct TempDir(std::path::PathBuf);

impl TempDir {
    pub fn new(prefix: &str) -> std::io::Result<TempDir> {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("{prefix}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        Ok(TempDir(dir))
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
