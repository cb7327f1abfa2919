/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanout's control interface: its action signals (see
 * gstgpufanout-control.cpp and docs/elements.md). */
#pragma once

#include "gstgpufanout.h"

/* Installs the action signals on gpufanout's class (class_init). */
void gst_gpufan_out_install_control_signals (GstGpuFanOutClass * klass);

/* gstgpufanout-childproxy.cpp: its pads as GstChildProxy children (the
 * interface's init, and the child-added/-removed signals from class_init) */
void gst_gpufan_out_child_proxy_init (gpointer g_iface, gpointer data);
void gst_gpufan_out_install_child_proxy (GstGpuFanOutClass * klass);
