// Package tests renders the idemgateway Helm chart with the Helm SDK (what `helm template` and
// `helm lint` do), decodes every manifest strictly into the Kubernetes API types, and checks the
// workloads, probes, ports, security context, the routes ConfigMap and its checksum, and that the
// idemgateway binary accepts the rendered routes file and environment.
//
// It is a module of its own, so that the gateway's module does not depend on Helm and Kubernetes.
package tests

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// chartDir is the chart, the parent of this module; repoRoot is the gateway's repository.
const (
	chartDir = ".."
	repoRoot = "../../.."
)

const (
	releaseName = "gw"
	namespace   = "agents"
	fullname    = "gw-idemgateway"
)

// serviceMonitor is the part of the Prometheus Operator's ServiceMonitor (monitoring.coreos.com/v1)
// that the chart writes; strict decoding refuses any other field.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// ruleGroups is the spec of a PrometheusRule (monitoring.coreos.com/v1), as the chart writes it
// and as deploy/prometheus-alerts.yaml holds it.
type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// prometheusRule is the Prometheus Operator's PrometheusRule.
type prometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              ruleGroups `json:"spec"`
}

// kinds maps apiVersion/kind to a new object of its Go type.
var kinds = map[string]func() any{
	"apps/v1/Deployment":                      func() any { return new(appsv1.Deployment) },
	"apps/v1/StatefulSet":                     func() any { return new(appsv1.StatefulSet) },
	"v1/Service":                              func() any { return new(corev1.Service) },
	"v1/ConfigMap":                            func() any { return new(corev1.ConfigMap) },
	"v1/Secret":                               func() any { return new(corev1.Secret) },
	"v1/ServiceAccount":                       func() any { return new(corev1.ServiceAccount) },
	"autoscaling/v2/HorizontalPodAutoscaler":  func() any { return new(autoscalingv2.HorizontalPodAutoscaler) },
	"policy/v1/PodDisruptionBudget":           func() any { return new(policyv1.PodDisruptionBudget) },
	"networking.k8s.io/v1/NetworkPolicy":      func() any { return new(networkingv1.NetworkPolicy) },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return new(serviceMonitor) },
	"monitoring.coreos.com/v1/PrometheusRule": func() any { return new(prometheusRule) },
}

// manifests are the decoded objects of one render, by "Kind/name".
type manifests map[string]any

func (m manifests) keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// get returns the object Kind/name as a T, failing the test when it is missing.
func get[T any](t *testing.T, m manifests, key string) *T {
	t.Helper()
	obj, ok := m[key]
	if !ok {
		t.Fatalf("no %s in the render; have %v", key, m.keys())
	}
	typed, ok := obj.(*T)
	if !ok {
		t.Fatalf("%s is a %T", key, obj)
	}
	return typed
}

var loadChart = sync.OnceValues(func() (*chart.Chart, error) { return loader.Load(chartDir) })

// renderFiles renders the chart with values (merged over values.yaml and checked against
// values.schema.json) and returns the rendered files by template path.
func renderFiles(values string) (map[string]string, error) {
	ch, err := loadChart()
	if err != nil {
		return nil, err
	}
	vals, err := chartutil.ReadValues([]byte(values))
	if err != nil {
		return nil, err
	}
	top, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: releaseName, Namespace: namespace,
		IsInstall: true, Revision: 1}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	return engine.Render(ch, top)
}

// render renders the chart and strictly decodes every manifest.
func render(t *testing.T, values string) manifests {
	t.Helper()
	files, err := renderFiles(values)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	m := manifests{}
	for name, content := range files {
		if strings.HasSuffix(name, "NOTES.txt") || strings.HasSuffix(name, ".tpl") {
			continue
		}
		for i, doc := range splitDocs(content) {
			var meta metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				t.Fatalf("%s document %d: %v\n%s", name, i, err, doc)
			}
			newObj, ok := kinds[meta.APIVersion+"/"+meta.Kind]
			if !ok {
				t.Fatalf("%s document %d: unexpected %s %s", name, i, meta.APIVersion, meta.Kind)
			}
			obj := newObj()
			// Strict: an unknown or duplicated field is an error, so a misspelt or misplaced key
			// in a template cannot pass as valid.
			if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
				t.Fatalf("%s document %d (%s): strict decode: %v\n%s", name, i, meta.Kind, err, doc)
			}
			var om struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
			}
			_ = yaml.Unmarshal([]byte(doc), &om)
			key := meta.Kind + "/" + om.Metadata.Name
			if _, dup := m[key]; dup {
				t.Fatalf("%s rendered twice", key)
			}
			m[key] = obj
		}
	}
	return m
}

