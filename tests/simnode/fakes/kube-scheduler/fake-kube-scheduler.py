#!/usr/bin/python3
"""Stand-in for a kube-scheduler static pod on a simulated control-plane node.

It does what the kubelet + kube-scheduler pair would do with the manifest, no more:
reads the static pod manifest, resolves --config / --policy-config-file through the
pod's volumeMounts and hostPath volumes (as the container would see them), loads the
file and checks it the way kube-scheduler of the image's version would (served
apiVersion, kind, clientConnection.kubeconfig present and mounted, extenders shape,
one binder). A valid setup serves HTTPS /healthz on 127.0.0.1:10259 ("ok"); an
invalid one logs why and exits 1, so systemd restarts it over and over, like a
crash-looping static pod. A systemd .path unit restarts it when the manifest changes,
as the kubelet restarts a static pod. The role under test never knows it is a fake.
"""

import http.server
import os
import re
import ssl
import sys

import yaml

SERVED = {"v1beta1": (19, 22), "v1beta2": (22, 27), "v1beta3": (23, 28), "v1": (25, 99)}
TOP = {"apiVersion", "kind", "parallelism", "leaderElection", "clientConnection", "enableProfiling",
       "enableContentionProfiling", "percentageOfNodesToScore", "podInitialBackoffSeconds",
       "podMaxBackoffSeconds", "profiles", "extenders", "delayCacheUntilActive"}
EXTENDER = {"urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight", "bindVerb", "enableHTTPS",
            "tlsConfig", "httpTimeout", "nodeCacheCapable", "managedResources", "ignorable"}


def die(message):
    print(f"E fake-kube-scheduler: {message}", file=sys.stderr, flush=True)
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


def main():
    manifest, cert, key = sys.argv[1:4]
    with open(manifest, encoding="utf-8") as handle:
        try:
            pod = yaml.safe_load(handle)
        except yaml.YAMLError as exc:
            die(f"{manifest}: {exc}")
    container = next(c for c in pod["spec"]["containers"] if c.get("name") == "kube-scheduler")
    minor = int(re.search(r":v1\.(\d+)", container["image"]).group(1))
    args = container.get("command", [])[1:] + container.get("args", [])
    loaded = []
    for flag in ("--config=", "--policy-config-file="):
        given = [a[len(flag):] for a in args if a.startswith(flag)]
        if len(given) > 1:
            die(f"{flag[:-1]} given {len(given)} times")
        if given:
            check_config(pod, container, given[0], minor)
            loaded.append(flag + given[0])
    # what this start loaded, for tests to see that the manifest was re-read
    os.makedirs("/run/gpunode-sim", exist_ok=True)
    with open("/run/gpunode-sim/kube-scheduler.loaded", "w", encoding="utf-8") as handle:
        handle.write(" ".join(loaded) + "\n")
    server = http.server.HTTPServer(("127.0.0.1", 10259), Healthz)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print(f"I fake-kube-scheduler v1.{minor}: serving securely on 127.0.0.1:10259", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
