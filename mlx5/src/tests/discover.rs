//! Discovery on fake sysfs trees, shaped as a ConnectX in switchdev mode
//! shows them: representors whose PCI function has `infiniband/mlx5_0`,
//! and the device's ports naming their netdevs.

use std::fs;
use std::path::{Path, PathBuf};

use super::*;

/// A temporary sysfs tree, removed on drop.
struct FakeSysfs(PathBuf);

impl FakeSysfs {
    fn new(tag: &str) -> FakeSysfs {
        let d = std::env::temp_dir().join(format!("esw-sysfs-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).expect("temp dir");
        FakeSysfs(d)
    }

    fn file(&self, rel: &str, text: &str) {
        let p = self.0.join(rel);
        fs::create_dir_all(p.parent().expect("parent")).expect("dirs");
        fs::write(p, text).expect("write");
    }

    fn dir(&self, rel: &str) {
        fs::create_dir_all(self.0.join(rel)).expect("dir");
    }

    /// A representor on `dev` at RDMA port `port`.
    fn rep(&self, name: &str, dev: &str, port: u32) {
        self.dir(&format!("class/net/{name}/device/infiniband/{dev}"));
        self.file(
            &format!("class/net/{name}/compat/devlink/mode"),
            "switchdev\n",
        );
        self.file(
            &format!("class/infiniband/{dev}/ports/{port}/gid_attrs/ndevs/0"),
            &format!("{name}\n"),
        );
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for FakeSysfs {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[test]
fn representors_map_to_their_device_and_ports() {
    let s = FakeSysfs::new("ok");
    s.rep("pf0vf0", "mlx5_0", 2);
    s.rep("pf0vf1", "mlx5_0", 3);
    s.rep("p0", "mlx5_0", 1);
    let d = discover(s.path(), &["pf0vf0", "pf0vf1"]).expect("found");
    assert_eq!(d.device, "mlx5_0");
    assert_eq!(
        d.ports.into_iter().collect::<Vec<_>>(),
        vec![("pf0vf0".to_string(), 2), ("pf0vf1".to_string(), 3)]
    );
    assert_eq!(d.eswitch_mode.as_deref(), Some("switchdev"));
}

#[test]
fn each_failure_names_the_netdev_and_what_to_check() {
    let s = FakeSysfs::new("bad");
    s.rep("pf0vf0", "mlx5_0", 2);
    s.rep("pf1vf0", "mlx5_1", 2);
    // A plain netdev: no RDMA device behind it.
    s.dir("class/net/veth7/device");
    let e = discover(s.path(), &["pf0vf0", "veth7"]).expect_err("veth");
    assert!(
        matches!(&e, DiscoverError::NoRdma { netdev, .. } if netdev == "veth7"),
        "{e}"
    );
    assert!(e.to_string().contains("mlx5_ib"), "{e}");
    let e = discover(s.path(), &["nope"]).expect_err("missing");
    assert!(
        e.to_string().starts_with("netdev nope: no such netdev"),
        "{e}"
    );
    let e = discover(s.path(), &["pf0vf0", "pf1vf0"]).expect_err("two");
    assert_eq!(
        e,
        DiscoverError::TwoDevices {
            netdev: "pf1vf0".into(),
            device: "mlx5_0".into(),
            other: "mlx5_1".into()
        }
    );
    assert_eq!(discover(s.path(), &[]), Err(DiscoverError::NoPorts));
}

#[test]
fn a_representor_without_a_listed_port_still_finds_its_device() {
    let s = FakeSysfs::new("noport");
    s.dir("class/net/pf0vf5/device/infiniband/mlx5_2");
    let d = discover(s.path(), &["pf0vf5"]).expect("found");
    assert_eq!((d.device.as_str(), d.ports.len()), ("mlx5_2", 0));
    assert_eq!(d.eswitch_mode, None);
}

#[test]
fn a_representor_leads_to_its_vf_netdev() {
    let s = FakeSysfs::new("vf");
    s.rep("rep3", "mlx5_0", 4);
    s.file("class/net/rep3/phys_port_name", "pf0vf3\n");
    s.dir("class/net/rep3/device/virtfn3/net/enp8s0f0v3");
    assert_eq!(vf_netdev(s.path(), "rep3").unwrap(), "enp8s0f0v3");
    assert_eq!(vf_index("c1pf0vf12"), Some(12));
    assert_eq!(vf_index("p0"), None);
    s.rep("rep4", "mlx5_0", 5);
    s.file("class/net/rep4/phys_port_name", "pf0vf4\n");
    let e = vf_netdev(s.path(), "rep4").unwrap_err().to_string();
    assert!(
        e.contains("rep4") && e.contains("no netdev") && e.contains("virtfn4"),
        "{e}"
    );
    s.file("class/net/p0/phys_port_name", "p0\n");
    s.rep("p0", "mlx5_0", 1);
    let e = vf_netdev(s.path(), "p0").unwrap_err().to_string();
    assert!(e.contains("not the representor of a VF"), "{e}");
    let e = vf_netdev(s.path(), "nosuch").unwrap_err().to_string();
    assert!(e.contains("not a representor"), "{e}");
}
