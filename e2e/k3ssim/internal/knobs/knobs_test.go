// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package knobs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadFileAndEnv(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sim.yaml")
	if err := os.WriteFile(p, []byte("timeScale: 0.1\ncrdStall: true\ndeploymentDelay: 2s\nfailHelmCharts: [rancher]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"K3SSIM_TIME_SCALE": "0.5", "K3SSIM_SUBNET_ENV_WAITS_FOR_TAINT": "true"}
	k, err := Load(p, func(s string) string { return env[s] })
	if err != nil {
		t.Fatal(err)
	}
	if k.TimeScale != 0.5 || !k.SubnetEnvWaitsForTaint || !k.CRDStall || k.DeploymentDelay != 2*time.Second || !k.FailsHelmChart("rancher") {
		t.Fatalf("knobs %+v", k)
	}
	if d, _ := Load(filepath.Join(t.TempDir(), "missing.yaml"), func(string) string { return "" }); d.TimeScale != 1 || d.DeploymentDelay != 5*time.Second {
		t.Fatalf("defaults %+v", d)
	}
	if _, err := Load(p, func(s string) string { return map[string]string{"K3SSIM_TIME_SCALE": "x"}[s] }); err == nil || !strings.Contains(err.Error(), "K3SSIM_TIME_SCALE") {
		t.Fatalf("bad env value must name the variable: %v", err)
	}
}

func TestEnvName(t *testing.T) {
	for k, want := range map[string]string{"timeScale": "K3SSIM_TIME_SCALE", "conflictOnNextReplace": "K3SSIM_CONFLICT_ON_NEXT_REPLACE", "crdStall": "K3SSIM_CRD_STALL"} {
		if got := EnvName(k); got != want {
			t.Errorf("EnvName(%s)=%s want %s", k, got, want)
		}
	}
}

func TestConflictSourceFileDecrements(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sim.yaml")
	if err := os.WriteFile(p, []byte("timeScale: 0.1\nconflictOnNextReplace: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := ConflictSource{Path: p, Getenv: func(string) string { return "" }}
	var st EnvConflictState
	var got []bool
	for i := 0; i < 3; i++ {
		take, err := src.Take(&st)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, take)
	}
	if !got[0] || !got[1] || got[2] {
		t.Fatalf("takes %v, want true true false", got)
	}
	k, err := Load(p, func(string) string { return "" })
	if err != nil || k.ConflictOnNextReplace != 0 || k.TimeScale != 0.1 {
		t.Fatalf("file after decrements: %+v %v", k, err)
	}
}

func TestConflictSourceEnv(t *testing.T) {
	val := "1"
	src := ConflictSource{Path: "/nonexistent", Getenv: func(k string) string {
		if k == "K3SSIM_CONFLICT_ON_NEXT_REPLACE" {
			return val
		}
		return ""
	}}
	var st EnvConflictState
	a, _ := src.Take(&st)
	b, _ := src.Take(&st)
	val = "2" // a new value re-arms
	c, _ := src.Take(&st)
	if !a || b || !c || st.Remaining != 1 {
		t.Fatalf("takes %v %v %v state %+v", a, b, c, st)
	}
}
