//! Every counter user space adds to a footer, declared once by `counted!`: its variant, the name the footer,
//! the report and the metrics give it, and what it counts. The kernel side's counters are tracer-common's
//! `Counter` table, declared the same way beside its slots. A stage of the recording keeps what it counts
//! in [`Counts`] and says it through [`Counting`]; the footer (and the live metrics) is a loop over the
//! stages, so a row added here reaches the footer, the report's `counted:` line and `/metrics` with no
//! other edit. docs/trace-format.md says each counter in words.

use std::collections::BTreeMap;

use tracer_common::Counter;

/// Declares [`Counted`] once: each row's variant, footer name and meaning (its doc); a row marked `per`
/// is a family whose footer names end in a suffix (a cause, a uid), given where it is counted.
macro_rules! counted {
    ($($(#[doc = $doc:literal])+ $variant:ident = $name:literal $(per $suffix:literal)?;)*) => {
        /// What user space counts for the footer, one row each (see the module's doc).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub(crate) enum Counted {
            $($(#[doc = $doc])+ $variant,)*
        }

        impl Counted {
            /// Every row, in the table's order.
            pub(crate) const ALL: &[Self] = &[$(Self::$variant),*];

            /// The counter's name in the footer's `counters` (a family's: its names' common beginning).
            pub(crate) const fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)*
                }
            }

            /// A family's suffix, in words (`cause`, `uid`); None for a single counter.
            pub(crate) const fn per(self) -> Option<&'static str> {
                match self {
                    $(Self::$variant => counted!(@per $($suffix)?),)*
                }
            }
        }
    };
    (@per $suffix:literal) => { Some($suffix) };
    (@per) => { None };
}