// splitDocs splits a rendered file into its YAML documents, without the empty ones.
func splitDocs(content string) []string {
	var docs []string
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(content, -1) {
		empty := true
		for _, line := range strings.Split(doc, "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
				empty = false
				break
			}
		}
		if !empty {
			docs = append(docs, doc)
		}
	}
	return docs
}

// The value sets of the tests.
const (
	redisSingle = `
store:
  mode: redis
  redis:
    url: redis://redis-master:6379/0
    passwordSecret: {name: redis, key: redis-password}
replicaCount: 3
`
	postgres = `
store:
  mode: postgres
  postgres:
    urlSecret: {name: pg, key: dsn}
    schema: agents_gw
replicaCount: 3
`
	redisSentinelEverything = `
store:
  mode: redis
  redis:
    addrs: [sentinel-0.sentinel:26379, sentinel-1.sentinel:26379, sentinel-2.sentinel:26379]
    master: mymaster
    username: gateway
    passwordSecret: {name: redis, key: password}
    sentinelPasswordSecret: {name: redis, key: sentinel-password}
    tls: true
    caSecret: {name: redis-ca, key: ca.crt}
    poolSize: 20
    waitReplicas: 1
    waitTimeout: 50ms
    autoPipeline: true
admin:
  token: {existingSecret: admin-token, key: bearer}
autoscaling: {enabled: true, minReplicas: 3, maxReplicas: 12}
serviceMonitor: {enabled: true, labels: {release: prometheus}}
networkPolicy:
  enabled: true
  proxyFrom:
    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: agents}}
  adminFrom:
    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}
  egress:
    - to: [{ipBlock: {cidr: 10.0.0.0/8}}]
upstreamSecrets: [tickets-credentials]
extraEnv:
  - name: OTEL_TRACES_EXPORTER
    value: otlp
  - name: TICKETS_TOKEN
    valueFrom: {secretKeyRef: {name: tickets, key: token}}
routes:
  upstreams:
    tickets:
      url: https://tickets.example.com
      headers:
        Authorization: "Bearer ${TICKETS_TOKEN}"
  routes:
    - name: create_ticket
      upstream: tickets
      method: POST
      path: /v1/tickets
      class: non_idempotent
`
	redisCluster = `
store:
  mode: redis
  redis:
    addrs: [redis-cluster:6379]
    urlSecret: {name: "", key: url}
    passwordSecret: {name: redis-cluster, key: password}
    tls: true
`
	// replicaCount, autoscaling and the PodDisruptionBudget do not apply to the embedded store.
	embeddedAsked5 = `
replicaCount: 5
autoscaling: {enabled: true}
podDisruptionBudget: {enabled: true}
store:
  embedded: {size: 10Gi, storageClassName: fast-ssd}
`
)

// workload returns the pod template of the only workload of m, and its kind.
func workload(t *testing.T, m manifests) (corev1.PodTemplateSpec, string) {
	t.Helper()
	_, hasDeploy := m["Deployment/"+fullname]
	_, hasSts := m["StatefulSet/"+fullname]
	switch {
	case hasDeploy && !hasSts:
		return get[appsv1.Deployment](t, m, "Deployment/"+fullname).Spec.Template, "Deployment"
	case hasSts && !hasDeploy:
		return get[appsv1.StatefulSet](t, m, "StatefulSet/"+fullname).Spec.Template, "StatefulSet"
	}
	t.Fatalf("want exactly one Deployment or StatefulSet; have %v", m.keys())
	return corev1.PodTemplateSpec{}, ""
}

func envMap(c corev1.Container) map[string]corev1.EnvVar {
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	return env
}

