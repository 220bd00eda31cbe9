package backend_test

import (
	"testing"

	"github.com/zooai/gym/backend"
	"github.com/zooai/gym/backend/backendtest"
)

func TestSuite(t *testing.T) { backendtest.Run(t, backend.GoBackend{}) }