counted! {
    // The ring and the drain.
    /// Records taken from the ring buffer.
    RingRecords = "ring_records";
    /// Records that could not be decoded.
    Undecodable = "undecodable";
    /// The most bytes of records that waited between the drain and naming at once.
    QueuePeakBytes = "queue_peak_bytes";
    /// Process-life records the drain kept in its queue's reserve while other kinds were dropped.
    QueueReserveRecords = "queue_reserve_records";
    /// 1 when the drain, naming and early-look threads run at nice -10.
    RecorderPriorityRaised = "recorder_priority_raised";
    // The session: the filter, the kernel's maps, the tracer's own cost.
    /// Processes in the PID filter at the start.
    FilterEntriesStart = "filter_entries_start";
    /// Processes in the PID filter at the end.
    FilterEntriesEnd = "filter_entries_end";
    /// Functions whose parameter plan could not be written to the eBPF map.
    ParamPlansUnwritten = "param_plans_unwritten";
    /// Program runs the kernel skipped (another tracer program ran on the CPU).
    ProgramRunsMissed = "program_runs_missed";
    /// GPU job stages the kernel skipped (of the program runs missed).
    JobStagesMissed = "job_stages_missed";
    /// Connections to the metrics endpoint closed to make room for a new one.
    MetricsConnectionsEvicted = "metrics_connections_evicted";
    /// Waits of 5 ms before accepting a metrics connection while every open one made progress.
    MetricsAcceptWaits = "metrics_accept_waits";
    /// The tracer's own CPU time, in microseconds.
    TracerCpuUs = "tracer_cpu_us";
    /// The tracer's peak resident memory, in KiB.
    TracerMaxRssKib = "tracer_max_rss_kib";
    // The library watch.
    /// Processes a look found ended with no earlier look held of them.
    MapsGoneBeforeLook = "maps_gone_before_look";
    /// Processes that joined and ended before their own probes could be placed.
    ProcessesEndedBeforeProbes = "processes_ended_before_probes";
    /// Processes ended before the ring's last read whose state the library watch still held.
    ProcessesHeldAfterExit = "processes_held_after_exit";
    /// Processes a look found ended whose libraries were listed from naming's last look.
    MapsGoneListedFromNaming = "maps_gone_listed_from_naming";
    /// Runtime copies opened in another root that had ended before the open was read.
    OpenedInOtherRootUnresolved = "opened_in_other_root_unresolved";
    /// Other roots seen after 64 whose usual places were not probed.
    RootsNotProbed = "roots_not_probed";
    /// Mapped files whose kind could not be told, by cause.
    MappedFilesUnread = "mapped_files_unread_" per "cause";
    // The process table.
    /// `process` records whose command line was cut to 64 KiB.
    ArgvCut = "argv_cut";
    // The early look.
    /// Processes the drain could not post for an early look (its queue full).
    EarlyLooksLost = "early_looks_lost";
    /// Early looks dropped to keep 1024.
    EarlyLooksEvicted = "early_looks_evicted";
    /// Mappings whose file the early look left to naming, 4096 files opened already.
    EarlyLookFilesLimit = "early_look_files_limit";
    /// Command lines the early look kept without their arguments past 64 KiB.
    EarlyLookArgvCut = "early_look_argv_cut";
    // Naming: processes' maps and files.
    /// Kernel handles that got no name.
    UnnamedKernels = "unnamed_kernels";
    /// Processes whose maps naming took from the early look's, theirs gone.
    MapsFromEarlyLook = "maps_from_early_look";
    /// Mapped files that could not be opened.
    FilesUnopened = "files_unopened";
    /// Mapped files not opened, 4096 files opened already.
    FilesNotOpenedLimit = "files_not_opened_limit";
    /// Mapped files refused: not regular files.
    FilesRefusedNotRegular = "files_refused_not_regular";
    /// Mapped files refused: another file than the maps line said.
    FilesRefusedChanged = "files_refused_changed";
    /// Mapped files refused: read past their end.
    FilesRefusedOutOfBounds = "files_refused_out_of_bounds";
    /// Mapped files refused: over the size read.
    FilesRefusedTooBig = "files_refused_too_big";
    /// Mapped files refused: on a FUSE file system.
    FilesRefusedFuse = "files_refused_fuse";
    /// Mapped files that could not be read.
    FilesUnreadable = "files_unreadable";
    /// Addresses outside every file mapping past 16 384 of a process: its maps not read again.
    MapsReadsOverLimit = "maps_reads_over_limit";
    /// New kernel handles a process presented past its limits.
    KernelHandlesOverLimit = "kernel_handles_over_limit";
    /// Dispatches of kernel objects no code object named.
    DispatchUnnamedObjects = "dispatch_unnamed_objects";
    /// Kernel handles refused by their user's budget, by uid.
    KernelHandlesOverBudget = "kernel_handles_over_budget_uid_" per "uid";
    /// Addresses outside every file mapping refused by their user's budget, by uid.
    MapsReadsOverBudget = "maps_reads_over_budget_uid_" per "uid";
    /// Kernel handles refused by the recording's budget.
    KernelHandlesOverRecordingBudget = "kernel_handles_over_recording_budget";
    /// Addresses refused by the recording's budget.
    MapsReadsOverRecordingBudget = "maps_reads_over_recording_budget";
    // Naming: code the finders read.
    /// Libraries whose code a finder read only in part.
    CodeFilesUnread = "code_files_unread";
    /// Libraries a finder was still reading when the recording stopped.
    CodeFilesUnfinished = "code_files_unfinished";
    /// Libraries not given to the finder, its queue full.
    FinderQueueFull = "finder_queue_full";
    /// Kernel handles named before the finder of their library answered.
    RegistrationCallsLate = "registration_calls_late";
    // Naming: HIP's fat binaries and ROCr's loader.
    /// Fat binary wrappers pointing into no mapped file.
    FatBinariesOutsideFiles = "fat_binaries_outside_files";
    /// Fat binaries in a file with no offload bundle there.
    FatBinariesWithoutBundle = "fat_binaries_without_bundle";
    /// Fat binaries whose bundle is corrupt or over a cap.
    FatBinariesWithCorruptBundle = "fat_binaries_with_corrupt_bundle";
    /// Module images found placed by the loader.
    ModuleImagesPlacedByLoader = "module_images_placed_by_loader";
    /// Module images not read: the process's maps were gone.
    ModuleImagesMapsGone = "module_images_maps_gone";
    /// Module images outside every mapped file.
    ModuleImagesOutsideFiles = "module_images_outside_files";
    /// Bundles a late attach could not open.
    BundlesUnreadable = "bundles_unreadable";
    /// `ROCr` loader lists that could not be read.
    LoaderListUnreadable = "loader_list_unreadable";
    /// `ROCr` loader lists cut at their bound.
    LoaderListTruncated = "loader_list_truncated";
    /// `ROCr` loader code object URIs that could not be read.
    LoaderUriUnreadable = "loader_uri_unreadable";
    /// `ROCr` loader code objects that could not be read.
    LoaderCodeObjectUnreadable = "loader_code_object_unreadable";
    // Naming: CUDA.
    /// Runtime handles named from the runtime's own tables.
    RuntimeHandlesNamed = "runtime_handles_named";
    /// Runtime handles left unnamed.
    RuntimeHandlesUnnamed = "runtime_handles_unnamed";
    /// Driver functions named.
    DriverFunctionsNamed = "driver_functions_named";
    /// Driver functions left unnamed.
    DriverFunctionsUnnamed = "driver_functions_unnamed";
    /// Driver names that agreed with the runtime's.
    DriverNamesAgreed = "driver_names_agreed";
    /// Driver names that differ from the runtime's by their device spelling alone.
    DriverNamesDeviceSpelling = "driver_names_device_spelling";
    /// Driver names that disagreed with the runtime's.
    DriverNamesDisagreed = "driver_names_disagreed";
    /// Graph executables read from the graph they were made from.
    GraphExecsNamed = "graph_execs_named";
    /// Graph executables read from their own node copies.
    GraphExecsNamedFromCopies = "graph_execs_named_from_copies";
    /// Copies whose first record pointed at a function the driver does not name.
    GraphExecCopiesFirstUnnamed = "graph_exec_copies_first_unnamed";
    /// Graph executables whose source graph was destroyed.
    GraphExecsSourceGone = "graph_execs_source_gone";
    /// Graph executables whose read failed or was out of bounds.
    GraphExecsLayout = "graph_execs_layout";
    /// Graph executables whose process had ended.
    GraphExecsProcessGone = "graph_execs_process_gone";
    /// Graph executables not read: the process's checks disagreed, or the driver was not measured.
    GraphExecsRefused = "graph_execs_refused";
    /// Kernel nodes of a graph executable without a name.
    GraphExecFunctionsUnnamed = "graph_exec_functions_unnamed";
    /// Graph checks whose executable agreed with its capture.
    GraphChecksAgreed = "graph_checks_agreed";
    /// Graph checks whose executable disagreed with its capture.
    GraphChecksDisagreed = "graph_checks_disagreed";
    /// Graph checks whose executable no longer read as a graph.
    GraphChecksUnread = "graph_checks_unread";
    /// Graph checks with a captured launch without a name.
    GraphChecksUnnamed = "graph_checks_unnamed";
    /// Graph checks of a capture of copies only.
    GraphChecksWithoutKernels = "graph_checks_without_kernels";
    /// Graph executables past 65 536 (or reads past 4096) of one process.
    GraphExecsUntracked = "graph_execs_untracked";
    // Naming: Vulkan.
    /// Shader modules named by the runtime's own pipeline calls.
    ShaderModulesNamedByRuntime = "shader_modules_named_by_runtime";
    /// Shader modules whose SPIR-V could not be read.
    ShaderModulesUnread = "shader_modules_unread";
    /// Shader modules named by their own SPIR-V.
    ShaderModulesSelfNamed = "shader_modules_self_named";
    /// Shader modules past a process's limit.
    ShaderModulesOverLimit = "shader_modules_over_limit";
    /// Shader modules that matched more than one of the library's arrays.
    ShaderModulesAmbiguous = "shader_modules_ambiguous";
    /// Shader modules named before the library's finder had answered.
    ShaderIndexLate = "shader_index_late";
    /// Shader modules that matched none of the library's arrays.
    ShaderModulesUnmatched = "shader_modules_unmatched";
    /// Shader arrays of a library left out of its index.
    ShaderArraysLeftOut = "shader_arrays_left_out";
    /// Shader arrays named from the library's code.
    ShaderArraysNamedFromCode = "shader_arrays_named_from_code";
    /// Pipelines the library names at run time.
    ShaderPipelinesNamedAtRunTime = "shader_pipelines_named_at_run_time";
    /// Pipelines created that could not be read.
    PipelinesUnread = "pipelines_unread";
    /// Command buffers past a process's limit.
    CommandBuffersOverLimit = "command_buffers_over_limit";
    /// Dispatches recorded with no pipeline bound.
    DispatchesWithoutBoundPipeline = "dispatches_without_bound_pipeline";
    /// Pipeline names that found no pipeline.
    PipelineNamesUnbound = "pipeline_names_unbound";
    /// Pipeline names that could not be read.
    PipelineNamesUnread = "pipeline_names_unread";
    /// Pipeline names past a process's limit.
    PipelineNamesOverLimit = "pipeline_names_over_limit";
    /// Vulkan entry points called past the loader.
    VulkanEntryPointsPastLoader = "vulkan_entry_points_past_loader";
    // Attribution.
    /// ioctl records of a number tracer does not know.
    IoctlUnknown = "ioctl_unknown";
    /// Kernel parameters read at a launch's entry that no launch record joined.
    ParamsWithoutLaunch = "params_without_launch";
    /// Launches of a kernel whose needed parameter could not be read.
    ParamsUnread = "params_unread";
    /// Runtime launches read only for their kernel's name.
    RuntimeLaunchesForNames = "runtime_launches_for_names";
    /// Kernel names cut at their bound.
    NameTruncated = "name_truncated";
    /// Kernel names that could not be read.
    NameFault = "name_fault";
    /// Module paths seen with no module load call.
    ModulePathsWithoutCall = "module_paths_without_call";
    /// Module loads whose path was not read.
    ModuleLoadsWithoutPath = "module_loads_without_path";
    /// Module paths that could not be read.
    ModulePathsUnread = "module_paths_unread";
    /// Module paths that stayed relative.
    ModulePathsRelative = "module_paths_relative";
    /// Code object opens whose relative path could not be made whole.
    CodeObjectOpensRelative = "code_object_opens_relative";
    /// Code object opens whose path was cut.
    CodeObjectOpensTruncated = "code_object_opens_truncated";
    /// Code object opens let go past 4096 threads.
    CodeObjectOpensLetGo = "code_object_opens_let_go";
    /// Code object images not bound to the file their thread opened.
    CodeObjectImagesUnmatched = "code_object_images_unmatched";
    /// Bound code object images let go past 256 of one process.
    CodeObjectImagesLetGo = "code_object_images_let_go";
    /// Code object files whose descriptor could not be read.
    CodeObjectFdsUnread = "code_object_fds_unread";
    /// Code directories not listed: the recording's budget was spent.
    CodeDirsNotListedBudget = "code_dirs_not_listed_budget";
    /// Code directories not listed.
    CodeDirsNotListed = "code_dirs_not_listed";
    /// Code directories that could not be listed.
    CodeDirsUnlisted = "code_dirs_unlisted";
    // Runs of repeated launches.
    /// Runs the kernel counted instead of writing their launches.
    RunsCountedInKernel = "runs_counted_in_kernel";
    /// Launches of the runs the kernel counted.
    LaunchesInKernelRuns = "launches_in_kernel_runs";
    /// Runs written as one `repeat` line as they came.
    RunsWrittenWhole = "runs_written_as_counted";
    /// Runs whose earlier launches the recorder did not hold.
    RepeatsWithoutHistory = "repeats_without_history";
    /// Launches of the runs without history, and of runs under way when their process left the filter.
    LaunchesInRepeatsLost = "launches_in_repeats_lost";
    /// Runs the kernel wrote malformed.
    RepeatsMalformed = "repeats_malformed";
    // The writer.
    /// Parts of recordings removed to keep them under `--keep-size`.
    PartsRemovedByKeepSize = "parts_removed_by_keep_size";
    /// Bytes of the parts removed.
    PartsRemovedBytes = "parts_removed_bytes";
    /// A rotated recording's part names found taken, skipped.
    RotationNamesTaken = "rotation_names_taken";
}

