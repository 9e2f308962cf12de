package allocator

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

//go:embed example_round.json
var exampleRound []byte

// ExampleRound returns the built-in example round: a small heterogeneous
// cluster and a queue of jobs, in the documented JSON format.
func ExampleRound() []byte { return exampleRound }

// ReadInstance decodes one round instance from JSON. Fields left out keep
// the defaults of DefaultConfig; unknown fields are an error so that a
// typo in a weight name is not silently ignored. The instance is validated.
func ReadInstance(r io.Reader) (*Instance, error) {
	in := &Instance{Config: DefaultConfig()}
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(in); err != nil {
		return nil, fmt.Errorf("decoding round instance: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("decoding round instance: unexpected data after the instance object")
	}
	if err := in.Validate(); err != nil {
		return nil, err
	}
	return in, nil
}

// ReadInstanceString is ReadInstance over a string.
func ReadInstanceString(s string) (*Instance, error) { return ReadInstance(strings.NewReader(s)) }
