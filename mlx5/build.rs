//! Passes on whether `rdma-core-sys` found rdma-core (its `links = "mlx5"`
//! metadata): without it this crate builds its pure parts only and the
//! backend refuses to open, saying so.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(rdma_core_missing)");
    println!("cargo:rerun-if-env-changed=DEP_MLX5_AVAILABLE");
    if std::env::var("DEP_MLX5_AVAILABLE").as_deref() != Ok("1") {
        println!("cargo:rustc-cfg=rdma_core_missing");
    }
}
