// Package hanzodv1 is the generated gRPC API of hanzod, the Zoo Gym
// orchestrator: NodeService for signed worker requests and
// OrchestratorService for clients and operators. The source is
// hanzod.proto; regenerate with api/generate.sh.
package hanzodv1
