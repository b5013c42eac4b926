"""Assertions on devlet's rendered Helm chart (chart_test.sh renders it into DIR).

  chart_check.py DIR [--node DEVLET_NODE] [--extender DEVLET_EXTENDER]
  chart_check.py --extract KIND FILE      print the objects of KIND (a YAML stream)
"""
import argparse
import re
import subprocess
import sys

import yaml

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def load(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def by_kind(objs, kind):
    return [o for o in objs if o["kind"] == kind]


def one(objs, kind):
    found = by_kind(objs, kind)
    check(len(found) == 1, f"want one {kind}, got {len(found)}")
    return found[0] if found else {}


def env_of(container):
    return {e["name"]: e for e in container.get("env", [])}


def flags(args):
    return {a.split("=", 1)[0]: (a.split("=", 1)[1] if "=" in a else None)
            for a in args if a.startswith("-")}


def known_flags(binary):
    """The long flags a binary accepts, from its --help."""
    out = subprocess.run([binary, "--help"], capture_output=True, text=True, check=True).stdout
    return set(re.findall(r"(--[a-z][a-z0-9-]*)", out))


def check_node_daemonset(objs, name, binary):
    ds = one(objs, "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    c = pod["containers"][0]
    args = flags(c["args"])
    env = env_of(c)
    check(env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
          == "spec.nodeName", f"{name}: NODE_NAME from the downward API (spec.nodeName)")
    check(pod["serviceAccountName"] == "devlet", f"{name}: serviceAccountName")
    check(c["securityContext"].get("privileged") is True and
          c["securityContext"].get("readOnlyRootFilesystem") is True,
          f"{name}: privileged with a read-only root filesystem")
    check(c["livenessProbe"]["httpGet"]["path"] == "/healthz" and
          c["readinessProbe"]["httpGet"]["path"] == "/healthz", f"{name}: probes on /healthz")
    check(pod.get("tolerations") == [{"operator": "Exists"}], f"{name}: tolerates every taint")
    check("resources" in c, f"{name}: resources")
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    hostpaths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    for vol, path in hostpaths.items():
        # Same path inside and outside: CDI specs and sockets name host paths.
        check(mounts.get(vol) == path, f"{name}: host path {path} mounted at the same path")
    if binary:
        known = known_flags(binary)
        for flag in args:
            check(flag in known, f"{name}: devlet-node has no flag {flag}")
    return ds, pod, c, args, env, hostpaths


def check_extender(objs, name, mode, binary):
    dep = [d for d in by_kind(objs, "Deployment") if d["metadata"]["name"] == "devlet-extender"]
    check(len(dep) == 1, f"{name}: the devlet-extender Deployment")
    if not dep:
        return
    pod = dep[0]["spec"]["template"]["spec"]
    c = pod["containers"][0]
    args = flags(c["args"])
    check(args.get("--mode") == mode, f"{name}: --mode={mode}")
    check(c["readinessProbe"]["httpGet"]["path"] == "/readyz", f"{name}: readiness on /readyz")
    check(c["securityContext"]["readOnlyRootFilesystem"] and
          pod["securityContext"]["runAsNonRoot"], f"{name}: extender unprivileged")
    svc = [s for s in by_kind(objs, "Service") if s["metadata"]["name"] == "devlet-extender"]
    check(len(svc) == 1 and svc[0]["spec"]["ports"][0]["port"] == 8888, f"{name}: Service :8888")
    if binary:
        known = known_flags(binary)
        for flag in args:
            check(flag in known, f"{name}: devlet-extender has no flag {flag}")
    roles = {r["metadata"]["name"]: r for r in by_kind(objs, "ClusterRole")}
    rules = roles.get("devlet-extender", {}).get("rules", [])
    writes = {(res, verb) for r in rules for res in r["resources"] for verb in r["verbs"]}
    allocating = {("pods/binding", "create"), ("resourceclaims/status", "update"),
                  ("resourceclaims/binding", "update"), ("resourceclaims", "create"),
                  ("pods/status", "update")}
    if mode == "allocate":
        check(allocating <= writes, f"{name}: allocate-mode RBAC {allocating - writes}")
    else:
        check(not (allocating & writes), f"{name}: score mode writes nothing")
    configs = {c["metadata"]["labels"]["devlet.io/extender-mode"]: c
               for c in by_kind(objs, "ConfigMap") if "devlet.io/extender-mode" in
               c["metadata"].get("labels", {})}
    check(set(configs) == {"score", "allocate"}, f"{name}: scheduler ConfigMaps for both modes")
    for m, cm in configs.items():
        check(cm["metadata"]["labels"]["devlet.io/active"] == str(m == mode).lower(),
              f"{name}: active label on the {m} configuration")
        cfg = yaml.safe_load(cm["data"]["config.yaml"])
        check(cfg["kind"] == "KubeSchedulerConfiguration" and
              cfg["apiVersion"] == "kubescheduler.config.k8s.io/v1", f"{name}: {m} config kind")
        ext = cfg["extenders"][0]
        check(ext["filterVerb"] == "filter" and ext["prioritizeVerb"] == "prioritize" and
              ext["nodeCacheCapable"] is True, f"{name}: {m} verbs")
        disabled = [p["name"] for p in cfg.get("profiles", [{}])[0].get("plugins", {})
                    .get("multiPoint", {}).get("disabled", [])]
        if m == "allocate":
            check(ext.get("bindVerb") == "bind" and ext["ignorable"] is False and
                  disabled == ["DynamicResources"], f"{name}: allocate config")
        else:
            check("bindVerb" not in ext and ext["ignorable"] is True and not disabled,
                  f"{name}: score config")
    return configs


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir", nargs="?")
    p.add_argument("--node")
    p.add_argument("--extender")
    p.add_argument("--extract", nargs=2, metavar=("KIND", "FILE"))
    a = p.parse_args()
    if a.extract:
        yaml.safe_dump_all(by_kind(load(a.extract[1]), a.extract[0]), sys.stdout)
        return 0

    # ---- Default values ----
    objs = load(f"{a.dir}/default.yaml")
    kinds = sorted(o["kind"] for o in objs)
    check(kinds == sorted(["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet",
                           "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"] +
                          ["DeviceClass"] * 5), f"default: kinds {kinds}")
    for o in objs:
        if o["kind"] in ("ServiceAccount", "DaemonSet"):
            check(o["metadata"]["namespace"] == "devlet-system", f"namespace of {o['kind']}")
    ds, pod, c, args, env, hostpaths = check_node_daemonset(objs, "default", a.node)
    check(args.get("--driver-name") == "devlet.io", "default: --driver-name=devlet.io")
    check(args.get("--nri-socket") == "/var/run/nri/nri.sock", "default: NRI on")
    check(args.get("--healthcheck-port") == "51515", "default: --healthcheck-port=51515")
    check("--healthcheck-address" not in args and
          env.get("HEALTHCHECK_ADDRESS", {}).get("valueFrom", {}).get("fieldRef", {})
          .get("fieldPath") == "status.podIP", "default: health served on the pod IP")
    check("KUBERNETES_SERVICE_HOST" not in env, "default: the in-cluster Service")
    check(pod["hostNetwork"] is False, "default: no host network")
    check(set(hostpaths.values()) == {"/var/lib/kubelet/plugins_registry",
                                      "/var/lib/kubelet/plugins", "/var/run/cdi",
                                      "/var/lib/devlet", "/sys", "/dev", "/var/run/nri"},
          f"default: host paths {sorted(hostpaths.values())}")
    annotations = ds["spec"]["template"]["metadata"]["annotations"]
    check(annotations.get("prometheus.io/port") == "51515", "default: prometheus annotations")

    rules = one(objs, "ClusterRole")["rules"]
    got = {(g, res, verb, tuple(r.get("resourceNames", [])))
           for r in rules for g in r["apiGroups"] for res in r["resources"] for verb in r["verbs"]}
    want = {("resource.k8s.io", "resourceslices", v, ()) for v in
            ("create", "update", "delete", "list", "watch")}
    want |= {("resource.k8s.io", "resourceclaims", v, ()) for v in ("get", "list", "watch")}
    want |= {("resource.k8s.io", "resourceclaims/status", v, ()) for v in ("update", "patch")}
    want |= {("resource.k8s.io", "resourceclaims/driver", v, ("devlet.io",))
             for v in ("associated-node:update", "associated-node:patch")}
    want |= {("", "nodes", "get", ()), ("", "events", "create", ()),
             ("events.k8s.io", "events", "create", ())}
    check(got == want, f"default: ClusterRole rules differ: extra {got - want}, "
                       f"missing {want - got}")
    binding = one(objs, "ClusterRoleBinding")
    check(binding["subjects"] == [{"kind": "ServiceAccount", "name": "devlet",
                                   "namespace": "devlet-system"}], "default: binding subject")

    vap = one(objs, "ValidatingAdmissionPolicy")
    check(vap["spec"]["matchConditions"][0]["expression"] ==
          'request.userInfo.username == "system:serviceaccount:devlet-system:devlet"',
          "default: the policy applies to devlet-node's ServiceAccount")
    check(vap["spec"]["matchConstraints"]["resourceRules"][0]["resources"] == ["resourceslices"],
          "default: the policy matches ResourceSlices")
    check("authentication.kubernetes.io/node-name" in vap["spec"]["variables"][0]["expression"],
          "default: the policy reads the token's node name")
    vapb = one(objs, "ValidatingAdmissionPolicyBinding")
    check(vapb["spec"]["policyName"] == vap["metadata"]["name"] and
          vapb["spec"]["validationActions"] == ["Deny"], "default: policy binding denies")

    classes = {d["metadata"]["name"]: d for d in by_kind(objs, "DeviceClass")}
    check(set(classes) == {"gpu.devlet.io", "vfio-gpu.devlet.io", "nic.devlet.io",
                           "vf.devlet.io", "cpu.devlet.io"}, f"default: classes {sorted(classes)}")
    vfio = classes.get("vfio-gpu.devlet.io", {}).get("spec", {})
    check(vfio.get("config", [{}])[0].get("opaque", {}).get("parameters", {}).get("bindDriver")
          == "vfio-pci", "default: the vfio GPU class binds vfio-pci")
    for cls in classes.values():
        check('device.driver == "devlet.io"' in cls["spec"]["selectors"][0]["cel"]["expression"],
              f"{cls['metadata']['name']}: selects devlet.io devices")
        check("extendedResourceName" not in cls["spec"], "default: no extendedResourceName")

    # ---- The extender in both modes ----
    for mode in ("score", "allocate"):
        objs = load(f"{a.dir}/{mode}.yaml")
        configs = check_extender(objs, mode, mode, a.extender)
        url = yaml.safe_load(configs[mode]["data"]["config.yaml"])["extenders"][0]["urlPrefix"]
        check(url == "http://devlet-extender.devlet-system.svc:8888/devlet",
              f"{mode}: urlPrefix {url}")
        dep = by_kind(objs, "Deployment")[0]
        check("--check-peer-allocations" not in flags(dep["spec"]["template"]["spec"]
                                                      ["containers"][0]["args"]),
              f"{mode}: one replica, no peer check")
    # ---- The extender over HTTPS with client certificates, two replicas ----
    objs = load(f"{a.dir}/tls.yaml")
    configs = check_extender(objs, "tls", "allocate", a.extender)
    dep = [d for d in by_kind(objs, "Deployment")][0]
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    args = flags(c["args"])
    check(dep["spec"]["replicas"] == 2 and args.get("--check-peer-allocations") == "true",
          f"tls: two allocating replicas check each other's allocations {args}")
    check(args.get("--tls-cert-file") == "/etc/devlet-extender/tls/tls.crt" and
          args.get("--tls-private-key-file") == "/etc/devlet-extender/tls/tls.key" and
          args.get("--client-ca-file") == "/etc/devlet-extender/tls/ca.crt" and
          args.get("--allowed-client-names") == "kube-scheduler", f"tls: flags {args}")
    check(pod["volumes"] == [{"name": "tls", "secret": {"secretName": "devlet-extender-tls"}}] and
          c["volumeMounts"][0]["mountPath"] == "/etc/devlet-extender/tls", "tls: the Secret mounted")
    check(c["livenessProbe"]["httpGet"]["scheme"] == "HTTPS" and
          c["readinessProbe"]["httpGet"]["scheme"] == "HTTPS", "tls: probes over HTTPS")
    ext = yaml.safe_load(configs["allocate"]["data"]["config.yaml"])["extenders"][0]
    check(ext["urlPrefix"] == "https://devlet-extender.devlet-system.svc:8888/devlet" and
          set(ext.get("tlsConfig", {})) == {"certFile", "keyFile", "caFile"},
          f"tls: scheduler configuration {ext}")
    default_dep = [d for d in by_kind(load(f"{a.dir}/allocate.yaml"), "Deployment")][0]
    check("volumes" not in default_dep["spec"]["template"]["spec"] and
          default_dep["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"]
          ["scheme"] == "HTTP", "allocate without tls: plain HTTP, no Secret")

    allocate = load(f"{a.dir}/allocate.yaml")
    dep = [d for d in by_kind(allocate, "Deployment")][0]
    check(flags(dep["spec"]["template"]["spec"]["containers"][0]["args"]).get("--policy") ==
          "spread", "allocate: --policy=spread")

    # ---- A simulated node on a cluster without a Service network ----
    objs = load(f"{a.dir}/sim.yaml")
    ds, pod, c, args, env, hostpaths = check_node_daemonset(objs, "sim", a.node)
    check(pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet",
          "sim: host network")
    check(env.get("KUBERNETES_SERVICE_HOST", {}).get("value") == "127.0.0.1" and
          env.get("KUBERNETES_SERVICE_PORT", {}).get("value") == "6443",
          "sim: devlet-node talks to the API server directly")
    check(args.get("--sysfs-root") == "/tmp/sim/sys" and args.get("--dev-root") == "/tmp/sim" and
          args.get("--topology-xml") == "/tmp/sim/topology.xml", "sim: simulated hardware flags")
    check({"/tmp/sim/sys", "/tmp/sim/dev", "/tmp/sim/topology.xml"} <= set(hostpaths.values()),
          "sim: simulated hardware mounted")
    check(args.get("--nri-socket") == "" and "/var/run/nri" not in hostpaths.values(),
          "sim: NRI off")
    check(args.get("--healthcheck-address") == "0.0.0.0" and "HEALTHCHECK_ADDRESS" not in env,
          "sim: explicit health address")
    check(args.get("--profiles") == "/etc/devlet/profiles.yaml", "sim: --profiles")
    check(args.get("--feature-gates") == "SomeGate=true" and args.get("--v") == "4",
          "sim: feature gates and verbosity")
    profiles = [o for o in by_kind(objs, "ConfigMap") if o["metadata"]["name"] == "devlet-profiles"]
    check(len(profiles) == 1 and yaml.safe_load(profiles[0]["data"]["profiles.yaml"]) ==
          {"profiles": [{"name": "gpu", "kind": "gpu"}]}, "sim: profiles ConfigMap")
    classes = {d["metadata"]["name"]: d for d in by_kind(objs, "DeviceClass")}
    check(classes.get("gpu.gpu.example.com", {}).get("spec", {}).get("extendedResourceName") ==
          "example.com/gpu", "sim: extendedResourceName on the GPU class")
    rules = one(objs, "ClusterRole") if len(by_kind(objs, "ClusterRole")) == 1 else \
        [r for r in by_kind(objs, "ClusterRole") if r["metadata"]["name"] == "devlet"][0]
    drv = [r for r in rules["rules"] if r["resources"] == ["resourceclaims/driver"]]
    check(drv and drv[0]["resourceNames"] == ["gpu.example.com"], "sim: driver name in RBAC")
    dep = [d for d in by_kind(objs, "Deployment")][0]
    check(env_of(dep["spec"]["template"]["spec"]["containers"][0])
          .get("KUBERNETES_SERVICE_HOST", {}).get("value") == "127.0.0.1",
          "sim: the extender talks to the API server directly")
    cfg = [o for o in by_kind(objs, "ConfigMap") if o["metadata"].get("labels", {})
           .get("devlet.io/active") == "true"][0]
    check(yaml.safe_load(cfg["data"]["config.yaml"])["extenders"][0]["urlPrefix"] ==
          "http://127.0.0.1:8888/devlet", "sim: urlHost")

    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
