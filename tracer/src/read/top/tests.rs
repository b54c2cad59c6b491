//! The fold, lines in, figures out: per process families, phases and traps, equal to the report's for the
//! same lines; exited processes kept bounded; libraries, late probes and drops; the sort keys.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use tracer_common::ApiFunc;

use super::{
    model::{MAX_EXITED, Model, Row},
    view::{Action, SortKey, View, per_token},
};
use crate::{
    read::report::Report,
    trace::event::MemcpyKind,
    trace::{Call, Checkpoint, Exit, Footer, Kernel, Launch, Library, Line, Mapping, Process, Role, Stop},
};

const MMVQ1: &str = "_Z13mul_mat_vec_qIL9ggml_type12ELi1ELb0EEvPKvS2_PKiPfjjj";
const ROPE: &str = "_Z9rope_normILb1EEvPKfPfiiiii";

fn launch(pid: u32, kernel: u32, ts: u64) -> Line {
    Line::Launch(Launch { lib: 1, ..Launch::for_test(pid, Some(kernel), ts) })
}

fn call(pid: u32, api: ApiFunc, kind: Option<MemcpyKind>, ts: u64) -> Line {
    let v = serde_json::json!({"ts": ts, "pid": pid, "tid": pid, "lib": 1, "api": api.name(), "ret": 0, "dur": 0, "kind": kind});
    Line::Call(Box::new(serde_json::from_value::<Call>(v).unwrap()))
}

/// A runner of `pid` that decodes `tokens` tokens: per token an MMVQ over one column and a `RoPE`, the
/// logits copied down, a sync.
fn runner(pid: u32, tokens: u64) -> Vec<Line> {
    let mut lines = vec![
        Line::Process(Process {
            pid,
            comm: "ollama".into(),
            role: Some(Role::Runner),
            model_name: Some("qwen3:8b".into()),
            ..Process::default()
        }),
        Line::Kernel(Kernel { id: 1, pid, name: MMVQ1.into(), ..Kernel::default() }),
        Line::Kernel(Kernel { id: 2, pid, name: ROPE.into(), ..Kernel::default() }),
    ];
    for t in 0..tokens {
        let ts = 100 * (t + 1);
        lines.push(launch(pid, 1, ts));
        lines.push(launch(pid, 2, ts + 1));
        lines.push(call(pid, ApiFunc::HipMemcpy, Some(MemcpyKind::DeviceToHost), ts + 2));
        lines.push(call(pid, ApiFunc::HipStreamSynchronize, None, ts + 3));
    }
    // The last token's kernels: a step the report closes at the end, the live view once the process ends.
    lines.push(launch(pid, 1, 100 * (tokens + 1)));
    lines
}

fn fold(lines: &[Line]) -> Model {
    let mut m = Model::default();
    for l in lines {
        m.record(l);
    }
    m
}

fn row(m: &mut Model, pid: u32) -> Row {
    m.snapshot().rows.into_iter().find(|r| r.pid == pid).unwrap()
}

