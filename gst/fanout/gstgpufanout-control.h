/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* gpufanout's control interface: its action signals (see
 * gstgpufanout-control.cpp and docs/elements.md). */
#pragma once

#include "gstgpufanout.h"

/* Installs the action signals on gpufanout's class (class_init). */
void gst_gpufan_out_install_control_signals (GstGpuFanOutClass * klass);
