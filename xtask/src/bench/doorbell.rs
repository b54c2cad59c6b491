//! Row 18: what reading a doorbell store's AQL packets costs, per packet, as the kernel times the doorbell
//! program (`record --program-stats`), for stores of 1 packet (HIP 6.4 rings once a packet), 16 and 256 (HIP
//! 7.2 rings once for up to 256 packets of a graph replay), on the HSA test double's queue path
//! (`hsa_driver burst`): a real ring of real 64-byte packets in a process, the runtime doubled. The goal: a
//! packet of a batched store costs no more than one stored alone (HIP 6.4's way), whose trap (not timed here,
//! ~1 us) a batched packet does not pay at all.

use std::{path::Path, process::Command};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use super::{Dir, Rows};
use crate::{fixtures::fixtures_dir, step, tracer_bin, verdict};

/// Packets a store, and stores a run of each.
const SHAPES: [(u64, u64); 3] = [(1, 20_000), (16, 1_250), (256, 80)];

pub(super) fn row_18(d: &Dir, q: bool, rows: &mut Rows) -> Result<()> {
    step("18/18 AQL packets read at a doorbell store (1, 16, 256 a store; the HSA test double's queue path)");
    let trace = d.trace();
    let (double, driver) = (fixtures_dir().join("hsa-double/libhsa-runtime64.so.1"), fixtures_dir().join("hsa_driver"));
    let mut each = Vec::new();
    let mut single = 0.0;
    let mut worst_batched: f64 = 0.0;
    for (packets, stores) in SHAPES {
        let stores = if q { stores / 4 } else { stores };
        // The median of the runs: this VM's programs' times swing by half between runs.
        let mut per_run = Vec::new();
        for _ in 0..super::repeats(q) {
            per_run.push(ns_per_packet(&trace, (&double, &driver), stores, packets)?);
        }
        per_run.sort_by(f64::total_cmp);
        let per_packet = per_run[per_run.len() / 2];
        if packets == 1 {
            single = per_packet;
        } else {
            worst_batched = worst_batched.max(per_packet);
        }
        each.push(
            json!({"packets_per_store": packets, "stores": stores, "ns_per_packet": per_packet, "runs": per_run}),
        );
    }
    let said: Vec<String> = each
        .iter()
        .map(|e| {
            format!("{} a store: {:.0} ns a packet", e["packets_per_store"], e["ns_per_packet"].as_f64().unwrap_or(0.0))
        })
        .collect();
    rows.results.insert("doorbell_packets".into(), json!({"shapes": each}));
    rows.table.push((
        "18 AQL packets read at a doorbell".into(),
        format!("{} (every packet read)", said.join("; ")),
        "batched <= 1 a store, a packet".into(),
        verdict(worst_batched <= single),
    ));
    Ok(())
}

/// One recording of `hsa_driver burst STORES PACKETS`: the doorbell program's time over the packets it read, each
/// store and packet checked read.
fn ns_per_packet(trace: &Path, (double, driver): (&Path, &Path), stores: u64, packets: u64) -> Result<f64> {
    let st = Command::new(tracer_bin())
        .args(["record", "-q", "--force", "--program-stats", "-o"])
        .arg(trace)
        .arg("--lib")
        .arg(double)
        .arg("--")
        .arg(driver)
        .args(["burst", &stores.to_string(), &packets.to_string()])
        .stdout(std::process::Stdio::null())
        .status()
        .context("running tracer record")?;
    if !st.success() {
        bail!("tracer record -- hsa_driver burst failed ({st})");
    }
    let out = Command::new(tracer_bin()).args(["report", "--json"]).arg(trace).output()?;
    let v: Value = serde_json::from_slice(&out.stdout).context("tracer report --json")?;
    let program = &v["programs"]["doorbell"];
    let (runs, ns) = (program["runs"].as_u64().unwrap_or(0), program["ns"].as_u64().unwrap_or(0));
    let read: u64 = v["processes"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|p| p["dispatches"].as_array().into_iter().flatten())
        .filter_map(|r| r["dispatches"].as_u64())
        .sum();
    if runs != stores || read != stores * packets {
        bail!("hsa_driver burst {stores} {packets}: {runs} doorbell runs and {read} dispatches read");
    }
    Ok(ns as f64 / read as f64)
}
