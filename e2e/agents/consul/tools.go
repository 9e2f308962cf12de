//go:build tools

package consul

// The Consul agent is built from this module (see ../build-consul.sh), so its
// dependencies are pinned by this go.mod and go.sum.
import _ "github.com/hashicorp/consul"
