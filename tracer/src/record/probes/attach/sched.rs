//! The kernel's GPU scheduler tracepoints: which of them this kernel has, and where their records keep
//! the fields the `sched` programs read (from each tracepoint's format file).
//!
//! Two generations exist. Linux 6.17 renamed and reshaped them: `drm_sched_job_queue`, `_run` and `_done`
//! carry the finished fence's context and sequence number and the submitting file's DRM client id. Before,
//! `drm_sched_job`, `drm_run_job` and `drm_sched_process_job` carry the finished fence's address. Either
//! way the fence is the key that joins a job's three stages.

use std::path::Path;

use anyhow::{Result, anyhow, bail};
use tracer_common::{JobFields, JobFormat, JobStage};

use super::TRACEFS;

/// The tracepoint group, defined by the `gpu-sched` module.
pub(crate) const GROUP: &str = "gpu_scheduler";

/// The stage tracepoints of each generation, newest first, in [`JobStage`] order.
const GENERATIONS: [[&str; 3]; 2] = [
    ["drm_sched_job_queue", "drm_sched_job_run", "drm_sched_job_done"],
    ["drm_sched_job", "drm_run_job", "drm_sched_process_job"],
];

/// The scheduler tracepoints tracer attaches on this kernel, and where their fields are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct JobTracepoints {
    /// Tracepoint names in [`JobStage`] order.
    pub(crate) names: [&'static str; 3],
    pub(crate) format: JobFormat,
}

impl JobTracepoints {
    /// This kernel's scheduler tracepoints, if its `gpu_scheduler` group is there (the `gpu-sched` module
    /// is loaded: a driver using the DRM scheduler, such as amdgpu, is). `Ok(None)` when the group is
    /// absent; an error, saying why, when it is there with tracepoints or formats tracer does not know.
    pub(crate) fn find() -> Result<Option<Self>> {
        let group = Path::new(TRACEFS).join("events").join(GROUP);
        if !group.is_dir() {
            return Ok(None);
        }
        for names in GENERATIONS {
            let read = |name: &str| std::fs::read_to_string(group.join(name).join("format")).ok();
            let [Some(queue), Some(run), Some(done)] = names.map(read) else { continue };
            return Self::from_formats(names, [&queue, &run, &done]).map(Some);
        }
        bail!(
            "this kernel's {GROUP} tracepoints are none of those tracer knows ({})",
            GENERATIONS.map(|g| g.join(", ")).join("; or ")
        )
    }

    /// The fields of each stage from its format file's text.
    pub(crate) fn from_formats(names: [&'static str; 3], formats: [&str; 3]) -> Result<Self> {
        let mut format = [JobFields::ABSENT; 3];
        for (stage, (slot, text)) in JobStage::ALL.iter().zip(format.iter_mut().zip(formats)) {
            let name = names[*stage as usize - 1];
            let fields = Fields::parse(text);
            let key = fields
                .scalar("fence_context", 8)
                .or_else(|| fields.scalar("fence", 8))
                .ok_or_else(|| anyhow!("{GROUP}:{name} has no fence field tracer can key a job by"))?;
            *slot = JobFields {
                context: key,
                seqno: fields.scalar("fence_seqno", 8).unwrap_or(JobFields::NONE),
                client: fields.scalar("client_id", 8).unwrap_or(JobFields::NONE),
                ring: if *stage == JobStage::Queue { fields.string("name") } else { None }.unwrap_or(JobFields::NONE),
            };
        }
        Ok(Self { names, format })
    }
}

/// One `field:` line of a format file.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Field {
    name: String,
    offset: u32,
    size: u32,
    /// A `__data_loc` field: a u32 locating a variable-length value later in the record.
    data_loc: bool,
}

/// The fields of a format file.
struct Fields(Vec<Field>);

impl Fields {
    /// Reads the `field:TYPE NAME; offset:N; size:N; signed:N;` lines; others are skipped, as are lines that
    /// do not parse.
    fn parse(text: &str) -> Self {
        Self(
            text.lines()
                .filter_map(|l| {
                    let l = l.trim();
                    let mut parts = l.split(';').map(str::trim);
                    let decl = parts.next()?.strip_prefix("field:")?;
                    let mut number = |key: &str| parts.next()?.strip_prefix(key)?.trim().parse::<u32>().ok();
                    let offset = number("offset:")?;
                    let size = number("size:")?;
                    let name = decl.rsplit([' ', '\t', '*']).next()?.split('[').next()?.to_owned();
                    Some(Field { name, offset, size, data_loc: decl.starts_with("__data_loc") })
                })
                .collect(),
        )
    }

