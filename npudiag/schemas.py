"""Every canonical table's pyarrow schema, in one place.

Readers return tables that start with exactly these columns, in this order. Tables that carry
per-run metric columns (kernels: the PMU tail of op_summary / kernel_details, which depends on
``--aic-metrics``) append them after the declared core, with normalised names (see
:func:`npudiag.profiling.formats.csvtext.normalise_column_name`). Times are microseconds, sizes bytes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# fmt: off
# the declarations below are tables: one column a line, its meaning beside it (docs/tables.md is made from them)
KERNELS = pa.schema(
    [
        ("source", pa.string()),  # file kind the row came from: op_summary, kernel_details, task_time, trace, db
        ("rank", pa.int32()),
        ("device_id", pa.int32()),
        ("step", pa.int64()),
        ("model_id", pa.int64()),  # null where the file says 4294967295 (no model)
        ("stream_id", pa.int64()),
        ("task_id", pa.int64()),
        ("op_name", pa.string()),
        ("op_type", pa.string()),
        ("op_state", pa.string()),
        ("task_type", pa.string()),  # AI_CORE, AI_VECTOR_CORE, MIX_AIC, AI_CPU, HCCL, ...
        ("task_class", pa.string()),  # compute or communication (npudiag.profiling.tasks: one rule for every source)
        ("start_us", pa.float64()),  # absolute, local Unix time (float64: 0.25 us resolution at today's epoch)
        ("start_ns", pa.int64()),  # the same instant exactly, parsed from the text; interval arithmetic uses it
        ("duration_us", pa.float64()),
        ("wait_us", pa.float64()),
        ("block_dim", pa.int64()),
        ("mix_block_dim", pa.int64()),
        ("hf32_eligible", pa.string()),
        ("context_id", pa.string()),
        ("input_shapes", pa.string()),
        ("input_dtypes", pa.string()),
        ("input_formats", pa.string()),
        ("output_shapes", pa.string()),
        ("output_dtypes", pa.string()),
        ("output_formats", pa.string()),
        ("connection_id", pa.int64()),  # the host call that launched it carries the same id (api_calls)
        ("launched_by", pa.string()),  # the framework op the user's code called that issued it (aten::conv2d), by the profile's flows
    ]
)

API_CALLS = pa.schema(
    [
        ("source", pa.string()),
        ("rank", pa.int32()),
        ("level", pa.string()),  # acl, runtime, node, hccl, ...
        ("name", pa.string()),  # API name without the "AscendCL@" / "Runtime@" prefix
        ("start_us", pa.float64()),
        ("start_ns", pa.int64()),
        ("duration_us", pa.float64()),
        ("thread_id", pa.int64()),
        ("connection_id", pa.int64()),
    ]
)

API_STATISTIC = pa.schema(
    [
        ("rank", pa.int32()),
        ("level", pa.string()),
        ("api_name", pa.string()),
        ("time_us", pa.float64()),
        ("count", pa.int64()),
        ("avg_us", pa.float64()),
        ("min_us", pa.float64()),
        ("max_us", pa.float64()),
        ("variance", pa.float64()),
    ]
)

OP_STATISTIC = pa.schema(
    [
        ("rank", pa.int32()),
        ("device_id", pa.int32()),
        ("op_type", pa.string()),
        ("core_type", pa.string()),
        ("count", pa.int64()),
        ("total_us", pa.float64()),
        ("min_us", pa.float64()),
        ("avg_us", pa.float64()),
        ("max_us", pa.float64()),
        ("ratio_pct", pa.float64()),
    ]
)

COPIES = pa.schema(
    [
        ("source", pa.string()),
        ("rank", pa.int32()),
        ("side", pa.string()),  # device (a MEMCPY task on a stream) or host (a copy API call)
        ("name", pa.string()),  # task or API name
        ("direction", pa.string()),  # H2D, D2H, D2D, H2H, unknown
        ("size_bytes", pa.int64()),  # null when the data does not say
        ("start_us", pa.float64()),
        ("start_ns", pa.int64()),
        ("duration_us", pa.float64()),
        ("stream_id", pa.int64()),
        ("thread_id", pa.int64()),
        ("mode", pa.string()),  # sync, async, unknown
        ("connection_id", pa.int64()),
        ("launched_by", pa.string()),  # device copies: the framework op that issued it, as for kernels
    ]
)

STEPS = pa.schema(
    [
        ("source", pa.string()),
        ("rank", pa.int32()),
        ("device_id", pa.int32()),
        ("step", pa.int64()),
        ("start_us", pa.float64()),  # null where the file gives only durations
        ("end_us", pa.float64()),
        ("start_ns", pa.int64()),  # the recorded range in exact ns where the file has it (.db, a trace's text ts)
        ("end_ns", pa.int64()),
        ("step_time_us", pa.float64()),  # Stage (torch_npu) or Iteration Time (msprof)
        ("stage_us", pa.float64()),  # torch_npu's Stage: first to last device task of the step, without Bubble
        ("computing_us", pa.float64()),
        ("communication_not_overlapped_us", pa.float64()),
        ("overlapped_us", pa.float64()),
        ("communication_us", pa.float64()),
        ("free_us", pa.float64()),
        ("bubble_us", pa.float64()),
        ("communication_not_overlapped_exclude_receive_us", pa.float64()),
        ("preparing_us", pa.float64()),
        ("fp_bp_us", pa.float64()),  # msprof FP to BP Time
        ("data_aug_bound_us", pa.float64()),
        ("iteration_refresh_us", pa.float64()),  # msprof Iteration Refresh (BP end to iteration end)
        ("reduce_us", pa.float64()),  # msprof: summed Reduce ranges of the iteration (gradient all-reduce)
    ]
)

COMM_TASKS = pa.schema(
    [
        ("source", pa.string()),  # db, trace (HCCL plane tasks), hccl_json, hardware (sub-tasks seen only on HCCL streams)
        ("rank", pa.int32()),
        ("op_name", pa.string()),  # the communication op the task belongs to (hcom_allReduce__868_0_1)
        ("plane_id", pa.int32()),
        ("task_type", pa.string()),  # Notify_Wait, Notify_Record, Memcpy, Reduce_Inline, RDMASend, Write Value, ...
        ("start_us", pa.float64()),
        ("start_ns", pa.int64()),
        ("duration_us", pa.float64()),
        ("stream_id", pa.int64()),
        ("task_id", pa.int64()),
        ("src_rank", pa.int64()),  # 4294967295 (no rank) is null
        ("dst_rank", pa.int64()),
        ("transport", pa.string()),  # SDMA, RDMA, LOCAL
        ("link_type", pa.string()),  # ON_CHIP, HCCS, PCIE, ROCE, SIO, ...
        ("size_bytes", pa.int64()),
        ("bandwidth_gbps", pa.float64()),  # GB/s (1e9 bytes per second), as the trace writes it
    ]
)

HOT_OPS = pa.schema(
    [
        ("group_by", pa.string()),  # "type" or "name"
        ("key", pa.string()),
        ("task_types", pa.string()),  # distinct task types of the group, ';'-joined
        ("ranks", pa.int32()),
        ("count", pa.int64()),
        ("total_us", pa.float64()),
        ("avg_us", pa.float64()),
        ("min_us", pa.float64()),
        ("max_us", pa.float64()),
        ("share_pct", pa.float64()),  # of the summed duration of all kernels
    ]
)

FINDINGS = pa.schema(
    [
        ("finding_id", pa.string()),  # rule_id:rank:n, the key of its rows in finding_intervals
        ("rule_id", pa.string()),
        ("severity", pa.string()),  # info, warning, critical
        ("rank", pa.int32()),
        ("title", pa.string()),
        ("time_lost_us", pa.float64()),  # estimate of what fixing it saves; null where no honest estimate exists
        ("count", pa.int64()),
        ("evidence", pa.string()),  # JSON: ops, streams, steps, time ranges behind the finding
        ("advice", pa.string()),
    ]
)

STEP_BREAKDOWN = pa.schema(
    [
        ("rank", pa.int32()),
        ("step", pa.int64()),  # null: a profile without steps (one row for the whole window)
        ("start_us", pa.float64()),  # the step's first device task
        # = before first task + computing + communication not overlapped + copy not overlapped + free + after last task
        ("step_time_us", pa.float64()),
        ("before_first_task_us", pa.float64()),  # the step's recorded start to its first device task (host time)
        ("computing_us", pa.float64()),
        ("communication_us", pa.float64()),
        ("overlapped_us", pa.float64()),
        ("communication_not_overlapped_us", pa.float64()),
        ("copy_not_overlapped_us", pa.float64()),
        ("free_us", pa.float64()),  # gaps between the step's first and last device task
        ("after_last_task_us", pa.float64()),  # the step's last device task end to its end
        ("device_busy_us", pa.float64()),  # computing + communication not overlapped + copy not overlapped
        ("stage_us", pa.float64()),  # torch_npu's Stage where the profile gives it, else first to last device task
        ("preparing_us", pa.float64()),  # torch_npu's Preparing where the profile gives it, else before_first_task_us
        ("kernels", pa.int64()),  # kernels counted in the step
        ("kernel_time_us", pa.float64()),  # their summed duration
        ("profiler_step_time_us", pa.float64()),  # the step's recorded duration (null without one)
        # profiler_range (ProfilerStep#N, STEP_TIME, msprof Iteration), extended (its tasks ran past it), step_trace
        # (a duration only, e.g. Stage), task_span (that duration was shorter than the tasks), kernels (no steps)
        ("step_time_source", pa.string()),
    ]
)

FINDING_INTERVALS = pa.schema(
    [
        ("finding_id", pa.string()),  # findings.finding_id
        ("rule_id", pa.string()),
        ("rank", pa.int32()),
        ("start_ns", pa.int64()),  # absolute and exact, as the tables' start_ns
        ("end_ns", pa.int64()),
        ("duration_us", pa.float64()),
    ]
)

DIFF = pa.schema(
    [
        ("match_by", pa.string()),  # type, name, type+shapes, name+shapes, torch (framework ops)
        ("key", pa.string()),
        ("status", pa.string()),  # both, added (only in current), removed (only in baseline)
        ("base_count", pa.float64()),  # per run: the mean over repeated runs, so not always whole
        ("cur_count", pa.float64()),
        ("base_total_us", pa.float64()),
        ("cur_total_us", pa.float64()),
        ("delta_total_us", pa.float64()),
        ("ratio", pa.float64()),  # cur_total / base_total; null for added ops
        ("base_avg_us", pa.float64()),
        ("cur_avg_us", pa.float64()),
        ("delta_avg_us", pa.float64()),
        ("base_share_pct", pa.float64()),
        ("cur_share_pct", pa.float64()),
        ("base_host_self_us", pa.float64()),  # --level torch: the ops' host self time per run (null at the kernel level)
        ("cur_host_self_us", pa.float64()),
        ("base_mfu_pct", pa.float64()),  # kernel level by type or name: the op group's MFU (op_perf's, null where unknown)
        ("cur_mfu_pct", pa.float64()),
    ]
)

LOG_EVENTS = pa.schema(
    [
        ("file", pa.string()),  # the log file (inside an archive: archive.tar.gz!member), or "-" for stdin
        ("line", pa.int64()),  # 1-based line of the record's first line in that file
        ("line_count", pa.int32()),  # the record spans lines line .. line + line_count - 1 (its last line with text)
        ("origin", pa.string()),  # host (plog, host device-<id> logs), device (msnpureport export), console (pasted / stdout)
        ("format", pa.string()),  # plog, cann_console, torch_npu, torch_dist, glog, python, python_logging, mindie,
        # dmesg, syslog, bbox (hisi_logs history), device_info, app, text
        ("device_id", pa.int32()),
        ("rank", pa.int32()),
        ("pid", pa.int64()),
        ("process", pa.string()),
        ("level", pa.string()),  # FATAL, ERROR, WARNING, INFO, DEBUG, EVENT, TRACE, OPLOG; null where the line does not say
        ("module", pa.string()),  # RUNTIME, GE, HCCL, DRV, ... (torch_npu: PTA, OPS, DIST, ...)
        ("timestamp", pa.timestamp("us")),  # local time as the log writes it; null where the line has none (or no year)
        # a line that gives month, day and time but no year (c10 / glog "E0324 13:00:25.428", syslog "Mar 24 13:00:25"):
        # that time in the year 2000 (a leap year), to order the records of one run; null where timestamp is set
        ("timestamp_no_year", pa.timestamp("us")),
        ("src_file", pa.string()),
        ("src_line", pa.int64()),
        ("thread_id", pa.int64()),
        ("function", pa.string()),
        ("message", pa.string()),  # continuation lines joined with "\n"
        ("error_codes", pa.list_(pa.string())),  # EZ9999, EI0002, ERR01100, 507035 ... distinct, in order; none at INFO/DEBUG/EVENT
        ("prefix", pa.string()),  # what a collector put before the record's first line ("(train pid=8464)", "[rank3]:"), stripped
    ]
)

TRIAGE = pa.schema(
    [
        ("kb_id", pa.string()),
        ("title", pa.string()),
        ("role", pa.string()),  # cause or symptom (a symptom, e.g. a notify timeout, usually follows a failure elsewhere)
        ("count", pa.int64()),
        ("first_timestamp", pa.timestamp("us")),
        ("last_timestamp", pa.timestamp("us")),
        ("first_timestamp_no_year", pa.timestamp("us")),  # where no matching record gives a year: the first month-day time (in 2000)
        ("first_file", pa.string()),
        ("first_line", pa.int64()),
        ("device_ids", pa.list_(pa.int32())),
        ("ranks", pa.list_(pa.int32())),
        ("error_codes", pa.list_(pa.string())),
        ("example", pa.string()),  # the first matching record's message (first line)
        ("meaning", pa.string()),
        ("causes", pa.string()),  # JSON list
        ("checks", pa.string()),  # JSON list
        ("fix", pa.string()),
        ("source", pa.string()),  # the public source(s) the entry's facts come from
        ("advice", pa.string()),  # "from the source", or "general advice for the <category> category" (the source has no fix)
        ("applies_to", pa.string()),  # the CANN / torch_npu releases the source text is from (null where not recorded)
        ("follows_from", pa.string()),  # kb_id of an earlier-listed finding whose rule chain leads to this one (not a root cause)
    ]
)

TENSORS = pa.schema(
    [
        ("file", pa.string()),
        ("offset", pa.int64()),  # byte offset of the tensor data in the file (null for stats CSV rows)
        ("source", pa.string()),  # bin (a dump file), stats_csv (dump_data=stats) or msprobe (msprobe's dump.json statistics)
        ("op_type", pa.string()),
        ("op_name", pa.string()),
        ("task_id", pa.int64()),
        ("stream_id", pa.int64()),
        ("timestamp_us", pa.int64()),  # from the file name; execution order
        ("time_dir", pa.string()),  # the YYYYMMDDHHMMSS folder
        ("device_id", pa.int32()),
        ("model_name", pa.string()),
        ("model_id", pa.int64()),
        ("iteration", pa.int64()),
        ("io", pa.string()),  # input, output, buffer, workspace; msprobe: input, output, parameters, parameters_grad
        ("index", pa.int32()),
        ("tensor_name", pa.string()),  # msprobe's name of the tensor (Functional.conv2d.0.forward.input.1); null for dump files
        ("dtype", pa.string()),  # DT_FLOAT, DT_BF16, ...
        ("format", pa.string()),  # as stored: ND, NCHW, NC1HWC0, FRACTAL_NZ, ...
        ("shape", pa.list_(pa.int64())),
        ("original_shape", pa.list_(pa.int64())),
        ("size_bytes", pa.int64()),
        ("element_count", pa.int64()),
        ("min", pa.float64()),
        ("max", pa.float64()),
        ("mean", pa.float64()),
        ("std", pa.float64()),
        ("l2norm", pa.float64()),
        ("nan_count", pa.int64()),
        ("pos_inf_count", pa.int64()),
        ("neg_inf_count", pa.int64()),
        ("zero_count", pa.int64()),
    ]
)

COMPARE = pa.schema(
    [
        ("order", pa.int64()),  # execution order of the op in MY_DUMP
        ("op_type", pa.string()),
        ("op_name", pa.string()),
        ("io", pa.string()),
        ("index", pa.int32()),
        ("golden_name", pa.string()),
        ("dtype", pa.string()),
        ("golden_dtype", pa.string()),
        ("shape", pa.list_(pa.int64())),
        ("cosine_similarity", pa.float64()),
        ("max_absolute_error", pa.float64()),
        ("max_relative_error", pa.float64()),
        ("mean_absolute_error", pa.float64()),
        ("mean_relative_error", pa.float64()),
        ("root_mean_square_error", pa.float64()),
        ("accumulated_relative_error", pa.float64()),
        ("relative_euclidean_distance", pa.float64()),
        ("kl_divergence", pa.float64()),
        ("my_mean", pa.float64()),
        ("my_std", pa.float64()),
        ("golden_mean", pa.float64()),
        ("golden_std", pa.float64()),
        ("one_thousandth_ratio", pa.float64()),  # share of elements with relative error < 0.001
        ("one_hundredth_ratio", pa.float64()),
        ("my_nan_count", pa.int64()),
        ("golden_nan_count", pa.int64()),
        ("passed", pa.bool_()),
        ("fail_reason", pa.string()),
    ]
)

STATS_COMPARE = pa.schema(
    [
        ("order", pa.int64()),  # execution order of the call in MY_DUMP (msprobe's dump.json order)
        ("op_type", pa.string()),  # the API or module: Functional.conv2d, Module.fc.Linear
        ("op_name", pa.string()),  # the call: Functional.conv2d.0.forward
        ("io", pa.string()),  # input, output, parameters, parameters_grad
        ("index", pa.int32()),
        ("tensor_name", pa.string()),  # msprobe's name: Functional.conv2d.0.forward.input.1
        ("golden_name", pa.string()),
        ("dtype", pa.string()),
        ("golden_dtype", pa.string()),
        ("shape", pa.list_(pa.int64())),
        ("golden_shape", pa.list_(pa.int64())),
        ("my_max", pa.float64()),
        ("my_min", pa.float64()),
        ("my_mean", pa.float64()),
        ("my_l2norm", pa.float64()),
        ("golden_max", pa.float64()),
        ("golden_min", pa.float64()),
        ("golden_mean", pa.float64()),
        ("golden_l2norm", pa.float64()),
        ("max_diff", pa.float64()),  # mine - golden, as msprobe's Max diff
        ("min_diff", pa.float64()),
        ("mean_diff", pa.float64()),
        ("l2norm_diff", pa.float64()),
        ("max_relative_error_pct", pa.float64()),  # |diff / golden| x 100 (msprobe's MaxRelativeErr); null where golden is 0
        ("min_relative_error_pct", pa.float64()),
        ("mean_relative_error_pct", pa.float64()),
        ("l2norm_relative_error_pct", pa.float64()),
        # tensor mode (both sides saved the tensor): msprobe's metrics of the data (npudiag.dump.tensor_metrics); null otherwise
        ("cosine", pa.float64()),
        ("euc_dist", pa.float64()),
        ("max_abs_err", pa.float64()),
        ("max_relative_err", pa.float64()),  # a fraction, as msprobe's tensor-mode MaxRelativeErr
        ("one_thousandth_err_ratio", pa.float64()),  # share of elements with relative error < 0.001
        ("five_thousandths_err_ratio", pa.float64()),
        ("result", pa.string()),  # msprobe's verdict: pass, warning or error (npudiag.dump.stats_compare)
        ("passed", pa.bool_()),  # result is not error
        ("fail_reason", pa.string()),  # why error or warning
    ]
)

CLUSTER_STEPS = pa.schema(
    [
        ("step", pa.int64()),
        ("rank", pa.int32()),
        ("device_id", pa.int32()),
        ("computing_us", pa.float64()),
        ("communication_not_overlapped_us", pa.float64()),
        ("overlapped_us", pa.float64()),
        ("communication_us", pa.float64()),
        ("free_us", pa.float64()),  # step_trace_time.csv's Free: exposed copies included
        ("stage_us", pa.float64()),  # the step's time on this rank
        ("bubble_us", pa.float64()),
        ("communication_not_overlapped_exclude_receive_us", pa.float64()),
        ("preparing_us", pa.float64()),  # step_trace_time.csv Preparing, where the rank's file has it
        ("source", pa.string()),  # step_trace (the rank's step_trace_time.csv) or kernels (computed)
        # Megatron position of the rank, from profiler_metadata.json distributed_args (null without)
        ("dp_index", pa.int32()),
        ("pp_index", pa.int32()),
        ("tp_index", pa.int32()),
    ]
)

SLOW_RANKS = pa.schema(
    [
        ("step", pa.int64()),
        ("rank", pa.int32()),
        ("stage_us", pa.float64()),
        ("median_stage_us", pa.float64()),
        ("excess_us", pa.float64()),
        ("excess_pct", pa.float64()),
        ("robust_z", pa.float64()),  # (stage - median) / (1.4826 * MAD)
        ("cause", pa.string()),  # computing, communication, free, bubble: the phase that grew most vs the median rank
        ("cause_excess_us", pa.float64()),
        ("slower_ops", pa.string()),  # JSON: ops slower than on the median rank, largest first
    ]
)

# cluster_comm_waits.parquet: one row per rank of each collective seen on two ranks or more
CLUSTER_COMM_WAITS = pa.schema(
    [
        ("step", pa.string()),  # as communication.json names it, e.g. step13
        ("op_name", pa.string()),
        ("occurrence", pa.int32()),  # the n-th time this op name appears in the step on a rank (from 0)
        ("rank", pa.int32()),
        ("start_us", pa.float64()),  # when the rank entered the collective (its own clock)
        ("wait_us", pa.float64()),  # latest entry - this rank's entry: how long it waited for the last rank
        ("late_rank", pa.int32()),  # the rank that entered last
        ("late_by_us", pa.float64()),  # latest entry - earliest entry: the longest any rank waited for it
        ("late_busy_us", pa.float64()),  # on the late rank, its device computing time in that stretch (null: no kernel data)
        ("late_comm_us", pa.float64()),  # its communication there, not overlapped by compute
        ("late_idle_us", pa.float64()),  # and its device idle time there (what held it up: late_host_cause)
        ("late_host_cause", pa.string()),  # what most of that idle time went to (idle_gaps' rule)
        ("late_host_kind", pa.string()),  # its kind: op_compile, host_api, sync, dataloader, dispatch
    ]
)

# idle_gaps.parquet: one row per device gap of a step (before its first task, between tasks, after its last),
# given to what delayed the launch of the task that ends it (npudiag.profiling.analysis.idle_causes)
IDLE_GAPS = pa.schema(
    [
        ("rank", pa.int32()),
        ("step", pa.int64()),  # null when the profile has no steps
        ("place", pa.string()),  # before_first_task, between_tasks, after_last_task
        ("start_ns", pa.int64()),  # exact; null for an after-last-task time of a step recorded as a duration only
        ("start_us", pa.float64()),
        ("idle_us", pa.float64()),
        ("cause", pa.string()),  # the compile / CANN call on the launching thread, the sync call, the DataLoader range or the framework op
        ("kind", pa.string()),  # op_compile, host_api, sync, dataloader, dispatch, none
        ("next_task", pa.string()),  # the device task that ends the gap (kernel or copy): its name
        ("launch_call", pa.string()),  # the CANN call that launched it (level@name; the one carrying its connection id)
        ("launch_thread_id", pa.int64()),  # the thread of that call (with torch_npu's task queue: the dequeue thread)
        ("launched_by", pa.string()),  # the framework op that issued it (kernels.launched_by)
    ]
)

# idle_causes.parquet: idle_gaps summed per rank, step, cause and kind; per step the rows add up to the step
# breakdown's before_first_task_us + free_us + after_last_task_us
IDLE_CAUSES = pa.schema(
    [
        ("rank", pa.int32()),
        ("step", pa.int64()),  # null when the profile has no steps
        ("cause", pa.string()),  # as idle_gaps.cause; null: nothing recorded says why
        ("kind", pa.string()),  # op_compile, host_api, sync, dataloader, dispatch, none
        ("idle_us", pa.float64()),
        ("count", pa.int64()),  # gaps
    ]
)

# check's health table: one row per (profile, kind of data)
HEALTH = pa.schema(
    [
        ("rank", pa.int32()),  # as the profile declares it; null when it declares none
        ("profile", pa.string()),  # the profile's folder (or file)
        ("data", pa.string()),  # kernels, host_api, framework_ops, flows, steps, memory, communication, aicore_metrics, frequency
        ("status", pa.string()),  # present, missing (asked for, absent), not collected, partial, unreadable
        ("rows", pa.int64()),  # the largest count of one source (trace events, .db rows); null for files only looked into
        ("found_in", pa.string()),  # the files (and a .db's tables) that hold it
        ("note", pa.string()),  # for missing / not collected: the switch that records it
    ]
)

# cluster_stages.parquet: one row per (step, pipeline stage), each phase the mean over the stage's ranks
CLUSTER_STAGES = pa.schema(
    [
        ("step", pa.int64()),
        ("pp_index", pa.int32()),  # the pipeline stage (profiler_metadata.json distributed_args)
        ("ranks", pa.list_(pa.int32())),
        ("computing_us", pa.float64()),
        ("communication_not_overlapped_us", pa.float64()),
        ("free_us", pa.float64()),
        ("bubble_us", pa.float64()),
        ("stage_us", pa.float64()),
    ]
)

COMM_LINKS = pa.schema(
    [
        ("rank", pa.int32()),  # the rank whose communication_matrix.json holds the row
        ("step", pa.string()),  # as the file names it, e.g. step13
        ("kind", pa.string()),  # p2p or collective
        ("op_group", pa.string()),  # e.g. batchsendrecv-top1@3985310405473756128
        ("op_name", pa.string()),
        ("src_rank", pa.int32()),
        ("dst_rank", pa.int32()),
        ("transport", pa.string()),  # HCCS, RDMA, PCIE, SDMA, LOCAL
        ("size_bytes", pa.int64()),  # Transit Size(MB) x 1e6
        ("time_us", pa.float64()),
        ("bandwidth_gbps", pa.float64()),  # GB/s: 1e9 bytes per second, as the file's Bandwidth(GB/s)
    ]
)

COMM_OPS = pa.schema(
    [
        ("rank", pa.int32()),
        ("step", pa.string()),
        ("kind", pa.string()),
        ("op_name", pa.string()),  # hcom_allReduce__868_0_1@group
        ("start_us", pa.float64()),
        ("elapse_us", pa.float64()),
        ("transit_us", pa.float64()),
        ("wait_us", pa.float64()),
        ("synchronization_us", pa.float64()),
        ("idle_us", pa.float64()),
    ]
)

# comm_bandwidth.parquet: per communication op and transport, what it moved (communication.json's
# "Communication Bandwidth Info", analysis.db's CommAnalyzerBandwidth); transports with nothing moved are left out
COMM_BANDWIDTH = pa.schema(
    [
        ("rank", pa.int32()),
        ("step", pa.string()),
        ("kind", pa.string()),  # p2p or collective
        ("op_name", pa.string()),
        ("transport", pa.string()),  # SDMA (the sum of the on-node links), RDMA, HCCS, PCIE, SIO
        ("size_bytes", pa.int64()),  # Transit Size(MB) x 1e6
        ("time_us", pa.float64()),  # Transit Time(ms) x 1000
        ("bandwidth_gbps", pa.float64()),
        ("large_packet_pct", pa.float64()),  # Large Packet Ratio x 100
    ]
)

# torch_ops.parquet: framework (aten / torch) ops by name, with the device time of the kernels they launched
TORCH_OPS = pa.schema(
    [
        ("rank", pa.int32()),
        ("name", pa.string()),  # aten::addmm, npu::npu_rms_norm ...
        ("calls", pa.int64()),
        ("host_total_us", pa.float64()),  # the calls' host time, nested ops included
        ("host_self_us", pa.float64()),  # minus the ops nested directly inside
        ("device_us", pa.float64()),  # the kernels launched from inside the op itself (not from a nested op)
        ("kernels", pa.int64()),
    ]
)

# host_ops.parquet: framework (torch) ops as time ranges on the host: torch_npu's trace_view.json cpu_op
# events, the .db's PYTORCH_API rows of type op (what torch_ops sums by name)
HOST_OPS = pa.schema(
    [
        ("source", pa.string()),  # trace, db, kineto (a PyTorch trace of a GPU run)
        ("rank", pa.int32()),
        ("name", pa.string()),  # aten::item, npu::npu_rms_norm ...
        ("start_us", pa.float64()),
        ("start_ns", pa.int64()),  # exact
        ("duration_us", pa.float64()),
        ("thread_id", pa.int64()),
    ]
)

# ranges.parquet: named host time ranges and the device work launched inside them: torch modules
# (torch_npu's python_function "nn.Module: X" events / the .db's PYTORCH_API rows of type trace) and mstx
# ranges (PYTORCH_API rows of type mstx); the ranges of a thread nest
RANGES = pa.schema(
    [
        ("source", pa.string()),  # trace, db, kineto (a PyTorch trace of a GPU run)
        ("rank", pa.int32()),
        ("kind", pa.string()),  # module, mstx
        ("name", pa.string()),  # Conv2d_0 (the "nn.Module: " prefix dropped), the mstx message
        ("path", pa.string()),  # the enclosing ranges of its kind and thread, outermost first: Net_0/Sequential_0/Conv2d_0
        ("depth", pa.int32()),  # 0 outermost
        ("start_us", pa.float64()),
        ("start_ns", pa.int64()),
        ("duration_us", pa.float64()),  # host time
        ("thread_id", pa.int64()),
        ("kernels", pa.int64()),  # device tasks (compute kernels, copies) launched inside, nested ranges included
        ("device_us", pa.float64()),  # their device time
    ]
)

# device_info.parquet: what each device is made of (msprof's PROF_*/device_N/info.json.N DeviceInfo)
DEVICE_INFO = pa.schema(
    [
        ("rank", pa.int32()),
        ("device_id", pa.int32()),
        ("ai_core_num", pa.int32()),  # AI Cores (cube units)
        ("aiv_num", pa.int32()),  # vector cores; 0 on chips without separate ones
        ("ai_cpu_core_num", pa.int32()),
        ("aic_frequency_mhz", pa.float64()),
    ]
)

MEMORY_TIMELINE = pa.schema(
    [
        ("source", pa.string()),  # memory_record, npu_module_mem, npu_mem, db
        ("rank", pa.int32()),
        ("device_id", pa.int32()),
        ("kind", pa.string()),  # allocator (memory_record: PTA, GE, PTA+GE, APP), module (npu_module_mem), npu (npu_mem)
        ("component", pa.string()),  # PTA, GE, PTA+GE, APP; a CANN module (SLOG, HCCL, ...); APP or DEVICE for npu_mem
        ("ts_us", pa.float64()),  # the sample's time, absolute local Unix time
        ("ts_ns", pa.int64()),  # the same instant exactly, parsed from the text
        ("allocated_bytes", pa.int64()),  # Total Allocated: bytes handed out to tensors
        ("reserved_bytes", pa.int64()),  # Total Reserved: bytes the allocator holds from the device; npu_mem: DDR + HBM in use
        ("active_bytes", pa.int64()),  # Total Active: allocated plus blocks freed but still in use by a stream
        ("hbm_bytes", pa.int64()),  # npu_mem only
        ("ddr_bytes", pa.int64()),  # npu_mem only
        ("stream_ptr", pa.int64()),
        ("device_type", pa.string()),  # NPU:0
    ]
)

OP_MEMORY = pa.schema(
    [
        ("source", pa.string()),  # operator_memory, db
        ("rank", pa.int32()),
        ("device_id", pa.int32()),
        ("op_name", pa.string()),  # null on a release-only row
        ("size_bytes", pa.int64()),  # negative: a release whose allocation came before the profile (CANN's convention)
        ("alloc_us", pa.float64()),  # null on a release-only row
        ("alloc_ns", pa.int64()),
        ("release_us", pa.float64()),  # null: not released while profiling (msprof files: allocation + duration)
        ("release_ns", pa.int64()),
        ("active_release_us", pa.float64()),
        ("duration_us", pa.float64()),  # how long the block was held
        ("active_duration_us", pa.float64()),
        ("alloc_allocated_bytes", pa.int64()),  # the pool's totals at the allocation
        ("alloc_reserved_bytes", pa.int64()),
        ("alloc_active_bytes", pa.int64()),
        ("release_allocated_bytes", pa.int64()),  # the pool's totals at the release
        ("release_reserved_bytes", pa.int64()),
        ("release_active_bytes", pa.int64()),
        ("stream_ptr", pa.int64()),
        ("device_type", pa.string()),
    ]
)

AICORE_FREQ = pa.schema(
    [
        ("source", pa.string()),  # trace (the "AI Core Freq" counter events) or db (AICORE_FREQ)
        ("rank", pa.int32()),
        ("device_id", pa.int32()),
        ("ts_us", pa.float64()),  # from this instant on the AI Core clock is freq_mhz (absolute local Unix time)
        ("ts_ns", pa.int64()),  # the same instant exactly
        ("freq_mhz", pa.float64()),
    ]
)

# op_perf.parquet: one row per compute kernel, how fast it ran against the chip's peak and what bounds it
# (npudiag.profiling.analysis.op_perf has the formulas and thresholds with their sources)
OP_PERF = pa.schema(
    [
        ("rank", pa.int32()),
        ("step", pa.int64()),
        ("start_ns", pa.int64()),
        ("op_name", pa.string()),
        ("op_type", pa.string()),
        ("task_type", pa.string()),
        ("dtype_class", pa.string()),  # fp16 (FLOAT16, BF16), int8, fp32, ... of its first input
        ("duration_us", pa.float64()),
        ("flops", pa.int64()),  # floating-point operations (multiply and add are two)
        ("flops_source", pa.string()),  # shape (the op's formula over its recorded shapes), cube_fops (ArithmeticUtilization)
        ("flops_note", pa.string()),  # why flops is null
        ("shape_flops", pa.int64()),  # the shape formula's count, beside a measured cube_fops
        ("moved_bytes", pa.float64()),
        ("bytes_source", pa.string()),  # memory_metrics (main memory read + write), shapes (inputs + outputs x dtype size)
        ("achieved_tflops", pa.float64()),  # flops / duration
        ("peak_tflops", pa.float64()),  # given, or AI Cores x clock x ops per cycle
        ("mfu_pct", pa.float64()),  # 100 x achieved_tflops / peak_tflops
        ("flops_per_byte", pa.float64()),  # arithmetic intensity: flops / moved_bytes
        ("bound", pa.string()),  # cube, cube+mte2, mte2, mte3, fixpipe, vector, vector+memory, scalar, latency, none; null without ratios
        ("aic_mac_ratio", pa.float64()),
        ("aic_mte2_ratio", pa.float64()),
        ("aic_fixpipe_ratio", pa.float64()),
        ("aic_scalar_ratio", pa.float64()),
        ("aiv_vec_ratio", pa.float64()),
        ("aiv_mte2_ratio", pa.float64()),
        ("aiv_mte3_ratio", pa.float64()),
        ("aiv_scalar_ratio", pa.float64()),
    ]
)

TABLES: dict[str, pa.Schema] = {
    "kernels": KERNELS,
    "api_calls": API_CALLS,
    "api_statistic": API_STATISTIC,
    "op_statistic": OP_STATISTIC,
    "copies": COPIES,
    "steps": STEPS,
    "hot_ops": HOT_OPS,
    "findings": FINDINGS,
    "step_breakdown": STEP_BREAKDOWN,
    "finding_intervals": FINDING_INTERVALS,
    "idle_gaps": IDLE_GAPS,
    "op_perf": OP_PERF,
    "idle_causes": IDLE_CAUSES,
    "comm_links": COMM_LINKS,
    "comm_ops": COMM_OPS,
    "comm_tasks": COMM_TASKS,
    "comm_bandwidth": COMM_BANDWIDTH,
    "memory_timeline": MEMORY_TIMELINE,
    "op_memory": OP_MEMORY,
    "aicore_freq": AICORE_FREQ,
    "device_info": DEVICE_INFO,
    "torch_ops": TORCH_OPS,
    "host_ops": HOST_OPS,
    "ranges": RANGES,
}

# fmt: on


def concat(tables: list[pa.Table]) -> pa.Table:
    """Tables of one kind from several files or ranks; columns one of them lacks become nulls."""
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="permissive")


_EMPTY: dict[str, pa.Table] = {}


def empty(name: str) -> pa.Table:
    """The table ``name`` with no rows (made once per name: tables are immutable, and making one costs
    a fraction of a millisecond, called a thousand times in a run of small inputs)."""
    table = _EMPTY.get(name)
    if table is None:
        table = _EMPTY[name] = TABLES[name].empty_table()
    return table


_ZEROS: list = [0, None]  # (length, buffer) of the last zero buffer made


def nulls(n: int, type: pa.DataType) -> pa.Array:
    """An all-null column of ``n`` rows. Fixed-width and text types share one zero buffer (validity,
    values, offsets), made by calloc, so memory pages are only mapped if read: a table of forty absent
    columns costs no more than one (``pa.nulls`` allocates and zero-fills each)."""
    fixed = _fixed(type)
    if not n or not (fixed or pa.types.is_string(type)):
        return pa.nulls(n, type)
    size = (n + 1) * 8
    if _ZEROS[0] < size:
        _ZEROS[:] = [size, pa.py_buffer(np.zeros(size, np.uint8))]
    zeros = _ZEROS[1]
    # each buffer cut to the size its array needs: an array serialised to another process carries its
    # buffers whole (a ten-row table sent from a pool worker carried the largest table's zeros)
    validity = zeros.slice(0, (n + 7) // 8)
    if fixed:
        width = 1 if pa.types.is_boolean(type) else type.bit_width // 8
        values = zeros.slice(0, (n + 7) // 8 if pa.types.is_boolean(type) else n * width)
        return pa.Array.from_buffers(type, n, [validity, values], null_count=n)
    return pa.Array.from_buffers(type, n, [validity, zeros.slice(0, (n + 1) * 4), pa.py_buffer(b"")], null_count=n)


def _fixed(type: pa.DataType) -> bool:
    return (
        pa.types.is_integer(type)
        or pa.types.is_floating(type)
        or pa.types.is_boolean(type)
        or pa.types.is_timestamp(type)
    )


def _compact(col: pa.Array | pa.ChunkedArray, n: int) -> pa.Array | pa.ChunkedArray:
    """``col`` as :func:`nulls` where every row is null: a reader's or a take's null column held its own
    zeroed buffers (fifteen of the kernels' columns in a trace without shapes: about 300 MB for 3.5 M rows)."""
    if n and col.null_count == n and (_fixed(col.type) or pa.types.is_string(col.type)):
        return nulls(n, col.type)
    return col


def map_distinct(
    values: pa.Array | pa.ChunkedArray, f: Callable[[str | None], str | None]
) -> pa.Array | pa.ChunkedArray:
    """``f`` of each text value (a string column), called once per distinct value, not once per row."""
    distinct = pc.unique(values)
    out = pa.array([f(v) for v in distinct.to_pylist()], pa.string())
    return out.take(pc.index_in(values, distinct, skip_nulls=False))


def conform(table: pa.Table, schema: pa.Schema, *, keep_extra: bool = False) -> pa.Table:
    """Return ``table`` with exactly ``schema``'s columns first (missing ones as nulls).

    Extra columns are appended when ``keep_extra`` (kernels keep their metric columns); otherwise
    dropped. Casting is safe-checked so a wrong type is a bug, not a silent truncation.
    """
    n = table.num_rows
    arrays = []
    have = set(table.column_names)
    for field in schema:
        if field.name in have:
            col = table.column(field.name)
            if col.type != field.type:
                col = col.cast(field.type)
            arrays.append(_compact(col, n))
        else:
            arrays.append(nulls(n, field.type))
    fields = list(schema)
    if keep_extra:
        wanted = set(schema.names)
        for name in table.column_names:
            if name not in wanted:
                arrays.append(_compact(table.column(name), n))
                fields.append(pa.field(name, table.column(name).type))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))
