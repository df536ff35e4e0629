//! Network namespaces and veth pairs for scenario tests.
//!
//! A [`Lab`] creates namespaces with unique names (prefix + process id +
//! counter), connects them with veth pairs, and removes everything it made
//! when dropped, even when the test panics. Background processes started
//! through [`Lab::spawn_in`] are killed by PID on drop. Addresses must come
//! from 198.18.0.0/15, the benchmarking range.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Runs a command, returning its stdout, or an error with its stderr.
pub fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Namespaces, links and processes of one test; all removed on drop.
pub struct Lab {
    tag: String,
    namespaces: Vec<String>,
    children: Vec<Child>,
}

impl Lab {
    /// A lab whose names start with `prefix` (keep it short: interface names
    /// are limited to 15 bytes).
    pub fn new(prefix: &str) -> Self {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        Lab {
            tag: format!("{prefix}{}x{n}", std::process::id() % 100_000),
            namespaces: Vec::new(),
            children: Vec::new(),
        }
    }

    /// Creates namespace `<tag>-<name>` and returns its full name.
    pub fn netns(&mut self, name: &str) -> Result<String, String> {
        let full = format!("{}-{name}", self.tag);
        run("ip", &["netns", "add", &full])?;
        self.namespaces.push(full.clone());
        run("ip", &["-n", &full, "link", "set", "lo", "up"])?;
        Ok(full)
    }

    /// Connects two namespaces with a veth pair, gives each end an address
    /// (CIDR form) and brings both up. Returns the two interface names.
    pub fn veth(
        &mut self,
        a: &str,
        a_addr: &str,
        b: &str,
        b_addr: &str,
    ) -> Result<(String, String), String> {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let ia = format!("va{}x{n}", std::process::id() % 100_000);
        let ib = format!("vb{}x{n}", std::process::id() % 100_000);
        run(
            "ip",
            &[
                "link", "add", &ia, "netns", a, "type", "veth", "peer", "name", &ib, "netns", b,
            ],
        )?;
        for (ns, ifc, addr) in [(a, &ia, a_addr), (b, &ib, b_addr)] {
            run("ip", &["-n", ns, "addr", "add", addr, "dev", ifc])?;
            run("ip", &["-n", ns, "link", "set", ifc, "up"])?;
        }
        Ok((ia, ib))
    }

    /// Runs a command inside a namespace and waits for it.
    pub fn exec(&self, ns: &str, args: &[&str]) -> Result<String, String> {
        let mut all = vec!["netns", "exec", ns];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// Starts a background command inside a namespace; it is killed on drop.
    /// Returns its index for [`Lab::stop`].
    pub fn spawn_in(&mut self, ns: &str, args: &[&str]) -> Result<usize, String> {
        let child = Command::new("ip")
            .args(["netns", "exec", ns])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("spawn {args:?}: {e}"))?;
        self.children.push(child);
        Ok(self.children.len() - 1)
    }

    /// Stops a background process (SIGINT first, so capture tools flush),
    /// waiting at most `limit` before killing it.
    pub fn stop(&mut self, idx: usize, limit: Duration) {
        let Some(child) = self.children.get_mut(idx) else {
            return;
        };
        let _ = run("kill", &["-INT", &child.id().to_string()]);
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for c in &mut self.children {
            if let Ok(None) = c.try_wait() {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
        for ns in self.namespaces.iter().rev() {
            // Deleting a namespace destroys the veth ends inside it.
            let _ = run("ip", &["netns", "del", ns]);
        }
    }
}
