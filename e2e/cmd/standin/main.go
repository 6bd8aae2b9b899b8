// Copyright The k3strap Authors.
// SPDX-License-Identifier: Apache-2.0

// Command standin is a TEST STAND-IN, not part of k3strap: the throw-away hosts of the e2e
// harness have no internet, no curl and no web server, so one binary plays both sides of an
// online install:
//
//	standin serve DIR ADDR   a static HTTP server standing in for get.k3s.io and the GitHub
//	                         release downloads (DIR holds install.sh and
//	                         releases/download/<version>/{k3s,sha256sum-amd64.txt})
//	curl [-fsSL] -o FILE URL  installed as /usr/local/bin/curl on a host: the subset of curl
//	                         that install scripts use to download a file (exit 22 on HTTP
//	                         errors, as curl -f does)
package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	if filepath.Base(os.Args[0]) == "curl" {
		os.Exit(curl(os.Args[1:]))
	}
	if len(os.Args) == 4 && os.Args[1] == "serve" {
		log.Printf("k3strap e2e stand-in for get.k3s.io and GitHub releases: serving %s on %s", os.Args[2], os.Args[3])
		log.Fatal(http.ListenAndServe(os.Args[3], http.FileServer(http.Dir(os.Args[2]))))
	}
	fmt.Fprintln(os.Stderr, "usage: standin serve DIR ADDR | curl -o FILE URL (a test stand-in)")
	os.Exit(2)
}

func curl(args []string) int {
	var out, url string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-o":
			i++
			if i < len(args) {
				out = args[i]
			}
		case strings.HasPrefix(a, "-"):
			// -f -s -S -L and combinations: always on.
		default:
			url = a
		}
	}
	if url == "" {
		fmt.Fprintln(os.Stderr, "curl (k3strap e2e stand-in): no URL")
		return 2
	}
	c := &http.Client{Timeout: 2 * time.Minute}
	resp, err := c.Get(url)
	if err != nil {
		fmt.Fprintf(os.Stderr, "curl (k3strap e2e stand-in): %v\n", err)
		return 7
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		fmt.Fprintf(os.Stderr, "curl (k3strap e2e stand-in): %s: %s\n", url, resp.Status)
		return 22
	}
	w := io.Writer(os.Stdout)
	if out != "" {
		f, err := os.Create(out)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 23
		}
		defer f.Close()
		w = f
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 23
	}
	return 0
}
