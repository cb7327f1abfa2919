/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Per-device worker threads: lane tasks run on threads bound to the CPUs
 * local to the lane's device. The fan-out sets this pool on a lane's task
 * when the pad announces the task (STREAM_STATUS CREATE), before it starts. */
#include "gstgpufantaskpool.h"

#include <mutex>
#include <thread>

#include "gpufan/topology.h"

GST_DEBUG_CATEGORY_STATIC (gst_gpufan_task_pool_debug);
#define GST_CAT_DEFAULT gst_gpufan_task_pool_debug

struct GstGpuFanTaskPoolPrivate {
  std::vector<int> cpus;
  GstGpuFanBindFunc bind = nullptr;

  std::mutex lock;
  std::string binding = "not started"; /* under lock */
};

struct _GstGpuFanTaskPool {
  GstTaskPool parent;
  GstGpuFanTaskPoolPrivate * priv;
};

G_DEFINE_TYPE_WITH_CODE (GstGpuFanTaskPool, gst_gpufan_task_pool,
    GST_TYPE_TASK_POOL,
    GST_DEBUG_CATEGORY_INIT (gst_gpufan_task_pool_debug, "gpufantaskpool", 0,
        "gpufan per-device worker threads"));

static void
run_bound (GstGpuFanTaskPool * self, GstTaskPoolFunction func,
    gpointer user_data)
{
  GstGpuFanTaskPoolPrivate * priv = self->priv;

  /* Nothing may keep the task from running: GstTask joins this thread. */
  try {
    std::string why_not;
    std::string outcome;
    if (priv->cpus.empty ())
      outcome = "unbound: the device's local CPUs are unknown";
    else if (!priv->bind (priv->cpus, &why_not))
      outcome = "unbound: " + why_not;
    else
      outcome = "bound to CPUs " + gpufan::FormatCpuList (priv->cpus);
    GST_DEBUG_OBJECT (self, "worker thread %s", outcome.c_str ());
    std::lock_guard<std::mutex> lk (priv->lock);
    priv->binding = outcome;
  } catch (const std::exception & e) {
    GST_WARNING_OBJECT (self, "worker thread left unbound: %s", e.what ());
  }

  func (user_data);
}

static gpointer
gst_gpufan_task_pool_push (GstTaskPool * pool, GstTaskPoolFunction func,
    gpointer user_data, GError ** error)
{
  GstGpuFanTaskPool * self = GST_GPUFAN_TASK_POOL (pool);
  try {
    /* the pool outlives the thread: GstTask joins it before it drops the
     * pool */
    return new std::thread (run_bound, self, func, user_data);
  } catch (const std::exception & e) {
    g_set_error (error, GST_CORE_ERROR, GST_CORE_ERROR_FAILED,
        "Could not start a worker thread: %s", e.what ());
    return nullptr;
  }
}

static void
gst_gpufan_task_pool_join (GstTaskPool *, gpointer id)
{
  auto * thread = static_cast<std::thread *> (id);
  if (thread->joinable ())
    thread->join ();
  delete thread;
}

static void
gst_gpufan_task_pool_dispose_handle (GstTaskPool *, gpointer id)
{
  /* only called for handles that were never joined */
  auto * thread = static_cast<std::thread *> (id);
  if (thread->joinable ())
    thread->detach ();
  delete thread;
}

static void
gst_gpufan_task_pool_noop (GstTaskPool *, GError **)
{
}

static void
gst_gpufan_task_pool_cleanup (GstTaskPool *)
{
}

static void
gst_gpufan_task_pool_finalize (GObject * object)
{
  delete GST_GPUFAN_TASK_POOL (object)->priv;
  G_OBJECT_CLASS (gst_gpufan_task_pool_parent_class)->finalize (object);
}

static void
gst_gpufan_task_pool_class_init (GstGpuFanTaskPoolClass * klass)
{
  GObjectClass * gobject_class = G_OBJECT_CLASS (klass);
  GstTaskPoolClass * pool_class = GST_TASK_POOL_CLASS (klass);

  gobject_class->finalize = gst_gpufan_task_pool_finalize;
  /* No GThreadPool: a thread per task, created in push. */
  pool_class->prepare = gst_gpufan_task_pool_noop;
  pool_class->cleanup = gst_gpufan_task_pool_cleanup;
  pool_class->push = gst_gpufan_task_pool_push;
  pool_class->join = gst_gpufan_task_pool_join;
  pool_class->dispose_handle = gst_gpufan_task_pool_dispose_handle;
}

static void
gst_gpufan_task_pool_init (GstGpuFanTaskPool * self)
{
  self->priv = new GstGpuFanTaskPoolPrivate ();
}

GstGpuFanTaskPool *
gst_gpufan_task_pool_new (const std::vector<int> & cpus, GstGpuFanBindFunc bind)
{
  auto * self = GST_GPUFAN_TASK_POOL (
      g_object_new (GST_TYPE_GPUFAN_TASK_POOL, nullptr));
  gst_object_ref_sink (self);
  self->priv->cpus = cpus;
  self->priv->bind = bind;
  return self;
}

std::string
gst_gpufan_task_pool_binding (GstGpuFanTaskPool * pool)
{
  std::lock_guard<std::mutex> lk (pool->priv->lock);
  return pool->priv->binding;
}