func TestRenderDefaultsEmbedded(t *testing.T) {
	m := render(t, "")
	sts := get[appsv1.StatefulSet](t, m, "StatefulSet/"+fullname)
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 1 {
		t.Errorf("StatefulSet replicas = %v, want 1", sts.Spec.Replicas)
	}
	if sts.Spec.ServiceName != fullname+"-headless" {
		t.Errorf("serviceName = %q", sts.Spec.ServiceName)
	}
	headless := get[corev1.Service](t, m, "Service/"+fullname+"-headless")
	if headless.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("headless Service clusterIP = %q", headless.Spec.ClusterIP)
	}
	if len(sts.Spec.VolumeClaimTemplates) != 1 || sts.Spec.VolumeClaimTemplates[0].Name != "data" ||
		sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String() != "1Gi" {
		t.Errorf("volumeClaimTemplates = %+v", sts.Spec.VolumeClaimTemplates)
	}
	c := sts.Spec.Template.Spec.Containers[0]
	env := envMap(c)
	if env["IDEMGATEWAY_DATA_DIR"].Value != "/var/lib/idemgateway" {
		t.Errorf("IDEMGATEWAY_DATA_DIR = %+v", env["IDEMGATEWAY_DATA_DIR"])
	}
	for name := range env {
		if strings.HasPrefix(name, "IDEMGATEWAY_REDIS_") {
			t.Errorf("embedded store with %s set", name)
		}
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(v corev1.VolumeMount) bool {
		return v.Name == "data" && v.MountPath == "/var/lib/idemgateway" && !v.ReadOnly
	}) {
		t.Errorf("no writable data mount at /var/lib/idemgateway: %+v", c.VolumeMounts)
	}
	for _, absent := range []string{"Deployment/" + fullname, "HorizontalPodAutoscaler/" + fullname, "PodDisruptionBudget/" + fullname,
		"ServiceMonitor/" + fullname, "NetworkPolicy/" + fullname} {
		if _, ok := m[absent]; ok {
			t.Errorf("%s rendered with the defaults", absent)
		}
	}
	// The chart creates the admin token's Secret.
	secret := get[corev1.Secret](t, m, "Secret/"+fullname+"-admin")
	if len(secret.Data["token"]) < 32 {
		t.Errorf("generated admin token has %d bytes", len(secret.Data["token"]))
	}
	if env["IDEMGATEWAY_ADMIN_TOKEN"].ValueFrom.SecretKeyRef.Name != fullname+"-admin" {
		t.Errorf("IDEMGATEWAY_ADMIN_TOKEN = %+v", env["IDEMGATEWAY_ADMIN_TOKEN"])
	}
}

func TestRenderEmbeddedForcesOneReplica(t *testing.T) {
	m := render(t, embeddedAsked5)
	sts := get[appsv1.StatefulSet](t, m, "StatefulSet/"+fullname)
	if *sts.Spec.Replicas != 1 {
		t.Errorf("StatefulSet replicas = %d, want 1 whatever replicaCount says", *sts.Spec.Replicas)
	}
	pvc := sts.Spec.VolumeClaimTemplates[0].Spec
	if pvc.StorageClassName == nil || *pvc.StorageClassName != "fast-ssd" || pvc.Resources.Requests.Storage().String() != "10Gi" {
		t.Errorf("PVC = class %v, size %s", pvc.StorageClassName, pvc.Resources.Requests.Storage())
	}
	for _, absent := range []string{"Deployment/" + fullname, "HorizontalPodAutoscaler/" + fullname, "PodDisruptionBudget/" + fullname} {
		if _, ok := m[absent]; ok {
			t.Errorf("%s rendered for the embedded store", absent)
		}
	}
}

func TestRenderRedisSingle(t *testing.T) {
	m := render(t, redisSingle)
	d := get[appsv1.Deployment](t, m, "Deployment/"+fullname)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("Deployment replicas = %v, want 3", d.Spec.Replicas)
	}
	if s := d.Spec.Strategy; s.Type != appsv1.RollingUpdateDeploymentStrategyType || s.RollingUpdate.MaxUnavailable.IntValue() != 0 || s.RollingUpdate.MaxSurge.IntValue() != 1 {
		t.Errorf("strategy = %+v, want a rolling update with maxUnavailable 0, maxSurge 1", s)
	}
	if _, ok := m["StatefulSet/"+fullname]; ok {
		t.Error("StatefulSet rendered for the Redis store")
	}
	env := envMap(d.Spec.Template.Spec.Containers[0])
	if env["IDEMGATEWAY_REDIS_URL"].Value != "redis://redis-master:6379/0" {
		t.Errorf("IDEMGATEWAY_REDIS_URL = %+v", env["IDEMGATEWAY_REDIS_URL"])
	}
	if ref := env["IDEMGATEWAY_REDIS_PASSWORD"].ValueFrom; ref == nil || ref.SecretKeyRef.Name != "redis" || ref.SecretKeyRef.Key != "redis-password" {
		t.Errorf("IDEMGATEWAY_REDIS_PASSWORD = %+v, want a secretKeyRef", env["IDEMGATEWAY_REDIS_PASSWORD"])
	}
	if _, ok := env["IDEMGATEWAY_DATA_DIR"]; ok {
		t.Error("IDEMGATEWAY_DATA_DIR set for the Redis store")
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			t.Errorf("volume %s is a PVC in redis mode", v.Name)
		}
	}
	pdb := get[policyv1.PodDisruptionBudget](t, m, "PodDisruptionBudget/"+fullname)
	if pdb.Spec.MaxUnavailable.IntValue() != 1 || !labelsMatch(pdb.Spec.Selector, d.Spec.Template.Labels) {
		t.Errorf("PDB = %+v", pdb.Spec)
	}
	if _, ok := m["HorizontalPodAutoscaler/"+fullname]; ok {
		t.Error("HPA rendered though autoscaling is off")
	}
}

