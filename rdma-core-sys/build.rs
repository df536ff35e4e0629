//! Finds Debian's rdma-core through pkg-config (`libmlx5 >= 1.20`: Direct
//! Rule's `allow_duplicate_rules` is in `MLX5_1.20`), links libmlx5 and
//! libibverbs, and compiles two C files against the installed headers:
//! `csrc/wrap.c` (out-of-line wrappers of the inline calls) and
//! `csrc/layout.c` (the layout the committed bindings assume, as
//! `_Static_assert`s: a header that drifted fails the build here).
//!
//! Without the headers (no `libibverbs-dev`) the crate builds empty, with
//! `cfg(rdma_core_missing)` and a warning, so the rest of eswitch (the sim,
//! replay) builds on any machine; the `mlx5` backend then says it was built
//! without rdma-core. `ESWITCH_REQUIRE_RDMA_CORE=1` (the test command sets
//! it) makes a missing rdma-core a build error instead.
//!
//! The package arriving or leaving reruns this script: it watches the
//! directories pkg-config searches (and the headers' directory). Cargo
//! compares a watched directory's own modification time too, which adding
//! or removing a `.pc` file changes (the files themselves keep the
//! package's old times).

use std::path::Path;
use std::process::Command;

/// Where Debian's pkg-config looks when it cannot be asked.
const DEBIAN_PC_PATH: &str = "/usr/local/lib/x86_64-linux-gnu/pkgconfig:/usr/local/lib/pkgconfig:\
/usr/local/share/pkgconfig:/usr/lib/x86_64-linux-gnu/pkgconfig:/usr/lib/pkgconfig:/usr/share/pkgconfig";

/// The directories pkg-config searches: `PKG_CONFIG_PATH`, then its own.
fn pc_dirs() -> Vec<String> {
    let own = Command::new("pkg-config")
        .args(["--variable", "pc_path", "pkg-config"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| DEBIAN_PC_PATH.to_string());
    let extra = std::env::var("PKG_CONFIG_PATH").unwrap_or_default();
    extra
        .split(':')
        .chain(own.split(':'))
        .filter(|d| !d.is_empty())
        .map(str::to_string)
        .collect()
}

fn main() {
    println!("cargo:rerun-if-changed=csrc/wrap.h");
    println!("cargo:rerun-if-changed=csrc/wrap.c");
    println!("cargo:rerun-if-changed=csrc/layout.c");
    println!("cargo:rerun-if-env-changed=ESWITCH_REQUIRE_RDMA_CORE");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    // Only directories that exist: a missing path would rerun the script
    // (and rebuild what depends on it) at every build.
    for dir in pc_dirs()
        .iter()
        .map(String::as_str)
        .chain(["/usr/include/infiniband"])
    {
        if Path::new(dir).is_dir() {
            println!("cargo:rerun-if-changed={dir}");
        }
    }
    println!("cargo::rustc-check-cfg=cfg(rdma_core_missing)");
    let found = pkg_config::Config::new()
        .atleast_version("1.20")
        .probe("libmlx5")
        .and_then(|m| {
            pkg_config::Config::new()
                .probe("libibverbs")
                .map(|v| (m, v))
        });
    let (mlx5, verbs) = match found {
        Ok(libs) => libs,
        Err(e) => {
            if std::env::var("ESWITCH_REQUIRE_RDMA_CORE").as_deref() == Ok("1") {
                panic!(
                    "rdma-core-sys: libmlx5 >= 1.20 and libibverbs not found ({e}); \
                     apt-get install libibverbs-dev pkg-config"
                );
            }
            println!(
                "cargo:warning=rdma-core-sys: rdma-core not found ({}); building without the mlx5 \
                 backend (apt-get install libibverbs-dev pkg-config, then rebuild)",
                e.to_string()
                    .split_whitespace()
                    .take(24)
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            println!("cargo:rustc-cfg=rdma_core_missing");
            println!("cargo:available=0");
            return;
        }
    };
    println!("cargo:available=1");
    let mut cc = cc::Build::new();
    cc.files(["csrc/wrap.c", "csrc/layout.c"])
        .include("csrc")
        .flag_if_supported("-std=gnu11")
        .warnings(true)
        .extra_warnings(true);
    for p in mlx5.include_paths.iter().chain(&verbs.include_paths) {
        cc.include(p);
    }
    cc.compile("eswitch_rdma_wrap");
}
