/* SPDX-License-Identifier: LGPL-2.1-or-later */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "gstgpufanwirepay.h"

#include <cstring>

#ifndef GPUFAN_WIRE_PAY_TYPE_NAME
#define GPUFAN_WIRE_PAY_TYPE_NAME "GstGpuFanWirePay"
#endif

GST_DEBUG_CATEGORY_STATIC (gst_gpufan_wire_pay_debug);
#define GST_CAT_DEFAULT gst_gpufan_wire_pay_debug

/* GDP 1.0 (gst-plugins-bad's dataprotocol): a 62-byte header, then the
 * payload. No CRCs (flags 0): SRT checks what crosses. */
enum : guint16 {
  kGdpHeaderLength = 62,
  kGdpPayloadBuffer = 1,
  kGdpPayloadCaps = 2,
  kGdpPayloadEventNone = 64,
  /* how a custom event crosses: GST_EVENT_CUSTOM_DOWNSTREAM's low 16 bits
   * (serialized, downstream, not sticky: gdpdepay stores nothing) */
  kWireCustom = GST_EVENT_CUSTOM_DOWNSTREAM & 0xffff,
};

struct GstGpuFanWirePay {
  GstElement parent;
  GstPad * sinkpad, * srcpad;
  /* FLUSH_START comes outside the streaming thread: one packet at a time */
  GMutex push_lock;
  /* our own stream-start, caps and segment went out (under push_lock) */
  gboolean started;
};

struct GstGpuFanWirePayClass {
  GstElementClass parent_class;
};

static GstElementClass * parent_class = nullptr;

#define WIRE_PAY(obj) \
  (G_TYPE_CHECK_INSTANCE_CAST ((obj), gst_gpufan_wire_pay_get_type (), \
      GstGpuFanWirePay))

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);
static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS ("application/x-gdp"));

/* Big-endian, a byte at a time: header fields sit at odd offsets, and
 * GStreamer's GST_WRITE_* macros store unaligned words (UBSan). */
static void
put_be (guint8 * at, guint64 value, guint bytes)
{
  for (guint i = 0; i < bytes; i++)
    at[i] = (guint8) (value >> (8 * (bytes - 1 - i)));
}

static GstBuffer *
packet_new (guint16 type, guint32 payload_length)
{
  GstBuffer * packet = gst_buffer_new_allocate (nullptr, kGdpHeaderLength,
      nullptr);
  GstMapInfo map;
  gst_buffer_map (packet, &map, GST_MAP_WRITE);
  guint8 * h = map.data;
  memset (h, 0, kGdpHeaderLength);
  h[0] = 1; /* version 1.0 */
  put_be (h + 4, type, 2);
  put_be (h + 6, payload_length, 4);
  gst_buffer_unmap (packet, &map);
  return packet;
}

/* Header fields at @offset (big endian) of a packet just made. */
static void
packet_set_u64 (GstBuffer * packet, gsize offset, guint64 value)
{
  guint8 bytes[8];
  put_be (bytes, value, 8);
  gst_buffer_fill (packet, offset, bytes, sizeof (bytes));
}

static GstBuffer *
packet_with_string (guint16 type, gchar * text)
{
  const guint32 length = text ? (guint32) strlen (text) + 1 : 0;
  GstBuffer * packet = packet_new (type, length);
  if (text)
    gst_buffer_append_memory (packet,
        gst_memory_new_wrapped ((GstMemoryFlags) 0, text, length, 0, length,
            text, g_free));
  return packet;
}

/* Our src pad's own stream-start, caps and segment, once. */
static void
ensure_started (GstGpuFanWirePay * self)
{
  if (self->started)
    return;
  self->started = TRUE;
  gchar * id = gst_pad_create_stream_id (self->srcpad, GST_ELEMENT (self),
      "gdp");
  gst_pad_push_event (self->srcpad, gst_event_new_stream_start (id));
  g_free (id);
  GstCaps * caps = gst_caps_new_empty_simple ("application/x-gdp");
  gst_pad_push_event (self->srcpad, gst_event_new_caps (caps));
  gst_caps_unref (caps);
  GstSegment segment;
  gst_segment_init (&segment, GST_FORMAT_BYTES);
  gst_pad_push_event (self->srcpad, gst_event_new_segment (&segment));
}

static GstFlowReturn
push_packet (GstGpuFanWirePay * self, GstBuffer * packet)
{
  g_mutex_lock (&self->push_lock);
  ensure_started (self);
  GstFlowReturn ret = gst_pad_push (self->srcpad, packet);
  g_mutex_unlock (&self->push_lock);
  return ret;
}

static GstFlowReturn
gst_gpufan_wire_pay_chain (GstPad *, GstObject * parent, GstBuffer * buffer)
{
  GstGpuFanWirePay * self = WIRE_PAY (parent);
  GstBuffer * packet = packet_new (kGdpPayloadBuffer,
      (guint32) gst_buffer_get_size (buffer));
  packet_set_u64 (packet, 10, GST_BUFFER_PTS (buffer));
  packet_set_u64 (packet, 18, GST_BUFFER_DURATION (buffer));
  packet_set_u64 (packet, 26, GST_BUFFER_OFFSET (buffer));
  packet_set_u64 (packet, 34, GST_BUFFER_OFFSET_END (buffer));
  const guint16 kept = GST_BUFFER_FLAGS (buffer) & (GST_BUFFER_FLAG_LIVE
      | GST_BUFFER_FLAG_DISCONT | GST_BUFFER_FLAG_HEADER | GST_BUFFER_FLAG_GAP
      | GST_BUFFER_FLAG_DELTA_UNIT);
  guint8 flags[2];
  put_be (flags, kept, 2);
  gst_buffer_fill (packet, 42, flags, sizeof (flags));
  packet_set_u64 (packet, 44, GST_BUFFER_DTS (buffer));
  /* the frame's memory, not a copy of it */
  packet = gst_buffer_append (packet, buffer);
  return push_packet (self, packet);
}

