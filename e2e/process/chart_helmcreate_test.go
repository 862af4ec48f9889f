package process

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/leader-sidecar/leader-sidecar/internal/sidecartest"
)

// userPodLists are a helm create chart's own Pod lists, as its values.yaml
// suggests them (a Secret volume mounted into its container, a pull
// secret), and an init container of its own.
const userPodLists = `volumes:
  - name: foo
    secret:
      secretName: mysecret
      optional: false
volumeMounts:
  - name: foo
    mountPath: /etc/foo
    readOnly: true
imagePullSecrets:
  - name: regcred
initContainers:
  - name: migrate
    image: my/migrate
`

// TestChartHelmCreateKeepsItsLists: the library README's recipe in a
// helm create chart keeps the chart's volumes, volume mounts, pull secrets
// and init containers next to the sidecar's, each list under one key (the
// manifests are decoded strictly: a key rendered twice fails), on every
// backend and placement, and every volume mount names a volume of the Pod.
func TestChartHelmCreateKeepsItsLists(t *testing.T) {
	chart := sidecartest.HelmCreateWithLibrary(t)
	file := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(file, []byte(userPodLists), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		set         []string
		wantVolumes []string
		wantInit    []string
	}{
		{nil, []string{"foo", "leader-sidecar-token"}, []string{"leader-sidecar", "migrate"}},
		{[]string{"sidecar.native=false"}, []string{"foo", "leader-sidecar-token"}, []string{"migrate"}},
		{[]string{"sidecar.backend=sqlite"}, []string{"foo", "leader-sidecar-db"}, []string{"leader-sidecar", "migrate"}},
	} {
		args := []string{"template", "shop", chart, "--namespace", "apps", "--values", file}
		for _, s := range c.set {
			args = append(args, "--set", s)
		}
		out, err := sidecartest.RunHelm(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		pod := sidecartest.One[*appsv1.Deployment](t, sidecartest.DecodeManifests(t, out)).Spec.Template.Spec
		if got := volumeNames(pod.Volumes); !slices.Equal(got, c.wantVolumes) {
			t.Errorf("%v: volumes %q, want %q", c.set, got, c.wantVolumes)
		}
		var inits, secrets []string
		for _, ic := range pod.InitContainers {
			inits = append(inits, ic.Name)
		}
		if !slices.Equal(inits, c.wantInit) {
			t.Errorf("%v: initContainers %q, want %q", c.set, inits, c.wantInit)
		}
		for _, s := range pod.ImagePullSecrets {
			secrets = append(secrets, s.Name)
		}
		if !slices.Equal(secrets, []string{"regcred"}) {
			t.Errorf("%v: imagePullSecrets %q, want [regcred]", c.set, secrets)
		}
		app := sidecartest.ContainerNamed(pod.Containers, "mychart")
		if app == nil || len(app.VolumeMounts) != 1 || app.VolumeMounts[0].Name != "foo" {
			t.Fatalf("%v: the chart's container lost its volume mount: %+v", c.set, app)
		}
		for _, ctr := range slices.Concat(pod.InitContainers, pod.Containers) {
			for _, m := range ctr.VolumeMounts {
				if !slices.Contains(volumeNames(pod.Volumes), m.Name) {
					t.Errorf("%v: container %s mounts %q, which is no volume of the Pod", c.set, ctr.Name, m.Name)
				}
			}
		}
	}
}

// TestChartListHelpersRefuseWhatWouldBreakThePod: a chart volume or init
// container with the sidecar's name, a list that is not a list, and the
// root context where the helper needs the chart's list each fail the
// render, naming what is wrong.
func TestChartListHelpersRefuseWhatWouldBreakThePod(t *testing.T) {
	chart := sidecartest.HelmCreateWithLibrary(t)
	for _, c := range []struct {
		set  []string
		want string
	}{
		{[]string{"volumes[0].name=leader-sidecar-token", "volumes[0].emptyDir.medium=Memory"},
			`the chart's volumes have one named "leader-sidecar-token"`},
		{[]string{"initContainers[0].name=leader-sidecar", "initContainers[0].image=x"},
			`the chart's initContainers have one named "leader-sidecar"`},
		{[]string{"volumes=foo"}, "leader-sidecar-lib.volumes: volumes must be a list, not foo"},
	} {
		if _, err := sidecartest.TemplateMyChart(t, chart, c.set...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error with %q", c.set, err, c.want)
		}
	}
	deployment := filepath.Join(chart, "templates", "deployment.yaml")
	raw, err := os.ReadFile(deployment)
	if err != nil {
		t.Fatal(err)
	}
	old := strings.Replace(string(raw), `include "leader-sidecar-lib.volumes" (dict "volumes" .Values.volumes "context" $)`, `include "leader-sidecar-lib.volumes" .`, 1)
	if old == string(raw) {
		t.Fatal("the volumes helper's call is not in the chart")
	}
	if err := os.WriteFile(deployment, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	want := `leader-sidecar-lib.volumes takes (dict "volumes" .Values.volumes "context" $)`
	if _, err := sidecartest.TemplateMyChart(t, chart); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("the root context given to the volumes helper: %v, want an error with %q", err, want)
	}
}

func volumeNames(vs []corev1.Volume) []string {
	var names []string
	for _, v := range vs {
		names = append(names, v.Name)
	}
	return names
}