func TestRenderRedisSentinelEverything(t *testing.T) {
	m := render(t, redisSentinelEverything)
	d := get[appsv1.Deployment](t, m, "Deployment/"+fullname)
	if d.Spec.Replicas != nil {
		t.Errorf("Deployment replicas = %d, want unset under the HPA", *d.Spec.Replicas)
	}
	hpa := get[autoscalingv2.HorizontalPodAutoscaler](t, m, "HorizontalPodAutoscaler/"+fullname)
	if hpa.Spec.ScaleTargetRef.Kind != "Deployment" || hpa.Spec.ScaleTargetRef.Name != fullname || *hpa.Spec.MinReplicas != 3 || hpa.Spec.MaxReplicas != 12 {
		t.Errorf("HPA = %+v", hpa.Spec)
	}
	pod := d.Spec.Template.Spec
	env := envMap(pod.Containers[0])
	want := map[string]string{
		"IDEMGATEWAY_REDIS_ADDRS":         "sentinel-0.sentinel:26379,sentinel-1.sentinel:26379,sentinel-2.sentinel:26379",
		"IDEMGATEWAY_REDIS_MASTER":        "mymaster",
		"IDEMGATEWAY_REDIS_USERNAME":      "gateway",
		"IDEMGATEWAY_REDIS_TLS":           "true",
		"IDEMGATEWAY_REDIS_TLS_CA_FILE":   "/etc/redis-ca/ca.crt",
		"IDEMGATEWAY_REDIS_POOL_SIZE":     "20",
		"IDEMGATEWAY_REDIS_WAIT_REPLICAS": "1",
		"IDEMGATEWAY_REDIS_WAIT_TIMEOUT":  "50ms",
		"IDEMGATEWAY_REDIS_AUTO_PIPELINE": "true",
		"OTEL_TRACES_EXPORTER":            "otlp",
	}
	for name, value := range want {
		if env[name].Value != value {
			t.Errorf("%s = %+v, want %q", name, env[name], value)
		}
	}
	for name, ref := range map[string][2]string{
		"IDEMGATEWAY_REDIS_PASSWORD":          {"redis", "password"},
		"IDEMGATEWAY_REDIS_SENTINEL_PASSWORD": {"redis", "sentinel-password"},
		"IDEMGATEWAY_ADMIN_TOKEN":             {"admin-token", "bearer"},
		"TICKETS_TOKEN":                       {"tickets", "token"},
	} {
		if e := env[name]; e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef.Name != ref[0] || e.ValueFrom.SecretKeyRef.Key != ref[1] {
			t.Errorf("%s = %+v, want secretKeyRef %s/%s", name, e, ref[0], ref[1])
		}
	}
	if _, ok := env["IDEMGATEWAY_REDIS_URL"]; ok {
		t.Error("IDEMGATEWAY_REDIS_URL set for Sentinel")
	}
	if ef := pod.Containers[0].EnvFrom; len(ef) != 1 || ef[0].SecretRef.Name != "tickets-credentials" {
		t.Errorf("envFrom = %+v", ef)
	}
	if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Secret != nil && v.Secret.SecretName == "redis-ca" }) ||
		!slices.ContainsFunc(pod.Containers[0].VolumeMounts, func(v corev1.VolumeMount) bool {
			return v.MountPath == "/etc/redis-ca" && v.ReadOnly
		}) {
		t.Errorf("CA Secret not mounted read-only: volumes %+v, mounts %+v", pod.Volumes, pod.Containers[0].VolumeMounts)
	}
	if _, ok := m["Secret/"+fullname+"-admin"]; ok {
		t.Error("admin Secret rendered though existingSecret is set")
	}
	sm := get[serviceMonitor](t, m, "ServiceMonitor/"+fullname)
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "admin" || sm.Spec.Endpoints[0].Path != "/metrics" ||
		sm.Labels["release"] != "prometheus" || !labelsMatch(&sm.Spec.Selector, get[corev1.Service](t, m, "Service/"+fullname).Labels) {
		t.Errorf("ServiceMonitor = %+v", sm)
	}
	np := get[networkingv1.NetworkPolicy](t, m, "NetworkPolicy/"+fullname)
	if len(np.Spec.Ingress) != 2 || np.Spec.Ingress[0].Ports[0].Port.String() != "http" || np.Spec.Ingress[1].Ports[0].Port.String() != "admin" ||
		len(np.Spec.Ingress[1].From) != 1 || len(np.Spec.Egress) != 1 || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
		t.Errorf("NetworkPolicy = %+v", np.Spec)
	}
	if !labelsMatch(&np.Spec.PodSelector, d.Spec.Template.Labels) {
		t.Errorf("NetworkPolicy selects %v, pods are %v", np.Spec.PodSelector, d.Spec.Template.Labels)
	}
}