/// How many rows the table has.
const ROWS: usize = Counted::ALL.len();

/// What one stage counted: each row it has said (a counter said at 0 is in the footer at 0; one never said
/// is not), and its families' members by suffix.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    said: Said,
    per: BTreeMap<(Counted, String), u64>,
    /// The kernel side's counters (tracer-common's table), summed over the CPUs.
    kernel: BTreeMap<&'static str, u64>,
}

/// One slot per row.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Said([Option<u64>; ROWS]);

impl Default for Said {
    fn default() -> Self {
        Self([None; ROWS])
    }
}

impl Counts {
    /// One more.
    pub(crate) fn bump(&mut self, c: Counted) {
        self.add(c, 1);
    }

    /// `n` more (said, even when `n` is 0).
    pub(crate) fn add(&mut self, c: Counted, n: u64) {
        let slot = &mut self.said.0[c as usize];
        *slot = Some(slot.unwrap_or(0).saturating_add(n));
    }

    /// Says `n` (a figure taken as it stands: a peak, a flag).
    pub(crate) const fn set(&mut self, c: Counted, n: u64) {
        self.said.0[c as usize] = Some(n);
    }

    /// Says `n` if it is not 0 (a counter the footer leaves out when nothing happened).
    pub(crate) const fn set_nonzero(&mut self, c: Counted, n: u64) {
        if n > 0 {
            self.set(c, n);
        }
    }

