package backend_test

import (
	"testing"

	"github.com/zooai/gym/node/backend"
	"github.com/zooai/gym/node/backend/backendtest"
)

func TestSuite(t *testing.T) { backendtest.Run(t, backend.GoBackend{}) }
