// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package features

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// The checks below run when a value is read (Load) and on the command-line
// flags that override one (discovery --cluster-domain). A value that passes
// them gives valid hostnames, status entries and bootstraps; each error says
// what is accepted, and the caller adds the variable's or flag's name.

// controllerNamePattern is the Gateway API's GatewayController pattern
// (sigs.k8s.io/gateway-api apis/v1 shared_types.go): a domain prefix, a
// slash and a path. The CRDs refuse a GatewayClass whose controllerName
// does not match, so status entries with another one could never be written.
var controllerNamePattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$`)

// CheckControllerName accepts a Gateway API controller name: a domain
// prefix and a path, such as istio.io/gateway-controller, at most 253
// characters.
func CheckControllerName(v string) error {
	if len(v) > 253 || !controllerNamePattern.MatchString(v) {
		return errors.New("not a Gateway API controller name: want DOMAIN/PATH, such as istio.io/gateway-controller (lower-case domain, at most 253 characters)")
	}
	return nil
}

// CheckClusterDomain accepts a DNS domain (RFC 1123 subdomain: lower-case
// labels of letters, digits and '-', separated by dots), such as
// cluster.local.
func CheckClusterDomain(v string) error {
	if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
		return fmt.Errorf("not a DNS domain: %s", strings.Join(errs, "; "))
	}
	return nil
}

// checkObjectName accepts a Kubernetes object name (RFC 1123 subdomain).
func checkObjectName(v string) error {
	if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
		return fmt.Errorf("not a Kubernetes object name: %s", strings.Join(errs, "; "))
	}
	return nil
}

// checkNoSpace accepts a value without white space (an image reference).
func checkNoSpace(v string) error {
	if strings.ContainsFunc(v, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }) {
		return errors.New("must not contain white space")
	}
	return nil
}

// CheckAudience accepts a token audience: a non-empty string of at most
// 253 characters without white space or commas (a name such as infermesh,
// or a URL).
func CheckAudience(v string) error {
	switch {
	case v == "":
		return errors.New("must not be empty")
	case len(v) > 253:
		return errors.New("longer than 253 characters")
	case strings.ContainsFunc(v, func(r rune) bool { return r == ',' || r <= ' ' || r == 0x7f }):
		return errors.New("must not contain white space, control characters or commas")
	}
	return nil
}

// CheckHostPort accepts HOST:PORT where HOST is a DNS name or an IP
// address and PORT is 1 to 65535.
func CheckHostPort(v string) error {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return fmt.Errorf("not HOST:PORT: %w", err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("port %q: want a number from 1 to 65535", port)
	}
	if net.ParseIP(host) == nil {
		if errs := validation.IsDNS1123Subdomain(strings.ToLower(host)); len(errs) > 0 {
			return fmt.Errorf("host %q is neither an IP address nor a DNS name", host)
		}
	}
	return nil
}
