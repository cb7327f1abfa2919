#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Remote lanes on loopback: gpufanout, two gpufanremote lanes served by two
gpufan-lane-worker processes, gpufanin. Checks:

  frames     every frame comes back once and in order (PTS), and the
             workers drain and exit 0 on SIGTERM;
  chunks-frames, chunks-keyframes
             chunk mode over two remote lanes (x264enc in the workers'
             branch: raw frames encoded chunk by chunk, or an H.264 file
             transcoded GOP by GOP with avdec_h264 ! x264enc): the output
             decoded gives the same frames (hashes), in the same order, as
             the same pipeline on two local lanes;
  bin        gpufanbin remote-lanes= with the two workers (no local lane),
             chunk=frames: the same decoded frames as gpufanbin's two
             local lanes;
  fuzz       corrupted input to one worker: a GDP stream cut short in a
             packet, a huge length field, random byte flips (seeded) of a
             valid stream, garbage: the worker says why it dropped the
             client, never crashes, and serves the next client (frames
             through it come back in order); run in the ASan build too;
  refusals   the worker refuses a non-loopback --listen without
             --passphrase, gpufanremote refuses a non-loopback uri without
             passphrase (their texts), and a passphrase mismatch is a lane
             error within the deadline, not a hang.

Usage: remote_lanes.py WORKER_PROGRAM CHECK
Ports are chosen free per run (pairs PORT, PORT+1), so runs in parallel do
not collide. Exit status 0 when the check passes.
"""

import atexit
import hashlib
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402

# Deadlines only catch hangs.
HUNG_AFTER_S = int(os.environ.get("GPUFAN_TEST_HUNG_AFTER_S", "60"))


def free_port_pair():
    """A port P with P and P+1 free for UDP now (SRT runs over UDP)."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as a:
            a.bind(("127.0.0.1", 0))
            port = a.getsockname()[1]
            if port >= 65534:
                continue
            try:
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as b:
                    b.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port pair")


# Every worker this run started: killed at exit, so that a failed check
# leaves no process behind.
STARTED = []


def kill_leftover_workers():
    for worker in STARTED:
        if worker.proc.poll() is None:
            worker.kill()


atexit.register(kill_leftover_workers)
# meson's timeout sends SIGTERM: exit through atexit all the same
signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))


class LaneWorker:
    """A gpufan-lane-worker process whose output a thread reads line by
    line, so that every wait for a line has a deadline."""

    def __init__(self, args, env):
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, env=env)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)  # the end of its output

    def wait_for_line(self, text):
        """The output up to a line with @text; RuntimeError if the worker
        exits first or nothing comes for HUNG_AFTER_S."""
        seen = []
        while True:
            try:
                line = self.lines.get(timeout=HUNG_AFTER_S)
            except queue.Empty:
                raise RuntimeError(f"hung: no '{text}' from the worker: "
                                   f"{''.join(seen)}") from None
            if line is None:
                raise RuntimeError(f"worker exited without '{text}': "
                                   f"{''.join(seen)}")
            seen.append(line)
            if text in line:
                return "".join(seen)

    def rest(self):
        """Its remaining output, once it exited."""
        seen = []
        while True:
            line = self.lines.get(timeout=HUNG_AFTER_S)
            if line is None:
                return "".join(seen)
            seen.append(line)

    def kill(self):
        self.proc.kill()
        self.proc.wait()


def start_worker(program, port, branch="identity", extra=()):
    env = dict(os.environ)
    if os.environ.get("GPUFAN_WORKER_ASAN_OPTIONS"):
        env["ASAN_OPTIONS"] = os.environ["GPUFAN_WORKER_ASAN_OPTIONS"]
    worker = LaneWorker(
        [program, "--listen", f"srt://127.0.0.1:{port}", "--branch", branch,
         *extra], env)
    STARTED.append(worker)
    # it says so once it listens
    worker.wait_for_line("listening on")
    return worker


def stop_worker(worker, client=False):
    """SIGTERM; with @client, once the worker saw its client go (a SIGTERM
    as the client leaves waits for --drain-timeout: see elements.md)."""
    seen = worker.wait_for_line("waiting for the next client") \
        if client else ""
    worker.proc.terminate()
    worker.proc.wait(timeout=HUNG_AFTER_S)
    return worker.proc.returncode, seen + worker.rest()


