// Package consultest runs a real Consul dev agent for the main module's tests.
package consultest