func TestRenderRedisCluster(t *testing.T) {
	m := render(t, redisCluster)
	d := get[appsv1.Deployment](t, m, "Deployment/"+fullname)
	env := envMap(d.Spec.Template.Spec.Containers[0])
	if env["IDEMGATEWAY_REDIS_ADDRS"].Value != "redis-cluster:6379" || env["IDEMGATEWAY_REDIS_TLS"].Value != "true" {
		t.Errorf("env = %+v", env)
	}
	if _, ok := env["IDEMGATEWAY_REDIS_MASTER"]; ok {
		t.Error("IDEMGATEWAY_REDIS_MASTER set for Cluster")
	}
}

// TestEveryWorkload checks what every rendering's pods must have: ports, probes on the admin port,
// a non-root read-only security context without capabilities, resources, the topology spread, the
// routes mount and the admin listener on all addresses with its token.
func TestEveryWorkload(t *testing.T) {
	for name, values := range map[string]string{"defaults": "", "embedded": embeddedAsked5, "redis": redisSingle,
		"sentinel": redisSentinelEverything, "cluster": redisCluster, "postgres": postgres} {
		t.Run(name, func(t *testing.T) {
			m := render(t, values)
			tmpl, kind := workload(t, m)
			pod := tmpl.Spec
			if len(pod.Containers) != 1 {
				t.Fatalf("%d containers", len(pod.Containers))
			}
			c := pod.Containers[0]
			ports := map[string]int32{}
			for _, p := range c.Ports {
				ports[p.Name] = p.ContainerPort
			}
			if ports["http"] != 8080 || ports["admin"] != 9090 || len(ports) != 2 {
				t.Errorf("container ports = %v, want http 8080 and admin 9090", ports)
			}
			for probeName, probe := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
				if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != probeName || probe.HTTPGet.Port.String() != "admin" {
					t.Errorf("probe %s = %+v, want GET %s on the admin port", probeName, probe, probeName)
				}
			}
			env := envMap(c)
			if env["IDEMGATEWAY_ADMIN_LISTEN"].Value != ":9090" || env["IDEMGATEWAY_LISTEN"].Value != ":8080" {
				t.Errorf("listeners = %q, %q", env["IDEMGATEWAY_LISTEN"].Value, env["IDEMGATEWAY_ADMIN_LISTEN"].Value)
			}
			// The records API is reached through the Service by its name: the admin listener must answer for it.
			if want := fullname + "," + fullname + ".agents," + fullname + ".agents.svc," + fullname + ".agents.svc.cluster.local"; env["IDEMGATEWAY_ADMIN_HOSTS"].Value != want {
				t.Errorf("IDEMGATEWAY_ADMIN_HOSTS = %q, want %q", env["IDEMGATEWAY_ADMIN_HOSTS"].Value, want)
			}
			if ref := env["IDEMGATEWAY_ADMIN_TOKEN"].ValueFrom; ref == nil || ref.SecretKeyRef == nil {
				t.Error("a non-loopback admin listener without IDEMGATEWAY_ADMIN_TOKEN: the process refuses to start")
			}

			psc, sc := pod.SecurityContext, c.SecurityContext
			if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 ||
				psc.FSGroup == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod securityContext = %+v", psc)
			}
			if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil ||
				!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
				t.Errorf("container securityContext = %+v", sc)
			}
			if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
				t.Error("the service account token is mounted; the gateway does not talk to the API server")
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
				t.Errorf("resources = %+v", c.Resources)
			}
			if len(pod.TopologySpreadConstraints) != 1 || !labelsMatch(pod.TopologySpreadConstraints[0].LabelSelector, tmpl.Labels) {
				t.Errorf("topologySpreadConstraints = %+v", pod.TopologySpreadConstraints)
			}
			if pod.TerminationGracePeriodSeconds == nil || *pod.TerminationGracePeriodSeconds < 40 {
				t.Errorf("terminationGracePeriodSeconds = %v, want room for the gateway's drain (upstream timeout + 5 s) and its cut (5 s)", pod.TerminationGracePeriodSeconds)
			}

			// The routes file: ConfigMap, volume, mount, setting.
			cm := get[corev1.ConfigMap](t, m, "ConfigMap/"+fullname+"-routes")
			if _, ok := cm.Data["routes.yaml"]; !ok {
				t.Errorf("ConfigMap data = %v", cm.Data)
			}
			if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
				return v.Name == "routes" && v.ConfigMap != nil && v.ConfigMap.Name == cm.Name
			}) || !slices.ContainsFunc(c.VolumeMounts, func(v corev1.VolumeMount) bool {
				// A directory mount (no subPath), so that the file follows ConfigMap updates.
				return v.Name == "routes" && v.MountPath == "/etc/idemgateway" && v.SubPath == "" && v.ReadOnly
			}) || env["IDEMGATEWAY_ROUTES"].Value != "/etc/idemgateway/routes.yaml" {
				t.Errorf("routes not mounted at IDEMGATEWAY_ROUTES: volumes %+v, mounts %+v", pod.Volumes, c.VolumeMounts)
			}
			if tmpl.Annotations["checksum/routes"] == "" {
				t.Error("no checksum/routes annotation on the pods")
			}

			// The Service exposes both ports by name and selects exactly the pods.
			svc := get[corev1.Service](t, m, "Service/"+fullname)
			svcPorts := map[string]string{}
			for _, p := range svc.Spec.Ports {
				svcPorts[p.Name] = fmt.Sprintf("%d->%s", p.Port, p.TargetPort.String())
			}
			if svcPorts["http"] != "8080->http" || svcPorts["admin"] != "9090->admin" {
				t.Errorf("Service ports = %v", svcPorts)
			}
			if !mapsSubset(svc.Spec.Selector, tmpl.Labels) {
				t.Errorf("Service selects %v, pods are %v", svc.Spec.Selector, tmpl.Labels)
			}
			if sa := get[corev1.ServiceAccount](t, m, "ServiceAccount/"+fullname); sa.Name != pod.ServiceAccountName {
				t.Errorf("pods use service account %q", pod.ServiceAccountName)
			}
			t.Logf("%s: %v", kind, m.keys())
		})
	}
}

