package main

// Scenario 6 (issue 17 §2): the same pods scheduled through devlet-extender, in score mode and in
// allocate mode, with kube-scheduler running the KubeSchedulerConfiguration the chart renders into
// a ConfigMap for that mode (as an operator mounts it), and the extender Deployment, Service and
// RBAC of the chart.

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// extenderName is the chart's devlet.extenderName for release "devlet".
const extenderName = releaseName + "-extender"

// helmUpgrade repeats the install's values with extra --set arguments.
func (d *devlet) helmUpgrade(set ...string) {
	args := append([]string{"upgrade", releaseName, d.opts.chart, "--namespace", devletNamespace},
		d.helmValues...)
	for _, s := range set {
		args = append(args, "--set", s)
	}
	d.helm(args...)
}

// extenderMetrics reads devlet-extender's counters from its /metrics (host network).
func extenderMetrics(port int) (map[string]float64, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && !strings.HasPrefix(line, "#") {
			if v, err := strconv.ParseFloat(f[1], 64); err == nil {
				out[f[0]] = v
			}
		}
	}
	return out, nil
}

// extenderPodReady waits for the extender Deployment's pod running `--mode=<mode>` to be Ready.
func (d *devlet) extenderPodReady(mode string, timeout time.Duration) {
	waitFor("devlet-extender pod in "+mode+" mode Ready", timeout, func() (bool, string) {
		pods, err := d.c.client.CoreV1().Pods(devletNamespace).List(d.ctx(), metav1.ListOptions{
			LabelSelector: "app.kubernetes.io/component=scheduler-extender"})
		if err != nil {
			return false, err.Error()
		}
		var states []string
		for _, p := range pods.Items {
			ready := false
			for _, c := range p.Status.Conditions {
				ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
			}
			hasMode := false
			for _, a := range p.Spec.Containers[0].Args {
				hasMode = hasMode || a == "--mode="+mode
			}
			if ready && hasMode && p.DeletionTimestamp == nil {
				return true, ""
			}
			states = append(states, fmt.Sprintf("%s %s ready=%v mode=%v", p.Name, p.Status.Phase, ready, hasMode))
		}
		return false, fmt.Sprint(states)
	})
}

// schedulerWithChartConfig restarts kube-scheduler with the chart's ConfigMap for `mode`.
func (d *devlet) schedulerWithChartConfig(mode string) {
	cm, err := d.c.client.CoreV1().ConfigMaps(devletNamespace).Get(d.ctx(),
		extenderName+"-scheduler-config-"+mode, metav1.GetOptions{})
	must(err, "the chart's scheduler ConfigMap for "+mode)
	check(cm.Labels["devlet.io/active"] == "true", "ConfigMap %s is not labelled active: %v", cm.Name,
		cm.Labels)
	config := cm.Data["config.yaml"]
	check(strings.Contains(config, "kubeconfig: "+d.c.schedulerKubeconfig),
		"the chart's scheduler configuration does not carry schedulerConfig.kubeconfig:\n%s", config)
	path := d.c.path("scheduler-config-" + mode + ".yaml")
	writeFile(path, []byte(config), 0o644)
	d.c.scheduler.stop(10 * time.Second)
	d.c.startScheduler(path)
}