    fn get(&self, name: &str) -> Option<&Field> {
        self.0.iter().find(|f| f.name == name)
    }

    /// The offset of a plain field of this size.
    fn scalar(&self, name: &str, size: u32) -> Option<u32> {
        self.get(name).filter(|f| !f.data_loc && f.size == size).map(|f| f.offset)
    }

    /// The offset of a `__data_loc` string field's locator.
    fn string(&self, name: &str) -> Option<u32> {
        self.get(name).filter(|f| f.data_loc && f.size == 4).map(|f| f.offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel's three stage formats, as captured (`tests/data/drm_sched/README.md`).
    fn captured(kernel: &str, names: [&'static str; 3]) -> JobTracepoints {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/drm_sched").join(kernel);
        let texts = names.map(|n| std::fs::read_to_string(dir.join(format!("{n}.format"))).unwrap_or_default());
        JobTracepoints::from_formats(names, [&texts[0], &texts[1], &texts[2]]).unwrap_or_else(|e| panic!("{e:#}"))
    }

    const NONE: u32 = JobFields::NONE;

    #[test]
    fn linux_6_1_to_6_16_key_jobs_by_fence_address() {
        for kernel in ["6.1.0-50-amd64", "6.12.117+deb13-amd64"] {
            let t = captured(kernel, GENERATIONS[1]);
            // Offsets as the format files print them: drm_sched_job and drm_run_job share a class (fence at 16,
            // the ring's name a __data_loc at 24); drm_sched_process_job has the fence alone, at 8.
            assert_eq!(t.format[0], JobFields { context: 16, seqno: NONE, client: NONE, ring: 24 }, "{kernel}");
            assert_eq!(t.format[1], JobFields { context: 16, seqno: NONE, client: NONE, ring: NONE }, "{kernel}");
            assert_eq!(t.format[2], JobFields { context: 8, seqno: NONE, client: NONE, ring: NONE }, "{kernel}");
        }
    }

    #[test]
    fn linux_6_17_and_later_key_jobs_by_fence_context_and_seqno() {
        for kernel in ["6.17.13+deb13-amd64", "6.18.15+deb13-amd64", "7.3.4+deb13-amd64"] {
            let t = captured(kernel, GENERATIONS[0]);
            assert_eq!(t.format[0], JobFields { context: 24, seqno: 32, client: 40, ring: 8 }, "{kernel}");
            assert_eq!(t.format[1], JobFields { context: 24, seqno: 32, client: 40, ring: NONE }, "{kernel}");
            assert_eq!(t.format[2], JobFields { context: 8, seqno: 16, client: NONE, ring: NONE }, "{kernel}");
        }
    }

    #[test]
    fn a_format_without_a_fence_or_with_odd_sizes_is_refused() {
        let no_fence = "format:\n\tfield:u32 job_count;\toffset:8;\tsize:4;\tsigned:0;\n";
        let err = JobTracepoints::from_formats(GENERATIONS[0], [no_fence; 3]).unwrap_err().to_string();
        assert!(err.contains("no fence field"), "{err}");
        // A 4-byte fence is not a key this build reads (the programs read 8 bytes).
        let short = "\tfield:u32 fence_context;\toffset:8;\tsize:4;\tsigned:0;\n";
        let err = JobTracepoints::from_formats(GENERATIONS[0], [short; 3]).unwrap_err().to_string();
        assert!(err.contains("no fence field"), "{err}");
        // A name that is not a __data_loc string is left unread, not misread.
        let plain = "\tfield:u64 fence_context;\toffset:8;\tsize:8;\tsigned:0;\n\tfield:u64 name;\toffset:16;\tsize:8;\tsigned:0;\n";
        let t = JobTracepoints::from_formats(GENERATIONS[0], [plain; 3]).unwrap();
        assert_eq!(t.format[0].ring, NONE);
        assert!(Fields::parse("garbage\nfield:\nfield:x; offset:; size:1;").0.is_empty());
    }
}
