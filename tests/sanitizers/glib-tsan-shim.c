// SPDX-License-Identifier: LGPL-2.1-or-later
// Built by meson in a -Db_sanitize=thread build and preloaded by its test
// setup (tests/sanitizers/meson.build; docs/testing.md, "ThreadSanitizer").
// LD_PRELOAD shim: tell TSan about GLib/GStreamer synchronisation that it
// cannot see (GMutex/GCond are futex based, refcounts are inlined atomics).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <glib.h>
#include <glib-object.h>
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define REAL(ret, name, ...) static ret (*real_##name)(__VA_ARGS__); \
  if (!real_##name) real_##name = dlsym(RTLD_NEXT, #name);

void g_mutex_lock(GMutex *m) { REAL(void, g_mutex_lock, GMutex *); real_g_mutex_lock(m); __tsan_acquire(m); }
gboolean g_mutex_trylock(GMutex *m) { REAL(gboolean, g_mutex_trylock, GMutex *); gboolean r = real_g_mutex_trylock(m); if (r) __tsan_acquire(m); return r; }
void g_mutex_unlock(GMutex *m) { REAL(void, g_mutex_unlock, GMutex *); __tsan_release(m); real_g_mutex_unlock(m); }
void g_rec_mutex_lock(GRecMutex *m) { REAL(void, g_rec_mutex_lock, GRecMutex *); real_g_rec_mutex_lock(m); __tsan_acquire(m); }
gboolean g_rec_mutex_trylock(GRecMutex *m) { REAL(gboolean, g_rec_mutex_trylock, GRecMutex *); gboolean r = real_g_rec_mutex_trylock(m); if (r) __tsan_acquire(m); return r; }
void g_rec_mutex_unlock(GRecMutex *m) { REAL(void, g_rec_mutex_unlock, GRecMutex *); __tsan_release(m); real_g_rec_mutex_unlock(m); }
void g_rw_lock_writer_lock(GRWLock *m) { REAL(void, g_rw_lock_writer_lock, GRWLock *); real_g_rw_lock_writer_lock(m); __tsan_acquire(m); }
void g_rw_lock_writer_unlock(GRWLock *m) { REAL(void, g_rw_lock_writer_unlock, GRWLock *); __tsan_release(m); real_g_rw_lock_writer_unlock(m); }
void g_rw_lock_reader_lock(GRWLock *m) { REAL(void, g_rw_lock_reader_lock, GRWLock *); real_g_rw_lock_reader_lock(m); __tsan_acquire(m); }
void g_rw_lock_reader_unlock(GRWLock *m) { REAL(void, g_rw_lock_reader_unlock, GRWLock *); __tsan_release(m); real_g_rw_lock_reader_unlock(m); }
void g_cond_wait(GCond *c, GMutex *m) { REAL(void, g_cond_wait, GCond *, GMutex *); __tsan_release(m); real_g_cond_wait(c, m); __tsan_acquire(m); __tsan_acquire(c); }
gboolean g_cond_wait_until(GCond *c, GMutex *m, gint64 t) { REAL(gboolean, g_cond_wait_until, GCond *, GMutex *, gint64); __tsan_release(m); gboolean r = real_g_cond_wait_until(c, m, t); __tsan_acquire(m); __tsan_acquire(c); return r; }
void g_cond_signal(GCond *c) { REAL(void, g_cond_signal, GCond *); __tsan_release(c); real_g_cond_signal(c); }
void g_cond_broadcast(GCond *c) { REAL(void, g_cond_broadcast, GCond *); __tsan_release(c); real_g_cond_broadcast(c); }
gboolean g_thread_pool_push(GThreadPool *p, gpointer data, GError **e) { REAL(gboolean, g_thread_pool_push, GThreadPool *, gpointer, GError **); __tsan_release(data); return real_g_thread_pool_push(p, data, e); }
void g_object_unref(gpointer o) { REAL(void, g_object_unref, gpointer); __tsan_release(o); __tsan_acquire(o); real_g_object_unref(o); }
void gst_mini_object_unref(void *o) { REAL(void, gst_mini_object_unref, void *); __tsan_release(o); __tsan_acquire(o); real_gst_mini_object_unref(o); }
typedef struct { GFunc func; gpointer user_data; } PoolTramp;
static void pool_tramp(gpointer data, gpointer ud) { PoolTramp *t = ud; __tsan_acquire(data); t->func(data, t->user_data); }
GThreadPool *g_thread_pool_new(GFunc func, gpointer user_data, gint max, gboolean excl, GError **e) {
  REAL(GThreadPool *, g_thread_pool_new, GFunc, gpointer, gint, gboolean, GError **);
  PoolTramp *t = g_new0(PoolTramp, 1); t->func = func; t->user_data = user_data;  /* leaked on purpose */
  return real_g_thread_pool_new(pool_tramp, t, max, excl, e);
}
/* Buffer pools recycle buffers through a lock-free GstAtomicQueue. */
int gst_buffer_pool_acquire_buffer(void *pool, void **buffer, void *params) {
  REAL(int, gst_buffer_pool_acquire_buffer, void *, void **, void *);
  int r = real_gst_buffer_pool_acquire_buffer(pool, buffer, params);
  if (buffer && *buffer) __tsan_acquire(*buffer);
  return r;
}