// scenarioExtender (scenario 6): for score mode then allocate mode, `helm upgrade` with the
// extender enabled in that mode (host network: there is no pod network; urlHost 127.0.0.1),
// kube-scheduler restarted with the chart's ConfigMap for the mode, and the pods of scenarios 1
// and 3 (a claim from a template; an extended resource): they run with a GPU; the extender's
// counters show kube-scheduler called its filter (and, in allocate mode, its bind: with the
// DynamicResources plugin disabled by that configuration the extender alone allocated the
// claims). Afterwards the cluster's own scheduler configuration and the chart without the
// extender are put back.
func scenarioExtender(d *devlet) {
	tmpl := "one-gpu"
	for _, mode := range []string{"score", "allocate"} {
		start := time.Now()
		// A port per mode: with host network the rolling update's new pod cannot share the old
		// one's port (kube-scheduler's NodePorts filter keeps it Pending).
		port := freePort()
		d.helmUpgrade("extender.enabled=true", "extender.mode="+mode, "extender.hostNetwork=true",
			"extender.port="+strconv.Itoa(port), "extender.schedulerConfig.urlHost=127.0.0.1",
			"extender.schedulerConfig.kubeconfig="+d.c.schedulerKubeconfig)
		d.extenderPodReady(mode, 60*time.Second)
		d.schedulerWithChartConfig(mode)
		before, err := extenderMetrics(port)
		must(err, "extender /metrics")
		logf("%s mode: extender Ready, kube-scheduler on the chart's configuration, %.1fs", mode,
			time.Since(start).Seconds())

		ns := "scenario-6-" + mode
		d.ensureNamespace(ns)
		d.createGPUTemplate(ns)
		claimPod, gpus := d.runGPUPod(ns, "claim-gpu", corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}},
			Containers:     []corev1.Container{sleeper("app", "gpu")},
		})
		check(len(gpus) == 1, "%s mode: claim-gpu's GPU env %v", mode, gpus)
		if check(len(claimPod.Status.ResourceClaimStatuses) == 1 &&
			claimPod.Status.ResourceClaimStatuses[0].ResourceClaimName != nil,
			"%s mode: claim statuses %+v", mode, claimPod.Status.ResourceClaimStatuses) {
			claim, err := d.c.client.ResourceV1().ResourceClaims(ns).Get(d.ctx(),
				*claimPod.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
			must(err, "claim")
			check(claim.Status.Allocation != nil && len(claim.Status.Allocation.Devices.Results) == 1 &&
				claim.Status.Allocation.Devices.Results[0].Pool == nodeName,
				"%s mode: claim allocation %+v", mode, claim.Status.Allocation)
		}
		// The extended-resource pod: in allocate mode devlet-extender synthesizes its claim and
		// writes the pod's status.extendedResourceClaimStatus, which the kubelet reads to hand the
		// claim's devices to the container.
		pods := 2
		ext := sleeper("app")
		ext.Resources.Limits = corev1.ResourceList{gpuExtendedResource: resourceOne}
		extPod, extGPUs := d.runGPUPod(ns, "ext-gpu", corev1.PodSpec{Containers: []corev1.Container{ext}})
		check(len(extGPUs) == 1 && extPod.Status.ExtendedResourceClaimStatus != nil,
			"%s mode: ext-gpu's GPU env %v, extendedResourceClaimStatus %+v", mode, extGPUs,
			extPod.Status.ExtendedResourceClaimStatus)
		var extClaim string
		if extPod.Status.ExtendedResourceClaimStatus != nil {
			extClaim = extPod.Status.ExtendedResourceClaimStatus.ResourceClaimName
		}
		after, err := extenderMetrics(port)
		must(err, "extender /metrics")
		filters := after["devlet_extender_filter_requests_total"] - before["devlet_extender_filter_requests_total"]
		binds := after["devlet_extender_bind_requests_total"] - before["devlet_extender_bind_requests_total"]
		check(filters >= float64(pods), "%s mode: the extender served %v filter requests for %d pods",
			mode, filters, pods)
		if mode == "allocate" {
			check(binds >= float64(pods) && after["devlet_extender_bind_failures_total"] ==
				before["devlet_extender_bind_failures_total"],
				"allocate mode: the extender bound %v pods (%d expected), bind failures %v", binds, pods,
				after["devlet_extender_bind_failures_total"])
		} else {
			check(binds == 0, "score mode: the extender bound %v pods", binds)
		}
		logf("%s mode: claim-gpu %v, ext-gpu %v; extender filter +%v, bind +%v, %.1fs", mode, gpus,
			extGPUs, filters, binds, time.Since(start).Seconds())
		d.deletePod(ns, "claim-gpu")
		d.deletePod(ns, "ext-gpu")
		// The synthesized claim is owned by its pod: the garbage collector deletes it.
		if extClaim != "" {
			waitFor(mode+" mode: ext-gpu's claim "+extClaim+" deleted with the pod", 60*time.Second,
				func() (bool, string) {
					_, err := d.c.client.ResourceV1().ResourceClaims(ns).Get(d.ctx(), extClaim,
						metav1.GetOptions{})
					return apierrors.IsNotFound(err), fmt.Sprint(err)
				})
		}
	}
	// Put back the cluster's scheduler and the chart as installed.
	d.c.scheduler.stop(10 * time.Second)
	d.c.startScheduler(d.c.path("scheduler-config.yaml"))
	d.helmUpgrade()
}
