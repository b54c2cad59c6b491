//! The AMD GPUs this machine has, as AMD's compute driver (KFD) lists them in sysfs: the topology `ROCr` itself
//! reads (`/sys/devices/virtual/kfd/kfd/topology/nodes/N/properties`, one `name value` pair a line). A node is a
//! GPU when its `gfx_target_version` is not 0 (a CPU node's is 0). Bounded: at most [`MAX_NODES`] nodes, and
//! [`MAX_PROPERTIES`] bytes of each node's file; a line that does not parse is no GPU.

use std::io::Read as _;

/// Where KFD lists its nodes.
const NODES: &str = "/sys/devices/virtual/kfd/kfd/topology/nodes";
/// Nodes looked at (a machine with 16 GPUs and their CPU sockets has about 20).
const MAX_NODES: usize = 256;
/// Bytes read of a node's properties (about 1.5 KiB on a real GPU).
const MAX_PROPERTIES: u64 = 64 << 10;

/// The gfx target versions of the GPUs KFD lists (e.g. 110000 for gfx1100), in node order; empty without KFD
/// (no AMD GPU driver loaded, or no GPU).
pub(crate) fn gpus() -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir(NODES) else { return Vec::new() };
    let mut nodes: Vec<(u32, u32)> = dir
        .take(MAX_NODES)
        .flatten()
        .filter_map(|e| {
            let node: u32 = e.file_name().to_str()?.parse().ok()?;
            let mut text = String::new();
            std::fs::File::open(e.path().join("properties"))
                .ok()?
                .take(MAX_PROPERTIES)
                .read_to_string(&mut text)
                .ok()?;
            Some((node, gfx_target(&text)?))
        })
        .collect();
    nodes.sort_unstable();
    nodes.into_iter().map(|(_, gfx)| gfx).collect()
}

/// A node's gfx target version from its properties, when it is a GPU (not 0).
fn gfx_target(properties: &str) -> Option<u32> {
    properties
        .lines()
        .find_map(|l| l.strip_prefix("gfx_target_version ")?.trim().parse::<u32>().ok())
        .filter(|&v| v != 0)
}

#[cfg(test)]
mod tests {
    use super::gfx_target;

    #[test]
    fn a_gpu_node_has_a_gfx_target_and_a_cpu_node_none() {
        assert_eq!(gfx_target("cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\nvendor_id 0\n"), None);
        assert_eq!(gfx_target("cpu_cores_count 0\nsimd_count 192\ngfx_target_version 110000\n"), Some(110_000));
        // What does not parse is no GPU.
        assert_eq!(gfx_target("gfx_target_version x\n"), None);
        assert_eq!(gfx_target("gfx_target_version 99999999999\n"), None);
        assert_eq!(gfx_target(""), None);
        assert_eq!(gfx_target("my_gfx_target_version 110000\n"), None);
    }
}
