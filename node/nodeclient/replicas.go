package nodeclient

import (
	"time"

	"google.golang.org/grpc"
	_ "google.golang.org/grpc/health" // client-side health checking
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// Replicas returns the gRPC target and options that reach whichever of
// hanzod's replicas at addrs leads: one address list, round robin over
// the replicas whose health service says SERVING — only the leader does
// (a standby says NOT_SERVING), so after a takeover calls go to the new
// leader without the caller knowing which it is. One address: that
// address, no options but the keepalive.
//
// Keepalive: a replica whose host drops off the network sends no RST, so
// its connection would look alive — and the replica SERVING — until TCP
// gives up (many minutes), and the calls sent there would hang. A ping
// every 10 s answered within 5 s (Keepalive; hanzod permits it) closes
// such a connection, fails its calls, and takes the replica out of the
// round robin until it answers again.
func Replicas(addrs []string) (string, []grpc.DialOption) {
	ka := grpc.WithKeepaliveParams(Keepalive)
	if len(addrs) == 1 {
		return addrs[0], []grpc.DialOption{ka}
	}
	r := manual.NewBuilderWithScheme("hanzod")
	var st resolver.State
	for _, a := range addrs {
		st.Addresses = append(st.Addresses, resolver.Address{Addr: a})
	}
	r.InitialState(st)
	return r.Scheme() + ":///replicas", []grpc.DialOption{grpc.WithResolvers(r), ka,
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}],"healthCheckConfig":{"serviceName":""}}`)}
}

// Keepalive is the clients' keepalive (Replicas). gRPC raises a ping
// interval below 10 s to 10 s; hanzod's servers allow pings every 5 s
// (server.KeepalivePolicy).
var Keepalive = keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}
