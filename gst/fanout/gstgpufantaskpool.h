/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gst/gst.h>

#include <string>
#include <vector>

G_BEGIN_DECLS

#define GST_TYPE_GPUFAN_TASK_POOL (gst_gpufan_task_pool_get_type ())
G_DECLARE_FINAL_TYPE (GstGpuFanTaskPool, gst_gpufan_task_pool, GST,
    GPUFAN_TASK_POOL, GstTaskPool);

G_END_DECLS

/* Binds the calling thread to @cpus; FALSE (with a reason) when it cannot. */
typedef gboolean (
    *GstGpuFanBindFunc) (const std::vector<int> & cpus, std::string * why_not);

/* A task pool whose every task gets a thread of its own, bound to @cpus
 * (the CPUs local to a lane's device) before the task runs. A thread is
 * never reused for another task, so its binding cannot leak into other
 * elements' tasks the way binding a pooled thread would. (GstTask names the
 * thread after the task, e.g. "f:src_0".) */
GstGpuFanTaskPool * gst_gpufan_task_pool_new (const std::vector<int> & cpus,
    GstGpuFanBindFunc bind);

/* Outcome of the binding of the latest thread: "bound to CPUs 0-3",
 * "unbound: <why>", or "not started". */
std::string gst_gpufan_task_pool_binding (GstGpuFanTaskPool * pool);
