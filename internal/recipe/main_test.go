package recipe

import (
	"testing"

	"github.com/ovpnperf/ovpnperf/internal/lab/labtest"
)

func TestMain(m *testing.M) { labtest.Main(m) }
