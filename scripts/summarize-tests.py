#!/usr/bin/env python3
"""Summarize a gst-gpufan test run in test cases, not test binaries.

Reads every GoogleTest XML report in the results directory (one per test
binary, written through --gtest_output=xml:... or GTEST_OUTPUT) and meson's
testlog.json, and prints one line per failed (and skipped) case followed by the
last line, exactly:

    N passed, N failed            or
    N passed, N failed, N skipped (only when something was skipped)

Counting rules:
  * each <testcase> is one case: failed if it has <failure> or <error>,
    skipped if result="skipped", has <skipped>, or was not run (DISABLED_),
    else passed;
  * a meson test that did not end OK (crash, timeout, leak reported at exit,
    sanitizer error, ...) whose XML is missing, unreadable or shows no failed
    case counts as one failed case named after it, e.g.
    "scheduler-test (crash: SIGSEGV)";
  * a meson test that writes no XML at all counts as one case with meson's
    verdict;
  * a sanitizer report (AddressSanitizer, LeakSanitizer, UndefinedBehavior-
    Sanitizer's "runtime error:", ThreadSanitizer) in a test's output, its
    own or a child process's, counts as one failed case per kind of report,
    e.g. "tsan: gst-gpufan:gst / test-pipeline (ThreadSanitizer: data race)",
    whether or not the binary ended OK; when the binary did not end OK, the
    report stands for that failure;
  * --case NAME=passed|failed|skipped adds a case run outside meson (e.g. the
    static checker);
  * --run PREFIX RESULTS TESTLOG adds another build's run (e.g. the sanitizer
    builds): its cases are counted by the same rules, named "PREFIX: ...".

Exit status: 1 if anything failed, else 0.
"""

import argparse
import json
import os
import re
import signal
import sys
import xml.etree.ElementTree as ET


def parse_xml(path):
    """Return a list of (name, verdict, message) for one GoogleTest report.

    Names are "<report>: <Suite>.<Test>", the report named after its file.
    """
    cases = []
    stem = os.path.splitext(os.path.basename(path))[0]
    root = ET.parse(path).getroot()
    for tc in root.iter("testcase"):
        name = tc.get("name", "?")
        cls = tc.get("classname")
        full = f"{stem}: {cls}.{name}" if cls else f"{stem}: {name}"
        failures = tc.findall("failure") + tc.findall("error")
        skipped = tc.find("skipped")
        if failures:
            msg = (failures[0].get("message") or failures[0].text or "").strip()
            cases.append((full, "failed", msg))
        elif (tc.get("result") == "skipped" or skipped is not None):
            msg = ""
            if skipped is not None:
                msg = (skipped.get("message") or skipped.text or "").strip()
            cases.append((full, "skipped", msg))
        elif tc.get("status") == "notrun":
            cases.append((full, "skipped", "disabled"))
        else:
            cases.append((full, "passed", ""))
    return cases


def xml_paths_of(entry):
    """The XML files a meson test was told to write (argument or env)."""
    cmd = entry.get("command") or []
    env = entry.get("env") or {}
    exe = os.path.basename(cmd[0]) if cmd else entry.get("name", "")
    specs = [a[len("--gtest_output="):] for a in cmd[1:]
             if a.startswith("--gtest_output=")]
    if not specs and env.get("GTEST_OUTPUT"):
        specs = [env["GTEST_OUTPUT"]]
    paths = []
    for spec in specs:
        if not spec.startswith("xml"):
            continue
        path = spec[4:] if spec.startswith("xml:") else ""
        if not path or path.endswith("/"):
            # A directory: GoogleTest names the file after the executable.
            path = os.path.join(path or ".", exe + ".xml")
        if not os.path.isabs(path):
            cwd = env.get("PWD") or os.getcwd()
            path = os.path.join(cwd, path)
        paths.append(os.path.normpath(path))
    return paths


# The first line of a sanitizer report: the tool, and the kind of report.
SANITIZER_REPORTS = [
    ("AddressSanitizer", re.compile(r"ERROR: AddressSanitizer: ([\w-]+)")),
    ("LeakSanitizer",
     re.compile(r"ERROR: LeakSanitizer: (detected memory leaks)")),
    ("ThreadSanitizer",
     re.compile(r"(?:WARNING|ERROR|FATAL): ThreadSanitizer: ([^(\n]+?) *(?:\(|$)",
                re.M)),
    ("UndefinedBehaviorSanitizer", re.compile(r": (runtime error): ")),
]


def sanitizer_reports(text):
    """The kinds of sanitizer report in a test's output, once each, with the
    line of the first one: [("ThreadSanitizer: data race", line), ...]."""
    found = {}
    for tool, pattern in SANITIZER_REPORTS:
        for m in pattern.finditer(text):
            kind = f"{tool}: {m.group(1)}"
            if kind not in found:
                start = text.rfind("\n", 0, m.start()) + 1
                end = text.find("\n", m.end())
                found[kind] = text[start:end if end >= 0 else None].strip()
    return list(found.items())


def describe_bad_end(entry):
    result = entry.get("result", "?")
    rc = entry.get("returncode")
    if result == "TIMEOUT":
        return "timeout"
    if isinstance(rc, int) and rc < 0:
        try:
            sig = signal.Signals(-rc).name
        except ValueError:
            sig = f"signal {-rc}"
        return f"crash: {sig}"
    if isinstance(rc, int) and 128 < rc < 128 + 65:
        try:
            return f"crash: {signal.Signals(rc - 128).name}"
        except ValueError:
            pass
    if result == "UNEXPECTEDPASS":
        return "unexpected pass"
    if result == "ERROR":
        return f"error, exit status {rc}"
    return f"exit status {rc}"


