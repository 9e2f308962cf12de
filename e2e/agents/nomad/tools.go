//go:build tools

package nomad

// The Nomad agent is built from this module (see ../build.sh), so its
// dependencies are pinned by this go.mod and go.sum.
import _ "github.com/hashicorp/nomad"
