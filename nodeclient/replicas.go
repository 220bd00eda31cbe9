package nodeclient

import (
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/health" // client-side health checking
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// Replicas returns the gRPC target and options that reach whichever of
// hanzod's replicas at addrs leads: one address list, round robin over
// the replicas whose health service says SERVING — only the leader does
// (a standby says NOT_SERVING), so after a takeover calls go to the new
// leader without the caller knowing which it is. One address: that
// address, no options.
func Replicas(addrs []string) (string, []grpc.DialOption) {
	if len(addrs) == 1 {
		return addrs[0], nil
	}
	r := manual.NewBuilderWithScheme("hanzod")
	var st resolver.State
	for _, a := range addrs {
		st.Addresses = append(st.Addresses, resolver.Address{Addr: a})
	}
	r.InitialState(st)
	return r.Scheme() + ":///replicas", []grpc.DialOption{grpc.WithResolvers(r),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}],"healthCheckConfig":{"serviceName":""}}`)}
}
