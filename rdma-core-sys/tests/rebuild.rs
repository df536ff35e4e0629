//! The build script reruns when rdma-core arrives or leaves: it watches
//! every directory pkg-config searches that exists (an install or removal
//! of `libibverbs-dev` changes one's modification time), and nothing that
//! does not exist (which would rerun it, and rebuild what depends on it,
//! at every build). Read from the script's own output.

use std::path::Path;
use std::process::Command;

const T: &str = "the_build_script_watches_where_rdma_core_arrives_and_nothing_missing";

#[test]
fn the_build_script_watches_where_rdma_core_arrives_and_nothing_missing() {
    let out_dir = Path::new(env!("OUT_DIR"));
    let output = out_dir.parent().expect("build dir").join("output");
    let text =
        std::fs::read_to_string(&output).unwrap_or_else(|e| panic!("{}: {e}", output.display()));
    let watched: Vec<&str> = text
        .lines()
        .filter_map(|l| {
            l.strip_prefix("cargo:rerun-if-changed=")
                .or_else(|| l.strip_prefix("cargo::rerun-if-changed="))
        })
        .collect();
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    for w in &watched {
        let p = Path::new(w);
        let p = if p.is_relative() {
            manifest.join(p)
        } else {
            p.to_path_buf()
        };
        assert!(
            p.exists(),
            "{w} is watched but does not exist: every build would rerun the script"
        );
    }
    let Some(pc_path) = Command::new("pkg-config")
        .args(["--variable", "pc_path", "pkg-config"])
        .output()
        .ok()
        .filter(|o| o.status.success())
    else {
        prereq::skip(
            T,
            "pkg-config is not installed (apt-get install pkg-config)",
        );
        return;
    };
    let pc_path = String::from_utf8_lossy(&pc_path.stdout).trim().to_string();
    let dirs: Vec<&str> = pc_path
        .split(':')
        .filter(|d| Path::new(d).is_dir())
        .collect();
    assert!(
        !dirs.is_empty(),
        "pkg-config searches no directory that exists: {pc_path}"
    );
    for d in dirs {
        assert!(
            watched.contains(&d),
            "{d} (pkg-config's) is not watched: {watched:?}"
        );
    }
    assert!(
        !rdma_core_sys::AVAILABLE || watched.contains(&"/usr/include/infiniband"),
        "the headers' directory is not watched: {watched:?}"
    );
}
