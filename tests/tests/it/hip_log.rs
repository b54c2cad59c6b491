//! HIP's own log of the packets it writes, the oracle that names kernels without tracer (issue 80). With
//! `AMD_LOG_LEVEL` at 4 (HIP 6.4) or 5 (HIP 7.2, whose packet lines are a level further down), CLR prints, for each
//! AQL kernel packet it writes, the kernel's name (`ShaderName : NAME`, or `Graph ShaderName : NAME, device id : N`
//! for a graph's node) and then the packet (`Dispatch Header = 0x... (type=2, ...), ... kernel_obj=0x...,`). The
//! variable changes HIP's logging only: no packet, queue or launch changes, and tracer reads nothing from it. The
//! guest keeps just those lines ([`GREP`]); a name line not followed by a packet on its thread (a graph's nodes named
//! at capture) names nothing. HIP 7.2 names each graph node's packet again at every replay; HIP 6.4 names graph nodes
//! only at capture and writes their packets unnamed, so this oracle is used on HIP 7.2's runs.

use std::collections::BTreeMap;

use integration_tests::*;

use crate::null_gpu::number;

/// The guest's filter of HIP's stderr: the log lines the oracle reads, the packet's other fields cut.
pub(crate) const GREP: &str = "grep -E 'ShaderName : |Dispatch Header' | sed -E 's/SWq=.*(type=[0-9]+).*kernel_obj=/\\1 kernel_obj=/; s/, kernarg_address.*//'";

/// What HIP's log says: per kernel object, its name and the kernel packets HIP wrote for it.
#[derive(Debug, Default)]
pub(crate) struct HipLog {
    pub(crate) names: BTreeMap<u64, String>,
    pub(crate) packets: BTreeMap<u64, u64>,
    /// Kernel objects HIP named two ways: none is expected.
    pub(crate) conflicts: Vec<(u64, String, String)>,
}

/// HIP's log lines (after [`GREP`], which leaves a packet's line as `... [pid:P tid: T] type=2 kernel_obj=0x...`),
/// read.
pub(crate) fn parse(log: &str) -> HipLog {
    let mut h = HipLog::default();
    let mut pending: BTreeMap<&str, String> = BTreeMap::new(); // by thread: the name of its next packet
    for line in log.lines() {
        let tid = line.split("tid:").nth(1).and_then(|t| t.split(']').next()).map_or("", str::trim);
        if let Some(rest) = line.split("ShaderName : ").nth(1) {
            pending.insert(tid, rest.split(", device id").next().unwrap_or(rest).trim().to_owned());
            continue;
        }
        if !line.contains("type=2 kernel_obj=") {
            continue; // [`GREP`] keeps a kernel packet's type and object only
        }
        let Some(object) = line.split("kernel_obj=").nth(1).map(|r| number(r.split(',').next().unwrap_or(r).trim()))
        else {
            continue;
        };
        *h.packets.entry(object).or_default() += 1;
        let Some(name) = pending.remove(tid) else { continue }; // a replayed packet: its object named before
        match h.names.get(&object) {
            Some(known) if *known != name => h.conflicts.push((object, known.clone(), name)),
            Some(_) => {}
            None => {
                h.names.insert(object, name);
            }
        }
    }
    h
}

