//! `tracer export --format csv`: rocprofv3's kernel-trace columns, one row per kernel dispatch.

use std::{collections::BTreeMap, io::Write};

use anyhow::Result;

use crate::trace::{
    self, Dispatch, Queue,
    model::{Index, Visitor},
};

/// rocprofv3's kernel-trace CSV columns, in its order.
///
/// As rocprofiler-sdk's `generateCSV.cpp` writes the kernel trace with streams. Empty where tracer cannot know the value without touching the process: the agent and
/// stream (not in an AQL packet), the correlation id and end time (the GPU's side), and the register
/// counts (the code object the device ran is one of several per-target ones; `tracer inspect --target`
/// lists them).
pub(crate) const CSV_COLUMNS: [&str; 22] = [
    "Kind",
    "Agent_Id",
    "Queue_Id",
    "Stream_Id",
    "Thread_Id",
    "Dispatch_Id",
    "Kernel_Id",
    "Kernel_Name",
    "Correlation_Id",
    "Start_Timestamp",
    "End_Timestamp",
    "LDS_Block_Size",
    "Scratch_Size",
    "VGPR_Count",
    "Accum_VGPR_Count",
    "SGPR_Count",
    "Workgroup_Size_X",
    "Workgroup_Size_Y",
    "Workgroup_Size_Z",
    "Grid_Size_X",
    "Grid_Size_Y",
    "Grid_Size_Z",
];

/// The rows, written as the dispatches are visited.
struct Rows<W: Write> {
    w: ::csv::Writer<W>,
    /// Each queue's id, by (pid, queue): the recording's, else numbered as first seen.
    queues: BTreeMap<(u32, u64), u64>,
    dispatch_id: u64,
    failure: Option<::csv::Error>,
}

pub(crate) fn csv(input: &trace::Input, out: &mut dyn Write) -> Result<Vec<String>> {
    let mut w = ::csv::Writer::from_writer(out);
    w.write_record(CSV_COLUMNS)?;
    let mut rows = Rows { w, queues: BTreeMap::new(), dispatch_id: 0, failure: None };
    let (_, status) = trace::model::read(input, &mut rows)?;
    if let Some(e) = rows.failure {
        return Err(e.into());
    }
    rows.w.flush()?;
    Ok(status.warnings())
}

impl<W: Write> Visitor for Rows<W> {
    fn queue(&mut self, _: &Index, q: &Queue) {
        self.queues.insert((q.pid, q.queue), q.id);
    }

    fn dispatch(&mut self, index: &Index, d: &Dispatch) {
        if d.kernel.is_none() || self.failure.is_some() {
            return;
        }
        self.dispatch_id += 1;
        let n = self.queues.len() as u64;
        let queue_id = *self.queues.entry((d.pid, d.queue)).or_insert(n);
        let name = index.kernel_label(d.kernel).unwrap_or_default().into_owned();
        let num = |v: u64| v.to_string();
        // See CSV_COLUMNS for what stays empty and why. LDS is the packet's group segment (dynamic shared
        // memory included, not rounded to the allocation granule as rocprofv3 rounds the kernel's static
        // size).
        let row = [
            "KERNEL_DISPATCH".to_owned(),
            String::new(),
            num(queue_id),
            String::new(),
            num(d.tid.into()),
            num(self.dispatch_id),
            num(d.kernel.unwrap_or(0).into()),
            name,
            String::new(),
            num(d.ts),
            String::new(),
            num(d.group_segment.into()),
            num(d.private_segment.into()),
            String::new(),
            String::new(),
            String::new(),
            num(d.workgroup[0].into()),
            num(d.workgroup[1].into()),
            num(d.workgroup[2].into()),
            num(d.grid[0].into()),
            num(d.grid[1].into()),
            num(d.grid[2].into()),
        ];
        if let Err(e) = self.w.write_record(&row) {
            self.failure = Some(e);
        }
    }
}
