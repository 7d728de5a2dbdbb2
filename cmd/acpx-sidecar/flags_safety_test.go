package main

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/acpx-sidecar/acpx-sidecar/internal/statestore"
)

// TestParseFlags_InheritEnv (docs/protocol.md §2, §18.1): the default is
// minimal; minimal, all and none are taken as given; the old boolean
// spellings keep their meaning (true = all, false = none) and are
// remembered for the warning; a bare --inherit-env and any other value
// are flag errors (exit 2).
func TestParseFlags_InheritEnv(t *testing.T) {
	for _, c := range []struct {
		args      []string
		want, old string
	}{{nil, "minimal", ""}, {[]string{"--inherit-env", "all"}, "all", ""}, {[]string{"--inherit-env=none"}, "none", ""},
		{[]string{"--inherit-env=MINIMAL"}, "minimal", ""}, {[]string{"--inherit-env=true"}, "all", "true"},
		{[]string{"--inherit-env=false"}, "none", "false"}, {[]string{"--inherit-env=0"}, "none", "0"}} {
		o, err := parseFlags(c.args, io.Discard)
		if err != nil || o.inheritEnv != c.want || o.inheritEnvOld != c.old {
			t.Errorf("%v: %+v %v, want policy %s old %q", c.args, o, err, c.want, c.old)
		}
	}
	for _, args := range [][]string{{"--inherit-env"}, {"--inherit-env=some"}, {"--default-pids=1"}, {"--default-memory-bytes=100"},
		{"--default-cpu-percent=-5"}} {
		var out, errb bytes.Buffer
		if code := run(args, strings.NewReader(""), &out, &errb); code != 2 || out.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q; want 2 and nothing", args, code, out.String())
		}
	}
}

// TestRun_DoctorNamesTheEnvPolicyAndLimits: doctor reports the policy
// its flags set and the names it would pass (never values), and per kind
// of limit whether it is enforceable, with a reason when not.
func TestRun_DoctorNamesTheEnvPolicyAndLimits(t *testing.T) {
	t.Setenv("ACPX_DOCTOR_TEST_SECRET", "sk-doctor-test-value")
	for _, c := range []struct {
		flag, policy string
		secret       bool
	}{{"", "minimal", false}, {"--inherit-env=all", "all", true}, {"--inherit-env=none", "none", false}} {
		args := []string{"doctor"}
		if c.flag != "" {
			args = append(args, c.flag)
		}
		var out bytes.Buffer
		run(args, strings.NewReader(""), &out, io.Discard)
		var rep struct {
			InheritEnv struct {
				Policy string   `json:"policy"`
				Passes []string `json:"passes"`
			} `json:"inheritEnv"`
			Limits map[string]struct {
				Enforceable bool   `json:"enforceable"`
				Reason      string `json:"reason"`
				Mechanism   string `json:"mechanism"`
			} `json:"limits"`
		}
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if strings.Contains(out.String(), "sk-doctor-test-value") {
			t.Errorf("%v: doctor printed an environment value", args)
		}
		has := strings.Contains(strings.Join(rep.InheritEnv.Passes, " "), "ACPX_DOCTOR_TEST_SECRET")
		if rep.InheritEnv.Policy != c.policy || has != c.secret {
			t.Errorf("%v: policy %q passes the test variable %v; want %s, %v", args, rep.InheritEnv.Policy, has, c.policy, c.secret)
		}
		for _, k := range []string{"memoryBytes", "pids", "cpuPercent"} {
			l, ok := rep.Limits[k]
			if !ok || (!l.Enforceable && l.Reason == "") || (l.Enforceable && !strings.HasPrefix(l.Mechanism, "cgroup v")) {
				t.Errorf("%v: limits.%s = %+v", args, k, l)
			}
		}
	}
}

// TestDoctorEnv_ListsTheStoreCredentialsAsWithheld (docs/protocol.md
// §24): with an s3:// store, doctor's inheritEnv does not list the store's
// credential variables among those passed, but as withheld (names only).
func TestDoctorEnv_ListsTheStoreCredentialsAsWithheld(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "doctor-store-secret-value")
	t.Setenv("AWS_REGION", "us-east-1")
	rep := doctorEnv("all", statestore.CredentialEnv("s3://bucket/prefix"))
	passes, _ := rep["passes"].([]string)
	held, _ := rep["withheld"].([]string)
	if slices.Contains(passes, "AWS_SECRET_ACCESS_KEY") || !slices.Contains(held, "AWS_SECRET_ACCESS_KEY") || !slices.Contains(passes, "AWS_REGION") {
		t.Errorf("doctorEnv: passes %v, withheld %v", passes, held)
	}
	if b, _ := json.Marshal(rep); strings.Contains(string(b), "doctor-store-secret-value") {
		t.Errorf("doctorEnv printed a value: %s", b)
	}
	if rep := doctorEnv("all", nil); rep["withheld"] != nil {
		t.Errorf("doctorEnv without a store lists withheld names: %v", rep)
	}
}
