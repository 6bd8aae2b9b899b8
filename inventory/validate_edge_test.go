package inventory

import "testing"

// TestEdgeValidation: every field of issue 14 is validated with the position of the offending
// value or key.
func TestEdgeValidation(t *testing.T) {
	f := "testdata/edge/bad.yaml"
	got := loadErrors(t, f, LoadOptions{SkipFileChecks: true})
	checkErrors(t, f, got, []wantErr{
		{8, 23, "", `installScriptURL "get.k3s.io" is not an http(s) URL`, "https://get.k3s.io"},
		{9, 26, "", "not a sha256", "sha256sum"},
		{11, 12, "", "selinuxRPMs are for airgap installs", "install: airgap"},
		{13, 16, "", `apiEndpoint address "https://vip:6443" is not a DNS name`, "bare name"},
		{15, 9, "", "kubeVIP has no interface", "interface"},
		{15, 18, "", "kube-vip needs an IP address", "kubeVIP.address"},
		{19, 20, "", `mirror endpoint "mirror.example:5000" is not an http(s) URL`, "scheme"},
		{21, 11, "", "not a regular expression", "Go regular expression"},
		{25, 11, "", "both passwordFile and passwordEnv", "keep one"},
	})
}
