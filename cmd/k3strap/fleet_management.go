// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/k3strap/k3strap/fleet/sitestatus"
	"github.com/k3strap/k3strap/internal/atomicfile"
)

// `k3strap fleet management`: the management cluster that collects every site's status
// (docs/fleet.md "Status in a management cluster"): install its CRD, make a site's credential.

// fleetManagementCmd groups install and credential.
func (a *app) fleetManagementCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "management",
		Short: "Set up the management cluster that collects every site's status (SiteStatus objects)",
		Args:  cobra.NoArgs,
	}
	c.AddCommand(a.fleetManagementInstallCmd(), a.fleetManagementCredentialCmd())
	return c
}

// managementKubeconfig registers --kubeconfig: an operator's kubeconfig of the management
// cluster.
func managementKubeconfig(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "kubeconfig", "", "an operator's kubeconfig file of the management cluster (required)")
}

func needKubeconfig(p string) error {
	if strings.TrimSpace(p) == "" {
		return usageError{errors.New("give the management cluster's kubeconfig with --kubeconfig FILE (an operator's: it applies a CRD and RBAC)")}
	}
	return nil
}

// fleetManagementInstallCmd is `k3strap fleet management install`.
func (a *app) fleetManagementInstallCmd() *cobra.Command {
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "install --kubeconfig MANAGEMENT",
		Short: "Apply the namespace " + sitestatus.Namespace + " and the SiteStatus CRD to the management cluster (idempotent)",
		Long: "install applies the namespace " + sitestatus.Namespace + " and the CustomResourceDefinition " + sitestatus.CRDName + "\n" +
			"(server-side apply: re-running changes nothing) and waits until the API serves it. Then\n" +
			"`kubectl get sitestatuses -n " + sitestatus.Namespace + "` lists the sites. Any Kubernetes will do; a K3s that\n" +
			"k3strap installed is fine.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needKubeconfig(kubeconfig); err != nil {
				return err
			}
			if err := sitestatus.Install(cmd.Context(), kubeconfig); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "management cluster %s: namespace %s and CRD %s installed\n", sitestatus.Server(kubeconfig), sitestatus.Namespace, sitestatus.CRDName)
			return nil
		},
	}
	managementKubeconfig(cmd, &kubeconfig)
	return cmd
}

// fleetManagementCredentialCmd is `k3strap fleet management credential`.
func (a *app) fleetManagementCredentialCmd() *cobra.Command {
	var kubeconfig, site, out string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "credential --kubeconfig MANAGEMENT --site NAME --out FILE",
		Short: "Make a site's identity on the management cluster, allowed to write only its own status, and write its kubeconfig (0600)",
		Long: "credential makes, in namespace " + sitestatus.Namespace + ", the ServiceAccount site-NAME, the site's SiteStatus object,\n" +
			"a Role allowing get, update and patch of that one object (and its status) only, and the RoleBinding;\n" +
			"then it requests a token for the ServiceAccount (TokenRequest API, valid for --expiration) and writes a\n" +
			"kubeconfig with it to --out, mode 0600. Re-running is idempotent and issues a new token (earlier\n" +
			"ones stay valid until they expire; deleting the ServiceAccount revokes them all). The token is never printed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needKubeconfig(kubeconfig); err != nil {
				return err
			}
			if errs := validation.IsDNS1123Label(site); site == "" || len(errs) > 0 || len(site) > 58 {
				return usageError{fmt.Errorf("--site %q: give the site's name (its inventory's metadata.name: a DNS-1123 label of at most 58 characters)", site)}
			}
			if out == "" {
				return usageError{errors.New("give the file to write the site's kubeconfig to with --out FILE (it holds the site's token; written 0600)")}
			}
			if ttl < sitestatus.MinCredentialTTL { // the upper bound: durationLimit (flags.go)
				return usageError{fmt.Errorf("--expiration %s is shorter than the TokenRequest API's minimum %s", ttl, sitestatus.MinCredentialTTL)}
			}
			cred, err := sitestatus.MakeCredential(cmd.Context(), kubeconfig, site, ttl)
			if err != nil {
				return err
			}
			if err := atomicfile.WriteFile(out, cred.Kubeconfig, 0o600); err != nil {
				return fmt.Errorf("writing the site's kubeconfig %s: %w", out, err)
			}
			fmt.Fprintf(a.stdout, "site %s: kubeconfig written to %s (0600); ServiceAccount %s/%s may get, update and patch only SiteStatus %s; its token expires %s\n",
				site, out, sitestatus.Namespace, cred.ServiceAccount, site, cred.Expires.UTC().Format(time.RFC3339))
			return nil
		},
	}
	managementKubeconfig(cmd, &kubeconfig)
	cmd.Flags().StringVar(&site, "site", "", "the site's name (its inventory's metadata.name)")
	cmd.Flags().StringVarP(&out, "out", "O", "", "the site's kubeconfig file to write (mode 0600; replaced atomically)")
	cmd.Flags().DurationVar(&ttl, "expiration", sitestatus.DefaultCredentialTTL, "how long the site's token is valid (at least 10m; the API server may cap it)")
	return cmd
}
