// Package deploy holds no code: its tests check the deployment files next
// to them (Kubernetes manifests decoded strictly into the API types and
// rendered with kustomize, the compose file loaded by compose-go with its
// schema, the Dockerfile parsed by BuildKit's parser, the systemd units with
// systemd-analyze, the Grafana dashboard against the documented metrics).
// It is a module of its own so that those libraries stay out of gym's
// build; scripts/test.sh runs it.
package deploy
