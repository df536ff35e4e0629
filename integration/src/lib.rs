//! Scenarios with real parts (network namespaces, veth pairs, OpenFlow
//! clients, captures). Helpers shared by the scenario tests live here.
//!
//! Privileged scenarios call [`require_root`] and return early, printing the
//! reason, when the privilege is missing: they never pass silently.

pub mod netns;
pub mod ovs;

/// True when the process can create network namespaces (runs as root).
/// Prints why a test is skipped otherwise.
pub fn require_root(test: &str) -> bool {
    let uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_owned))
        })
        .unwrap_or_default();
    if uid == "0" {
        true
    } else {
        println!("SKIP {test}: needs root to create network namespaces (uid {uid})");
        false
    }
}

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