static gboolean
gst_gpufan_wire_pay_sink_event (GstPad *, GstObject * parent, GstEvent * event)
{
  GstGpuFanWirePay * self = WIRE_PAY (parent);
  GstBuffer * packet;
  if (GST_EVENT_TYPE (event) == GST_EVENT_CAPS) {
    GstCaps * caps;
    gst_event_parse_caps (event, &caps);
    packet = packet_with_string (kGdpPayloadCaps, gst_caps_to_string (caps));
  } else if ((guint) GST_EVENT_TYPE (event) > G_MAXUINT16) {
    /* GDP's type field has 16 bits, too few for the custom types: they
     * travel as plain serialized events with their type in a field, and
     * the far end makes them whole (gst_gpufan_remote_wire_depayloader) */
    const GstStructure * s = gst_event_get_structure (event);
    GstStructure * fields = s ? gst_structure_copy (s)
                              : gst_structure_new_empty (GST_GPUFAN_WIRE_EVENT);
    gst_structure_set (fields, GST_GPUFAN_WIRE_TYPE_FIELD, G_TYPE_UINT,
        (guint) GST_EVENT_TYPE (event), nullptr);
    packet = packet_with_string (kGdpPayloadEventNone + kWireCustom,
        gst_structure_to_string (fields));
    gst_structure_free (fields);
  } else {
    const GstStructure * s = gst_event_get_structure (event);
    packet = packet_with_string (
        (guint16) (kGdpPayloadEventNone + GST_EVENT_TYPE (event)),
        s ? gst_structure_to_string (s) : nullptr);
  }
  packet_set_u64 (packet, 10, GST_EVENT_TIMESTAMP (event));
  gst_event_unref (event);
  const GstFlowReturn ret = push_packet (self, packet);
  if (ret != GST_FLOW_OK)
    GST_DEBUG_OBJECT (self, "event packet: %s", gst_flow_get_name (ret));
  return ret == GST_FLOW_OK;
}

static gboolean
gst_gpufan_wire_pay_src_event (GstPad *, GstObject *, GstEvent * event)
{
  /* nothing upstream of a wire can seek or be asked for more */
  gst_event_unref (event);
  return FALSE;
}

static GstStateChangeReturn
gst_gpufan_wire_pay_change_state (GstElement * element,
    GstStateChange transition)
{
  GstGpuFanWirePay * self = WIRE_PAY (element);
  const GstStateChangeReturn ret
      = parent_class->change_state (element, transition);
  if (transition == GST_STATE_CHANGE_PAUSED_TO_READY) {
    g_mutex_lock (&self->push_lock);
    self->started = FALSE;
    g_mutex_unlock (&self->push_lock);
  }
  return ret;
}

static void
gst_gpufan_wire_pay_init (GTypeInstance * instance, gpointer)
{
  GstGpuFanWirePay * self = (GstGpuFanWirePay *) instance;
  g_mutex_init (&self->push_lock);
  self->sinkpad = gst_pad_new_from_static_template (&sink_template, "sink");
  gst_pad_set_chain_function (self->sinkpad, gst_gpufan_wire_pay_chain);
  gst_pad_set_event_function (self->sinkpad, gst_gpufan_wire_pay_sink_event);
  gst_element_add_pad (GST_ELEMENT (self), self->sinkpad);
  self->srcpad = gst_pad_new_from_static_template (&src_template, "src");
  gst_pad_set_event_function (self->srcpad, gst_gpufan_wire_pay_src_event);
  gst_pad_use_fixed_caps (self->srcpad);
  gst_element_add_pad (GST_ELEMENT (self), self->srcpad);
}

static void
gst_gpufan_wire_pay_finalize (GObject * object)
{
  g_mutex_clear (&WIRE_PAY (object)->push_lock);
  G_OBJECT_CLASS (parent_class)->finalize (object);
}

static void
gst_gpufan_wire_pay_class_init (gpointer klass, gpointer)
{
  parent_class = GST_ELEMENT_CLASS (g_type_class_peek_parent (klass));
  G_OBJECT_CLASS (klass)->finalize = gst_gpufan_wire_pay_finalize;
  GstElementClass * element_class = GST_ELEMENT_CLASS (klass);
  element_class->change_state = gst_gpufan_wire_pay_change_state;
  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_set_static_metadata (element_class,
      "GPU fan remote lane payloader", "Generic",
      "Every buffer, caps and event out at once as a GDP 1.0 packet",
      "gst-gpufan developers");
}

GType
gst_gpufan_wire_pay_get_type (void)
{
  static gsize type = 0;
  if (g_once_init_enter (&type)) {
    GST_DEBUG_CATEGORY_INIT (gst_gpufan_wire_pay_debug, "gpufanwirepay", 0,
        "gpufan remote lane payloader");
    const GType t = g_type_register_static_simple (GST_TYPE_ELEMENT,
        g_intern_static_string (GPUFAN_WIRE_PAY_TYPE_NAME),
        sizeof (GstGpuFanWirePayClass), gst_gpufan_wire_pay_class_init,
        sizeof (GstGpuFanWirePay), gst_gpufan_wire_pay_init,
        (GTypeFlags) 0);
    g_once_init_leave (&type, t);
  }
  return type;
}

GstElement *
gst_gpufan_wire_pay_new (void)
{
  return GST_ELEMENT (g_object_new (gst_gpufan_wire_pay_get_type (),
      nullptr));
}