// TestRoutesChecksum: a change of the routes changes the pods' checksum annotation, so that the
// Deployment or StatefulSet rolls its pods; other changes leave it alone.
func TestRoutesChecksum(t *testing.T) {
	checksum := func(values string) (string, string) {
		t.Helper()
		m := render(t, values)
		tmpl, _ := workload(t, m)
		return tmpl.Annotations["checksum/routes"], get[corev1.ConfigMap](t, m, "ConfigMap/"+fullname+"-routes").Data["routes.yaml"]
	}
	base, baseRoutes := checksum(redisSingle)
	if want := fmt.Sprintf("%x", sha256.Sum256([]byte(strings.TrimSuffix(baseRoutes, "\n")))); base != want {
		t.Errorf("checksum/routes = %s, want the SHA-256 of the ConfigMap's routes.yaml %s", base, want)
	}
	if same, _ := checksum(redisSingle + "replicaCount: 7\nimage: {tag: v9}\n"); same != base {
		t.Errorf("checksum changed with replicaCount and image tag: %s -> %s", base, same)
	}
	changed, _ := checksum(redisSingle + `
routes:
  upstreams:
    example: {url: https://api.example.com, timeout: 10s}
  routes:
    - {name: create_item, upstream: example, method: POST, path: /v1/items, class: non_idempotent}
`)
	if changed == base {
		t.Error("checksum unchanged after the routes changed")
	}
	if off, _ := checksum(redisSingle + "rollOnRoutesChange: false\n"); off != "" {
		t.Errorf("checksum/routes = %q with rollOnRoutesChange false, want none", off)
	}
}

