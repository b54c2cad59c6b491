//! The rocpd database's tables and views, written for tracer from rocprofiler-sdk's schema 3 as a format
//! (see the parent module for the files and commit read): each table's name ends in the database's
//! `_UUID` suffix ([`UUID`] here, replaced), a plain view of each takes its bare name, and the data and
//! summary views read those plain views, by the names and columns rocpd gives them.

/// Replaced by `_` and the database's UUID (underscores for dashes) in every statement.
pub(super) const UUID: &str = "@UUID@";
/// Replaced by the database's GUID: every row's `guid` default.
pub(super) const GUID: &str = "@GUID@";

/// The schema's version, as rocprofv3 writes it in `rocpd_metadata`.
pub(super) const SCHEMA_VERSION: &str = "3";

/// Every table, by its bare name, and its columns after `id` (each table's `id` is its integer primary key).
pub(super) const TABLES: &[(&str, &str)] = &[
    ("rocpd_metadata", r#""tag" TEXT NOT NULL, "value" TEXT NOT NULL"#),
    ("rocpd_string", r#""guid" TEXT DEFAULT '@GUID@' NOT NULL, "string" TEXT NOT NULL UNIQUE ON CONFLICT ABORT"#),
    (
        "rocpd_info_node",
        r#""guid" TEXT DEFAULT '@GUID@' NOT NULL, "hash" BIGINT NOT NULL UNIQUE, "machine_id" TEXT NOT NULL UNIQUE,
        "system_name" TEXT, "hostname" TEXT, "release" TEXT, "version" TEXT, "hardware_name" TEXT,
        "domain_name" TEXT"#,
    ),
    (
        "rocpd_info_process",
        r#""guid" TEXT DEFAULT '@GUID@' NOT NULL, "nid" INTEGER NOT NULL, "ppid" INTEGER, "pid" INTEGER NOT NULL,
        "init" BIGINT, "fini" BIGINT, "start" BIGINT, "end" BIGINT, "command" TEXT,
        "environment" JSONB DEFAULT '{}' NOT NULL, "extdata" JSONB DEFAULT '{}' NOT NULL,
        FOREIGN KEY (nid) REFERENCES `rocpd_info_node@UUID@` (id) ON UPDATE CASCADE"#,
    ),
    (
        "rocpd_info_thread",
        r#""guid" TEXT DEFAULT '@GUID@' NOT NULL, "nid" INTEGER NOT NULL, "ppid" INTEGER, "pid" INTEGER NOT NULL,
        "tid" INTEGER NOT NULL, "name" TEXT, "start" BIGINT, "end" BIGINT, "extdata" JSONB DEFAULT '{}' NOT NULL,
        FOREIGN KEY (nid) REFERENCES `rocpd_info_node@UUID@` (id) ON UPDATE CASCADE,
        FOREIGN KEY (pid) REFERENCES `rocpd_info_process@UUID@` (id) ON UPDATE CASCADE"#,
    ),
    (
        "rocpd_info_agent",
        r#""guid" TEXT DEFAULT '@GUID@' NOT NULL, "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL,
        "type" TEXT CHECK ("type" IN ('CPU', 'GPU')), "absolute_index" INTEGER, "logical_index" INTEGER,
        "type_index" INTEGER, "uuid" INTEGER, "name" TEXT, "model_name" TEXT, "vendor_name" TEXT,
        "product_name" TEXT, "user_name" TEXT, "extdata" JSONB DEFAULT '{}' NOT NULL,
        FOREIGN KEY (nid) REFERENCES `rocpd_info_node@UUID@` (id) ON UPDATE CASCADE,
        FOREIGN KEY (pid) REFERENCES `rocpd_info_process@UUID@` (id) ON UPDATE CASCADE"#,
    ),
    ("rocpd_info_queue", OWNED_NAME),
    ("rocpd_info_stream", OWNED_NAME),
    (
        "rocpd_info_pmc",
        r#""guid" TEXT DEFAULT '@GUID@' NOT NULL, "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "agent_id" INTEGER,
        "target_arch" TEXT CHECK ("target_arch" IN ('CPU', 'GPU')), "event_code" INT, "instance_id" INTEGER,
        "name" TEXT NOT NULL, "symbol" TEXT NOT NULL, "description" TEXT, "long_description" TEXT DEFAULT '',
        "component" TEXT, "units" TEXT DEFAULT '', "value_type" TEXT CHECK ("value_type" IN ('ABS', 'ACCUM', 'RELATIVE')),
        "block" TEXT, "expression" TEXT, "is_constant" INTEGER, "is_derived" INTEGER,
        "extdata" JSONB DEFAULT '{}' NOT NULL,
        FOREIGN KEY (nid) REFERENCES `rocpd_info_node@UUID@` (id) ON UPDATE CASCADE,
        FOREIGN KEY (pid) REFERENCES `rocpd_info_process@UUID@` (id) ON UPDATE CASCADE,
        FOREIGN KEY (agent_id) REFERENCES `rocpd_info_agent@UUID@` (id) ON UPDATE CASCADE"#,
    ),
    (
        "rocpd_info_code_object",
        r#""guid" TEXT DEFAULT '@GUID@' NOT NULL, "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "agent_id" INTEGER,
        "uri" TEXT, "load_base" BIGINT, "load_size" BIGINT, "load_delta" BIGINT,
        "storage_type" TEXT CHECK ("storage_type" IN ('FILE', 'MEMORY')), "extdata" JSONB DEFAULT '{}' NOT NULL,
        FOREIGN KEY (nid) REFERENCES `rocpd_info_node@UUID@` (id) ON UPDATE CASCADE,
        FOREIGN KEY (pid) REFERENCES `rocpd_info_process@UUID@` (id) ON UPDATE CASCADE,
        FOREIGN KEY (agent_id) REFERENCES `rocpd_info_agent@UUID@` (id) ON UPDATE CASCADE"#,
    ),
    (
        "rocpd_info_kernel_symbol",
        r#""guid" TEXT DEFAULT '@GUID@' NOT NULL, "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL,
        "code_object_id" INTEGER NOT NULL, "kernel_name" TEXT, "display_name" TEXT, "kernel_object" INTEGER,
        "kernarg_segment_size" INTEGER, "kernarg_segment_alignment" INTEGER, "group_segment_size" INTEGER,
        "private_segment_size" INTEGER, "sgpr_count" INTEGER, "arch_vgpr_count" INTEGER,
        "accum_vgpr_count" INTEGER, "extdata" JSONB DEFAULT '{}' NOT NULL,
        FOREIGN KEY (nid) REFERENCES `rocpd_info_node@UUID@` (id) ON UPDATE CASCADE,
        FOREIGN KEY (pid) REFERENCES `rocpd_info_process@UUID@` (id) ON UPDATE CASCADE,
        FOREIGN KEY (code_object_id) REFERENCES `rocpd_info_code_object@UUID@` (id) ON UPDATE CASCADE"#,
    ),
    (
        "rocpd_track",
        r#""guid" TEXT DEFAULT '@GUID@' NOT NULL, "nid" INTEGER NOT NULL, "pid" INTEGER, "tid" INTEGER,
        "name_id" INTEGER, "extdata" JSONB DEFAULT '{}' NOT NULL,
        FOREIGN KEY (nid) REFERENCES `rocpd_info_node@UUID@` (id) ON UPDATE CASCADE,
        FOREIGN KEY (pid) REFERENCES `rocpd_info_process@UUID@` (id) ON UPDATE CASCADE,
        FOREIGN KEY (tid) REFERENCES `rocpd_info_thread@UUID@` (id) ON UPDATE CASCADE,
        FOREIGN KEY (name_id) REFERENCES `rocpd_string@UUID@` (id) ON UPDATE CASCADE"#,
    ),
    (
        "rocpd_event",
        r#""guid" TEXT DEFAULT '@GUID@' NOT NULL, "category_id" INTEGER, "stack_id" INTEGER, "parent_stack_id" INTEGER,
        "correlation_id" INTEGER, "call_stack" JSONB DEFAULT '{}' NOT NULL, "line_info" JSONB DEFAULT '{}' NOT NULL,
        "extdata" JSONB DEFAULT '{}' NOT NULL,
        FOREIGN KEY (category_id) REFERENCES `rocpd_string@UUID@` (id) ON UPDATE CASCADE"#,
    ),
    (
        "rocpd_arg",
        r#""guid" TEXT DEFAULT '@GUID@' NOT NULL, "event_id" INTEGER NOT NULL, "position" INTEGER NOT NULL,
        "type" TEXT NOT NULL, "name" TEXT NOT NULL, "value" TEXT, "extdata" JSONB DEFAULT '{}' NOT NULL,
        FOREIGN KEY (event_id) REFERENCES `rocpd_event@UUID@` (id) ON UPDATE CASCADE"#,
    ),
    (
        "rocpd_pmc_event",
        r#""guid" TEXT DEFAULT '@GUID@' NOT NULL, "event_id" INTEGER, "pmc_id" INTEGER NOT NULL, "value" REAL DEFAULT 0.0,
        "extdata" JSONB DEFAULT '{}',
        FOREIGN KEY (pmc_id) REFERENCES `rocpd_info_pmc@UUID@` (id) ON UPDATE CASCADE,
        FOREIGN KEY (event_id) REFERENCES `rocpd_event@UUID@` (id) ON UPDATE CASCADE"#,
    ),
    (
        "rocpd_region",
        r#""guid" TEXT DEFAULT '@GUID@' NOT NULL, "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "tid" INTEGER NOT NULL,
        "start" BIGINT NOT NULL, "end" BIGINT NOT NULL, "name_id" INTEGER NOT NULL, "event_id" INTEGER,
        "extdata" JSONB DEFAULT '{}' NOT NULL,
        FOREIGN KEY (nid) REFERENCES `rocpd_info_node@UUID@` (id) ON UPDATE CASCADE,
        FOREIGN KEY (pid) REFERENCES `rocpd_info_process@UUID@` (id) ON UPDATE CASCADE,
        FOREIGN KEY (tid) REFERENCES `rocpd_info_thread@UUID@` (id) ON UPDATE CASCADE,
        FOREIGN KEY (name_id) REFERENCES `rocpd_string@UUID@` (id) ON UPDATE CASCADE,
        FOREIGN KEY (event_id) REFERENCES `rocpd_event@UUID@` (id) ON UPDATE CASCADE"#,
    ),
    (
        "rocpd_sample",
        r#""guid" TEXT DEFAULT '@GUID@' NOT NULL, "track_id" INTEGER NOT NULL, "timestamp" BIGINT NOT NULL,
        "event_id" INTEGER, "extdata" JSONB DEFAULT '{}' NOT NULL,
        FOREIGN KEY (track_id) REFERENCES `rocpd_track@UUID@` (id) ON UPDATE CASCADE,
        FOREIGN KEY (event_id) REFERENCES `rocpd_event@UUID@` (id) ON UPDATE CASCADE"#,
    ),
    (
        "rocpd_kernel_dispatch",
        r#""guid" TEXT DEFAULT '@GUID@' NOT NULL, "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "tid" INTEGER,
        "agent_id" INTEGER NOT NULL, "kernel_id" INTEGER NOT NULL, "dispatch_id" INTEGER NOT NULL,
        "queue_id" INTEGER NOT NULL, "stream_id" INTEGER NOT NULL, "start" BIGINT NOT NULL, "end" BIGINT NOT NULL,
        "private_segment_size" INTEGER, "group_segment_size" INTEGER, "workgroup_size_x" INTEGER NOT NULL,
        "workgroup_size_y" INTEGER NOT NULL, "workgroup_size_z" INTEGER NOT NULL, "grid_size_x" INTEGER NOT NULL,
        "grid_size_y" INTEGER NOT NULL, "grid_size_z" INTEGER NOT NULL, "region_name_id" INTEGER, "event_id" INTEGER,
        "extdata" JSONB DEFAULT '{}' NOT NULL,
        FOREIGN KEY (nid) REFERENCES `rocpd_info_node@UUID@` (id) ON UPDATE CASCADE,
        FOREIGN KEY (pid) REFERENCES `rocpd_info_process@UUID@` (id) ON UPDATE CASCADE,
        FOREIGN KEY (tid) REFERENCES `rocpd_info_thread@UUID@` (id) ON UPDATE CASCADE,
        FOREIGN KEY (agent_id) REFERENCES `rocpd_info_agent@UUID@` (id) ON UPDATE CASCADE,
        FOREIGN KEY (kernel_id) REFERENCES `rocpd_info_kernel_symbol@UUID@` (id) ON UPDATE CASCADE,
        FOREIGN KEY (queue_id) REFERENCES `rocpd_info_queue@UUID@` (id) ON UPDATE CASCADE,
        FOREIGN KEY (stream_id) REFERENCES `rocpd_info_stream@UUID@` (id) ON UPDATE CASCADE,
        FOREIGN KEY (region_name_id) REFERENCES `rocpd_string@UUID@` (id) ON UPDATE CASCADE,
        FOREIGN KEY (event_id) REFERENCES `rocpd_event@UUID@` (id) ON UPDATE CASCADE"#,
    ),
    (
        "rocpd_memory_copy",
        r#""guid" TEXT DEFAULT '@GUID@' NOT NULL, "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "tid" INTEGER,
        "start" BIGINT NOT NULL, "end" BIGINT NOT NULL, "name_id" INTEGER NOT NULL, "dst_agent_id" INTEGER,
        "dst_address" INTEGER, "src_agent_id" INTEGER, "src_address" INTEGER, "size" INTEGER NOT NULL,
        "queue_id" INTEGER, "stream_id" INTEGER, "region_name_id" INTEGER, "event_id" INTEGER,
        "extdata" JSONB DEFAULT '{}' NOT NULL"#,
    ),
    (
        "rocpd_memory_allocate",
        r#""guid" TEXT DEFAULT '@GUID@' NOT NULL, "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "tid" INTEGER,
        "agent_id" INTEGER, "type" TEXT CHECK ("type" IN ('ALLOC', 'FREE', 'REALLOC', 'RECLAIM')),
        "level" TEXT CHECK ("level" IN ('REAL', 'VIRTUAL', 'SCRATCH')), "start" BIGINT NOT NULL,
        "end" BIGINT NOT NULL, "address" INTEGER, "size" INTEGER NOT NULL, "queue_id" INTEGER, "stream_id" INTEGER,
        "event_id" INTEGER, "extdata" JSONB DEFAULT '{}' NOT NULL"#,
    ),
];

/// The columns of the queue and stream tables: a name, owned by a process.
const OWNED_NAME: &str = r#""guid" TEXT DEFAULT '@GUID@' NOT NULL, "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL,
    "name" TEXT, "extdata" JSONB DEFAULT '{}' NOT NULL,
    FOREIGN KEY (nid) REFERENCES `rocpd_info_node@UUID@` (id) ON UPDATE CASCADE,
    FOREIGN KEY (pid) REFERENCES `rocpd_info_process@UUID@` (id) ON UPDATE CASCADE"#;

/// `category` of an event, by its `category_id` (a string), as rocpd's views select it.
const CATEGORY: &str = "(SELECT string FROM `rocpd_string` RS WHERE RS.id = E.category_id AND RS.guid = E.guid)";

/// The views rocpd's tools read, by rocpd's names and columns: the kernel executions (`kernels`), the API
/// calls (`regions`, `samples`, `regions_and_samples`), processes, threads, kernel symbols and the
/// summaries (`top_kernels`, `top`, `busy`).
pub(super) fn views() -> Vec<String> {
    let mut v: Vec<String> =
        TABLES.iter().map(|(name, _)| format!("CREATE VIEW `{name}` AS SELECT * FROM `{name}{UUID}`")).collect();
    v.push(format!(
        "CREATE VIEW `kernels` AS SELECT K.id, K.guid, T.tid, {CATEGORY} AS category, R.string AS region,
        S.display_name AS name, K.nid, P.pid, A.absolute_index AS agent_abs_index,
        A.logical_index AS agent_log_index, A.type_index AS agent_type_index, A.type AS agent_type,
        S.code_object_id AS code_object_id, K.kernel_id, K.dispatch_id, K.stream_id, K.queue_id, Q.name AS queue,
        ST.name AS stream, K.start, K.end, (K.end - K.start) AS duration, K.grid_size_x AS grid_x,
        K.grid_size_y AS grid_y, K.grid_size_z AS grid_z, K.workgroup_size_x AS workgroup_x,
        K.workgroup_size_y AS workgroup_y, K.workgroup_size_z AS workgroup_z, K.group_segment_size AS lds_size,
        K.private_segment_size AS scratch_size, S.group_segment_size AS static_lds_size,
        S.private_segment_size AS static_scratch_size, E.stack_id, E.parent_stack_id, E.correlation_id AS corr_id
        FROM `rocpd_kernel_dispatch` K
        INNER JOIN `rocpd_info_agent` A ON A.id = K.agent_id AND A.guid = K.guid
        INNER JOIN `rocpd_event` E ON E.id = K.event_id AND E.guid = K.guid
        INNER JOIN `rocpd_string` R ON R.id = K.region_name_id AND R.guid = K.guid
        INNER JOIN `rocpd_info_kernel_symbol` S ON S.id = K.kernel_id AND S.guid = K.guid
        LEFT JOIN `rocpd_info_stream` ST ON ST.id = K.stream_id AND ST.guid = K.guid
        LEFT JOIN `rocpd_info_queue` Q ON Q.id = K.queue_id AND Q.guid = K.guid
        INNER JOIN `rocpd_info_process` P ON P.id = Q.pid AND P.guid = Q.guid
        INNER JOIN `rocpd_info_thread` T ON T.id = K.tid AND T.guid = K.guid"
    ));
    v.push(format!(
        "CREATE VIEW `regions` AS SELECT R.id, R.guid, {CATEGORY} AS category, S.string AS name, R.nid, P.pid, T.tid,
        R.start, R.end, (R.end - R.start) AS duration, R.event_id, E.stack_id, E.parent_stack_id,
        E.correlation_id AS corr_id, E.extdata, E.call_stack, E.line_info
        FROM `rocpd_region` R
        INNER JOIN `rocpd_event` E ON E.id = R.event_id AND E.guid = R.guid
        INNER JOIN `rocpd_string` S ON S.id = R.name_id AND S.guid = R.guid
        INNER JOIN `rocpd_info_process` P ON P.id = R.pid AND P.guid = R.guid
        INNER JOIN `rocpd_info_thread` T ON T.id = R.tid AND T.guid = R.guid"
    ));
    for (view, time) in [
        ("samples", "R.timestamp"),
        (
            "sample_regions",
            "R.timestamp AS start, R.timestamp AS end,
        (R.timestamp - R.timestamp) AS duration",
        ),
    ] {
        v.push(format!(
            "CREATE VIEW `{view}` AS SELECT R.id, R.guid, {CATEGORY} AS category,
            (SELECT string FROM `rocpd_string` RS WHERE RS.id = T.name_id AND RS.guid = T.guid) AS name, T.nid,
            P.pid, TH.tid, {time}, R.event_id, E.stack_id AS stack_id, E.parent_stack_id AS parent_stack_id,
            E.correlation_id AS corr_id, E.extdata AS extdata, E.call_stack AS call_stack, E.line_info AS line_info
            FROM `rocpd_sample` R
            INNER JOIN `rocpd_track` T ON T.id = R.track_id AND T.guid = R.guid
            INNER JOIN `rocpd_event` E ON E.id = R.event_id AND E.guid = R.guid
            INNER JOIN `rocpd_info_process` P ON P.id = T.pid AND P.guid = T.guid
            INNER JOIN `rocpd_info_thread` TH ON TH.id = T.tid AND TH.guid = T.guid"
        ));
    }
    v.extend(summaries());
    v
}

/// `regions_and_samples`, processes, threads, kernel symbols and the summary views.
fn summaries() -> [String; 7] {
    let node = "N.id AS nid, N.machine_id, N.system_name, N.hostname, N.release AS system_release,
        N.version AS system_version, P.guid, P.ppid, P.pid";
    let spans = "SELECT end, start FROM `rocpd_kernel_dispatch` UNION ALL SELECT end, start FROM `rocpd_memory_copy`";
    [
        "CREATE VIEW `regions_and_samples` AS SELECT * FROM `regions` UNION ALL SELECT * FROM `sample_regions`".into(),
        format!(
            "CREATE VIEW `processes` AS SELECT {node}, P.init, P.start, P.end, P.fini, P.command
            FROM `rocpd_info_process` P INNER JOIN `rocpd_info_node` N ON N.id = P.nid AND N.guid = P.guid"
        ),
        format!(
            "CREATE VIEW `threads` AS SELECT {node}, T.tid, T.start, T.end, T.name FROM `rocpd_info_thread` T
            INNER JOIN `rocpd_info_process` P ON P.id = T.pid AND P.guid = T.guid
            INNER JOIN `rocpd_info_node` N ON N.id = T.nid AND N.guid = T.guid"
        ),
        "CREATE VIEW `kernel_symbols` AS SELECT KS.id, KS.guid, KS.nid, P.pid, KS.code_object_id, KS.kernel_name,
        KS.display_name, KS.kernel_object, KS.kernarg_segment_size, KS.kernarg_segment_alignment,
        KS.group_segment_size, KS.private_segment_size, KS.sgpr_count, KS.arch_vgpr_count, KS.accum_vgpr_count,
        JSON_EXTRACT(KS.extdata, '$.size') AS kernel_symbol_size, JSON_EXTRACT(KS.extdata, '$.kernel_id') AS kernel_id,
        JSON_EXTRACT(KS.extdata, '$.kernel_code_entry_byte_offset') AS kernel_code_entry_byte_offset,
        JSON_EXTRACT(KS.extdata, '$.formatted_kernel_name') AS formatted_kernel_name,
        JSON_EXTRACT(KS.extdata, '$.demangled_kernel_name') AS demangled_kernel_name,
        JSON_EXTRACT(KS.extdata, '$.truncated_kernel_name') AS truncated_kernel_name,
        JSON_EXTRACT(KS.extdata, '$.kernel_address.handle') AS kernel_address
        FROM `rocpd_info_kernel_symbol` KS INNER JOIN `rocpd_info_process` P ON KS.pid = P.id AND KS.guid = P.guid"
            .into(),
        "CREATE VIEW `top_kernels` AS SELECT S.display_name AS name, COUNT(K.kernel_id) AS total_calls,
        SUM(K.end - K.start) / 1000.0 AS total_duration, (SUM(K.end - K.start) / COUNT(K.kernel_id)) / 1000.0 AS average,
        SUM(K.end - K.start) * 100.0 / (SELECT SUM(A.end - A.start) FROM `rocpd_kernel_dispatch` A) AS percentage
        FROM `rocpd_kernel_dispatch` K
        INNER JOIN `rocpd_info_kernel_symbol` S ON S.id = K.kernel_id AND S.guid = K.guid
        GROUP BY name ORDER BY total_duration DESC"
            .into(),
        format!(
            "CREATE VIEW `busy` AS SELECT A.agent_id, AG.type, GpuTime, WallTime, GpuTime * 1.0 / WallTime AS Busy
            FROM (SELECT agent_id, guid, SUM(end - start) AS GpuTime FROM (SELECT agent_id, guid, end, start
            FROM `rocpd_kernel_dispatch` UNION ALL SELECT dst_agent_id AS agent_id, guid, end, start
            FROM `rocpd_memory_copy`) GROUP BY agent_id, guid) A
            INNER JOIN (SELECT MAX(end) - MIN(start) AS WallTime FROM ({spans})) W ON 1 = 1
            INNER JOIN `rocpd_info_agent` AG ON AG.id = A.agent_id AND AG.guid = A.guid"
        ),
        format!(
            "CREATE VIEW `top` AS SELECT name, COUNT(*) AS total_calls, SUM(duration) / 1000.0 AS total_duration,
            (SUM(duration) / COUNT(*)) / 1000.0 AS average, SUM(duration) * 100.0 / total_time AS percentage
            FROM (SELECT ks.display_name AS name, (kd.end - kd.start) AS duration FROM `rocpd_kernel_dispatch` kd
            INNER JOIN `rocpd_info_kernel_symbol` ks ON kd.kernel_id = ks.id AND kd.guid = ks.guid
            UNION ALL SELECT rs.string AS name, (end - start) AS duration FROM `rocpd_memory_copy` mc
            INNER JOIN `rocpd_string` rs ON rs.id = mc.name_id AND rs.guid = mc.guid
            UNION ALL SELECT rs.string AS name, (end - start) AS duration FROM `rocpd_region` rr
            INNER JOIN `rocpd_string` rs ON rs.id = rr.name_id AND rs.guid = rr.guid) operations
            CROSS JOIN (SELECT SUM(end - start) AS total_time FROM ({spans} UNION ALL SELECT end, start
            FROM `rocpd_region`)) TOTAL GROUP BY name ORDER BY total_duration DESC"
        ),
    ]
}

/// Every table's `CREATE TABLE`, for a database of `uuid` (the suffix, `_` included) and `guid`.
pub(super) fn tables(uuid: &str, guid: &str) -> Vec<String> {
    TABLES
        .iter()
        .map(|(name, columns)| {
            format!("CREATE TABLE `{name}{UUID}` (\"id\" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, {columns})")
                .replace(UUID, uuid)
                .replace(GUID, guid)
        })
        .collect()
}

/// The views, for a database of `uuid`.
pub(super) fn view_statements(uuid: &str) -> Vec<String> {
    views().into_iter().map(|v| v.replace(UUID, uuid)).collect()
}
