// Package sdk is what a prorl task-domain plugin imports. A domain implements
// Domain (prompts, tools, reward) and calls Serve from main; the SDK hides
// go-plugin, gRPC, logging and panic recovery. The package never imports the
// host (core/): the wire contract is sdk/proto.
package sdk
