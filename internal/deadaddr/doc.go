// Package deadaddr gives tests an address that refuses connections (URL): an upstream that
// cannot be reached, so that nothing of a request reaches it.
package deadaddr
