#!/usr/bin/python3
"""Stand-in for a kube-scheduler static pod on a simulated control-plane node.

It does what the kubelet + kube-scheduler pair would do with the manifest, no more:

``standin-scheduler.py kubelet MANIFEST CERT KEY`` (the systemd unit's command; a
.path unit restarts it when the manifest changes, as the kubelet replaces a static
pod whose manifest changed) reads the manifest, resolves --config /
--policy-config-file through the pod's volumeMounts and hostPath volumes (as the
container would see them), loads the file and checks it the way kube-scheduler of
the binary's version would (served apiVersion, kind, clientConnection.kubeconfig
present and mounted, extenders' shape, one binder). An invalid setup logs why and
exits 1, so systemd restarts it over and over, like a crash-looping static pod. A
valid one becomes the scheduler: it executes the stand-in binary (kube-scheduler.c,
named kube-scheduler, answering --version) with the container's command and args,
so the node sees the process a kubelet would start. The binary runs
``standin-scheduler.py serve`` as its child, which serves HTTPS /healthz on
127.0.0.1:10259 ("ok").

The role under test never knows it is a fake.
"""

import http.server
import os
import ssl
import subprocess
import sys

import yaml

BINARY = os.environ.get("GPUNODE_STANDIN_BINARY", "/usr/local/lib/gpunode-sim/bin/kube-scheduler")
LOADED = "/run/gpunode-sim/kube-scheduler.loaded"
SERVED = {"v1beta1": (19, 22), "v1beta2": (22, 27), "v1beta3": (23, 28), "v1": (25, 99)}
TOP = {"apiVersion", "kind", "parallelism", "leaderElection", "clientConnection", "enableProfiling",
       "enableContentionProfiling", "percentageOfNodesToScore", "podInitialBackoffSeconds",
       "podMaxBackoffSeconds", "profiles", "extenders", "delayCacheUntilActive"}
EXTENDER = {"urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight", "bindVerb", "enableHTTPS",
            "tlsConfig", "httpTimeout", "nodeCacheCapable", "managedResources", "ignorable"}


def die(message):
    print(f"E standin-scheduler: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def host_path(pod, container, path):
    volumes = {v["name"]: v for v in pod["spec"].get("volumes") or []}
    best = None
    for mount in container.get("volumeMounts") or []:
        mount_path = mount["mountPath"].rstrip("/")
        if path == mount_path or path.startswith(mount_path + "/"):
            source = volumes.get(mount["name"], {}).get("hostPath", {}).get("path")
            if source and (best is None or len(mount_path) > len(best[0])):
                best = (mount_path, source + path[len(mount_path):])
    return best[1] if best else None


def check_config(pod, container, path, minor):
    source = host_path(pod, container, path)
    if source is None or not os.path.isfile(source):
        die(f"open {path}: no such file or directory")
    with open(source, encoding="utf-8") as handle:
        try:
            data = yaml.safe_load(handle)
        except yaml.YAMLError as exc:
            die(f"couldn't decode {path}: {exc}")
    if not isinstance(data, dict):
        die(f"{path}: not an object")
    kind, api = data.get("kind"), str(data.get("apiVersion"))
    if kind == "Policy":
        if minor >= 23:
            die("unknown flag: --policy-config-file")
        return
    group, _, version = api.partition("/")
    if kind != "KubeSchedulerConfiguration" or group != "kubescheduler.config.k8s.io" \
            or version not in SERVED:
        die(f"{path}: no kind \"{kind}\" is registered for version \"{api}\"")
    low, high = SERVED[version]
    if not low <= minor <= high:
        die(f"{path}: no kind \"KubeSchedulerConfiguration\" is registered for version \"{api}\"")
    insecure = {"healthzBindAddress", "metricsBindAddress"}
    allowed = TOP | (insecure if version in ("v1beta1", "v1beta2") else set())
    if set(data) - allowed:
        die(f"{path}: strict decoding error: unknown field(s) {sorted(set(data) - allowed)}")
    kubeconfig = (data.get("clientConnection") or {}).get("kubeconfig")
    if not kubeconfig:
        die("invalid configuration: no configuration has been provided")
    mapped = host_path(pod, container, kubeconfig)
    if mapped is None or not os.path.isfile(mapped):
        die(f"stat {kubeconfig}: no such file or directory")
    binders = 0
    for extender in data.get("extenders") or []:
        if set(extender) - EXTENDER:
            die(f"{path}: strict decoding error: unknown field(s) {sorted(set(extender) - EXTENDER)}")
        binders += bool(extender.get("bindVerb"))
    if binders > 1:
        die("only one extender can implement bind")


def binary_minor():
    out = subprocess.run([BINARY, "--version"], capture_output=True, text=True, check=True).stdout
    return int(out.split()[-1].lstrip("v").split(".")[1])


def kubelet(manifest, cert, key):
    with open(manifest, encoding="utf-8") as handle:
        try:
            pod = yaml.safe_load(handle)
        except yaml.YAMLError as exc:
            die(f"{manifest}: {exc}")
    container = next(c for c in pod["spec"]["containers"] if c.get("name") == "kube-scheduler")
    minor = binary_minor()
    argv = [str(a) for a in container.get("command", []) + container.get("args", [])]
    loaded = []
    for flag in ("--config=", "--policy-config-file="):
        given = [a[len(flag):] for a in argv if a.startswith(flag)]
        if len(given) > 1:
            die(f"{flag[:-1]} given {len(given)} times")
        if given:
            check_config(pod, container, given[0], minor)
            loaded.append(flag + given[0])
    # what this start loaded, for tests to see that the manifest was re-read
    os.makedirs(os.path.dirname(LOADED), exist_ok=True)
    with open(LOADED, "w", encoding="utf-8") as handle:
        handle.write(" ".join(loaded) + "\n")
    env = dict(os.environ, GPUNODE_STANDIN_CERT=cert, GPUNODE_STANDIN_KEY=key,
               GPUNODE_STANDIN_MINOR=str(minor))
    os.execve(BINARY, argv, env)


class Healthz(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ok = self.path in ("/healthz", "/livez", "/readyz")
        body = b"ok" if ok else b"not found"
        self.send_response(200 if ok else 404)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def serve():
    server = http.server.HTTPServer(("127.0.0.1", 10259), Healthz)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(os.environ["GPUNODE_STANDIN_CERT"], os.environ["GPUNODE_STANDIN_KEY"])
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print(f"I standin-scheduler v1.{os.environ.get('GPUNODE_STANDIN_MINOR')}: serving securely on "
          "127.0.0.1:10259", flush=True)
    server.serve_forever()


def main():
    if sys.argv[1:2] == ["serve"]:
        serve()
    elif sys.argv[1:2] == ["kubelet"] and len(sys.argv) == 5:
        kubelet(*sys.argv[2:5])
    else:
        die("usage: standin-scheduler.py kubelet MANIFEST CERT KEY | serve")


if __name__ == "__main__":
    main()
