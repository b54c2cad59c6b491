//! Vulkan's compute pipelines: each named when made, and bound to the command buffers whose dispatches run it.

use std::collections::HashMap;

use tracer_common::api::Op;

use crate::trace::counted::{Counted, Counts};
use crate::{trace::Line, trace::event::Call};

/// Command buffers whose bound pipeline a process keeps at most (more are counted, their dispatches
/// unnamed).
const MAX_COMMAND_BUFFERS: usize = 1 << 16;
/// `VK_PIPELINE_BIND_POINT_COMPUTE`.
const BIND_POINT_COMPUTE: u32 = 1;

/// A Vulkan pipeline made (named after its module's shader) or bound to a command buffer (the pipeline
/// that buffer's dispatches run).
pub(super) fn call(
    c: &Call,
    names: &mut crate::record::names::Of<'_>,
    bound: &mut HashMap<u64, u64>,
    counters: &mut Counts,
    out: &mut Vec<Line>,
) {
    match c.api.op() {
        Op::PipelineCreate if c.ret == 0 => {
            if let (Some(pipeline), Some(module)) = (c.function, c.module)
                && let Some(k) = names.pipeline(pipeline, module, c.ts)
            {
                out.push(Line::Kernel(k));
            }
            if let Some(more) = c.size.and_then(|n| n.checked_sub(1)).filter(|&n| n > 0) {
                // Only the first pipeline of a call is read: the others' dispatches stay unnamed.
                counters.add(Counted::PipelinesUnread, more);
            }
        }
        Op::Bind if c.attribute == Some(BIND_POINT_COMPUTE) => {
            if let (Some(cmd), Some(pipeline)) = (c.stream, c.function) {
                if bound.len() < MAX_COMMAND_BUFFERS || bound.contains_key(&cmd) {
                    bound.insert(cmd, pipeline);
                } else {
                    counters.bump(Counted::CommandBuffersOverLimit);
                }
            }
        }
        _ => {}
    }
}