    /// `n` more of a family's member (`suffix`: its cause, its uid).
    pub(crate) fn add_per(&mut self, c: Counted, suffix: &str, n: u64) {
        debug_assert!(c.per().is_some(), "{c:?} is not a family");
        let v = self.per.entry((c, suffix.to_owned())).or_default();
        *v = v.saturating_add(n);
    }

    /// A kernel-side counter, summed over the CPUs (said, even at 0).
    pub(crate) fn kernel(&mut self, c: Counter, n: u64) {
        *self.kernel.entry(c.name()).or_default() += n;
    }

    /// Adds another stage's counts in.
    pub(crate) fn merge(&mut self, other: &Self) {
        for (&c, n) in Counted::ALL.iter().zip(&other.said.0) {
            if let Some(n) = n {
                self.add(c, *n);
            }
        }
        for ((c, suffix), n) in &other.per {
            self.add_per(*c, suffix, *n);
        }
        for (name, n) in &other.kernel {
            *self.kernel.entry(name).or_default() += n;
        }
    }

    /// Every counter said, by its footer name: the kernel's, the table's rows in order, then the families'
    /// members.
    pub(crate) fn named(&self) -> impl Iterator<Item = (String, u64)> + '_ {
        let kernel = self.kernel.iter().map(|(name, n)| ((*name).to_owned(), *n));
        let rows = Counted::ALL.iter().zip(&self.said.0).filter_map(|(c, n)| Some((c.name().to_owned(), (*n)?)));
        kernel.chain(rows).chain(self.per.iter().map(|((c, suffix), n)| (format!("{}{suffix}", c.name()), *n)))
    }

    /// Whether nothing was said (tests).
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.said.0.iter().all(Option::is_none) && self.per.is_empty() && self.kernel.is_empty()
    }

    /// A counter by its footer name, as the tests look one up.
    #[cfg(test)]
    pub(crate) fn get(&self, name: &str) -> Option<&u64> {
        let c = Counted::ALL.iter().find(|c| c.per().is_none() && c.name() == name)?;
        self.said.0[*c as usize].as_ref()
    }
}

