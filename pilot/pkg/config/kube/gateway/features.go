// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"slices"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"
)

// SupportedFeatures are the Gateway API features our GatewayClasses
// publish in status.supportedFeatures, sorted by name as the field
// requires: the core and extended features of the conformance profiles
// GATEWAY-HTTP, GATEWAY-GRPC, GATEWAY-TLS and GATEWAY-TCP that the
// unmodified suite passes on this
// implementation (conformance/README.md, "Gateway API suite"). Gateway API
// v1.7.0 renamed GatewayInfrastructurePropagation to GatewayInfrastructure
// and removed HTTPRouteRetry and HTTPRouteRetryBackendTimeout (retries are
// Standard, tested under HTTPRouteRetryCodes). Of the features v1.7.0
// added, those whose tests passed in the v1.7.0 run are claimed:
// HTTPRouteRetryCodes, HTTPRouteBackendURLRewrite,
// GatewayRouteHostnameIntersectionPrecedence, GRPCRouteRequestHeaderModifier
// and GRPCRouteNamedRouteRule (the last two are in no v1.7.0 profile; their
// tests passed run alone). Not GatewayListenerFilters (refused), nor
// ClusterTrustBundle or GatewayAddressRoutability (not implemented). A
// feature goes in only with the conformance run that passes its tests.
var SupportedFeatures = sortedFeatures(
	features.SupportGateway, features.SupportHTTPRoute, features.SupportGRPCRoute, features.SupportReferenceGrant,
	features.SupportTLSRoute, features.SupportTLSRouteModeTerminate, features.SupportTLSRouteModeMixed, features.SupportTCPRoute,
	features.SupportGRPCRouteRequestHeaderModifier, features.SupportGRPCRouteNamedRouteRule,
	features.SupportGatewayRouteHostnameIntersectionPrecedence, features.SupportHTTPRouteBackendURLRewrite,
	features.SupportHTTPRouteRetryCodes,
	features.SupportBackendTLSPolicy, features.SupportBackendTLSPolicySANValidation,
	features.SupportGatewayAddressEmpty, features.SupportGatewayBackendClientCertificate,
	features.SupportGatewayFrontendClientCertificateValidation, features.SupportGatewayFrontendClientCertificateValidationInsecureFallback,
	features.SupportGatewayHTTPListenerIsolation, features.SupportGatewayHTTPSListenerDetectMisdirectedRequests,
	features.SupportGatewayInfrastructure, features.SupportGatewayPort8080, features.SupportGatewayStaticAddresses,
	features.SupportListenerSet,
	features.SupportHTTPRoute303RedirectStatusCode, features.SupportHTTPRoute307RedirectStatusCode, features.SupportHTTPRoute308RedirectStatusCode,
	features.SupportHTTPRouteBackendProtocolH2C, features.SupportHTTPRouteBackendProtocolWebSocket,
	features.SupportHTTPRouteBackendRequestHeaderModification, features.SupportHTTPRouteBackendTimeout, features.SupportHTTPRouteCORS,
	features.SupportHTTPRouteDestinationPortMatching, features.SupportHTTPRouteHostRewrite, features.SupportHTTPRouteMethodMatching,
	features.SupportHTTPRouteNamedRouteRule, features.SupportHTTPRouteParentRefPort, features.SupportHTTPRoutePathRedirect,
	features.SupportHTTPRoutePathRewrite, features.SupportHTTPRoutePortRedirect, features.SupportHTTPRouteQueryParamMatching,
	features.SupportHTTPRouteRequestMirror, features.SupportHTTPRouteRequestMultipleMirrors, features.SupportHTTPRouteRequestPercentageMirror,
	features.SupportHTTPRouteRequestTimeout, features.SupportHTTPRouteResponseHeaderModification,
	features.SupportHTTPRouteRetryConnectionError, features.SupportHTTPRouteSchemeRedirect,
)

func sortedFeatures(names ...features.FeatureName) []gwv1.SupportedFeature {
	out := make([]gwv1.SupportedFeature, 0, len(names))
	for _, n := range names {
		out = append(out, gwv1.SupportedFeature{Name: gwv1.FeatureName(n)})
	}
	slices.SortFunc(out, func(a, b gwv1.SupportedFeature) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return slices.CompactFunc(out, func(a, b gwv1.SupportedFeature) bool { return a.Name == b.Name })
}
