#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The plugin's packaging metadata, as users and packagers see it.

Usage: check-packaging.py GST_INSPECT DOAP NAME VERSION PROJECT_URL DOCS_URL
(GST_PLUGIN_PATH_1_0: the build)

1. `gst-inspect-1.0 gpufan`: Source module and Binary package NAME, version
   VERSION, License LGPL (COPYING is the LGPL 2.1, "or later" by the SPDX
   headers), Origin URL DOCS_URL.
2. `gst-inspect-1.0 <element>`: Documentation (doc-uri) DOCS_URL#<element>.
3. The .doap parses as XML (DOAP RDF): name NAME, release VERSION, license
   LGPL, homepage and repository at PROJECT_URL, a maintainer named, and
   nothing that looks like a placeholder.
"""

import re
import subprocess
import sys
import xml.etree.ElementTree as ET

GST_INSPECT, DOAP, NAME, VERSION, PROJECT_URL, DOCS_URL = sys.argv[1:7]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def inspect(what):
    r = subprocess.run([GST_INSPECT, what], capture_output=True, text=True,
                       timeout=60)
    if not check(r.returncode == 0,
                 f"gst-inspect-1.0 {what}: exit {r.returncode}: {r.stderr}"):
        return {}
    fields = {}
    for line in r.stdout.splitlines():
        m = re.match(r"^  (\S[^ ]*(?: [^ ]+)*?)\s{2,}(.*)$", line)
        if m and m.group(1) not in fields:
            fields[m.group(1)] = m.group(2).strip()
    return fields


PLACEHOLDER = re.compile(r"example\.(com|org)|FIXME|TODO|placeholder|"
                         r"Unknown package|unknown origin", re.I)

# 1. The plugin.
plugin = inspect("gpufan")
for key, want in [("Source module", NAME), ("Binary package", NAME),
                  ("Version", VERSION), ("License", "LGPL"),
                  ("Origin URL", DOCS_URL)]:
    check(plugin.get(key) == want,
          f"gst-inspect-1.0 gpufan: {key} {plugin.get(key)!r}, expected {want!r}")
for key, value in plugin.items():
    check(not PLACEHOLDER.search(value), f"gst-inspect-1.0 gpufan: {key} {value!r}")
check(DOCS_URL.startswith("https://"), f"docs URL {DOCS_URL!r} is no https URL")

# 2. Each element's documentation.
for element in ("gpufanout", "gpufanin", "gpufanbin"):
    details = inspect(element)
    check(details.get("Doc-uri") == f"{DOCS_URL}#{element}",
          f"gst-inspect-1.0 {element}: Doc-uri {details.get('Doc-uri')!r}")

# 3. The .doap.
NS = {"doap": "http://usefulinc.com/ns/doap#",
      "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
      "foaf": "http://xmlns.com/foaf/0.1/"}
RES = "{%s}resource" % NS["rdf"]
try:
    root = ET.parse(DOAP).getroot()
except ET.ParseError as e:
    failures.append(f"{DOAP} is not well-formed XML: {e}")
    root = None
if root is not None:
    check(root.tag == "{%s}Project" % NS["doap"], f"doap root {root.tag}")

    def text(path):
        node = root.find(path, NS)
        return node.text.strip() if node is not None and node.text else ""

    def resource(path):
        node = root.find(path, NS)
        return node.get(RES, "") if node is not None else ""

    check(text("doap:name") == NAME, f"doap name {text('doap:name')!r}")
    check(text("doap:shortdesc"), "doap: no shortdesc")
    check(text("doap:description"), "doap: no description")
    check(text("doap:programming-language"), "doap: no programming-language")
    check(resource("doap:license").endswith("/lgpl"),
          f"doap license {resource('doap:license')!r}")
    check(resource("doap:homepage") == PROJECT_URL,
          f"doap homepage {resource('doap:homepage')!r}, the build's "
          f"project_url is {PROJECT_URL!r}")
    location = resource("doap:repository/doap:GitRepository/doap:location")
    check(location.startswith(PROJECT_URL),
          f"doap repository location {location!r}")
    check(text("doap:release/doap:Version/doap:revision") == VERSION,
          "doap release revision "
          f"{text('doap:release/doap:Version/doap:revision')!r}, "
          f"meson's version {VERSION!r}")
    maintainer = text("doap:maintainer/foaf:Person/foaf:name")
    check(maintainer, "doap: no maintainer name")
    with open(DOAP, encoding="utf-8") as f:
        check(not PLACEHOLDER.search(f.read()), f"{DOAP}: a placeholder")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
    sys.exit(1)
print(f"packaging: {NAME} {VERSION}, origin {DOCS_URL}: passed")