// TestInvalidValues: the schema and the templates refuse values the process would refuse.
func TestInvalidValues(t *testing.T) {
	cases := []struct{ name, values, wantErr string }{
		{"unknown store mode", "store: {mode: memory}", "store/mode"},
		{"redis without an address", "store: {mode: redis}", "store.mode redis needs store.redis.url"},
		{"postgres without a Secret", "store: {mode: postgres}", "store.mode postgres needs store.postgres.urlSecret.name"},
		{"postgres schema not an identifier", "store: {mode: postgres, postgres: {urlSecret: {name: pg}, schema: Agents}}", "store/postgres/schema"},
		{"url and addrs", "store: {mode: redis, redis: {url: 'redis://r:6379', addrs: ['a:1']}}", "not both"},
		{"master without addrs", "store: {mode: redis, redis: {url: 'redis://r:6379', master: m}}", "store.redis.master needs"},
		{"not a redis url", "store: {mode: redis, redis: {url: 'http://r:6379'}}", "store/redis/url"},
		{"bad duration", "store: {redis: {readTimeout: 3}}", "store/redis/readTimeout"},
		{"zero replicas", "replicaCount: 0", "replicaCount"},
		{"misspelt top-level value", "replicas: 3", "replicas"},
		{"misspelt nested value", "store: {redis: {pasword: x}}", "pasword"},
		{"no routes", "routes: {upstreams: {a: {url: 'http://a'}}, routes: []}", "routes/routes"},
		{"bad port", "proxy: {port: 70000}", "proxy/port"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderFiles(tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("render = %v, want an error about %q", err, tc.wantErr)
			}
		})
	}
}

// TestLint runs Helm's linter (what `helm lint` runs: Chart.yaml, values and schema, every
// template) with each value set; any warning or error fails.
func TestLint(t *testing.T) {
	for name, values := range map[string]string{"defaults": "", "embedded": embeddedAsked5, "redis": redisSingle,
		"sentinel": redisSentinelEverything, "cluster": redisCluster} {
		t.Run(name, func(t *testing.T) {
			vals, err := chartutil.ReadValues([]byte(values))
			if err != nil {
				t.Fatal(err)
			}
			linter := lint.All(chartDir, vals, namespace, false)
			for _, msg := range linter.Messages {
				if msg.Severity >= support.WarningSev {
					t.Errorf("lint: %s", msg)
				} else {
					t.Logf("lint: %s", msg)
				}
			}
		})
	}
}

// TestNotes: NOTES.txt renders and tells the operator what matters.
func TestNotes(t *testing.T) {
	for _, tc := range []struct{ values, want string }{
		{"", "this release cannot scale out"},
		{"", "still the chart's placeholder"},
		{redisSentinelEverything, "Sentinel (master mymaster)"},
		{redisSentinelEverything, "Each commit waits for 1 replica(s)"},
		{redisSingle, "3 replicas"},
	} {
		files, err := renderFiles(tc.values)
		if err != nil {
			t.Fatal(err)
		}
		if notes := files["idemgateway/templates/NOTES.txt"]; !strings.Contains(notes, tc.want) {
			t.Errorf("NOTES.txt does not say %q:\n%s", tc.want, notes)
		}
	}
}

