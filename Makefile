# k3strap — make targets. `make demo` runs the main job against local throw-away hosts;
# `make test` runs every test (unit and end-to-end). Both need root for the host harness, and
# both do their own set-up first (`make setup`), so they work on a fresh Debian machine.
SHELL      := /bin/bash
# Go is installed in /usr/local/go on the machines this project targets; it may not be on PATH.
export PATH := $(PATH):/usr/local/go/bin
GO         ?= go
VERSION    ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
K3S_SIM_VERSION ?= v1.36.3+k3s1
HARNESS    := e2e/harness/harness.sh
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo -E)
export HARNESS_DIR ?= /var/tmp/k3strap-e2e

.PHONY: all setup build artifacts demo demo-down test unit e2e bench vet fmt lint clean release-tools release release-check

all: build

# What the demo and the tests need, all idempotent (fast when already done): the Debian packages
# of the host harness (debootstrap, systemd-container, nftables, iproute2, openssh-client) and
# tmux for the terminal UI tests, shellcheck for the remote scripts (vet), the Go modules, and the base image of the throw-away hosts
# (debootstrap'ed once, about a minute).
setup:
	$(SUDO) bash $(HARNESS) deps
	@command -v tmux >/dev/null && command -v shellcheck >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tmux shellcheck >/dev/null; }
	@# Headless Chromium renders `k3strap timeline` pages in frontend's tests (~2 min to install).
	@command -v chromium >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	$(GO) mod download
	$(SUDO) bash $(HARNESS) base

# One static binary (the README's promise): no cgo, so no libc to match on the workstation, and
# -trimpath so that no build machine's paths end up in it. The release builds the same way
# (.goreleaser.yaml).
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-X main.version=$(VERSION)" -o bin/k3strap ./cmd/k3strap

# The release (.goreleaser.yaml; docs/release.md): `make release` builds a snapshot of it
# offline into dist/ — static binaries for linux amd64/arm64/arm, darwin amd64/arm64 and
# windows amd64, their archives, the checksums file, a CycloneDX SBOM per binary and an OCI
# image (internal/cmd/ociimage: linux amd64/arm64/arm, no daemon, no base image pulled) — and
# `make release-check` checks it (internal/releasecheck: every archive, checksum, SBOM and
# image, static binaries, the linux/amd64 binary runs `version`). The tools are pinned and installed
# with `go install` (through the module proxy) when missing.
GOBIN_DIR          := $(or $(shell $(GO) env GOBIN 2>/dev/null),$(shell $(GO) env GOPATH 2>/dev/null)/bin)
GORELEASER_VERSION := v2.17.0
CYCLONEDX_VERSION  := v1.10.0

release-tools:
	@test -x $(GOBIN_DIR)/goreleaser || { set -x; $(GO) install github.com/goreleaser/goreleaser/v2@$(GORELEASER_VERSION); }
	@test -x $(GOBIN_DIR)/cyclonedx-gomod || { set -x; $(GO) install github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$(CYCLONEDX_VERSION); }

release: release-tools
	PATH=$(GOBIN_DIR):$$PATH K3STRAP_COMMIT=$$(git rev-parse --short=12 HEAD 2>/dev/null || echo none) goreleaser release --snapshot --clean
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || date +%s) $(GO) run ./internal/cmd/ociimage -dist dist

release-check:
	K3STRAP_RELEASE_DIST=$(CURDIR)/dist $(GO) test -count=1 -v -run '^TestRelease' ./internal/releasecheck/

# The airgap artifacts of the demo and their sha256sum file, as a K3s release ships them: the K3s
# SIMULATOR and its images archive, or with K3S_BINARY (a K3s release's k3s, e.g.
# `make demo K3S_BINARY=/path/to/k3s`) that real K3s with the stand-in images archive of the
# real-K3s tests (labelled stand-ins: docs/testing-stand-ins.md).
artifacts:
	@mkdir -p .artifacts
	@if [ -n "$(K3S_BINARY)" ]; then \
	  set -x; cp "$(K3S_BINARY)" .artifacts/k3s && chmod 0755 .artifacts/k3s && \
	  CGO_ENABLED=0 $(GO) run ./e2e/cmd/standin-images archive .artifacts/k3s-airgap-images-amd64.tar.zst; \
	else \
	  set -x; CGO_ENABLED=0 $(GO) build -ldflags "-X main.version=$(K3S_SIM_VERSION)" -o .artifacts/k3s ./e2e/k3ssim && \
	  $(GO) run ./e2e/cmd/mkimages .artifacts/k3s-airgap-images-amd64.tar.zst; \
	fi
	cd .artifacts && sha256sum k3s k3s-airgap-images-amd64.tar.zst > sha256sum-amd64.txt

# One throw-away host (systemd + OpenSSH in its own network namespace), then the real command.
# The throw-away host gets new SSH host keys whenever the harness recreates it (and the tests
# change them on purpose), so the demo starts its known_hosts afresh: k3strap records the key on
# first contact (trust on first use) and refuses a changed one afterwards. A real K3s needs the
# machine sysctls its kubelet sets (held until `make demo-down` puts them back).
demo: setup build artifacts
	$(SUDO) bash $(HARNESS) up 1
	@if [ -n "$(K3S_BINARY)" ]; then set -x; $(SUDO) bash $(HARNESS) sysctl-hold; fi
	rm -f $(HARNESS_DIR)/demo_known_hosts
	./bin/k3strap apply -f examples/single-server.yaml --kubeconfig-out demo.kubeconfig

demo-down:
	$(SUDO) bash $(HARNESS) down

# Every test: unit tests and the end-to-end tests on throw-away hosts (they skip, saying why,
# without root).
test: setup vet
	$(GO) test -race -count=1 -p 1 -timeout 60m ./...

unit:
	$(GO) test -race -count=1 -short ./...

e2e:
	$(GO) test -race -count=1 -timeout 60m ./e2e/...

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3x -timeout 120m ./e2e/...

# The shell scripts k3strap runs on hosts (embedded in the binary). k3s-install.sh keeps the
# official install script's variables and idioms (SC2034, SC2015) so that the two stay comparable.
REMOTE_SCRIPTS := $(wildcard facts/*.sh installer/*/*.sh netcheck/*.sh)

vet:
	shellcheck $(REMOTE_SCRIPTS)
	shellcheck -e SC2034,SC2015 templates/install/k3s-install.sh
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { gofmt -l .; echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin .artifacts demo.kubeconfig dist