/// The recording `run`'s kernel dispatches against HIP's log `log`: HIP named every kernel object it wrote one way;
/// tracer read, per kernel object, the packets HIP wrote; and named each dispatch as HIP names its object. In words:
/// dispatches and kernels compared.
pub(crate) fn names_checked(records: &[Line], log: &str, run: &str) -> String {
    let h = parse(log);
    assert!(!h.packets.is_empty(), "{run}: HIP's log holds its packets (AMD_LOG_LEVEL): {log:.2000}");
    assert!(h.conflicts.is_empty(), "{run}: HIP named a kernel object two ways: {:?}", h.conflicts);
    let unnamed: Vec<&u64> = h.packets.keys().filter(|o| !h.names.contains_key(o)).collect();
    assert!(unnamed.is_empty(), "{run}: kernel objects HIP wrote and never named: {unnamed:x?}");
    // Each kernel's mangled name as tracer wrote it, and that name demangled by c++filt (HIP 7.2 logs the
    // demangled one; HIP 6.4 the mangled one).
    // A name longer than the probe keeps is cut and said so (`truncated`): its start must be HIP's name's.
    let kernels: BTreeMap<u32, (&str, bool)> =
        kernels(records).into_iter().map(|k| (k.id, (k.name.as_str(), k.truncated))).collect();
    let demangled = cxxfilt(&kernels.values().map(|(n, _)| *n).collect::<Vec<_>>());
    let mut cut = 0;
    let mut read: BTreeMap<u64, u64> = BTreeMap::new();
    let mut wrong = Vec::new();
    let mut dispatches = 0;
    for r in records {
        let Line::Dispatch(d) = r else { continue };
        if d.packet.name() != "kernel-dispatch" {
            continue;
        }
        dispatches += 1;
        *read.entry(d.kernel_object).or_default() += 1;
        let ours = d.kernel.and_then(|k| kernels.get(&k));
        let hip = h.names.get(&d.kernel_object).map(String::as_str);
        let same = |&(name, truncated): &(&str, bool)| {
            hip.is_some_and(|hip| {
                hip == name || demangled.get(name).is_some_and(|d| d == hip) || (truncated && hip.starts_with(name))
            })
        };
        cut += usize::from(ours.is_some_and(|(_, truncated)| *truncated));
        if !ours.is_some_and(same) && wrong.len() < 10 {
            wrong.push(format!("{:#x}: tracer {ours:?}, HIP {hip:?}", d.kernel_object));
        }
    }
    assert!(wrong.is_empty(), "{run}: dispatches tracer named otherwise than HIP's log: {wrong:#?}");
    assert_eq!(read, h.packets, "{run}: the kernel packets tracer read per kernel object, then those HIP wrote");
    format!(
        "{run}: {} kernel dispatches of {} kernels named as HIP's own log (AMD_LOG_LEVEL) names them ({cut} with a \
         name cut at the probe's bound, said so, their start HIP's name), per kernel object as many as HIP wrote",
        dispatches,
        h.names.len()
    )
}

/// The mangled names, demangled by binutils' c++filt (which writes them as HIP's demangler does, `3u` where
/// tracer's `cpp_demangle` writes `(unsigned int)3`): an oracle's demangler, not tracer's.
fn cxxfilt(names: &[&str]) -> BTreeMap<String, String> {
    use std::io::Write as _;
    let mut child = std::process::Command::new("c++filt")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("c++filt runs (binutils)");
    let mut input = child.stdin.take().expect("stdin");
    let mut text = names.join("\n");
    text.push('\n');
    let writer = std::thread::spawn(move || input.write_all(text.as_bytes()).expect("c++filt reads"));
    let out = child.wait_with_output().expect("c++filt ends");
    writer.join().expect("writer");
    let demangled = String::from_utf8(out.stdout).expect("UTF-8");
    names.iter().map(|n| (*n).to_owned()).zip(demangled.lines().map(str::to_owned)).collect()
}

#[test]
fn the_log_pairs_each_name_with_the_packet_after_it_on_its_thread() {
    let log = "\
:3:rocvirtual.cpp :3631: 1 us: [pid:1 tid: 0xa] ShaderName : graph_scale
:5:rocvirtual.cpp :1165: 2 us: [pid:1 tid: 0xa] type=2 kernel_obj=0x10
:3:rocvirtual.cpp :3631: 3 us: [pid:1 tid: 0xa] ShaderName : graph_axpy
:3:rocvirtual.cpp :3631: 3 us: [pid:1 tid: 0xa] ShaderName : graph_count
:5:rocvirtual.cpp :1392: 4 us: [pid:1 tid: 0xa] Graph ShaderName : graph_count, device id : 0
:5:rocvirtual.cpp :1165: 5 us: [pid:1 tid: 0xa] type=2 kernel_obj=0x20
:5:rocvirtual.cpp :1165: 6 us: [pid:1 tid: 0xa] type=2 kernel_obj=0x10
";
    let h = parse(log);
    assert_eq!(h.names, BTreeMap::from([(0x10, "graph_scale".to_owned()), (0x20, "graph_count".to_owned())]));
    assert_eq!(h.packets, BTreeMap::from([(0x10, 2), (0x20, 1)]));
    assert!(h.conflicts.is_empty());
}
