#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""gpufan-stats: the lane table of a `gpufan-stats` message, readable.

Reads what `gst-launch-1.0 -m` printed (the `Got message ... gpufan-stats,
...` lines) or a JSON file this tool wrote (--json), from FILE or standard
input, and prints the table gpufan-demo prints: the totals, then one row
per lane (device, dispatched, completed, dropped, learned service time,
fps, where the lane's time went) and a total row.

  gst-launch-1.0 -m videotestsrc num-buffers=300 ! \\
      gpufanbin devices=cpu:2 branch=videoflip ! fakesink | gpufan-stats

By default it prints each source's last message (each gpufanout's final
one, posted at EOS; see docs/elements.md, "Stats structure"); --all prints
every one. Only the
Python 3 standard library is used.

Exit status: 0; 1 when the input has no gpufan-stats message; 2 on a usage
or read error.
"""

import argparse
import json
import re
import sys

# --- GstStructure text (gst_structure_to_string) ---------------------------

_TYPES = {
    "int": int, "uint": int, "gint": int, "guint": int, "i": int, "u": int,
    "int64": int, "uint64": int, "gint64": int, "guint64": int,
    "long": int, "ulong": int,
    "double": float, "float": float, "gdouble": float, "gfloat": float,
    "d": float, "f": float,
}
_SEPARATORS = ",;>}"


class ParseError(ValueError):
    pass


class _Reader:
    """A cursor over serialized GStreamer values."""

    def __init__(self, text):
        self.text = text
        self.pos = 0

    def peek(self):
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_spaces(self):
        while self.peek().isspace():
            self.pos += 1

    def expect(self, char):
        self.skip_spaces()
        if self.peek() != char:
            raise ParseError(f"expected '{char}' at {self.pos}: "
                             f"{self.text[self.pos:self.pos + 40]!r}")
        self.pos += 1

    def quoted(self):
        """A "..." string, backslash escapes undone."""
        self.expect('"')
        out = []
        while True:
            c = self.peek()
            if not c:
                raise ParseError("unterminated string")
            self.pos += 1
            if c == '"':
                return "".join(out)
            if c == "\\":
                # gst_string_wrap: \ before a character, or three octal digits
                digits = self.text[self.pos:self.pos + 3]
                if re.fullmatch(r"[0-7]{3}", digits):
                    out.append(chr(int(digits, 8)))
                    self.pos += 3
                    continue
                c = self.peek()
                self.pos += 1
            out.append(c)

    def bare(self):
        """An unquoted token, up to a separator (backslash escapes undone)."""
        out = []
        while True:
            c = self.peek()
            if not c or c in _SEPARATORS or c.isspace():
                return "".join(out)
            self.pos += 1
            if c == "\\" and self.peek():
                c = self.peek()
                self.pos += 1
            out.append(c)

    def key(self):
        start = self.pos
        while self.peek() and self.peek() not in "=,;" \
                and not self.peek().isspace():
            self.pos += 1
        if self.pos == start:
            raise ParseError(f"expected a field name at {self.pos}")
        return self.text[start:self.pos]

    def value(self, type_name):
        self.skip_spaces()
        c = self.peek()
        if c in "<{":
            closing = ">" if c == "<" else "}"
            self.pos += 1
            items = []
            self.skip_spaces()
            if self.peek() == closing:
                self.pos += 1
                return items
            while True:
                items.append(self.value(type_name))
                self.skip_spaces()
                if self.peek() == closing:
                    self.pos += 1
                    return items
                self.expect(",")
        text = self.quoted() if c == '"' else self.bare()
        return _convert(text, type_name)


def _convert(text, type_name):
    if type_name in ("structure", "GstStructure"):
        return parse_structure(text)[1]
    if type_name in _TYPES:
        try:
            return _TYPES[type_name](text)
        except ValueError:
            return text
    if type_name in ("boolean", "gboolean", "bool", "b"):
        return text.lower() in ("true", "yes", "t", "1")
    return text


def parse_structure(text):
    """A serialized GstStructure: (name, {field: value}); nested
    structures (the `lanes` array's) become dicts too."""
    r = _Reader(text)
    r.skip_spaces()
    name = r.quoted() if r.peek() == '"' else r.bare()
    fields = {}
    while True:
        r.skip_spaces()
        c = r.peek()
        if not c or c == ";":
            return name, fields
        r.expect(",")
        r.skip_spaces()
        if not r.peek() or r.peek() == ";":
            continue
        key = r.key()
        r.expect("=")
        r.skip_spaces()
        type_name = None
        if r.peek() == "(":
            end = r.text.index(")", r.pos)
            type_name = r.text[r.pos + 1:end]
            r.pos = end + 1
        fields[key] = r.value(type_name)


# --- the input --------------------------------------------------------------

# gst-launch-1.0 -m: Got message #12 from element "f" (element): gpufan-stats, ...
_LAUNCH_LINE = re.compile(
    r'Got message #\d+ from (?:element|object|pad) "(?P<src>[^"]*)"'
    r' \([^)]*\): (?P<structure>gpufan-stats[,;].*)$')


def messages_from_text(text):
    """Each gpufan-stats message of `gst-launch-1.0 -m` output, as
    (source, stats dict), in order."""
    found = []
    for line in text.splitlines():
        m = _LAUNCH_LINE.search(line)
        if m:
            _, stats = parse_structure(m.group("structure"))
            found.append((m.group("src"), stats))
    return found


def messages_from_json(data):
    """This tool's --json output (or one stats object, or a list of them)."""
    if isinstance(data, dict) and "messages" in data:
        data = data["messages"]
    if isinstance(data, dict):
        data = [data]
    found = []
    for entry in data:
        if not isinstance(entry, dict):
            raise ParseError("a JSON entry is not an object")
        stats = entry.get("stats", entry)
        found.append((entry.get("source", "?"), stats))
    return found


def read_messages(text):
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        return messages_from_json(json.loads(text))
    return messages_from_text(text)


# --- the table (as examples/gpufan-demo.cpp's PrintLaneTable) ---------------

_TIMES = ("push", "idle", "settle", "query", "output")
_GPU_FIELDS = ("gpu-in-place", "gpu-copies-peer", "gpu-copies-via-host",
               "gpu-copies-skipped")


def _num(d, key):
    v = d.get(key, 0)
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


def lane_table(source, stats):
    """The table's lines for one message."""
    lines = []
    final = stats.get("final")
    kind = ("final" if final else "periodic") if final is not None else ""
    lines.append(f"gpufan-stats from {source}" + (f" ({kind})" if kind else ""))
    lines.append(
        f"  policy {stats.get('policy', '?')}, dispatched "
        f"{_num(stats, 'dispatched')}, released {_num(stats, 'released')}, "
        f"max-in-flight {_num(stats, 'max-in-flight')}, window peak "
        f"{_num(stats, 'window-peak')}")
    lanes = stats.get("lanes")
    if not isinstance(lanes, list) or not lanes:
        lines.append("  (no per-lane statistics)")
        return lines
    gpu = any(sum(_num(l, f) for f in _GPU_FIELDS) > 0 for l in lanes)
    head = (f"  {'lane':>4}  {'device':<16} {'dispatched':>10} "
            f"{'completed':>10} {'dropped':>8} {'service ms':>11} {'fps':>8}")
    head += "".join(f" {t + ' ms':>7}" for t in _TIMES)
    if gpu:
        head += f" {'in place':>8} {'peer':>6} {'via host':>9} {'copy MB':>8}"
    lines.append(head)
    totals = {"dispatched": 0, "completed": 0, "dropped": 0, "fps": 0.0}
    for l in lanes:
        row = (f"  {_num(l, 'lane'):>4}  {str(l.get('device', '?')):<16} "
               f"{_num(l, 'dispatched'):>10} {_num(l, 'completed'):>10} "
               f"{_num(l, 'dropped'):>8} "
               f"{_num(l, 'service-time') / 1e6:>11.2f} {_num(l, 'fps'):>8.1f}")
        row += "".join(f" {_num(l, t + '-time') / 1e6:>7.0f}" for t in _TIMES)
        if gpu:
            row += (f" {_num(l, 'gpu-in-place'):>8} "
                    f"{_num(l, 'gpu-copies-peer'):>6} "
                    f"{_num(l, 'gpu-copies-via-host'):>9} "
                    f"{_num(l, 'gpu-copy-bytes') / 1e6:>8.1f}")
        lines.append(row)
        for k in totals:
            totals[k] += _num(l, k)
    lines.append(
        f"  {'all':>4}  {'':<16} {totals['dispatched']:>10} "
        f"{totals['completed']:>10} {totals['dropped']:>8} {'':>11} "
        f"{totals['fps']:>8.1f}")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="gpufan-stats",
        description="Print the lane table of gpufan-stats messages from "
                    "`gst-launch-1.0 -m` output or a JSON file of this tool.")
    parser.add_argument("file", nargs="?", default="-",
                        help="input file (default: standard input)")
    parser.add_argument("--all", action="store_true",
                        help="print every message, not only each source's "
                             "last")
    parser.add_argument("--json", metavar="OUT",
                        help="also write the messages printed as JSON to OUT "
                             "('-': standard output, instead of the table)")
    args = parser.parse_args(argv)

    try:
        if args.file == "-":
            text = sys.stdin.read()
        else:
            with open(args.file, encoding="utf-8", errors="replace") as f:
                text = f.read()
        found = read_messages(text)
    except (OSError, ValueError) as e:
        print(f"gpufan-stats: {args.file}: {e}", file=sys.stderr)
        return 2
    if not found:
        print(f"gpufan-stats: no gpufan-stats message in "
              f"{'standard input' if args.file == '-' else args.file} "
              "(run gst-launch-1.0 with -m)", file=sys.stderr)
        return 1
    if args.all:
        chosen = found
    else:
        # each source's last message (its final one, after a full run)
        last = {src: i for i, (src, _) in enumerate(found)}
        chosen = [found[i] for i in sorted(last.values())]
    if args.json:
        doc = json.dumps({"messages": [{"source": src, "stats": stats}
                                       for src, stats in chosen]}, indent=2)
        if args.json == "-":
            print(doc)
            return 0
        with open(args.json, "w", encoding="utf-8") as f:
            f.write(doc + "\n")
    for i, (src, stats) in enumerate(chosen):
        if i:
            print()
        print("\n".join(lane_table(src, stats)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
