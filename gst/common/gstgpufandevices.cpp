/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "gstgpufandevices.h"

#include <cstdlib>
#include <mutex>
#include <optional>

#include "gpufan/cuda.h"
#include "gpufan/topology.h"

namespace {

struct Machine {
  gpufan::DeviceRegistry registry;
  std::string no_gpu_reason;
};

const Machine &
machine ()
{
  static Machine m;
  static std::once_flag once;
  std::call_once (once, [] {
    m.registry = gpufan::DeviceRegistry::Discover ();
    if (m.registry.gpu_count () == 0)
      m.no_gpu_reason = m.registry.gpu_note ().empty ()
          ? "no CUDA device found"
          : m.registry.gpu_note ();
  });
  return m;
}

} // namespace

const gpufan::DeviceRegistry &
gst_gpufan_device_registry (void)
{
  return machine ().registry;
}

const std::string &
gst_gpufan_no_gpu_reason (void)
{
  return machine ().no_gpu_reason;
}

guint64
gst_gpufan_device_free_memory (const gpufan::Device & device)
{
  return gpufan::cuda::FreeMemory (device.index);
}

gboolean
gst_gpufan_bind_thread (const std::vector<int> & cpus, std::string * why_not)
{
  return gpufan::Topology::System ()->BindCurrentThread (cpus, why_not);
}

gboolean
gst_gpufan_parse_compute_capability (const gchar * text, gint * major,
    gint * minor)
{
  if (!text)
    return FALSE;
  const std::optional<gpufan::ComputeCapability> cc
      = gpufan::ParseComputeCapability (text);
  if (!cc)
    return FALSE;
  *major = cc->major;
  *minor = cc->minor;
  return TRUE;
}

GType
gst_gpufan_codecs_get_type (void)
{
  static GType type = 0;
  static const GFlagsValue values[] = {
    { GST_GPUFAN_CODEC_NVENC, "NVENC video encoder", "nvenc" },
    { GST_GPUFAN_CODEC_NVDEC, "NVDEC video decoder", "nvdec" },
    { 0, nullptr, nullptr },
  };
  if (g_once_init_enter (&type)) {
    GType t = g_flags_register_static ("GstGpuFanCodecs", values);
    g_once_init_leave (&type, t);
  }
  return type;
}

void
gst_gpufan_device_to_structure (const gpufan::Device & device, GstStructure * s)
{
  std::string description = device.Describe ();
  std::string cpus = gpufan::FormatCpuList (device.local_cpus);
  gst_structure_set (s, "device", G_TYPE_STRING, description.c_str (),
      "device-kind", G_TYPE_STRING, gpufan::DeviceKindName (device.kind),
      "device-index", G_TYPE_INT, device.index, "device-name", G_TYPE_STRING,
      device.name.c_str (), "numa-node", G_TYPE_INT, device.numa_node,
      "local-cpus", G_TYPE_STRING, cpus.c_str (), nullptr);
  if (device.kind != gpufan::DeviceKind::kCuda)
    return;
  std::string cc = std::to_string (device.cc_major) + "."
      + std::to_string (device.cc_minor);
  gst_structure_set (s, "pci-bus-id", G_TYPE_STRING, device.pci_bus_id.c_str (),
      "uuid", G_TYPE_STRING, device.uuid.c_str (), "total-memory",
      G_TYPE_UINT64, (guint64)device.total_memory, "compute-capability",
      G_TYPE_STRING, cc.c_str (), "nvenc", G_TYPE_STRING,
      gpufan::SupportName (device.nvenc), "nvdec", G_TYPE_STRING,
      gpufan::SupportName (device.nvdec), nullptr);
}
