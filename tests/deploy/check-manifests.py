#!/usr/bin/env python3
"""Check deploy/kubernetes/ as far as a machine without a cluster can.

  check-manifests.py DIR              check the manifests in DIR
  check-manifests.py --self-test DIR  break copies of DIR in known ways (in a
                                      temporary directory) and require each
                                      break to be caught, with its message

What is checked, for every *.yaml in DIR:
  - it parses (every document), and each document has apiVersion, kind and
    metadata.name, with the apiVersion Kubernetes serves for that kind;
  - kustomization.yaml lists every other manifest, and every file it lists
    exists; its `images` name the image the containers use;
  - workloads (Deployment, StatefulSet, Job): the selector's labels are the
    pod template's; every container has a name, an image and a command;
    every $(VAR) in command/args is an env var of the container; every
    Secret a container reads (secretKeyRef, secretRef) and every claim a
    volume names are among the manifests, the Secret with that key;
  - the lane workers (a container whose command is gpufan-lane-worker):
    a GPU limit of nvidia.com/gpu 1, --listen srt://0.0.0.0:PORT and
    --passphrase; PORT and PORT+1 declared as UDP container ports (SRT is
    UDP); --health-port declared as a TCP port; a readiness probe httpGet
    /healthz and a liveness probe on a declared TCP port;
    terminationGracePeriodSeconds set; a StatefulSet's serviceName a
    headless Service (clusterIP: None);
  - Services: the selector matches a workload's pod labels; each targetPort
    is a port of those pods with the same protocol;
  - the coordinator (gpufanbin remote-lanes=...): each srt://POD.SERVICE:PORT
    names a pod that the StatefulSet governed by SERVICE has (POD is
    NAME-ORDINAL, ORDINAL < replicas) and the port its workers listen on,
    and remote-passphrase is set.
When kubectl is on PATH, `kubectl kustomize DIR` must render (offline).
Exit status 0 when everything holds, 1 with one line per problem otherwise.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

API_VERSIONS = {
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
    "Job": "batch/v1",
    "Service": "v1",
    "Secret": "v1",
    "PersistentVolumeClaim": "v1",
    "ConfigMap": "v1",
    "NetworkPolicy": "networking.k8s.io/v1",
    "Kustomization": "kustomize.config.k8s.io/v1beta1",
}
WORKLOADS = ("Deployment", "StatefulSet", "Job")


class Manifests:
    """The documents of one directory, each with the file it came from."""

    def __init__(self, directory):
        self.dir = directory
        self.docs = []  # (file, doc)
        self.problems = []
        self.files = sorted(f for f in os.listdir(directory)
                            if f.endswith((".yaml", ".yml")))
        for f in self.files:
            try:
                with open(os.path.join(directory, f)) as fh:
                    for doc in yaml.safe_load_all(fh):
                        if doc is not None:
                            self.docs.append((f, doc))
            except yaml.YAMLError as e:
                self.problem(f, f"does not parse as YAML: {e}")

    def problem(self, where, text):
        self.problems.append(f"{where}: {text}")

    def of_kind(self, kind):
        return [(f, d) for f, d in self.docs
                if isinstance(d, dict) and d.get("kind") == kind]

    def named(self, kind, name):
        for _, d in self.of_kind(kind):
            if d.get("metadata", {}).get("name") == name:
                return d
        return None


def where(f, doc):
    return f"{f}: {doc.get('kind', '?')} {doc.get('metadata', {}).get('name', '?')}"


def pod_spec(doc):
    return doc.get("spec", {}).get("template", {}).get("spec", {}) or {}


def pod_labels(doc):
    return doc.get("spec", {}).get("template", {}).get("metadata", {}).get("labels", {}) or {}


def containers(spec):
    return (spec.get("initContainers") or []) + (spec.get("containers") or [])


def command_line(c):
    return [str(x) for x in (c.get("command") or []) + (c.get("args") or [])]


def arg_value(cmd, flag):
    for i, a in enumerate(cmd):
        if a == flag and i + 1 < len(cmd):
            return cmd[i + 1]
        if a.startswith(flag + "="):
            return a[len(flag) + 1:]
    return None


def find_port(c, port):
    """The container port named or numbered `port`, or None."""
    for p in c.get("ports") or []:
        if port == p.get("name") or port == p.get("containerPort"):
            return p
    return None


def check_basics(m):
    for f, d in m.docs:
        if not isinstance(d, dict):
            m.problem(f, "a document that is not a mapping")
            continue
        for field in ("apiVersion", "kind"):
            if not d.get(field):
                m.problem(f, f"a document without {field}")
        kind = d.get("kind")
        if kind != "Kustomization" and not d.get("metadata", {}).get("name"):
            m.problem(f, f"{kind or 'a document'} without metadata.name")
        want = API_VERSIONS.get(kind)
        if kind and want is None:
            m.problem(f, f"kind {kind} is not one this check knows (add it to API_VERSIONS)")
        elif want and d.get("apiVersion") != want:
            m.problem(f, f"{kind} has apiVersion {d.get('apiVersion')}, not {want}")


def check_kustomization(m):
    ks = m.of_kind("Kustomization")
    if not ks:
        m.problem(m.dir, "no kustomization.yaml")
        return
    f, k = ks[0]
    listed = k.get("resources") or []
    for r in listed:
        if not os.path.exists(os.path.join(m.dir, r)):
            m.problem(f, f"lists {r}, which does not exist")
    for other in m.files:
        if other != f and other not in listed:
            m.problem(f, f"does not list {other}")
    images = {i.get("name") for i in k.get("images") or []}
    for wf, w in m.docs:
        if not isinstance(w, dict) or w.get("kind") not in WORKLOADS:
            continue
        for c in containers(pod_spec(w)):
            name = str(c.get("image", "")).rsplit(":", 1)[0]
            if images and name not in images:
                m.problem(wf, f"container {c.get('name')} uses image {c.get('image')}, "
                          f"which kustomization.yaml's images ({', '.join(sorted(images))}) do not name")


def check_secret_ref(m, at, name, key):
    s = m.named("Secret", name)
    if s is None:
        m.problem(at, f"reads Secret {name}, which no manifest defines")
    elif key is not None and key not in (s.get("stringData") or {}) and key not in (s.get("data") or {}):
        m.problem(at, f"reads key {key} of Secret {name}, which it does not have")


def check_workload(m, f, d):
    at = where(f, d)
    spec = d.get("spec", {}) or {}
    labels = pod_labels(d)
    sel = (spec.get("selector") or {}).get("matchLabels")
    if d["kind"] != "Job" or sel is not None:
        if not sel:
            m.problem(at, "no spec.selector.matchLabels")
        elif any(labels.get(k) != v for k, v in sel.items()):
            m.problem(at, f"selector.matchLabels {sel} does not match the pod template's labels {labels}")
    ps = pod_spec(d)
    if not ps.get("containers"):
        m.problem(at, "no containers")
    if d["kind"] == "Job" and ps.get("restartPolicy") not in ("Never", "OnFailure"):
        m.problem(at, "a Job's pods need restartPolicy Never or OnFailure")
    for c in containers(ps):
        cat = f"{at}, container {c.get('name', '?')}"
        for field in ("name", "image"):
            if not c.get(field):
                m.problem(cat, f"no {field}")
        if not c.get("command"):
            m.problem(cat, "no command")
        env = {e.get("name"): e for e in c.get("env") or []}
        for ref in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", " ".join(command_line(c))):
            if ref not in env:
                m.problem(cat, f"$({ref}) in its command is not one of its env vars")
        for e in env.values():
            skr = (e.get("valueFrom") or {}).get("secretKeyRef")
            if skr:
                check_secret_ref(m, cat, skr.get("name"), skr.get("key"))
        for ef in c.get("envFrom") or []:
            if ef.get("secretRef"):
                check_secret_ref(m, cat, ef["secretRef"].get("name"), None)
        for p in c.get("ports") or []:
            if str(p.get("name", "")).startswith("srt") and p.get("protocol") != "UDP":
                m.problem(cat, f"port {p.get('name')} ({p.get('containerPort')}) is SRT and must be protocol UDP")
        cmd = command_line(c)
        if cmd and os.path.basename(cmd[0]) == "gpufan-lane-worker":
            check_lane_worker(m, cat, d, c, cmd)
    for v in ps.get("volumes") or []:
        pvc = v.get("persistentVolumeClaim")
        if pvc and m.named("PersistentVolumeClaim", pvc.get("claimName")) is None:
            m.problem(at, f"volume {v.get('name')} claims {pvc.get('claimName')}, which no manifest defines")
        sec = v.get("secret")
        if sec:
            check_secret_ref(m, at, sec.get("secretName"), None)


def listen_port(cmd):
    listen = arg_value(cmd, "--listen") or ""
    mt = re.fullmatch(r"srt://([^:/]+):(\d+)", listen)
    return (mt.group(1), int(mt.group(2))) if mt else (None, None)


def check_probe_port(m, cat, c, probe, what):
    action = probe.get("httpGet") or probe.get("tcpSocket")
    if action is None:
        return
    p = find_port(c, action.get("port"))
    if p is None:
        m.problem(cat, f"{what} probe's port {action.get('port')} is not one of the container's ports")
    elif p.get("protocol", "TCP") != "TCP":
        m.problem(cat, f"{what} probe's port {action.get('port')} is {p.get('protocol')}, a probe needs TCP")


def check_lane_worker(m, cat, d, c, cmd):
    limits = (c.get("resources") or {}).get("limits") or {}
    if str(limits.get("nvidia.com/gpu")) != "1":
        m.problem(cat, f"a lane worker needs resources.limits nvidia.com/gpu: 1 (has {limits.get('nvidia.com/gpu')})")
    host, port = listen_port(cmd)
    if port is None:
        m.problem(cat, f"--listen is not srt://HOST:PORT ({arg_value(cmd, '--listen')})")
    else:
        if host != "0.0.0.0":
            m.problem(cat, f"--listen {host}: a pod must listen on 0.0.0.0 to be reached")
        for want in (port, port + 1):
            p = find_port(c, want)
            if p is None:
                m.problem(cat, f"SRT port {want} (--listen's port{'' if want == port else ' + 1'}) is not a container port")
            elif p.get("protocol") != "UDP":
                m.problem(cat, f"SRT port {want} must be protocol UDP (SRT is UDP), is {p.get('protocol', 'TCP')}")
    if not arg_value(cmd, "--passphrase"):
        m.problem(cat, "a lane worker off loopback needs --passphrase")
    hp = arg_value(cmd, "--health-port")
    hport = find_port(c, int(hp)) if hp and hp.isdigit() else None
    if hport is None:
        m.problem(cat, f"--health-port {hp} is not a container port")
    elif hport.get("protocol", "TCP") != "TCP":
        m.problem(cat, "the health port must be TCP")
    rp = c.get("readinessProbe")
    if not rp or (rp.get("httpGet") or {}).get("path") != "/healthz":
        m.problem(cat, "a lane worker needs a readinessProbe httpGet /healthz")
    else:
        check_probe_port(m, cat, c, rp, "readiness")
        if hport is not None and find_port(c, rp["httpGet"].get("port")) is not hport:
            m.problem(cat, "the readiness probe does not ask --health-port")
    lp = c.get("livenessProbe")
    if not lp:
        m.problem(cat, "a lane worker needs a livenessProbe")
    else:
        check_probe_port(m, cat, c, lp, "liveness")
    if c.get("startupProbe"):
        check_probe_port(m, cat, c, c["startupProbe"], "startup")
    if not pod_spec(d).get("terminationGracePeriodSeconds"):
        m.problem(cat, "terminationGracePeriodSeconds is not set (the drain's time on SIGTERM)")
    if d["kind"] == "StatefulSet":
        svc = m.named("Service", d["spec"].get("serviceName"))
        if svc is None:
            m.problem(cat, f"serviceName {d['spec'].get('serviceName')} is not a Service of the manifests")
        elif svc.get("spec", {}).get("clusterIP") != "None":
            m.problem(cat, f"serviceName {d['spec'].get('serviceName')} is not headless (clusterIP: None)")


def check_services(m):
    for f, s in m.of_kind("Service"):
        at = where(f, s)
        sel = (s.get("spec") or {}).get("selector") or {}
        if not sel:
            m.problem(at, "no selector")
            continue
        pods = [w for _, w in m.docs if isinstance(w, dict) and w.get("kind") in WORKLOADS
                and sel.items() <= pod_labels(w).items()]
        if not pods:
            m.problem(at, f"selector {sel} matches no workload's pod labels")
            continue
        for sp in s["spec"].get("ports") or []:
            target = sp.get("targetPort", sp.get("port"))
            found = [find_port(c, target) for w in pods for c in pod_spec(w).get("containers") or []]
            found = [p for p in found if p is not None]
            if not found:
                m.problem(at, f"port {sp.get('name')}: targetPort {target} is no port of the pods it selects")
            elif any(p.get("protocol", "TCP") != sp.get("protocol", "TCP") for p in found):
                m.problem(at, f"port {sp.get('name')} is {sp.get('protocol', 'TCP')}, the pods' port is "
                          f"{found[0].get('protocol', 'TCP')}")


def check_coordinator(m):
    for f, d in m.docs:
        if not isinstance(d, dict) or d.get("kind") not in WORKLOADS:
            continue
        for c in containers(pod_spec(d)):
            cmd = command_line(c)
            lanes = [a.split("=", 1)[1] for a in cmd if a.startswith("remote-lanes=")]
            if not lanes:
                continue
            cat = f"{where(f, d)}, container {c.get('name')}"
            if not any(a.startswith("remote-passphrase=") and len(a) > len("remote-passphrase=") for a in cmd):
                m.problem(cat, "remote-lanes without remote-passphrase")
            for uri in lanes[0].split(","):
                mt = re.fullmatch(r"srt://([a-z0-9-]+)\.([a-z0-9-]+)(?:\.[a-z0-9.-]+)?:(\d+)", uri)
                if not mt:
                    m.problem(cat, f"remote lane {uri} is not srt://POD.SERVICE:PORT")
                    continue
                pod, svc, port = mt.group(1), mt.group(2), int(mt.group(3))
                sets = [w for _, w in m.of_kind("StatefulSet") if w["spec"].get("serviceName") == svc]
                if not sets:
                    m.problem(cat, f"remote lane {uri}: no StatefulSet has serviceName {svc} (no per-pod names)")
                    continue
                w = sets[0]
                name = w["metadata"]["name"]
                om = re.fullmatch(re.escape(name) + r"-(\d+)", pod)
                replicas = w["spec"].get("replicas", 1)
                if not om or int(om.group(1)) >= replicas:
                    m.problem(cat, f"remote lane {uri}: {pod} is not a pod of StatefulSet {name} "
                              f"({name}-0 .. {name}-{replicas - 1})")
                ports = {listen_port(command_line(wc))[1] for wc in pod_spec(w).get("containers") or []}
                if port not in ports:
                    m.problem(cat, f"remote lane {uri}: the workers listen on {sorted(p for p in ports if p)}, not {port}")


def check_kubectl(m):
    kubectl = shutil.which("kubectl")
    if not kubectl:
        print("kubectl not found: `kubectl kustomize` not run")
        return
    r = subprocess.run([kubectl, "kustomize", m.dir], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        m.problem(m.dir, f"kubectl kustomize fails: {r.stderr.strip()}")


def check(directory, quiet=False):
    m = Manifests(directory)
    if not m.problems:
        check_basics(m)
    if not m.problems:
        check_kustomization(m)
        for f, d in m.docs:
            if d.get("kind") in WORKLOADS:
                check_workload(m, f, d)
        check_services(m)
        check_coordinator(m)
        check_kubectl(m)
    if not quiet:
        for p in m.problems:
            print(p)
        if not m.problems:
            print(f"{len(m.docs)} manifests in {len(m.files)} files: OK")
    return m.problems


# --- self-test: each break must be caught ---------------------------------

def doc_of(docs, kind):
    return next(d for d in docs if d.get("kind") == kind)


def worker(docs):
    return pod_spec(doc_of(docs, "StatefulSet"))["containers"][0]


def set_arg(c, flag, value):
    args = c["args"]
    args[args.index(flag) + 1] = value


BREAKS = [
    # (what, file, change to the file's documents, text the check must print)
    ("template label mismatch", "worker-statefulset.yaml",
     lambda ds: doc_of(ds, "StatefulSet")["spec"]["template"]["metadata"]["labels"].update(
         {"app.kubernetes.io/component": "lane-wroker"}),
     "does not match the pod template's labels"),
    ("no GPU limit", "worker-statefulset.yaml",
     lambda ds: worker(ds)["resources"]["limits"].pop("nvidia.com/gpu"),
     "nvidia.com/gpu: 1"),
    ("SRT port over TCP", "worker-statefulset.yaml",
     lambda ds: find_port(worker(ds), 7002).update({"protocol": "TCP"}),
     "must be protocol UDP"),
    ("readiness probe on an undeclared port", "worker-statefulset.yaml",
     lambda ds: worker(ds)["readinessProbe"]["httpGet"].update({"port": "healthz"}),
     "readiness probe's port healthz is not one of the container's ports"),
    ("health port not declared", "worker-statefulset.yaml",
     lambda ds: set_arg(worker(ds), "--health-port", "9090"),
     "--health-port 9090 is not a container port"),
    ("no passphrase", "worker-statefulset.yaml",
     lambda ds: worker(ds).update({"args": [a for a in worker(ds)["args"]
                                            if a not in ("--passphrase", "$(GPUFAN_SRT_PASSPHRASE)")]}),
     "needs --passphrase"),
    ("no termination grace", "worker-statefulset.yaml",
     lambda ds: pod_spec(doc_of(ds, "StatefulSet")).pop("terminationGracePeriodSeconds"),
     "terminationGracePeriodSeconds is not set"),
    ("Secret name drift", "worker-statefulset.yaml",
     lambda ds: worker(ds)["env"][0]["valueFrom"]["secretKeyRef"].update({"name": "gpufan-srt-key"}),
     "reads Secret gpufan-srt-key, which no manifest defines"),
    ("Service selector mismatch", "worker-service.yaml",
     lambda ds: doc_of(ds, "Service")["spec"]["selector"].update({"app.kubernetes.io/component": "worker"}),
     "matches no workload's pod labels"),
    ("Service not headless", "worker-service.yaml",
     lambda ds: doc_of(ds, "Service")["spec"].pop("clusterIP"),
     "is not headless"),
    ("remote lane beyond the replicas", "coordinator-job.yaml",
     lambda ds: (lambda c: c.update({"args": [
         a.replace("gpufan-worker-1.", "gpufan-worker-2.") for a in c["args"]]}))(
         pod_spec(doc_of(ds, "Job"))["containers"][0]),
     "gpufan-worker-2 is not a pod of StatefulSet gpufan-worker"),
    ("claim that does not exist", "coordinator-job.yaml",
     lambda ds: pod_spec(doc_of(ds, "Job"))["volumes"][0]["persistentVolumeClaim"].update(
         {"claimName": "media"}),
     "claims media, which no manifest defines"),
    ("no metadata.name", "media-pvc.yaml",
     lambda ds: ds[0]["metadata"].pop("name"),
     "without metadata.name"),
    ("wrong apiVersion", "coordinator-job.yaml",
     lambda ds: doc_of(ds, "Job").update({"apiVersion": "batch/v1beta1"}),
     "not batch/v1"),
]


def self_test(directory):
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        base = os.path.join(tmp, "base")
        shutil.copytree(directory, base)
        if check(base, quiet=True):
            failures.append("the unbroken copy does not pass: " + "; ".join(check(base, quiet=True)))
        cases = list(BREAKS) + [("YAML that does not parse", "worker-service.yaml", None,
                                 "does not parse as YAML")]
        for i, (what, fname, change, expect) in enumerate(cases):
            d = os.path.join(tmp, f"break{i}")
            shutil.copytree(directory, d)
            path = os.path.join(d, fname)
            if change is None:
                with open(path, "a") as fh:
                    fh.write("spec: [unclosed\n")
            else:
                with open(path) as fh:
                    docs = [x for x in yaml.safe_load_all(fh) if x is not None]
                change(docs)
                with open(path, "w") as fh:
                    yaml.safe_dump_all(docs, fh, sort_keys=False)
            problems = check(d, quiet=True)
            if not any(expect in p for p in problems):
                failures.append(f"{what} ({fname}): not caught as '{expect}'; the check said: "
                                f"{problems or 'nothing'}")
            else:
                print(f"caught: {what}: {next(p for p in problems if expect in p)}")
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print(f"all {len(BREAKS) + 1} broken copies caught")
    return 1 if failures else 0


def main(argv):
    if len(argv) == 3 and argv[1] == "--self-test":
        return self_test(argv[2])
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: check-manifests.py [--self-test] DIR", file=sys.stderr)
        return 2
    return 1 if check(argv[1]) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