def run_cases(results, testlog, no_testlog_ok=False):
    """The cases of one build's run: its XML reports and its testlog.json,
    as a list of (name, verdict, message)."""
    cases = []
    # Every XML report, keyed by its real path.
    reports = {}
    if os.path.isdir(results):
        for f in sorted(os.listdir(results)):
            if f.endswith(".xml"):
                p = os.path.normpath(os.path.abspath(os.path.join(results, f)))
                try:
                    reports[p] = parse_xml(p)
                except (ET.ParseError, OSError) as e:
                    reports[p] = None  # written half-way: the binary died
                    print(f"warning: unreadable report {p}: {e}", file=sys.stderr)

    claimed = set()
    entries = []
    if os.path.exists(testlog):
        with open(testlog, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                line = line.strip()
                if line:
                    try:
                        entries.append(json.loads(line))
                    except json.JSONDecodeError:
                        pass
    elif not no_testlog_ok:
        cases.append(("meson-test (no testlog.json: meson test did not run)",
                      "failed", ""))

    for entry in entries:
        name = entry.get("name", "?")
        result = entry.get("result", "?")
        ok = result in ("OK", "EXPECTEDFAIL")
        paths = [p for p in xml_paths_of(entry) if p in reports]
        if not paths:
            # No recorded --gtest_output: try the usual names.
            cmd = entry.get("command") or []
            exe = os.path.basename(cmd[0]) if cmd else ""
            # meson names tests "project:suite / name".
            for stem in (name.rsplit(" / ", 1)[-1], exe):
                p = os.path.normpath(os.path.abspath(
                    os.path.join(results, stem + ".xml")))
                if stem and p in reports and p not in claimed:
                    paths = [p]
                    break
        claimed.update(paths)
        found = sanitizer_reports(
            (entry.get("stdout") or "") + "\n" + (entry.get("stderr") or ""))
        for kind, line in found:
            cases.append((f"{name} ({kind})", "failed", line))
        own = []
        readable = bool(paths)
        for p in paths:
            if reports[p] is None:
                readable = False
            else:
                own.extend(reports[p])
        if ok:
            if not paths:
                cases.append((name, "passed", ""))
            elif not readable:
                cases.append((f"{name} (unreadable XML report)", "failed", ""))
            continue
        if result == "SKIP":
            if not paths:
                cases.append((name, "skipped", "meson test skipped"))
            continue
        # The binary did not end OK. Its own failed cases or a sanitizer's
        # report explain it, unless there are none (crash, timeout, leak at
        # exit, missing report).
        if found and result != "TIMEOUT":
            continue
        if not readable or not any(v == "failed" for _, v, _ in own):
            why = describe_bad_end(entry)
            if not paths:
                why += ", no XML report"
            elif not readable:
                why += ", unreadable XML report"
            cases.append((f"{name} ({why})", "failed", ""))

    for p, rep in sorted(reports.items()):
        if rep is None:
            if p not in claimed:
                cases.append((f"{os.path.basename(p)} (unreadable XML report)",
                              "failed", ""))
            continue
        cases.extend(rep)
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default="build/tests/results",
                    help="directory holding the GoogleTest XML files")
    ap.add_argument("--testlog", default="build/meson-logs/testlog.json",
                    help="meson's testlog.json")
    ap.add_argument("--case", action="append", default=[],
                    metavar="NAME=VERDICT",
                    help="extra case run outside meson (passed/failed/skipped)")
    ap.add_argument("--run", nargs=3, action="append", default=[],
                    metavar=("PREFIX", "RESULTS", "TESTLOG"),
                    help="another build's run (XML directory, testlog.json); "
                    "its cases are named 'PREFIX: ...'")
    ap.add_argument("--no-testlog-ok", action="store_true",
                    help="do not count a missing testlog.json as a failure")
    ap.add_argument("--quiet-skips", action="store_true",
                    help="do not list skipped cases")
    args = ap.parse_args()

    cases = []  # (name, verdict, message)

    for spec in args.case:
        name, _, verdict = spec.rpartition("=")
        if verdict not in ("passed", "failed", "skipped"):
            ap.error(f"bad --case {spec!r}")
        cases.append((name, verdict, ""))

    cases.extend(run_cases(args.results, args.testlog, args.no_testlog_ok))
    for prefix, results, testlog in args.run:
        cases.extend((f"{prefix}: {n}", v, m)
                     for n, v, m in run_cases(results, testlog))

    passed = sum(1 for _, v, _ in cases if v == "passed")
    failed = [c for c in cases if c[1] == "failed"]
    skipped = [c for c in cases if c[1] == "skipped"]

    if skipped and not args.quiet_skips:
        for n, _, m in skipped:
            m = " ".join(m.split())
            print(f"SKIPPED: {n}" + (f" ({m})" if m else ""))
    for n, _, m in failed:
        m = " ".join(m.split())
        if len(m) > 160:
            m = m[:157] + "..."
        print(f"FAILED: {n}" + (f": {m}" if m else ""))

    last = f"{passed} passed, {len(failed)} failed"
    if skipped:
        last += f", {len(skipped)} skipped"
    sys.stdout.flush()
    print(last)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
