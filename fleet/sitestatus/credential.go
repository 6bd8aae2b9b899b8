// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package sitestatus

import (
	"context"
	"fmt"
	"os"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// DefaultCredentialTTL is how long a site's credential is valid unless told otherwise (one
// year): a box nobody can reach must not lose its reporting soon, and the token still ends.
const DefaultCredentialTTL = 365 * 24 * time.Hour

// MinCredentialTTL is the shortest expiration the TokenRequest API accepts (10 minutes,
// https://kubernetes.io/docs/reference/kubernetes-api/authentication-resources/token-request-v1/).
const MinCredentialTTL = 10 * time.Minute

// CredentialTimeout bounds one Credential call as a whole.
const CredentialTimeout = time.Minute

var (
	saGVR          = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	roleGVR        = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}
	roleBindingGVR = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}
)

// Identity names the objects of site's identity: the ServiceAccount, Role and RoleBinding
// "site-NAME" in k3strap-fleet.
func Identity(site string) string { return "site-" + site }

// Credential is a site's credential as Credential made it.
type Credential struct {
	// Kubeconfig is the kubeconfig file's content: the management cluster's server and CA,
	// the ServiceAccount's token, namespace k3strap-fleet. It holds a secret: write it 0600.
	Kubeconfig []byte
	// ServiceAccount is the identity's name; Expires when the token ends (the API server
	// may shorten the asked expiration: --service-account-max-token-expiration).
	ServiceAccount string
	Expires        time.Time
}

// MakeCredential makes site's identity on the management cluster the kubeconfig file names (an
// operator's, allowed to manage RBAC in k3strap-fleet) and returns a credential for it:
//   - the ServiceAccount site-NAME;
//   - the site's SiteStatus object (created when missing; a Role cannot restrict create by
//     name — https://kubernetes.io/docs/reference/access-authn-authz/rbac/#referring-to-resources —
//     so the object is made here, and the site only updates it);
//   - the Role site-NAME: get, update, patch on sitestatuses and sitestatuses/status with
//     resourceNames [NAME] — nothing else, not even list; and its RoleBinding;
//   - a token from the TokenRequest API, valid for ttl (at least MinCredentialTTL). A
//     TokenRequest token is bound to the ServiceAccount and ends; the legacy token Secret never
//     does (Kubernetes documents it as a last resort).
//
// Re-running is idempotent (server-side apply) and issues a new token; earlier tokens stay
// valid until they expire or the ServiceAccount is deleted. The namespace and the CRD must be
// installed (Install). Errors are *Error; none carries a token.
func MakeCredential(ctx context.Context, kubeconfig, site string, ttl time.Duration) (*Credential, error) {
	if errs := validation.IsDNS1123Label(Identity(site)); len(errs) > 0 || len(validation.IsDNS1123Label(site)) > 0 {
		return nil, &Error{Op: "making the credential of site " + site, Problem: fmt.Sprintf("site name %q is not a DNS-1123 label of at most 58 characters (the ServiceAccount is site-NAME)", site),
			Fix: "use the site inventory's metadata.name"}
	}
	if ttl < MinCredentialTTL {
		return nil, &Error{Op: "making the credential of site " + site, Problem: fmt.Sprintf("expiration %s is shorter than the TokenRequest API's minimum %s", ttl, MinCredentialTTL),
			Fix: "give a longer --expiration (default 8760h)"}
	}
	c, err := connect(kubeconfig)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, CredentialTimeout)
	defer cancel()
	name := Identity(site)
	labels := map[string]any{SiteLabel: site, "app.kubernetes.io/managed-by": "k3strap"}
	meta := func() map[string]any {
		return map[string]any{"name": name, "namespace": Namespace, "labels": labels}
	}
	steps := []struct {
		what string
		gvr  schema.GroupVersionResource
		obj  map[string]any
	}{
		{"the ServiceAccount " + name, saGVR, map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta()}},
		{"the Role " + name, roleGVR, map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(),
			"rules": []any{map[string]any{
				"apiGroups":     []any{Group},
				"resources":     []any{Resource, Resource + "/status"},
				"resourceNames": []any{site},
				"verbs":         []any{"get", "update", "patch"},
			}}}},
		{"the RoleBinding " + name, roleBindingGVR, map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(),
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
			"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": name, "namespace": Namespace}}}},
	}
	for _, s := range steps {
		if err := c.apply(ctx, s.gvr, Namespace, &unstructured.Unstructured{Object: s.obj}); err != nil {
			return nil, c.explain(err, "applying "+s.what, "")
		}
	}
	if err := c.register(ctx, site); err != nil {
		return nil, err
	}
	secs := int64(ttl / time.Second)
	tr, err := c.core.CoreV1().ServiceAccounts(Namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, c.explain(err, "requesting a token for the ServiceAccount "+name, "")
	}
	kc, err := c.siteKubeconfig(site, tr.Status.Token)
	if err != nil {
		return nil, err
	}
	return &Credential{Kubeconfig: kc, ServiceAccount: name, Expires: tr.Status.ExpirationTimestamp.Time}, nil
}

// siteKubeconfig is a kubeconfig of the management cluster (the operator's server and CA)
// with token as its user, in namespace k3strap-fleet.
func (c *client) siteKubeconfig(site, token string) ([]byte, error) {
	cluster := clientcmdapi.NewCluster()
	cluster.Server = c.cfg.Host
	cluster.TLSServerName = c.cfg.TLSClientConfig.ServerName
	cluster.InsecureSkipTLSVerify = c.cfg.TLSClientConfig.Insecure
	cluster.CertificateAuthorityData = c.cfg.TLSClientConfig.CAData
	if len(cluster.CertificateAuthorityData) == 0 && c.cfg.TLSClientConfig.CAFile != "" {
		ca, err := os.ReadFile(c.cfg.TLSClientConfig.CAFile)
		if err != nil {
			return nil, &Error{Op: "reading the management cluster's CA", Problem: err.Error(), Fix: "make the kubeconfig's certificate-authority file readable"}
		}
		cluster.CertificateAuthorityData = ca
	}
	name := "k3strap-management"
	user := Identity(site)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = cluster
	auth := clientcmdapi.NewAuthInfo()
	auth.Token = token
	cfg.AuthInfos[user] = auth
	ctxt := clientcmdapi.NewContext()
	ctxt.Cluster, ctxt.AuthInfo, ctxt.Namespace = name, user, Namespace
	cfg.Contexts[user+"@"+name] = ctxt
	cfg.CurrentContext = user + "@" + name
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, &Error{Op: "writing the site's kubeconfig", Problem: c.redact(err.Error())}
	}
	return b, nil
}

// Register creates site's SiteStatus object when it does not exist (an operator's
// kubeconfig: a push site's status is written with it, and needs the object). Errors are
// *Error.
func Register(ctx context.Context, kubeconfig, site string) error {
	c, err := connect(kubeconfig)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, WriteTimeout)
	defer cancel()
	return c.register(ctx, site)
}

// register creates site's SiteStatus object unless it exists.
func (c *client) register(ctx context.Context, site string) error {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Group + "/" + Version, "kind": Kind,
		"metadata": map[string]any{"name": site, "namespace": Namespace, "labels": map[string]any{SiteLabel: site, "app.kubernetes.io/managed-by": "k3strap"}},
		"spec":     map[string]any{"site": site},
	}}
	if _, err := c.dyn.Resource(GVR).Namespace(Namespace).Create(ctx, obj, metav1.CreateOptions{FieldManager: fieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
		return c.explain(err, "creating the SiteStatus object of site "+site, "")
	}
	return nil
}