def run(launch, sink="fs"):
    """(message, [pts]) of a pipeline run to EOS or ERROR."""
    pipeline = Gst.parse_launch(launch)
    pts = []

    def probe(_pad, info):
        pts.append(info.get_buffer().pts)
        return Gst.PadProbeReturn.OK

    if sink:
        pipeline.get_by_name(sink).get_static_pad("sink").add_probe(
            Gst.PadProbeType.BUFFER, probe)
    pipeline.set_state(Gst.State.PLAYING)
    msg = pipeline.get_bus().timed_pop_filtered(
        HUNG_AFTER_S * Gst.SECOND, Gst.MessageType.ERROR | Gst.MessageType.EOS)
    pipeline.set_state(Gst.State.NULL)
    if msg is None:
        raise RuntimeError("hung: no EOS or ERROR within the deadline")
    return msg, pts


def check_frames(program):
    ports = [free_port_pair(), free_port_pair()]
    workers = [start_worker(program, p) for p in ports]
    frames = 120
    msg, pts = run(
        f"videotestsrc num-buffers={frames} ! video/x-raw,width=64,height=48 "
        "! gpufanout name=f gpufanin name=i ! fakesink name=fs sync=false "
        f"f.src_0 ! gpufanremote uri=srt://127.0.0.1:{ports[0]} ! i.sink_0 "
        f"f.src_1 ! gpufanremote uri=srt://127.0.0.1:{ports[1]} ! i.sink_1")
    if msg.type != Gst.MessageType.EOS:
        raise RuntimeError(f"pipeline error: {msg.parse_error()}")
    if len(pts) != frames or pts != sorted(pts) or len(set(pts)) != frames:
        raise RuntimeError(f"{len(pts)} frames, in order: {pts == sorted(pts)}")
    for worker in workers:
        rc, out = stop_worker(worker, client=True)
        if rc != 0 or "client connected" not in out:
            raise RuntimeError(f"worker exited {rc}: {out}")


def decoded_frames(launch):
    """[(pts, md5 of the decoded frame)] at the sink named fs."""
    pipeline = Gst.parse_launch(launch)
    frames = []

    def probe(_pad, info):
        buffer = info.get_buffer()
        ok, mapped = buffer.map(Gst.MapFlags.READ)
        frames.append((buffer.pts, hashlib.md5(mapped.data).hexdigest()))
        buffer.unmap(mapped)
        return Gst.PadProbeReturn.OK

    pipeline.get_by_name("fs").get_static_pad("sink").add_probe(
        Gst.PadProbeType.BUFFER, probe)
    pipeline.set_state(Gst.State.PLAYING)
    msg = pipeline.get_bus().timed_pop_filtered(
        HUNG_AFTER_S * Gst.SECOND, Gst.MessageType.ERROR | Gst.MessageType.EOS)
    pipeline.set_state(Gst.State.NULL)
    if msg is None:
        raise RuntimeError("hung: no EOS or ERROR within the deadline")
    if msg.type != Gst.MessageType.EOS:
        raise RuntimeError(f"pipeline error: {msg.parse_error()}")
    return frames


