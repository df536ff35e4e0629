//! eswitchd as a child process, live with an OpenFlow listener, for
//! scenarios that drive it with real clients (`ovs-ofctl`) beside a private
//! Open vSwitch ([`crate::ovs::Ovs`]).
//!
//! Its ports name netdevs that do not exist (the daemon keeps them,
//! absent), so no root is needed for eswitchd itself. Dropping it kills
//! the child by PID and waits for it; its directory is the caller's.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Longest wait for the OpenFlow socket.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// A running eswitchd.
pub struct Eswitchd {
    child: Child,
    target: String,
    control: std::path::PathBuf,
}

impl Eswitchd {
    /// Starts `bin` in `dir` (config, sockets and log there) with OpenFlow
    /// ports 1..=`ports` on absent netdevs, listening on
    /// `punix:<dir>/br0.mgmt`; `flows` is the flow file's text (`None`:
    /// the default `priority=0,actions=normal`).
    pub fn start(
        bin: &Path,
        dir: &Path,
        ports: u16,
        flows: Option<&str>,
    ) -> Result<Eswitchd, String> {
        let sock = dir.join("br0.mgmt");
        let ctl = dir.join("ctl.sock");
        let _ = std::fs::remove_file(&sock);
        let _ = std::fs::remove_file(&ctl);
        let pid = std::process::id();
        let mut config = String::from("[backend]\nkind = \"sim\"\n");
        if let Some(text) = flows {
            let f = dir.join("flows.txt");
            std::fs::write(&f, text).map_err(|e| format!("write {}: {e}", f.display()))?;
            config = format!("flows = \"{}\"\n{config}", f.display());
        }
        config += &format!("\n[openflow]\nlisten = [\"punix:{}\"]\n", sock.display());
        for n in 1..=ports {
            config += &format!(
                "\n[[port]]\nname = \"esw{pid}p{n}\"\nofport = {n}\nvport = \"pf0vf{}\"\n",
                n - 1
            );
        }
        let cfg = dir.join("eswitch.toml");
        std::fs::write(&cfg, config).map_err(|e| format!("write {}: {e}", cfg.display()))?;
        let log = std::fs::File::create(dir.join("eswitchd.log")).map_err(|e| e.to_string())?;
        let child = Command::new(bin)
            .args(["run", "--config"])
            .arg(&cfg)
            .arg("--socket")
            .arg(&ctl)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
        let mut d = Eswitchd {
            child,
            target: format!("unix:{}", sock.display()),
            control: ctl,
        };
        let began = Instant::now();
        while !sock.exists() {
            if let Ok(Some(st)) = d.child.try_wait() {
                return Err(format!("eswitchd exited: {st}"));
            }
            if began.elapsed() > START_TIMEOUT {
                return Err(format!(
                    "eswitchd did not open {} in {START_TIMEOUT:?}",
                    sock.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(d)
    }

    /// The `ovs-ofctl` target: `unix:<dir>/br0.mgmt`.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The control socket (`eswitchctl --socket`): `<dir>/ctl.sock`.
    pub fn control_socket(&self) -> &Path {
        &self.control
    }
}

impl Drop for Eswitchd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
