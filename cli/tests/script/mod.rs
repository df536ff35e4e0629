//! Running a bench script of integration/scripts from a test: bounded in
//! time (SIGTERM on overrun, so the script's trap removes its lab), its
//! `SKIP` line turned into the test's skip, its `PREFIX: KEY VALUE` lines
//! read as figures.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// integration/scripts/NAME.
pub fn path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../integration/scripts")
        .join(name)
}

/// The directory of the debug binaries, or `None` after skipping `test`
/// if esw-pktgen is not built there too.
pub fn bin_dir(test: &str) -> Option<PathBuf> {
    let d = Path::new(env!("CARGO_BIN_EXE_eswitchd")).parent()?;
    if !d.join("esw-pktgen").is_file() {
        prereq::skip(
            test,
            "esw-pktgen is not built next to eswitchd (cargo build -p integration --bin esw-pktgen)",
        );
        return None;
    }
    Some(d.to_path_buf())
}

/// Runs `bash SCRIPT ARGS...`, stopped after `limit`; returns its standard
/// output and whether it exited 0, or `None` after skipping `test` for
/// the script's own `SKIP <what>: <reason>` line.
pub fn run(test: &str, script: &str, args: &[String], limit: Duration) -> Option<(String, bool)> {
    let mut child = Command::new("bash")
        .arg(path(script))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {script}: {e}"));
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).ok();
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        stderr.read_to_string(&mut s).ok();
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if Instant::now() > deadline {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let _ = child.wait();
            panic!("{script} ran over {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let (out, err) = (
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    );
    eprintln!("{out}{err}");
    if let Some(reason) = out
        .lines()
        .find_map(|l| l.strip_prefix("SKIP ").and_then(|r| r.split_once(": ")))
    {
        prereq::skip(test, reason.1);
        return None;
    }
    Some((format!("{out}{err}"), status.success()))
}

/// The `PREFIX: KEY NUMBER` lines of `out`.
pub fn figures<'a>(out: &'a str, prefix: &str) -> HashMap<&'a str, f64> {
    out.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            (w.next()? == prefix).then_some(())?;
            Some((w.next()?, w.next()?.parse().ok()?))
        })
        .collect()
}