def check_chunks(program, mode):
    frames = 120
    # one thread: the same input gives the same bitstream on every run
    enc = "x264enc threads=1 speed-preset=ultrafast key-int-max=1000"
    caps = "video/x-raw,width=160,height=120,format=I420,framerate=30/1"
    tmp = tempfile.mkdtemp(prefix="gpufan-remote-chunks-")
    path = os.path.join(tmp, "in.h264")
    try:
        if mode == "keyframes":
            subprocess.run(
                ["gst-launch-1.0", "-q", "videotestsrc",
                 f"num-buffers={frames}", "pattern=ball", "!", caps, "!",
                 "x264enc", "key-int-max=15", "bframes=0", "!",
                 "video/x-h264,stream-format=byte-stream", "!", "filesink",
                 f"location={path}"], check=True, timeout=HUNG_AFTER_S)
            head = (f"filesrc location={path} ! h264parse ! "
                    "gpufanout name=f chunk=keyframes devices=cpu:2")
            branch = f"avdec_h264 ! {enc}"
        else:
            head = (f"videotestsrc num-buffers={frames} pattern=ball ! "
                    f"{caps} ! gpufanout name=f chunk=frames chunk-frames=15 "
                    "devices=cpu:2")
            branch = enc
        tail = " gpufanin name=i ! h264parse ! avdec_h264 ! fakesink name=fs"
        local = decoded_frames(head + tail + "".join(
            f" f.src_{k} ! queue ! {branch} ! i.sink_{k}" for k in range(2)))
        ports = [free_port_pair(), free_port_pair()]
        workers = [start_worker(program, p, branch) for p in ports]
        remote = decoded_frames(head + tail + "".join(
            f" f.src_{k} ! gpufanremote uri=srt://127.0.0.1:{ports[k]} "
            f"! i.sink_{k}" for k in range(2)))
        for worker in workers:
            rc, out = stop_worker(worker, client=True)
            if rc != 0 or "client connected" not in out:
                raise RuntimeError(f"worker exited {rc}: {out}")
    finally:
        if os.path.exists(path):
            os.unlink(path)
        os.rmdir(tmp)
    pts = [p for p, _ in remote]
    if len(local) != frames or len(remote) != frames:
        raise RuntimeError(f"{len(local)} local and {len(remote)} remote "
                           f"frames of {frames}")
    if pts != sorted(pts) or len(set(pts)) != frames:
        raise RuntimeError("remote frames out of order or repeated")
    differ = [i for i in range(frames) if local[i] != remote[i]]
    if differ:
        raise RuntimeError(f"{len(differ)} frames differ from the local "
                           f"run's, first at {differ[0]}")


def check_bin(program):
    frames = 120
    enc = "x264enc threads=1 speed-preset=ultrafast key-int-max=1000"
    head = (f"videotestsrc num-buffers={frames} pattern=ball ! "
            "video/x-raw,width=160,height=120,format=I420,framerate=30/1 ! "
            "gpufanbin chunk=frames chunk-frames=15 ")
    tail = " ! h264parse ! avdec_h264 ! fakesink name=fs"
    local = decoded_frames(
        head + f"lanes=2 devices=cpu:2 branch=\"{enc}\"" + tail)
    ports = [free_port_pair(), free_port_pair()]
    workers = [start_worker(program, p, enc) for p in ports]
    uris = ",".join(f"srt://127.0.0.1:{p}" for p in ports)
    remote = decoded_frames(head + f"remote-lanes=\"{uris}\"" + tail)
    for worker in workers:
        rc, out = stop_worker(worker, client=True)
        if rc != 0 or "client connected" not in out:
            raise RuntimeError(f"worker exited {rc}: {out}")
    if len(local) != frames or remote != local:
        raise RuntimeError(f"{len(local)} local, {len(remote)} remote frames "
                           f"of {frames}; the same: {remote == local}")


def run_killing_a_worker(pipeline, sink, workers, kill_after, restart,
                         stamp=lambda buffer: buffer.pts):
    """Plays @pipeline to EOS or ERROR. Once @kill_after buffers reached the
    element named @sink, workers[0] is SIGKILLed; at the first
    gpufan-lane-failed it is replaced by restart(). Returns the last
    message (None: hung), stamp() of each buffer at @sink, and the
    monotonic times started, killed, failed, restored and ended (None for
    what did not happen). Also the benchmark's kill-and-restart run."""
    stamps = []
    times = dict.fromkeys(("killed", "failed", "restored"))

    def probe(_pad, info):
        stamps.append(stamp(info.get_buffer()))
        if len(stamps) == kill_after:
            workers[0].kill()
            times["killed"] = time.monotonic()
        return Gst.PadProbeReturn.OK

    pipeline.get_by_name(sink).get_static_pad("sink").add_probe(
        Gst.PadProbeType.BUFFER, probe)
    bus = pipeline.get_bus()
    times["started"] = time.monotonic()
    pipeline.set_state(Gst.State.PLAYING)
    deadline = times["started"] + HUNG_AFTER_S
    msg = None
    while time.monotonic() < deadline:
        msg = bus.timed_pop_filtered(
            int((deadline - time.monotonic()) * Gst.SECOND),
            Gst.MessageType.ERROR | Gst.MessageType.EOS |
            Gst.MessageType.ELEMENT)
        if msg is None or msg.type != Gst.MessageType.ELEMENT:
            break
        name = msg.get_structure().get_name()
        if name == "gpufan-lane-failed" and times["failed"] is None:
            times["failed"] = time.monotonic()
            workers[0] = restart()
        elif name == "gpufan-lane-restored" and times["restored"] is None:
            times["restored"] = time.monotonic()
    times["ended"] = time.monotonic()
    pipeline.set_state(Gst.State.NULL)
    return msg, stamps, times


