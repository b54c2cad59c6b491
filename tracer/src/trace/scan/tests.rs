//! Tests of the fast scan and spelling of launch and call lines.

use super::*;
use std::collections::BTreeMap;

use crate::trace::Line;

fn line(r: &Line) -> Vec<u8> {
    serde_json::to_vec(r).unwrap()
}

fn launches() -> Vec<Launch> {
    let base = Launch {
        ts: 1_000_000,
        pid: 7,
        tid: 8,
        lib: 1,
        api: ApiFunc::HipLaunchKernel,
        kernel: Some(3),
        handle: 0x7f00_1234_5678,
        grid: [512, 1, 1],
        block: [32, 4, 1],
        grid_unit: GridUnit::Blocks,
        shmem: 0,
        stream: 0,
        ret: 0,
        dur: 6000,
        captured: false,
        entry_only: false,
        params: Default::default(),
        caller: 0,
        in_runs: false,
    };
    vec![
        base.clone(),
        Launch { kernel: None, ret: -1, ..base.clone() },
        Launch { ret: i32::MIN, dur: u64::MAX, ts: u64::MAX, handle: u64::MAX, ..base.clone() },
        Launch { api: ApiFunc::HipExtModuleLaunchKernel, grid_unit: GridUnit::WorkItems, ..base.clone() },
        Launch { captured: true, ..base.clone() },
        Launch { api: ApiFunc::CuLaunchKernel, entry_only: true, ..base.clone() },
        Launch { captured: true, entry_only: true, grid: [u32::MAX, 0, 10], ..base },
    ]
}

fn calls() -> Vec<Call> {
    let o = Origin { ts: 5, pid: 7, tid: 9, lib: 2 };
    let sync = Call::new(o, ApiFunc::HipStreamSynchronize, 0, 1200);
    vec![
        sync.clone(),
        Call { ret: -22, stream: Some(0x77), ..sync },
        Call {
            size: Some(256),
            dst: Some(1),
            src: Some(2),
            kind: Some(MemcpyKind::DeviceToHost),
            stream: Some(3),
            ..Call::new(o, ApiFunc::HipMemcpyAsync, 0, 9)
        },
        Call { size: Some(1 << 20), ptr: Some(0x7f00_0000_0000), ..Call::new(o, ApiFunc::HipMalloc, 0, 9) },
        Call { module: Some(1), function: Some(2), ..Call::new(o, ApiFunc::HipModuleGetFunction, 500, 9) },
        Call {
            handle: Some(4),
            attribute: Some(22),
            value: Some(5),
            ..Call::new(o, ApiFunc::HsaExecutableSymbolGetInfo, 0, 1)
        },
        Call { handle: Some(0x7000), entry_only: true, ..Call::new(o, ApiFunc::CuGraphLaunch, 0, 0) },
    ]
}

/// Every shape the writer makes reads back the same through the fast path as through serde.
#[test]
fn the_writers_lines_read_the_same_as_with_serde() {
    for l in launches() {
        let text = line(&Line::Launch(l.clone()));
        assert_eq!(launch(&text), Some(l.clone()), "{}", String::from_utf8_lossy(&text));
        assert_eq!(serde_json::from_slice::<Launch>(&text).unwrap(), l);
    }
    for c in calls() {
        let text = line(&Line::Call(Box::new(c.clone())));
        assert_eq!(call(&text), Some(c.clone()), "{}", String::from_utf8_lossy(&text));
        assert_eq!(serde_json::from_slice::<Call>(&text).unwrap(), c);
    }
}

/// The launch tails kept are bounded: past the most, the cache starts afresh, and every line is still
/// serde's.
#[test]
fn the_launch_tails_kept_are_bounded() {
    let mut tails = LaunchTails::default();
    let first = launches().remove(0);
    for handle in 0..(TAILS_MAX as u64 + 10) {
        let l = Launch { handle, ..first.clone() };
        let mut out = Vec::new();
        assert!(spell_launch(&l, &mut out, &mut tails));
        assert_eq!(out, line(&Line::Launch(l)));
        assert!(tails.0.len() <= TAILS_MAX);
    }
    assert_eq!(tails.0.len(), 10);
}

/// The fast writer's bytes are serde's, for every shape it spells; the ones it leaves write nothing.
#[test]
fn the_spelled_lines_are_serdes_bytes() {
    // Each launch twice, at two times: the second line's rest comes from the cache.
    let mut tails = LaunchTails::default();
    for l in launches() {
        for ts in [l.ts, l.ts + 1_000_003] {
            let l = Launch { ts, ..l.clone() };
            let mut out = Vec::new();
            assert!(spell_launch(&l, &mut out, &mut tails));
            assert_eq!(String::from_utf8(out).unwrap(), String::from_utf8(line(&Line::Launch(l))).unwrap());
        }
    }
    assert_eq!(tails.0.len(), launches().len());
    for c in calls() {
        let mut out = Vec::new();
        assert!(spell_call(&c, &mut out));
        assert_eq!(String::from_utf8(out).unwrap(), String::from_utf8(line(&Line::Call(Box::new(c)))).unwrap());
    }
    let mut out = Vec::new();
    let with_params = Launch { params: BTreeMap::from([(2, 7)]), ..launches().remove(0) };
    assert!(!spell_launch(&with_params, &mut out, &mut tails));
    assert!(!spell_launch(&Launch { grid_unit: GridUnit::Unknown, ..launches().remove(0) }, &mut out, &mut tails));
    assert!(!spell_call(&Call { file: Some("/lib/\"x\".so".into()), ..calls().remove(0) }, &mut out));
    assert!(!spell_call(&Call { kind: Some(MemcpyKind::Unknown(9)), ..calls().remove(0) }, &mut out));
    assert!(out.is_empty());
    // Every string spelled comes from a table whose entries need no escape.
    let plain = |s: &str| s.bytes().all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\');
    assert!(ApiFunc::ALL.iter().all(|f| plain(f.name())));
    for k in [0, 1, 2, 3, 4, 1024] {
        assert!(plain(&MemcpyKind::from_raw(k).name()));
    }
    assert!([GridUnit::Blocks, GridUnit::WorkItems].iter().all(|u| plain(u.as_str())));
}

/// Other spellings of the same JSON, and lines serde would refuse, are left to serde.
#[test]
fn other_spellings_fall_back() {
    let l = launches().remove(0);
    let text = String::from_utf8(line(&Line::Launch(l))).unwrap();
    for other in [
        text.replace(",\"pid\"", ", \"pid\""),
        text.replace("\"ts\":1000000,\"pid\":7", "\"pid\":7,\"ts\":1000000"),
        text.replace("\"kernel\":3", "\"kernel\":03"),
        text.replace("\"ret\":0", "\"ret\":-0"),
        text.replace("\"ret\":0", "\"ret\":4294967296"),
        text.replace("\"grid_unit\":\"blocks\"", "\"grid_unit\":\"bl\\u006fcks\""),
        text.replace("\"api\":\"hipLaunchKernel\"", "\"api\":\"hipNoSuchCall\""),
        text.replace('}', ",\"future\":1}"),
        format!("{text} "),
        text[..text.len() - 1].to_owned(),
    ] {
        assert_eq!(launch(other.as_bytes()), None, "{other}");
    }
    let c = Call { file: Some("/lib/x.so".into()), ..calls().remove(0) };
    assert_eq!(call(&line(&Line::Call(Box::new(c)))), None);
}