#[test]
fn a_runner_s_families_phases_and_traps_live_then_equal_to_the_report_s_at_its_exit() {
    let library = Line::Library(Library { id: 1, path: "/opt/rocm/lib/libamdhip64.so.6".into(), ..Library::default() });
    let mut lines = vec![library];
    lines.extend(runner(10, 3));
    let mut m = fold(&lines);
    let live = row(&mut m, 10);
    assert_eq!((live.comm.as_str(), live.role, live.model.as_deref()), ("ollama", Some("runner"), Some("qwen3:8b")));
    assert_eq!(live.families, [("MMVQ Q4_K".to_owned(), 4), ("RoPE".to_owned(), 3)].into());
    assert_eq!(live.libraries, ["libamdhip64.so.6".to_owned()].into());
    // Live: the closed steps only (three decode tokens), each sync's calls trapping.
    let [decode] = live.phases.as_slice() else { panic!("{:?}", live.phases) };
    assert_eq!((decode.phase, decode.steps, decode.tokens), ("decode", 3, 3));
    assert!(decode.traps > 0 && !live.final_figures && !live.exited);

    lines.push(Line::Exit(Exit { ts: 10_000, pid: 10, code: Some(0), signal: None }));
    let mut m = fold(&lines);
    let ended = row(&mut m, 10);
    assert!(ended.exited && ended.final_figures);
    let report = Report::build(lines);
    let p = report.processes.iter().find(|p| p.comm == "ollama").unwrap();
    let executions: u64 = serde_json::to_value(p).unwrap()["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["executions"].as_u64().unwrap())
        .sum();
    assert_eq!(ended.executions(), executions);
    let reported: Vec<(&str, u64, u64, u64)> = p
        .phases
        .iter()
        .map(|ph| {
            (ph.phase.as_str(), ph.steps, serde_json::to_value(ph).unwrap()["tokens"].as_u64().unwrap(), ph.traps)
        })
        .collect();
    let shown: Vec<(&str, u64, u64, u64)> =
        ended.phases.iter().map(|ph| (ph.phase, ph.steps, ph.tokens, ph.traps)).collect();
    assert_eq!(shown, reported);
    assert_eq!(
        reported.first().map(|r| (r.1, r.2)),
        Some((4, 4)),
        "the last token's step, closed as the report closes it"
    );
}

#[test]
fn the_footer_finishes_every_running_process_and_says_the_stop_and_the_losses() {
    let mut lines = runner(10, 2);
    lines.push(Line::Checkpoint(Checkpoint { ts: 1, drops: [("ring".to_owned(), 3)].into() }));
    let mut m = fold(&lines);
    assert_eq!((m.snapshot().dropped, m.snapshot().stop), (3, None));
    lines.push(Line::Footer(Footer {
        drops: [("ring".to_owned(), vec![2, 3])].into(),
        stop: Stop::CommandExited,
        ..Footer::default()
    }));
    let mut m = fold(&lines);
    let snap = m.snapshot();
    assert_eq!((snap.dropped, snap.stop), (5, Some(Stop::CommandExited)));
    let r = row(&mut m, 10);
    assert!(r.final_figures && !r.exited);
    let report = Report::build(lines);
    let steps: Vec<(u64, u64)> = report.processes[0].phases.iter().map(|p| (p.steps, p.traps)).collect();
    assert_eq!(r.phases.iter().map(|p| (p.steps, p.traps)).collect::<Vec<_>>(), steps);
}

#[test]
fn a_copy_probed_late_is_counted_until_a_mapping_says_otherwise() {
    let mapping = |late: bool| {
        Line::Mapping(Mapping {
            pid: 10,
            path: "/x/libamdhip64.so".into(),
            dev: 1,
            inode: 2,
            lib: Some(1),
            probed_late: late,
            ..Mapping::default()
        })
    };
    let mut m = fold(&[mapping(true)]);
    assert_eq!(row(&mut m, 10).probed_late, 1);
    m.record(&mapping(false));
    assert_eq!(row(&mut m, 10).probed_late, 0);
}

#[test]
fn exited_processes_are_kept_bounded_and_the_others_counted() {
    let mut m = Model::default();
    for pid in 1..=u32::try_from(MAX_EXITED).unwrap() + 3 {
        m.record(&Line::Process(Process { pid, comm: format!("p{pid}"), ..Process::default() }));
        m.record(&Line::Exit(Exit { ts: 1, pid, code: Some(0), signal: None }));
    }
    let snap = m.snapshot();
    assert_eq!((snap.rows.len(), snap.exited_not_shown), (MAX_EXITED, 3));
    assert_eq!(snap.rows.first().map(|r| r.pid), Some(4), "the oldest went first");
}

#[test]
fn keys_cycle_and_choose_the_sort_and_the_order_follows() {
    let row = |pid, comm: &str, kernels| Row {
        pid,
        comm: comm.into(),
        families: [("RoPE".to_owned(), kernels)].into(),
        ..Row::default()
    };
    let rows = vec![row(5, "b", 10), row(3, "c", 30), row(9, "a", 20), Row { pid: 1, ..Row::default() }];
    let mut view = View::default();
    let pids = |v: &View| v.order(&rows).iter().map(|r| r.pid).collect::<Vec<_>>();
    assert_eq!(pids(&view), [3, 9, 5], "most kernels first; a process without GPU activity not shown");
    let key = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE);
    for (k, want) in [
        ('s', SortKey::Rate),
        ('s', SortKey::Tokens),
        ('s', SortKey::Pid),
        ('s', SortKey::Comm),
        ('s', SortKey::Kernels),
        ('4', SortKey::Pid),
    ] {
        assert_eq!(view.key(key(k)), Action::None);
        assert_eq!(view.sort, want);
    }
    assert_eq!(pids(&view), [3, 5, 9]);
    view.key(key('r'));
    assert_eq!(pids(&view), [9, 5, 3]);
    view.key(key('5'));
    view.key(key('r'));
    assert_eq!(pids(&view), [9, 5, 3], "by comm: a, b, c");
    assert_eq!(view.key(key('q')), Action::Quit);
    assert_eq!(view.key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)), Action::Quit);
}

#[test]
fn traps_a_token_to_one_decimal() {
    assert_eq!((per_token(3, 2).as_str(), per_token(10, 3).as_str(), per_token(5, 0).as_str()), ("1.5", "3.3", "-"));
}