def check_kill_restart(program, chunks=False):
    """gpufanbin over two workers; worker 0 is SIGKILLed mid-stream and
    started again on the same ports once its lane failed: every frame comes
    out once, in order, the lane is failed and then restored, and the new
    worker serves it. With @chunks, chunk mode with x264enc in the workers,
    the output decoded."""
    frames = 600
    ports = [free_port_pair(), free_port_pair()]
    branch = "x264enc threads=1 speed-preset=ultrafast key-int-max=1000" \
        if chunks else "identity"
    workers = [start_worker(program, p, branch) for p in ports]
    uris = ",".join(f"srt://127.0.0.1:{p}" for p in ports)
    mode = "chunk=frames chunk-frames=15 " if chunks else ""
    decode = "h264parse ! avdec_h264 ! " if chunks else ""
    # live at 60 frames/s: the stream outlasts the stall (2 s) or SRT's
    # silence (5 s) that fails the lane, and the rebuild after
    # lane-restart-delay (0.2 s)
    pipeline = Gst.parse_launch(
        f"videotestsrc is-live=true num-buffers={frames} ! "
        "video/x-raw,width=64,height=48,framerate=60/1,format=I420 ! "
        f"gpufanbin name=b remote-lanes=\"{uris}\" {mode}"
        f"lane-restart-delay=200000000 ! {decode}fakesink name=fs sync=false")
    # the same ports: a restarted pod keeps its name and port
    msg, pts, times = run_killing_a_worker(
        pipeline, "fs", workers, 60,
        lambda: start_worker(program, ports[0], branch))
    killed_at, failed, restored = (times["killed"], times["failed"],
                                   times["restored"])
    if msg is None or msg.type != Gst.MessageType.EOS:
        raise RuntimeError(f"no EOS: {msg.parse_error() if msg else 'hung'}")
    if killed_at is None or failed is None or restored is None:
        raise RuntimeError(f"killed {killed_at is not None}, lane failed "
                           f"{failed is not None}, restored "
                           f"{restored is not None}")
    if len(pts) != frames or pts != sorted(pts) or len(set(pts)) != frames:
        step = Gst.SECOND // 60
        first = min(pts) if pts else 0
        missing = sorted(set(range(frames)) -
                         {(p - first) // step for p in pts})
        raise RuntimeError(f"{len(pts)} frames of {frames}, in order "
                           f"{pts == sorted(pts)}, distinct {len(set(pts))}, "
                           f"missing {missing[:20]}")
    print(f"lane failed {failed - killed_at:.1f} s after the kill, "
          f"restored {restored - failed:.1f} s after that")
    for worker in workers:
        rc, out = stop_worker(worker, client=True)
        if rc != 0 or "client connected" not in out:
            raise RuntimeError(f"worker exited {rc}: {out}")


def gdp_stream(frames):
    """A valid GDP byte stream (gdppay's) of a few small raw frames."""
    pipeline = Gst.parse_launch(
        f"videotestsrc num-buffers={frames} ! "
        "video/x-raw,format=GRAY8,width=16,height=16,framerate=30/1 ! "
        "gdppay ! appsink name=sink sync=false")
    sink = pipeline.get_by_name("sink")
    pipeline.set_state(Gst.State.PLAYING)
    data = b""
    while True:
        sample = sink.emit("try-pull-sample", HUNG_AFTER_S * Gst.SECOND)
        if sample is None:
            break
        buffer = sample.get_buffer()
        data += buffer.extract_dup(0, buffer.get_size())
    pipeline.set_state(Gst.State.NULL)
    if not data:
        raise RuntimeError("no GDP bytes made")
    return data


class RawClient:
    """A client process that sends bytes to a worker (send_raw_client):
    leave() ends it, and with it every socket it had, as a coordinator
    that is gone."""

    def __init__(self, port, data):
        with tempfile.NamedTemporaryFile(prefix="gpufan-fuzz-",
                                         delete=False) as f:
            f.write(data)
            self.path = f.name
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--send-raw", str(port), self.path],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if line.strip() != "sent":
            self.leave()
            raise RuntimeError(f"the raw client did not send: {line!r}")

    def leave(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=HUNG_AFTER_S)
        os.unlink(self.path)


def send_raw_client(port, path):
    """The raw client's process: says 'sent' once srtsink took every byte,
    stays until its stdin closes."""
    with open(path, "rb") as f:
        close = send_raw(port, f.read())
    print("sent", flush=True)
    sys.stdin.read()
    close()
    return 0


def send_raw(port, data):
    """Sends @data to a worker as a client would; returns what closes the
    connection (SRT in live mode drops what is not yet delivered when a
    peer closes: the worker must have read it first)."""
    query = "tsbpdmode=0&tlpktdrop=0"
    # the results' side too, as a client has it (the worker's sender waits
    # for it)
    back = Gst.parse_launch(
        f"srtsrc uri=\"srt://127.0.0.1:{port + 1}?{query}\" "
        "auto-reconnect=false ! fakesink sync=false")
    back.set_state(Gst.State.PLAYING)
    pipeline = Gst.parse_launch(
        "appsrc name=src format=bytes ! srtsink sync=false auto-reconnect=false "
        f"uri=\"srt://127.0.0.1:{port}?{query}\"")
    src = pipeline.get_by_name("src")
    pipeline.set_state(Gst.State.PLAYING)
    for i in range(0, len(data), 1000):
        src.emit("push-buffer", Gst.Buffer.new_wrapped(data[i:i + 1000]))
    src.emit("end-of-stream")
    # srtsink's EOS: everything was handed to SRT
    msg = pipeline.get_bus().timed_pop_filtered(
        HUNG_AFTER_S * Gst.SECOND, Gst.MessageType.ERROR | Gst.MessageType.EOS)
    if msg is None:
        raise RuntimeError("hung sending the corrupted stream")
    if msg.type == Gst.MessageType.ERROR:
        raise RuntimeError(f"sending: {msg.parse_error()[0].message}")

    def close():
        pipeline.set_state(Gst.State.NULL)
        back.set_state(Gst.State.NULL)
    return close


def check_fuzz(program):
    import random
    good = gdp_stream(10)
    rng = random.Random(28)
    header = bytearray(good[:62])
    huge = bytes(header[:6]) + (0xFFFFFFF0).to_bytes(4, "big") + \
        bytes(header[10:]) + b"x" * 1000
    # (name, bytes, whether the worker can only tell once the client left)
    cases = [("cut short", good[:len(good) - 37], True),
             ("huge length", huge, False),
             ("garbage", bytes(rng.randrange(256) for _ in range(5000)),
              False)]
    for n in range(6):
        flipped = bytearray(good)
        for _ in range(1 + n * 3):
            flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
        # a flip in a frame's bytes is no error: the client leaves
        cases.append((f"flips {n}", bytes(flipped), True))
    port = free_port_pair()
    # a client gone without a word is noticed after this much silence (or
    # of input, where srtsrc missed its going)
    worker = start_worker(program, port, extra=(
        "--peer-idle-timeout", "2000", "--client-idle-timeout", "3"))
    try:
        for name, data, leaves in cases:
            client = RawClient(port, data)
            if leaves:
                client.leave()
            out = worker.wait_for_line("client disconnected")
            # the worker listens again once the client is gone
            if not leaves:
                client.leave()
            out += worker.wait_for_line("waiting for the next client")
            if "client disconnected" not in out:
                raise RuntimeError(f"{name}: {out}")
            why = [l for l in out.splitlines() if "disconnected" in l][0]
            print(f"{name}: {why}")
            if name == "huge length" and "announces 4294967280 bytes" \
                    not in why:
                raise RuntimeError(f"huge length: {why}")
        msg, pts = run(
            "videotestsrc num-buffers=30 ! video/x-raw,width=64,height=48 "
            "! gpufanout name=f gpufanin name=i ! fakesink name=fs "
            f"sync=false f.src_0 ! gpufanremote uri=srt://127.0.0.1:{port} "
            "! i.sink_0")
        if msg.type != Gst.MessageType.EOS or len(pts) != 30 or \
                pts != sorted(pts):
            raise RuntimeError(f"the next client got {len(pts)} frames")
        worker.wait_for_line("waiting for the next client")
    finally:
        rc, out = stop_worker(worker)
    if rc != 0:
        raise RuntimeError(f"worker exited {rc}: {out}")


def check_refusals(program):
    out = subprocess.run(
        [program, "--listen", "srt://192.0.2.1:7001", "--branch", "identity"],
        capture_output=True, text=True, timeout=HUNG_AFTER_S)
    if out.returncode == 0 or "without --passphrase" not in out.stderr:
        raise RuntimeError(f"worker did not refuse: {out.stderr!r}")

    msg, _ = run("videotestsrc num-buffers=1 ! gpufanremote "
                 "uri=srt://192.0.2.1:7001 ! fakesink", sink=None)
    if msg.type != Gst.MessageType.ERROR or \
            "no passphrase is set" not in msg.parse_error()[0].message:
        raise RuntimeError(f"gpufanremote did not refuse: {msg.type}")

    port = free_port_pair()
    worker = start_worker(program, port,
                          extra=("--passphrase", "right-passphrase"))
    try:
        started = time.monotonic()
        msg, _ = run("videotestsrc num-buffers=30 ! gpufanout name=f "
                     "gpufanin name=i ! fakesink name=fs "
                     f"f.src_0 ! gpufanremote uri=srt://127.0.0.1:{port} "
                     "passphrase=wrong-passphrase peer-idle-timeout=2000 "
                     "! i.sink_0")
        if msg.type != Gst.MessageType.ERROR or \
                "Remote lane" not in msg.parse_error()[0].message:
            raise RuntimeError(f"mismatch gave {msg.type}")
        print(f"mismatch: error after {time.monotonic() - started:.1f} s: "
              f"{msg.parse_error()[0].message}")
    finally:
        stop_worker(worker)


def main():
    # Under the ASan test setup the sanitizer runtime is preloaded into
    # every process: the workers are what is checked for leaks, not Python
    # (whose allocations LeakSanitizer would report at exit) nor the plugin
    # scanner it starts. This script runs again without leak checks and
    # gives the workers the setup's options.
    options = os.environ.get("ASAN_OPTIONS", "")
    if "detect_leaks=1" in options and \
            "GPUFAN_WORKER_ASAN_OPTIONS" not in os.environ:
        env = dict(os.environ, GPUFAN_WORKER_ASAN_OPTIONS=options,
                   ASAN_OPTIONS=options.replace("detect_leaks=1",
                                                "detect_leaks=0"))
        os.execve(sys.executable, [sys.executable] + sys.argv, env)
    Gst.init(None)
    if sys.argv[1] == "--send-raw":
        return send_raw_client(int(sys.argv[2]), sys.argv[3])
    program, check = sys.argv[1], sys.argv[2]
    {"frames": check_frames, "refusals": check_refusals,
     "chunks-frames": lambda p: check_chunks(p, "frames"),
     "chunks-keyframes": lambda p: check_chunks(p, "keyframes"),
     "bin": check_bin, "fuzz": check_fuzz,
     "kill-restart": check_kill_restart,
     "kill-restart-chunks": lambda p: check_kill_restart(p, chunks=True),
     }[check](program)
    print(f"{check}: ok")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as e:
        print(f"FAILED: {e}")
        sys.exit(1)
