/* SPDX-License-Identifier: LGPL-2.1-or-later
 *
 * Which element of a branch refused caps, for errors that name it: at link
 * time (caps queries) and at run time (the caps each pad holds). A branch
 * is followed downstream through ghost pads, element by element, while each
 * element has one src pad.
 */
#pragma once

#include <gst/gst.h>

#include <string>

/* @caps as a user reads them, cut after a few hundred characters (the debug
 * text of an error has them whole). */
std::string gst_gpufan_caps_text (const GstCaps * caps);

/* "name (factory)" of @element. */
std::string gst_gpufan_element_text (GstElement * element);

/* At link time: the element of the branch that starts at @sink (a ghost pad
 * or an element's sink pad) that cannot take @offered: of the first
 * elements, whose caps queries do not intersect @offered, the first whose
 * own caps (template, `caps` property) do not. nullptr when every element
 * up to @stop passes them on: then what refuses them is downstream of the
 * branch. *takes (when given) gets what the refusing element takes. */
GstElement * gst_gpufan_link_refuser (GstPad * sink, GstCaps * offered,
    GstElement * stop, GstCaps ** takes);

/* At run time: the first element downstream of @src whose sink pad does not
 * hold the caps the pad before it holds (the one that refused them), or
 * whose src pad holds none (it found nothing its downstream takes).
 * *offered gets the caps it was offered. nullptr when none is found. */
GstElement * gst_gpufan_caps_refuser (GstPad * src, GstCaps ** offered);
