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

fn main() {
    println!("cargo:rerun-if-changed=csrc/wrap.h");
    println!("cargo:rerun-if-changed=csrc/wrap.c");
    println!("cargo:rerun-if-changed=csrc/layout.c");
    println!("cargo:rerun-if-env-changed=ESWITCH_REQUIRE_RDMA_CORE");
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
