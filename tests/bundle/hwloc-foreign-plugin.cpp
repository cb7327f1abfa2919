// SPDX-License-Identifier: LGPL-2.1-or-later
// A plugin that the "machine" offers in its hwloc plugin folder
// (check-bundle-offline.sh): libhwloc dlopens every hwloc_*.so it finds
// there. This one has no hwloc_gpufan_foreign_component, so hwloc closes it
// again; what the check looks for is that it was loaded at all, in the
// loader's record (LD_DEBUG=libs: "calling init"), as the GPU machine's
// hwloc_pci, hwloc_gl, hwloc_opencl and hwloc_xml_libxml were.
namespace {
__attribute__((constructor)) void Loaded() {}
}  // namespace
