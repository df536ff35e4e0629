//! The conformance suite on a real ConnectX, as `eswitchd hw-check` runs
//! it: when `ESWITCH_MLX5_DEVICE` names the RDMA device (`mlx5_0`) and
//! `ESWITCH_MLX5_PORTS` two or more representors whose VFs have netdevs on
//! this host (`pf0vf0,pf0vf1`; the first one's VF sends). Needs root, the
//! eSwitch in switchdev mode, and no other traffic on those VFs. With
//! `ESWITCH_MLX5_SLOW_PATH=verbs` misses are received on the slow-path
//! queue and the restore cases run (they prove the restore tags). Without
//! the variables the test does not run (no CI machine has the NIC) and
//! says so.

use cli::hw::check::{check_mlx5, Sizes};

#[test]
fn conformance_on_a_connectx() {
    let test = "conformance_on_a_connectx";
    let Some(device) = std::env::var_os("ESWITCH_MLX5_DEVICE") else {
        prereq::no_hardware(
            test,
            "ESWITCH_MLX5_DEVICE names no ConnectX; on a machine with one run \
             ESWITCH_MLX5_DEVICE=mlx5_0 ESWITCH_MLX5_PORTS=REP,REP \
             cargo test -p cli --test hw_check_mlx5",
        );
        return;
    };
    let device = device.to_string_lossy().into_owned();
    let ports: Vec<String> = std::env::var("ESWITCH_MLX5_PORTS")
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    let verbs = std::env::var("ESWITCH_MLX5_SLOW_PATH").as_deref() == Ok("verbs");
    let result = check_mlx5(Some(&device), &ports, Sizes::default(), verbs)
        .unwrap_or_else(|e| panic!("hw-check on {device} did not start: {e:#}"));
    println!("{result}");
    assert!(result.passed(), "{result}");
}
