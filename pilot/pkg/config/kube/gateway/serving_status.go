// Copyright infermesh authors
// SPDX-License-Identifier: Apache-2.0

package gateway

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/infermesh/infermesh/pilot/pkg/model"
	"github.com/infermesh/infermesh/pkg/kube/krt"
)

// Bounds of the Programmed message WithServing writes (a condition message
// may hold 32768 bytes; the full list is in /debug/syncz).
const (
	servingMessageParts = 5
	servingMessageError = 256
)

// WithServing returns st with the Gateway's Programmed condition set to
// False with reason Invalid when s, what the ADS server does not serve of
// the Gateway's translation (model.GatewayServing), is not nil. The message
// says how many parts were refused and names the first ones, with whether
// each is served at its last good version or left out, and its error.
// Invalid is the Gateway API's reason for a Gateway whose configuration is
// semantically invalid; the proxy does not run what the API objects say,
// so the positive-polarity summary condition must not say Programmed. The
// other listed reasons mislead here: Pending promises it will resolve by
// itself, NoResources and AddressNotAssigned are about infrastructure.
// Listener conditions and addresses are left as they are. st is not
// modified.
func WithServing(st gwv1.GatewayStatus, s *model.GatewayServing) gwv1.GatewayStatus {
	if s == nil || len(s.Refused) == 0 {
		return st
	}
	out := *st.DeepCopy()
	for i := range out.Conditions {
		if c := &out.Conditions[i]; c.Type == string(gwv1.GatewayConditionProgrammed) {
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, string(gwv1.GatewayReasonInvalid), servingMessage(s.Refused)
		}
	}
	return out
}

// servingMessage is the Programmed message for refused.
func servingMessage(refused []model.RefusedResource) string {
	var b strings.Builder
	switch t := refused[0].Type; {
	case len(refused) == 1 && (t == "translation" || t == "gateway"):
		b.WriteString("The Gateway's configuration was refused as a whole")
		if refused[0].LastGood {
			b.WriteString("; its proxies keep the last good configuration")
		} else {
			b.WriteString("; its proxies have no configuration")
		}
	default:
		fmt.Fprintf(&b, "%d part(s) of the Gateway's configuration failed validation and are not served as written; the rest is served", len(refused))
	}
	for i, r := range refused {
		if i == servingMessageParts {
			fmt.Fprintf(&b, "; and %d more (pilot-discovery proxy-status, /debug/syncz)", len(refused)-i)
			break
		}
		served := "left out"
		if r.LastGood {
			served = "last good version served"
		}
		fmt.Fprintf(&b, "; %s %s (%s): %s", r.Type, r.Name, served, cut(r.Error, servingMessageError))
	}
	return b.String()
}

// cut returns s cut to n bytes (at a rune start) with "..." when longer.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n] + "..."
}

// ServedGatewayStatuses is statuses with WithServing applied from serving,
// the ADS server's record of what it does not serve per Gateway (key
// "namespace/name"; pilot/pkg/xds publishes it through Config.Serving). It
// is the last step before the Gateway status writer, after the
// deployment's Programmed (DeployedGatewayStatuses), so a refusal wins
// over a ready Service.
func ServedGatewayStatuses(statuses krt.Collection[GatewayStatusResult], serving krt.Collection[model.GatewayServing],
	opts []krt.CollectionOption,
) krt.Collection[GatewayStatusResult] {
	opts = append(slices.Clone(opts), krt.WithName("gateway/ServedGatewayStatuses"))
	return krt.NewCollection(statuses, func(ctx krt.HandlerContext, st GatewayStatusResult) *GatewayStatusResult {
		s := krt.FetchOne(ctx, serving, krt.FilterKey(st.ResourceName()))
		if s == nil {
			return &st
		}
		out := st
		out.Status = WithServing(st.Status, s)
		return &out
	}, opts...)
}
