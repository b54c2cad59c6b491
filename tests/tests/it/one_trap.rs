//! One trap per dispatch on AMD (issue 58), checked on the null GPU's llama-bench runs (`null_gpu.rs`): with an AMD
//! GPU in KFD's topology, HIP's launch functions are left unprobed and each dispatch read at its doorbell stands for
//! its launch; `record --hip-launches` probes them again, and the kernel table then counts the same executions from
//! the launches (and graph replays) as it counts from the dispatches.

use std::collections::BTreeMap;

use integration_tests::*;

/// With HIP's launches left to the doorbell, the report's kernel table counts the dispatches as executions, kernel by
/// kernel: every row from dispatches, no launch, and every dispatched kernel a row.
pub(crate) fn executions_are_the_dispatches(p: &serde_json::Value, trace: &str) {
    let mut by_kernel: BTreeMap<u64, u64> = BTreeMap::new();
    for row in p["dispatches"].as_array().expect("dispatches per kernel") {
        let id = row["kernel"].as_u64().expect("every dispatch named");
        *by_kernel.entry(id).or_default() += row["dispatches"].as_u64().expect("a count");
    }
    let mut executed: BTreeMap<u64, u64> = BTreeMap::new();
    for row in p["kernels"].as_array().expect("kernel rows") {
        assert_eq!(row["from_dispatches"], true, "{trace}: {row}");
        assert_eq!(row["launches"], 0, "{trace}: {row}");
        let ids: Vec<u64> = row["ids"].as_array().expect("ids").iter().filter_map(serde_json::Value::as_u64).collect();
        let n: u64 = ids.iter().map(|id| by_kernel.get(id).copied().unwrap_or(0)).sum();
        assert_eq!(row["executions"].as_u64(), Some(n), "{trace}: executions of {}, then its dispatches", row["name"]);
        for id in ids {
            if let Some(&n) = by_kernel.get(&id) {
                executed.insert(id, n);
            }
        }
    }
    assert_eq!(executed, by_kernel, "{trace}: every dispatched kernel is a row of the kernel table");
}

/// One trap per dispatch: the guest has an AMD GPU in KFD's topology (the null GPU's gfx1100), so the recording
/// left HIP's launch functions (`hipLaunchKernel` and the rest, `<<<>>>`'s configuration) unprobed, said so in
/// its header and in their probe records, and holds no launch: each dispatch was read at its doorbell alone. In
/// words.
pub(crate) fn one_trap_per_dispatch(records: &[Line], trace: &str) -> String {
    let at_doorbell = matches!(records.first(), Some(Line::Header(h)) if h.options.launches_at_doorbell);
    assert!(at_doorbell, "{trace}: the header says the launches were left to the doorbell");
    assert!(launches(records).is_empty() && configs(records).is_empty(), "{trace}: no launch recorded");
    let left: Vec<&str> = records
        .iter()
        .filter_map(|r| match r {
            Line::Probe(p) if p.error.as_deref().is_some_and(|e| e.contains("read at its queue's doorbell")) => {
                Some(p.api.as_str())
            }
            _ => None,
        })
        .collect();
    for f in ["hipLaunchKernel", "hipModuleLaunchKernel", "hipExtModuleLaunchKernel", "__hipPushCallConfiguration"] {
        assert!(left.contains(&f), "{trace}: {f} left unprobed for the doorbell: {left:?}");
    }
    format!("HIP's launch functions left unprobed ({}), no launch recorded", left.join(", "))
}

/// The same llama-bench recorded with `--hip-launches` (`launched`) and by default (`dispatched`): the launches
/// are probed again, beside the dispatches, and each ggml or rocBLAS kernel's executions counted from the launches
/// and graph replays equal those counted from the dispatches, name by name; only the runtime's own copy and fill
/// kernels, which no HIP launch makes, are in the dispatches alone. In words.
pub(crate) fn launches_count_what_dispatches_count(out: &str, launched: &str, dispatched: &str) -> String {
    let records = guest_trace(out, launched);
    let at_doorbell = matches!(records.first(), Some(Line::Header(h)) if h.options.launches_at_doorbell);
    assert!(!at_doorbell && !launches(&records).is_empty(), "{launched}: launches probed with --hip-launches");
    let executions = |trace: &str| -> BTreeMap<String, u64> {
        let p = guest_report(out, trace, "llama-bench");
        let mut by_name = BTreeMap::new();
        for row in p["kernels"].as_array().expect("kernel rows") {
            let name = row["name"].as_str().expect("a name").to_owned();
            *by_name.entry(name).or_default() += row["executions"].as_u64().expect("executions");
        }
        by_name
    };
    let (from_launches, mut from_dispatches) = (executions(launched), executions(dispatched));
    let internal: u64 = from_dispatches.iter().filter(|(n, _)| n.starts_with("__amd_rocclr_")).map(|(_, n)| n).sum();
    from_dispatches.retain(|n, _| !n.starts_with("__amd_rocclr_"));
    let from_launches: BTreeMap<String, u64> = from_launches.into_iter().filter(|(_, n)| *n > 0).collect();
    assert_eq!(from_launches, from_dispatches, "executions by kernel: from launches, then from dispatches");
    format!(
        "{launched} (--hip-launches): {} launches recorded; {} executions of {} kernels, the same counted from launches \
         and graph replays as from the dispatches of {dispatched}, name by name ({internal} runtime copy/fill dispatches \
         aside)",
        launches(&records).len(),
        from_dispatches.values().sum::<u64>(),
        from_dispatches.len()
    )
}