var buildGateway = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "idemgateway-chart-test")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "idemgateway")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/idemgateway")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// TestBinaryAcceptsRender: the idemgateway binary (built from this repository) accepts each
// rendered routes file (`idemgateway validate`) and each container environment (its settings are
// checked at every start, `version` included), with the Secrets' values stood in for.
func TestBinaryAcceptsRender(t *testing.T) {
	bin, err := buildGateway()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(bin)) })
	for name, values := range map[string]string{"defaults": "", "redis": redisSingle, "sentinel": redisSentinelEverything, "cluster": redisCluster, "postgres": postgres} {
		t.Run(name, func(t *testing.T) {
			m := render(t, values)
			tmpl, _ := workload(t, m)
			routes := filepath.Join(t.TempDir(), "routes.yaml")
			if err := os.WriteFile(routes, []byte(get[corev1.ConfigMap](t, m, "ConfigMap/"+fullname+"-routes").Data["routes.yaml"]), 0o600); err != nil {
				t.Fatal(err)
			}
			env := []string{"PATH=" + os.Getenv("PATH")}
			for _, e := range tmpl.Spec.Containers[0].Env {
				value := e.Value
				if e.ValueFrom != nil {
					value = "from-a-secret"
					switch e.Name {
					case "IDEMGATEWAY_REDIS_URL":
						value = "redis://redis:6379/0"
					case "IDEMGATEWAY_POSTGRES_URL":
						value = "postgres://gw:pw@db:5432/agents"
					}
				}
				if e.Name == "IDEMGATEWAY_ROUTES" {
					value = routes
				}
				env = append(env, e.Name+"="+value)
			}
			for _, args := range [][]string{{"validate"}, {"version"}} {
				cmd := exec.Command(bin, args...)
				cmd.Env = env
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				if err := cmd.Run(); err != nil {
					t.Errorf("idemgateway %s with the rendered environment: %v\n%s", args[0], err, out.String())
				}
			}
		})
	}
}

// labelsMatch reports whether selector's matchLabels select pods labelled labels.
func labelsMatch(selector *metav1.LabelSelector, labels map[string]string) bool {
	return selector != nil && len(selector.MatchLabels) > 0 && len(selector.MatchExpressions) == 0 && mapsSubset(selector.MatchLabels, labels)
}

// mapsSubset reports whether every entry of sub is in super.
func mapsSubset(sub, super map[string]string) bool {
	for k, v := range sub {
		if super[k] != v {
			return false
		}
	}
	return len(sub) > 0
}

// TestRenderPrometheusRule: prometheusRule.enabled renders a PrometheusRule whose rules are
// deploy/prometheus-alerts.yaml's, every one (the expiry of unknown outcomes among them), with the
// labels asked for; by default there is none.
func TestRenderPrometheusRule(t *testing.T) {
	if _, ok := render(t, "")["PrometheusRule/"+fullname]; ok {
		t.Error("a PrometheusRule rendered by default")
	}
	m := render(t, "prometheusRule: {enabled: true, labels: {release: prometheus}}")
	pr := get[prometheusRule](t, m, "PrometheusRule/"+fullname)
	data, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "prometheus-alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want ruleGroups
	if err := yaml.UnmarshalStrict(data, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(pr.Spec, want) {
		t.Errorf("the PrometheusRule's rules differ from deploy/prometheus-alerts.yaml:\n got %+v\nwant %+v", pr.Spec, want)
	}
	if pr.Labels["release"] != "prometheus" {
		t.Errorf("labels %v, want release: prometheus", pr.Labels)
	}
	found := false
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			found = found || r.Alert == "IdemgatewayOutcomeUnknownExpiring"
		}
	}
	if !found {
		t.Error("no IdemgatewayOutcomeUnknownExpiring rule")
	}
}

// TestRenderPostgres: store.mode postgres is a Deployment of replicaCount replicas whose
// connection URL comes from the Secret asked for, with the schema asked for and no Redis or
// embedded setting.
func TestRenderPostgres(t *testing.T) {
	m := render(t, postgres)
	d := get[appsv1.Deployment](t, m, "Deployment/"+fullname)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("replicas = %v, want 3", d.Spec.Replicas)
	}
	env := envMap(d.Spec.Template.Spec.Containers[0])
	if ref := env["IDEMGATEWAY_POSTGRES_URL"].ValueFrom; ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != "pg" || ref.SecretKeyRef.Key != "dsn" {
		t.Errorf("IDEMGATEWAY_POSTGRES_URL = %+v, want the Secret pg, key dsn", env["IDEMGATEWAY_POSTGRES_URL"])
	}
	if env["IDEMGATEWAY_POSTGRES_SCHEMA"].Value != "agents_gw" {
		t.Errorf("IDEMGATEWAY_POSTGRES_SCHEMA = %q", env["IDEMGATEWAY_POSTGRES_SCHEMA"].Value)
	}
	for name := range env {
		if strings.HasPrefix(name, "IDEMGATEWAY_REDIS_") || name == "IDEMGATEWAY_DATA_DIR" {
			t.Errorf("%s set in postgres mode", name)
		}
	}
	if _, ok := m["StatefulSet/"+fullname]; ok {
		t.Error("a StatefulSet in postgres mode")
	}
}