impl Counted {
    /// What a footer's counters say of it (0 when absent).
    pub(crate) fn in_footer(self, counters: &BTreeMap<String, u64>) -> u64 {
        counters.get(self.name()).copied().unwrap_or(0)
    }

    /// A family's members in a footer's counters: (suffix, count).
    pub(crate) fn members(self, counters: &BTreeMap<String, u64>) -> impl Iterator<Item = (&str, u64)> {
        counters.iter().filter_map(move |(name, n)| Some((name.strip_prefix(self.name())?, *n)))
    }
}

/// What a footer's counters say of a kernel-side counter (0 when absent).
pub(crate) fn kernel_in_footer(c: Counter, counters: &BTreeMap<String, u64>) -> u64 {
    counters.get(c.name()).copied().unwrap_or(0)
}

/// A counter by its footer name, as the tests index one (a counter never said panics, as a map's would).
#[cfg(test)]
impl std::ops::Index<&str> for Counts {
    type Output = u64;

    fn index(&self, index: &str) -> &u64 {
        self.get(index).unwrap_or_else(|| panic!("{index} was never counted"))
    }
}

/// A stage of the recording that counts for the footer: it says what it has counted so far.
pub(crate) trait Counting {
    fn counted(&self, out: &mut Counts);
}

#[cfg(test)]
mod tests {
    use super::{Counted, Counts};

    #[test]
    fn names_are_unique_and_families_end_in_an_underscore() {
        let mut names: Vec<&str> = Counted::ALL.iter().map(|c| c.name()).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "a name is given twice");
        for c in Counted::ALL {
            assert_eq!(c.per().is_some(), c.name().ends_with('_'), "{c:?}");
        }
        // Tracer-common's names (the kernel's counters) are not given again here.
        for k in tracer_common::Counter::ALL {
            assert!(!names.contains(&k.name()), "{} is the kernel's", k.name());
        }
    }

    #[test]
    fn a_counter_said_at_zero_is_named_and_one_never_said_is_not() {
        let mut counts = Counts::default();
        counts.set(Counted::Undecodable, 0);
        counts.set_nonzero(Counted::ArgvCut, 0);
        counts.bump(Counted::NameFault);
        counts.bump(Counted::NameFault);
        counts.add_per(Counted::MappedFilesUnread, "fuse", 3);
        let mut other = Counts::default();
        other.add(Counted::NameFault, 5);
        other.add_per(Counted::MappedFilesUnread, "fuse", 1);
        counts.merge(&other);
        let named: Vec<(String, u64)> = counts.named().collect();
        assert_eq!(
            named,
            [("undecodable".into(), 0), ("name_fault".into(), 7), ("mapped_files_unread_fuse".into(), 4)]
        );
        assert_eq!(counts.get("name_fault"), Some(&7));
        assert_eq!(counts.get("argv_cut"), None);
    }
}
